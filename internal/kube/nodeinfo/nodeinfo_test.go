package nodeinfo_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podfence/podfence/internal/kube/kubeapi"
	"github.com/podfence/podfence/internal/kube/nodeinfo"
	"github.com/podfence/podfence/internal/testwait"
)

func TestMergePatch(t *testing.T) {
	for _, tc := range []struct {
		info nodeinfo.Info
		want string
	}{
		{nodeinfo.Info{CoreSched: true, PhysicalCores: 16},
			`{"metadata":{"annotations":{"podfence.io/physical-cores":"16"},"labels":{"podfence.io/core-sched":"supported"}}}`},
		{nodeinfo.Info{}, `{"metadata":{"labels":{"podfence.io/core-sched":"unsupported"}}}`},
	} {
		if got := string(nodeinfo.MergePatch(tc.info)); got != tc.want {
			t.Errorf("MergePatch(%+v) = %s, want %s", tc.info, got, tc.want)
		}
	}
}

func TestRead(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	if _, ok, err := nodeinfo.Read(n); ok || err != nil {
		t.Errorf("unlabelled: published %t, %v", ok, err)
	}
	n.Labels = map[string]string{nodeinfo.LabelCoreSched: "supported"}
	n.Annotations = map[string]string{nodeinfo.AnnotationPhysicalCores: "many"}
	info, ok, err := nodeinfo.Read(n)
	if want := `node a: annotation podfence.io/physical-cores="many": want a non-negative ` +
		`integer`; !ok || !info.CoreSched || err == nil || err.Error() != want {
		t.Errorf("Read = %+v, %t, %v; want supported, error %q", info, ok, err, want)
	}
}

// TestPublisher: the first patch fails and is retried; a change of Info is published; the
// node ends with the label and annotation, its other labels kept.
func TestPublisher(t *testing.T) {
	srv := newAPIServer(t, "n1")
	srv.failNext(http.StatusInternalServerError)
	var supported atomic.Bool
	var reads atomic.Int64 // Run reads Info once a period, after publishing what the last read changed
	p := &nodeinfo.Publisher{Client: client(t, srv), Node: "n1", Every: 5 * time.Millisecond, Retry: time.Millisecond,
		Info: func() nodeinfo.Info {
			reads.Add(1)
			return nodeinfo.Info{CoreSched: supported.Load(), PhysicalCores: 4}
		},
		Log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()

	wait := func(what, label string) {
		t.Helper()
		testwait.Eventually(t, what, func() bool { return srv.Node(t).Labels[nodeinfo.LabelCoreSched] == label })
	}
	wait("the retried patch", "unsupported")
	supported.Store(true)
	wait("the change", "supported")
	n := srv.Node(t)
	if info, ok, err := nodeinfo.Read(n); !ok || err != nil || info != (nodeinfo.Info{CoreSched: true,
		PhysicalCores: 4}) || n.Labels["keep"] != "me" {
		t.Errorf("node = %v %v, want the core count and the other labels kept", n.Labels, n.Annotations)
	}
	// A few periods without a change. A read ends the period begun by the read before it,
	// whose patch (if any) has been sent: four more reads are three whole periods after the
	// change was published, each of which would have patched had Run seen a change.
	want := reads.Load() + 4
	testwait.Eventually(t, "three more periods", func() bool { return reads.Load() >= want })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v", err)
	}
	const patch = "PATCH /api/v1/nodes/n1?fieldManager=podfence-agent application/merge-patch+json"
	if got := srv.requests(); !slices.Equal(got, []string{patch, patch, patch}) {
		t.Errorf("requests %q, want 3 patches (failed, first, change)", got)
	}
}

// TestPublisherBackoff: failed patches are retried after 1, 2, 4, 4... periods of Retry.
func TestPublisherBackoff(t *testing.T) {
	srv := newAPIServer(t, "n1")
	srv.failNext(403, 403, 403, 403, 403)
	var logs logRecords
	p := &nodeinfo.Publisher{Client: client(t, srv), Node: "n1", Retry: time.Millisecond, MaxRetry: 4 * time.Millisecond,
		Info: func() nodeinfo.Info { return nodeinfo.Info{} }, Log: slog.New(&logs)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = p.Run(ctx) }()
	testwait.EventuallyNil(t, "five failures and the publication", func() error {
		if got := logs.get(); len(got) < 6 {
			return fmt.Errorf("log %q", got)
		}
		return nil
	})
	cancel()
	const failed = `WARN publish node info err=patch node n1: PATCH /api/v1/nodes/n1?fieldManager=podfence-agent: 403 ` +
		`Forbidden: nodes "n1" is forbidden: no retryIn=`
	want := []string{failed + "1ms", failed + "2ms", failed + "4ms", failed + "4ms", failed + "4ms",
		"INFO published node info podfence.io/core-sched=false podfence.io/physical-cores=0"}
	if got := logs.get()[:6]; !slices.Equal(got, want) {
		t.Errorf("log\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestStart: without a node name or an API server client Start returns quietly; with
// both it publishes in the background.
func TestStart(t *testing.T) {
	srv := newAPIServer(t, "n1")
	info := func() nodeinfo.Info { return nodeinfo.Info{CoreSched: true, PhysicalCores: 8} }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs logRecords
	log := slog.New(&logs)
	nodeinfo.Start(ctx, client(t, srv), "", info, log)
	nodeinfo.Start(ctx, nil, "n1", info, log)
	want := []string{"DEBUG node info not published: no node name", "DEBUG node info not published: no API server"}
	if got := logs.get(); !slices.Equal(got, want) {
		t.Errorf("log\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	nodeinfo.Start(ctx, client(t, srv), "n1", info, log)
	testwait.EventuallyNil(t, "the patch", func() error {
		if srv.Node(t).Annotations[nodeinfo.AnnotationPhysicalCores] != "8" {
			return fmt.Errorf("not patched; log %q", logs.get())
		}
		return nil
	})
}

func client(t *testing.T, srv *apiServer) *kubeapi.Client {
	t.Helper()
	c, err := kubeapi.New(kubeapi.Config{Host: srv.URL}, "test")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// logRecords is a slog.Handler that keeps records as "LEVEL message key=value...".
type logRecords struct {
	mu  sync.Mutex
	rec []string
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecords) WithGroup(string) slog.Handler            { return l }

func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	s := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "node" {
			s += " " + a.String()
		}
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rec = append(l.rec, s)
	return nil
}

func (l *logRecords) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.rec)
}

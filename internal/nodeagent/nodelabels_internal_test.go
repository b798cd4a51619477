package nodeagent

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/podfence/podfence/internal/kube/kubeapi"
	"github.com/podfence/podfence/internal/kube/kubeapi/kubeapitest"
	"github.com/podfence/podfence/internal/testwait"
)

// runLabels starts a watcher of node n1 on srv, with a fast retry.
func runLabels(t *testing.T, srv *kubeapitest.NodeServer) *nodeLabels {
	t.Helper()
	c, err := kubeapi.New(kubeapi.Config{Host: srv.URL, Token: "t"}, "test")
	if err != nil {
		t.Fatal(err)
	}
	l := newNodeLabels(Config{NodeName: "n1"}, c, slog.New(slog.NewTextHandler(io.Discard, nil)))
	l.minRetry, l.maxRetry, l.pollEvery = time.Millisecond, 4*time.Millisecond, 5*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return l
}

func waitLabels(t *testing.T, l *nodeLabels, want map[string]string) {
	t.Helper()
	testwait.Eventually(t, "labels "+strings.Join(slicesOf(want), ","), func() bool {
		got, ok := l.current()
		return ok && maps.Equal(got, want)
	})
}

func slicesOf(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

// TestNodeLabelsWatch: failed reads are retried; once read, changes come by the watch, not
// by more GETs; a watch the server ends resumes, and a 410 Gone reads the Node again.
func TestNodeLabelsWatch(t *testing.T) {
	srv := kubeapitest.NewNodeServer(t, "n1", map[string]string{"nodeType": "a"})
	srv.FailGets(http.StatusInternalServerError, http.StatusServiceUnavailable)
	l := runLabels(t, srv)
	if !l.wait(context.Background(), time.Until(testwait.Deadline(t))) {
		t.Fatalf("labels not read: %v", l.lastError())
	}
	waitLabels(t, l, map[string]string{"nodeType": "a"})
	<-l.changed // the first read
	testwait.Eventually(t, "a watch open", func() bool { _, _, open := srv.Requests(); return open == 1 })
	srv.SetLabels(map[string]string{"nodeType": "b", "zone": "z1"})
	<-l.changed
	waitLabels(t, l, map[string]string{"nodeType": "b", "zone": "z1"})
	if gets, watches, _ := srv.Requests(); gets != 3 || watches != 1 {
		t.Errorf("%d GETs and %d watches; want 3 (two failed) and 1", gets, watches)
	}

	srv.EndWatches() // resumed from the last version: no GET
	testwait.Eventually(t, "watch resumed", func() bool { _, w, open := srv.Requests(); return w == 2 && open == 1 })
	srv.ExpireWatch()
	srv.EndWatches() // the next watch gets 410 Gone: read the Node again, then watch
	testwait.Eventually(t, "node read again after 410", func() bool { g, w, open := srv.Requests(); return g == 4 && w == 4 && open == 1 })
	srv.SetLabels(map[string]string{"nodeType": "c"})
	waitLabels(t, l, map[string]string{"nodeType": "c"})
}

// TestNodeLabelsPoll: where RBAC forbids the watch, the labels are polled with GET.
func TestNodeLabelsPoll(t *testing.T) {
	srv := kubeapitest.NewNodeServer(t, "n1", map[string]string{"nodeType": "a"})
	srv.ForbidWatch()
	l := runLabels(t, srv)
	waitLabels(t, l, map[string]string{"nodeType": "a"})
	srv.SetLabels(map[string]string{"nodeType": "b"})
	waitLabels(t, l, map[string]string{"nodeType": "b"})
	testwait.Eventually(t, "more polls", func() bool { g, _, _ := srv.Requests(); return g >= 3 })
	if _, watches, _ := srv.Requests(); watches != 1 {
		t.Errorf("%d watches; want 1 (forbidden, not tried again)", watches)
	}
}

// startConfig is an agent config on a captured 96-CPU sysfs tree with two pool configs,
// one per nodeType, whose labels come from the API server at url (none if "").
func startConfig(t *testing.T, url string) Config {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"poolconfig-a.yaml": "pools: {exclusive_a: {cpus: \"2-3,50-51\", hyperThreadingPolicy: multiThreaded}}\nnodeSelector: {nodeType: a}\n",
		"poolconfig-b.yaml": "pools: {exclusive_a: {cpus: \"4-5,52-53\", hyperThreadingPolicy: multiThreaded}}\nnodeSelector: {nodeType: b}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := Config{Pools: dir, NodeName: "n1", CheckpointDir: t.TempDir(), Sysfs: "../cpu/topology/testdata/sysfs/dual-socket-smt-apart"}
	if url != "" {
		c, err := kubeapi.New(kubeapi.Config{Host: url, Token: "t"}, "test")
		if err != nil {
			t.Fatal(err)
		}
		cfg.live = newNodeLabels(cfg, c, slog.New(slog.NewTextHandler(io.Discard, nil)))
		cfg.live.minRetry, cfg.live.maxRetry = time.Millisecond, time.Millisecond
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { cfg.live.run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	return cfg
}

// closedURL is the address of a server that is gone: every request fails.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// TestStartNodes: the labels read at start select the config; a layout in force still comes
// first; an API server that cannot be reached or refuses does not keep the agent waiting
// beyond the bound, and its error is named when no config can be selected without it.
func TestStartNodes(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()

	t.Run("labels select the config", func(t *testing.T) {
		srv := kubeapitest.NewNodeServer(t, "n1", map[string]string{"nodeType": "b"})
		start, next, file, err := startNodes(ctx, startConfig(t, srv.URL), time.Hour, time.Hour, log)
		if err != nil || start != file || next != nil || describe(file.Pools) != "default=0-3,6-51,54-95 exclusive_a=4-5,52-53" {
			t.Fatalf("startNodes = %v, %v, %s, %v", start, next, describe(file.Pools), err)
		}
	})
	t.Run("layout in force first", func(t *testing.T) {
		srv := kubeapitest.NewNodeServer(t, "n1", map[string]string{"nodeType": "b"})
		cfg := startConfig(t, srv.URL)
		a, err := LoadNode(Config{Pools: filepath.Join(cfg.Pools, "poolconfig-a.yaml"), Sysfs: cfg.Sysfs,
			NodeLabels: map[string]string{"nodeType": "a"}}, log)
		if err != nil {
			t.Fatal(err)
		}
		if err := saveInForce(cfg.CheckpointDir, a.Pools); err != nil {
			t.Fatal(err)
		}
		start, next, file, err := startNodes(ctx, cfg, time.Hour, time.Hour, log)
		if err != nil || describe(start.Pools) != "default=0-1,4-49,52-95 exclusive_a=2-3,50-51" || next != file ||
			describe(file.Pools) != "default=0-3,6-51,54-95 exclusive_a=4-5,52-53" {
			t.Fatalf("startNodes = %s, %v, %s, %v; want a's layout, then b's", describe(start.Pools), next, describe(file.Pools), err)
		}
	})
	t.Run("unreachable, layout in force", func(t *testing.T) {
		cfg := startConfig(t, closedURL(t))
		a, err := LoadNode(Config{Pools: filepath.Join(cfg.Pools, "poolconfig-a.yaml"), Sysfs: cfg.Sysfs,
			NodeLabels: map[string]string{"nodeType": "a"}}, log)
		if err != nil {
			t.Fatal(err)
		}
		if err := saveInForce(cfg.CheckpointDir, a.Pools); err != nil {
			t.Fatal(err)
		}
		start, next, file, err := startNodes(ctx, cfg, time.Hour, 20*time.Millisecond, log)
		if err != nil || start != file || next != nil || describe(start.Pools) != "default=0-1,4-49,52-95 exclusive_a=2-3,50-51" {
			t.Fatalf("startNodes = %s, %v, %v, %v; want the layout in force alone", describe(start.Pools), next, file, err)
		}
	})
	t.Run("unreachable, no layout in force", func(t *testing.T) {
		_, _, _, err := startNodes(ctx, startConfig(t, closedURL(t)), 20*time.Millisecond, time.Hour, log)
		if err == nil || !strings.Contains(err.Error(), "no pool config matches this node") ||
			!strings.Contains(err.Error(), "(the node's labels could not be read from the API server: Get \"http://127.0.0.1:") {
			t.Fatalf("startNodes error %v; want no match, naming the API server's error", err)
		}
	})
	t.Run("refused: no wait, hostname selects", func(t *testing.T) {
		srv := kubeapitest.NewNodeServer(t, "n1", nil)
		srv.FailGets(http.StatusForbidden, http.StatusForbidden, http.StatusForbidden, http.StatusForbidden)
		cfg := startConfig(t, srv.URL)
		if err := os.WriteFile(filepath.Join(cfg.Pools, "poolconfig-c.yaml"),
			[]byte("pools: {exclusive_a: {cpus: \"6-7,54-55\", hyperThreadingPolicy: multiThreaded}}\nnodeSelector: {kubernetes.io/hostname: n1}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, file, err := startNodes(ctx, cfg, time.Hour, time.Hour, log) // an hour: the 403 ends the wait
		if err != nil || describe(file.Pools) != "default=0-5,8-53,56-95 exclusive_a=6-7,54-55" {
			t.Fatalf("startNodes = %s, %v; want the hostname's config", describe(file.Pools), err)
		}
	})
}

// TestWatchPoolsWaitsForLabels: while the Node's labels are unknown, no config is offered,
// though one matches the hostname alone: the layout in force stays until they are read.
func TestWatchPoolsWaitsForLabels(t *testing.T) {
	cfg := startConfig(t, closedURL(t))
	if err := os.WriteFile(filepath.Join(cfg.Pools, "poolconfig-c.yaml"),
		[]byte("pools: {exclusive_a: {cpus: \"6-7,54-55\", hyperThreadingPolicy: multiThreaded}}\nnodeSelector: {kubernetes.io/hostname: n1}\n"),
		0o644); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := LoadNode(Config{Pools: filepath.Join(cfg.Pools, "poolconfig-a.yaml"), Sysfs: cfg.Sysfs,
		NodeLabels: map[string]string{"nodeType": "a"}}, log)
	if err != nil {
		t.Fatal(err)
	}
	fake := &tickedReloader{fakeReloader: &fakeReloader{}}
	fake.node.Store(a)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { watchPools(ctx, cfg, a, []reloader{fake}, 5*time.Millisecond, log); close(done) }()
	defer func() { cancel(); <-done }()
	fake.wait(t, 3)
	if n := fake.count(); n != 0 {
		t.Errorf("%d configs offered before the labels were read: %v", n, fake.offers)
	}
}

package kubeapi_test

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/podfence/podfence/internal/kube/kubeapi"
	"github.com/podfence/podfence/internal/kube/kubeapi/kubeapitest"
)

func nodeClient(t *testing.T, srv *kubeapitest.NodeServer) *kubeapi.Client {
	t.Helper()
	c, err := kubeapi.New(kubeapi.Config{Host: srv.URL, Token: "t"}, "podfence-test")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGetNode: the Node's labels and resource version; an error answer is a *StatusError.
func TestGetNode(t *testing.T) {
	srv := kubeapitest.NewNodeServer(t, "node-a", map[string]string{"nodeType": "dpdk"})
	c := nodeClient(t, srv)
	n, err := c.GetNode(context.Background(), "node-a")
	if err != nil || n.Name != "node-a" || n.ResourceVersion != "1" || !maps.Equal(n.Labels, map[string]string{"nodeType": "dpdk"}) {
		t.Fatalf("GetNode = %+v, %v", n, err)
	}
	srv.FailGets(http.StatusForbidden)
	_, err = c.GetNode(context.Background(), "node-a")
	if !kubeapi.IsForbidden(err) || err.Error() != "GET /api/v1/nodes/node-a: 403 Forbidden: injected failure" {
		t.Errorf("GetNode on 403 = %v", err)
	}
	if _, err := c.GetNode(context.Background(), "node-b"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("GetNode of another node = %v, want 404", err)
	}
}

// TestWatchNode: each label change arrives as a version of the Node; an expired resource
// version is IsGone, a watch RBAC denies IsForbidden; the watch ends with its context.
func TestWatchNode(t *testing.T) {
	srv := kubeapitest.NewNodeServer(t, "node-a", map[string]string{"nodeType": "dpdk"})
	c := nodeClient(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan kubeapi.NodeMeta, 4)
	done := make(chan error, 1)
	var last string
	go func() {
		var err error
		last, err = c.WatchNode(ctx, "node-a", "1", time.Minute, func(n kubeapi.NodeMeta) { got <- n })
		done <- err
	}()
	srv.SetLabels(map[string]string{"nodeType": "caas"})
	if n := <-got; n.ResourceVersion != "2" || n.Labels["nodeType"] != "caas" {
		t.Errorf("first event %+v, want rv 2 with nodeType=caas", n)
	}
	srv.SetLabels(map[string]string{"nodeType": "rt"})
	if n := <-got; n.ResourceVersion != "3" || n.Labels["nodeType"] != "rt" {
		t.Errorf("second event %+v, want rv 3 with nodeType=rt", n)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || last != "3" {
		t.Errorf("WatchNode ended with %q, %v; want rv 3 and context.Canceled", last, err)
	}

	srv.ExpireWatch()
	rv, err := c.WatchNode(context.Background(), "node-a", "1", time.Minute, func(kubeapi.NodeMeta) { t.Error("event after 410") })
	if !kubeapi.IsGone(err) || rv != "1" {
		t.Errorf("expired watch = %q, %v; want rv 1 and 410 Gone", rv, err)
	}
	srv.ForbidWatch()
	if _, err := c.WatchNode(context.Background(), "node-a", "1", time.Minute, nil); !kubeapi.IsForbidden(err) ||
		!strings.Contains(err.Error(), `cannot watch resource "nodes"`) {
		t.Errorf("forbidden watch = %v", err)
	}
}

// TestDecodeNodeWatch: event by event, as the API server streams them.
func TestDecodeNodeWatch(t *testing.T) {
	node := func(name, rv, labels string) string {
		return `{"kind":"Node","metadata":{"name":"` + name + `","resourceVersion":"` + rv + `","labels":{` + labels + `}}}`
	}
	for _, tc := range []struct {
		name, stream string
		rv           string   // returned
		seen         []string // "rv:nodeType" per call of fn
		err          string
	}{
		{name: "end of stream", stream: "", rv: "7"},
		{name: "added and modified", rv: "9", seen: []string{"8:a", "9:b"},
			stream: `{"type":"ADDED","object":` + node("n1", "8", `"nodeType":"a"`) + "}\n" +
				`{"type":"MODIFIED","object":` + node("n1", "9", `"nodeType":"b"`) + "}\n"},
		{name: "bookmark and deleted advance the version only", rv: "12",
			stream: `{"type":"BOOKMARK","object":{"kind":"Node","metadata":{"resourceVersion":"11"}}}` +
				`{"type":"DELETED","object":` + node("n1", "12", "") + "}"},
		{name: "error event", rv: "7", stream: `{"type":"ERROR","object":{"kind":"Status","code":410,"message":"too old"}}`,
			err: "WATCH /api/v1/nodes/n1: 410 Gone: too old"},
		{name: "unknown type", rv: "7", stream: `{"type":"SYNC","object":{}}`,
			err: `watch Node n1: event type "SYNC": want ADDED, MODIFIED, DELETED, BOOKMARK or ERROR`},
		{name: "another node", rv: "7", stream: `{"type":"MODIFIED","object":` + node("n2", "8", "") + "}",
			err: `watch Node n1: MODIFIED event for Node "n2"`},
		{name: "not a Node", rv: "7", stream: `{"type":"MODIFIED","object":{"kind":"Pod","metadata":{"name":"n1"}}}`,
			err: `watch Node n1: MODIFIED event: kind "Pod": want Node`},
		{name: "cut short", rv: "8", seen: []string{"8:a"},
			stream: `{"type":"ADDED","object":` + node("n1", "8", `"nodeType":"a"`) + `}{"type":"MODI`,
			err:    "watch Node n1: unexpected EOF"},
		{name: "event over the limit", rv: "7",
			stream: `{"type":"MODIFIED","object":{"metadata":{"name":"` + strings.Repeat("x", kubeapi.MaxResponse+10) + `"}}}`,
			err:    "watch Node n1: watch event larger than 4194304 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seen []string
			rv, err := kubeapi.DecodeNodeWatch(strings.NewReader(tc.stream), "n1", "7", func(n kubeapi.NodeMeta) {
				seen = append(seen, n.ResourceVersion+":"+n.Labels["nodeType"])
			})
			if rv != tc.rv || strings.Join(seen, " ") != strings.Join(tc.seen, " ") || (err == nil) != (tc.err == "") ||
				err != nil && err.Error() != tc.err {
				t.Errorf("DecodeNodeWatch = %q, %.300v, saw %q; want %q, %q, %q", rv, err, seen, tc.rv, tc.err, tc.seen)
			}
		})
	}
}

// FuzzDecodeNodeWatch: any stream ends in a version seen or the one given, and fn sees only
// Node n1.
func FuzzDecodeNodeWatch(f *testing.F) {
	f.Add(`{"type":"MODIFIED","object":{"kind":"Node","metadata":{"name":"n1","resourceVersion":"3","labels":{"a":"b"}}}}`)
	f.Add(`{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"4"}}}{"type":"ERROR","object":{"code":410}}`)
	f.Add(`{"type":"ADDED","object":null}`)
	f.Fuzz(func(t *testing.T, stream string) {
		_, _ = kubeapi.DecodeNodeWatch(strings.NewReader(stream), "n1", "1", func(n kubeapi.NodeMeta) {
			if n.Name != "n1" || n.Labels == nil {
				t.Fatalf("fn got %+v", n)
			}
		})
	})
}

// FuzzParseNode: a parsed Node has a name and a labels map.
func FuzzParseNode(f *testing.F) {
	f.Add(`{"kind":"Node","metadata":{"name":"n1","labels":{"a":"b"}}}`)
	f.Add(`{"metadata":{"name":"n1","labels":null}}`)
	f.Add(`{"kind":"Node","metadata":{"labels":{"a":1}}}`)
	f.Fuzz(func(t *testing.T, text string) {
		n, err := kubeapi.ParseNode([]byte(text))
		if err == nil && (n.Name == "" || n.Labels == nil) {
			t.Fatalf("ParseNode(%q) = %+v without error", text, n)
		}
	})
}

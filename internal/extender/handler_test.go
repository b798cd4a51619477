package extender

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/podfence/podfence/internal/coresched"
)

// server is a real loopback server over a cache with three published nodes and one
// unknown: a (16 cores, runs group web and ns:shop), b (16 cores, 2 other groups), old
// (no core scheduling).
func server(t *testing.T) *httptest.Server {
	t.Helper()
	c := NewCache(coresched.ByNamespace, quiet())
	c.SetNode(testNode("a", "supported", 16, 32))
	c.SetNode(testNode("b", "supported", 16, 32))
	c.SetNode(testNode("old", "unsupported", 8, 16))
	c.SetPod(testPod("shop", "w1", "a", 500, coresched.LabelGroup, "web"))
	c.SetPod(testPod("shop", "s1", "a", 500))
	c.SetPod(testPod("x", "x1", "b", 500))
	c.SetPod(testPod("y", "y1", "b", 500))
	s := httptest.NewServer(NewHandler(c, coresched.ByNamespace, quiet()))
	t.Cleanup(s.Close)
	return s
}

func post(t *testing.T, s *httptest.Server, path, body string, out any) int {
	t.Helper()
	resp, err := http.Post(s.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		if err := decodeJSON(resp, out); err != nil {
			t.Fatalf("decode %s response: %v", path, err)
		}
	}
	return resp.StatusCode
}

func decodeJSON(resp *http.Response, out any) error {
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}

const webPod = `{"metadata":{"name":"w2","namespace":"shop","uid":"u2","labels":{"podfence.io/core-sched-group":"web"}},
"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}`

func TestPrioritize(t *testing.T) {
	s := server(t)
	var got extenderv1.HostPriorityList
	code := post(t, s, "/prioritize", `{"Pod":`+webPod+`,"NodeNames":["a","b","old","gone"]}`, &got)
	// a: 2 groups, has web: round(6×(1−2/16)+4) = 9; b: 3 groups after: round(6×13/16) = 5.
	want := extenderv1.HostPriorityList{{Host: "a", Score: 9}, {Host: "b", Score: 5}, {Host: "old", Score: Neutral}, {Host: "gone",
		Score: Neutral}}
	if code != http.StatusOK || len(got) != len(want) {
		t.Fatalf("POST /prioritize: %d %v, want 200 %v", code, got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("POST /prioritize: %v, want %v", got, want)
		}
	}
}

func TestFilter(t *testing.T) {
	s := server(t)
	for _, tc := range []struct {
		name, pod string
		pass      []string
		refused   map[string]string
	}{
		{name: "explicit group", pod: webPod, pass: []string{"a", "b"}, refused: map[string]string{
			"old": "podfence: pod asks for core-scheduling group group:shop/web; node has podfence.io/core-sched=unsupported",
			"gone": "podfence: pod asks for core-scheduling group group:shop/web; node has no podfence.io/core-sched label (no podfence " +
				"agent has reported it)"}},
		{name: "implicit group", pod: `{"metadata":{"name":"p","namespace":"shop","uid":"u3"}}`, pass: []string{"a", "b", "old", "gone"}},
		{name: "policy none", pod: `{"metadata":{"name":"p","namespace":"shop","uid":"u4","labels":{"podfence.io/core-sched-policy":"none"}}}`,
			pass: []string{"a", "b", "old", "gone"}},
		{name: "bad label", pod: `{"metadata":{"name":"p","namespace":"shop","uid":"u5","labels":{"podfence.io/core-sched-policy":"solo"}}}`,
			pass: []string{}, refused: map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got extenderv1.ExtenderFilterResult
			if code := post(t, s, "/filter", `{"Pod":`+tc.pod+`,"NodeNames":["a","b","old","gone"]}`, &got); code != http.StatusOK {
				t.Fatalf("POST /filter: %d", code)
			}
			if got.NodeNames == nil || strings.Join(*got.NodeNames, ",") != strings.Join(tc.pass, ",") {
				t.Errorf("NodeNames = %v, want %v", got.NodeNames, tc.pass)
			}
			if tc.name == "bad label" {
				if len(got.FailedAndUnresolvableNodes) != 4 || !strings.Contains(got.FailedAndUnresolvableNodes["a"],
					`label podfence.io/core-sched-policy="solo": unknown policy`) {
					t.Errorf("refused = %v, want all 4 with the label error", got.FailedAndUnresolvableNodes)
				}
				return
			}
			if len(got.FailedAndUnresolvableNodes) != len(tc.refused) {
				t.Errorf("refused = %v, want %v", got.FailedAndUnresolvableNodes, tc.refused)
			}
			for n, why := range tc.refused {
				if got.FailedAndUnresolvableNodes[n] != why {
					t.Errorf("refused[%s] = %q, want %q", n, got.FailedAndUnresolvableNodes[n], why)
				}
			}
		})
	}
}

// TestNodeObjects: without nodeCacheCapable the scheduler sends Node objects; their labels
// win over the cache's and the filter returns the passing objects.
func TestNodeObjects(t *testing.T) {
	s := server(t)
	// "gone" is unknown to the cache but published in the object; "old" now says supported.
	nodes := `{"items":[{"metadata":{"name":"gone","labels":{"podfence.io/core-sched":"supported"},"annotations":{"podfence.io/physical-cores":"8"}}},
{"metadata":{"name":"old","labels":{"podfence.io/core-sched":"supported"},"annotations":{"podfence.io/physical-cores":"8"}}},
{"metadata":{"name":"new"}}]}`
	var f extenderv1.ExtenderFilterResult
	if code := post(t, s, "/filter", `{"Pod":`+webPod+`,"Nodes":`+nodes+`}`, &f); code != http.StatusOK {
		t.Fatalf("POST /filter: %d", code)
	}
	if f.Nodes == nil || len(f.Nodes.Items) != 2 || f.Nodes.Items[0].Name != "gone" || f.Nodes.Items[1].Name != "old" ||
		len(f.FailedAndUnresolvableNodes) != 1 || f.FailedAndUnresolvableNodes["new"] == "" || f.NodeNames != nil {
		t.Errorf("POST /filter = %+v, want gone and old, new refused", f)
	}
	var p extenderv1.HostPriorityList
	if code := post(t, s, "/prioritize", `{"Pod":`+webPod+`,"Nodes":`+nodes+`}`, &p); code != http.StatusOK {
		t.Fatalf("POST /prioritize: %d", code)
	}
	// gone: 8 cores, 1 group after: round(6×7/8) = 5; old: the same; new: neutral.
	if len(p) != 3 || p[0].Score != 5 || p[1].Score != 5 || p[2].Score != Neutral {
		t.Errorf("POST /prioritize = %v", p)
	}
}

func TestBadRequests(t *testing.T) {
	s := server(t)
	for _, tc := range []struct{ name, method, path, body string }{
		{"not JSON", "POST", "/prioritize", "{"},
		{"no pod", "POST", "/filter", `{"NodeNames":["a"]}`},
		{"no nodes", "POST", "/prioritize", `{"Pod":` + webPod + `}`},
		{"wrong type", "POST", "/filter", `{"Pod":` + webPod + `,"NodeNames":"a"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(s.URL+tc.path, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("POST %s %s: %d, want 400", tc.path, tc.body, resp.StatusCode)
			}
		})
	}
	resp, err := http.Get(s.URL + "/filter")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /filter: %d, want 405", resp.StatusCode)
	}
}

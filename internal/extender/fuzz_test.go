package extender

import (
	"encoding/json"
	"net/http"
	"runtime"
	"strings"
	"testing"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// Bounds of FuzzFilterBody on one request: the reply beyond what it echoes, and the memory
// allocated serving it.
const (
	fuzzReplyPerNode = 1024    // bytes of reply per candidate node, beyond the names and nodes it was sent
	fuzzAllocPerByte = 512     // bytes allocated per byte of body ("1e-999" values: ~200)
	fuzzAllocBase    = 8 << 20 // and at most this beyond
)

// FuzzFilterBody: whatever the body, POST /filter and /prioritize answer (serveBounded),
// with 200 or a 4xx, allocating memory in proportion to the body; a filter reply's reasons
// are short, so that it is at most a few times the request plus 1 KB per node.
func FuzzFilterBody(f *testing.F) {
	pod := func(cpu string) string {
		return `{"metadata":{"name":"p","namespace":"shop","labels":{"podfence.io/core-sched-group":"web"}},` +
			`"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":` + cpu + `}}}]}}`
	}
	nodes := `{"items":[{"metadata":{"name":"a"},"status":{"capacity":{"cpu":"1e-999999999"}}},{"metadata":{"name":"new"}}]}`
	for _, s := range []string{
		`{"Pod":` + webPod + `,"NodeNames":["a","b","old","gone"]}`,
		`{"Pod":` + pod(`"1e-999999999"`) + `,"NodeNames":["a"]}`,
		`{"Pod":` + pod(`1e-999999999`) + `,"NodeNames":["a"]}`,
		`{"Pod":` + pod(`"1e-99999"`) + `,"NodeNames":["a"]}`,
		`{"Pod":` + pod(`"1"`) + `,"Nodes":` + nodes + `}`,
		`{"Pod":` + pod(`"1"`) + `,"Nodes":{"items":[{"metadata":{"name":"a"},"status":{"allocatable":{"memory":9e999999999}}}]}}`,
		`{"Pod":` + pod(`"1"`) + `,"NodeNames":["a"]} {"Pod":` + pod(`"1e-999999999"`) + `}`,
		`{"Pod":{"metadata":{"labels":{"podfence.io/core-sched-policy":"` + strings.Repeat("x", 4000) + `"}}},"NodeNames":["a","b","c"]}`,
		`{"Pod":{"metadata":{"uid":"` + strings.Repeat("u", 4000) + `","labels":{"podfence.io/core-sched-policy":"exclusive"}}},` +
			`"NodeNames":["x","y","z"]}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	h := testHandler(f)
	f.Fuzz(func(t *testing.T, body []byte, prioritize bool) {
		path := "/filter"
		if prioritize {
			path = "/prioritize"
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		rec := serveBounded(t, h, jsonPost(path, body))
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(fuzzAllocPerByte*len(body)+fuzzAllocBase) {
			t.Errorf("POST %s of %d bytes allocated %d bytes", path, len(body), alloc)
		}
		switch {
		case rec.Code == http.StatusBadRequest:
			return
		case rec.Code != http.StatusOK:
			t.Fatalf("POST %s %.300q: %d %.300s", path, body, rec.Code, rec.Body)
		case prioritize:
			var list extenderv1.HostPriorityList
			if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
				t.Fatalf("POST %s %.300q: reply %.300s: %v", path, body, rec.Body, err)
			}
			return
		}
		var res extenderv1.ExtenderFilterResult
		if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil {
			t.Fatalf("POST %s %.300q: reply %.300s: %v", path, body, rec.Body, err)
		}
		nodes := len(res.FailedAndUnresolvableNodes) + len(res.FailedNodes)
		if res.NodeNames != nil {
			nodes += len(*res.NodeNames)
		}
		if res.Nodes != nil {
			nodes += len(res.Nodes.Items)
		}
		for n, why := range res.FailedAndUnresolvableNodes {
			if len(why) > fuzzReplyPerNode {
				t.Errorf("POST %s %.300q: node %.40q refused with a reason of %d bytes", path, body, n, len(why))
			}
		}
		// Names and node objects come back (escaped: up to 6 bytes per byte), reasons are short.
		if limit := 6*len(body) + fuzzReplyPerNode*nodes + 4096; rec.Body.Len() > limit {
			t.Errorf("POST %s of %d bytes, %d nodes: reply of %d bytes, want at most %d", path, len(body), nodes, rec.Body.Len(), limit)
		}
	})
}

package extender

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/podfence/podfence/internal/coresched"
)

// benchCluster is 1,000 published nodes (32 to 128 cores) with 30 pods each, from 300
// namespaces (implicit groups), a tenth of them in one of 50 explicit groups, and an
// ExtenderArgs for a pod of an explicit group with all node names.
func benchCluster(b *testing.B) (*Cache, []byte) {
	r := rand.New(rand.NewPCG(5, 6))
	c := NewCache(coresched.ByNamespace, quiet())
	names := make([]string, 1000)
	for i := range names {
		names[i] = nodeName(i)
		cores := 32 << r.IntN(3)
		c.SetNode(testNode(names[i], "supported", cores, 2*cores))
		for j := range 30 {
			var labels []string
			if r.IntN(10) == 0 {
				labels = []string{coresched.LabelGroup, fmt.Sprintf("g%d", r.IntN(50))}
			}
			c.SetPod(testPod(fmt.Sprintf("ns%d", r.IntN(300)), fmt.Sprintf("p%d-%d", i, j), names[i], 500, labels...))
		}
	}
	body, err := json.Marshal(map[string]any{"Pod": json.RawMessage(`{"metadata":{"name":"w","namespace":"ns7","uid":"u",
"labels":{"podfence.io/core-sched-group":"g7"}},"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}`),
		"NodeNames": names})
	if err != nil {
		b.Fatal(err)
	}
	return c, body
}

// equalScores is the baseline: the same decoding and reply, every node scored Neutral.
func equalScores(w http.ResponseWriter, r *http.Request) {
	var args extenderv1.ExtenderArgs
	if err := json.NewDecoder(r.Body).Decode(&args); err != nil || args.NodeNames == nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	list := make(extenderv1.HostPriorityList, len(*args.NodeNames))
	for i, n := range *args.NodeNames {
		list[i] = extenderv1.HostPriority{Host: n, Score: Neutral}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list)
}

// BenchmarkPrioritize1000Nodes times one POST /prioritize (decode, score, encode) for 1,000
// nodes, against the equal-scores baseline, and one POST /filter.
func BenchmarkPrioritize1000Nodes(b *testing.B) {
	c, body := benchCluster(b)
	h := NewHandler(c, coresched.ByNamespace, quiet())
	for _, bc := range []struct {
		name string
		h    http.Handler
		path string
	}{
		{"extender", h, "/prioritize"},
		{"baseline", http.HandlerFunc(equalScores), "/prioritize"},
		{"filter", h, "/filter"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				bc.h.ServeHTTP(w, jsonPost(bc.path, body))
				if w.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", bc.path, w.Code, w.Body)
				}
			}
		})
	}
}

package enforce_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/podfence/podfence/epc"
	"github.com/prometheus/client_golang/prometheus"
)

const dashboardFile = "../../deploy/grafana/epc-dashboard.json"

// TestDashboardMetrics: every podfence metric the Grafana dashboard queries is one the
// collector describes, and the dashboard has the panels it promises.
func TestDashboardMetrics(t *testing.T) {
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string
		Panels []struct {
			ID      int
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	queried := map[string]bool{}
	name := regexp.MustCompile(`podfence_[a-z0-9_]+`)
	for _, q := range queries(doc) {
		for _, m := range name.FindAllString(q, -1) {
			queried[m] = true
		}
	}
	described := describedNames(t)
	if len(queried) == 0 {
		t.Fatal("the dashboard queries no podfence metric")
	}
	for m := range queried {
		if !slices.Contains(described, m) {
			t.Errorf("the dashboard queries %s, which the collector does not report (it reports %q)", m, described)
		}
	}

	ids := map[int]bool{}
	var exprs []string
	for _, p := range dash.Panels {
		if p.Title == "" || ids[p.ID] {
			t.Errorf("panel %d: untitled or its id is taken", p.ID)
		}
		ids[p.ID] = true
		var e []string
		for _, tg := range p.Targets {
			e = append(e, tg.Expr)
		}
		exprs = append(exprs, strings.Join(e, " ; "))
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`podfence_epc_container_usage_bytes.* ; .*podfence_epc_container_limit_bytes`), // usage vs limit, one panel
		regexp.MustCompile(`rate\(podfence_epc_container_max_events_total`),
		regexp.MustCompile(`podfence_epc_unenforced_containers`),
	} {
		if !slices.ContainsFunc(exprs, want.MatchString) {
			t.Errorf("no panel queries %s", want)
		}
	}
}

// queries returns every "expr", "query" and "definition" string in a decoded JSON document.
func queries(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && (k == "expr" || k == "query" || k == "definition") {
				out = append(out, s)
			}
			out = append(out, queries(x)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, queries(x)...)
		}
	}
	return out
}

// describedNames returns the names of the metrics the collector describes.
func describedNames(t *testing.T) []string {
	n := newNode(t, "v2", epc.Strict, nil)
	ch := make(chan *prometheus.Desc, 32)
	n.Collector().Describe(ch)
	close(ch)
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	var out []string
	for d := range ch {
		if m := fq.FindStringSubmatch(d.String()); m != nil {
			out = append(out, m[1])
		}
	}
	slices.Sort(out)
	return out
}

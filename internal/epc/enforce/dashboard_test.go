package enforce_test

import (
	"regexp"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podfence/podfence/internal/dashboard"
	"github.com/podfence/podfence/internal/epc"
)

const dashboardFile = "../../../deploy/grafana/epc-dashboard.json"

// TestDashboardMetrics: every podfence metric the Grafana dashboard queries is one the
// collector describes, and the dashboard has the panels it promises.
func TestDashboardMetrics(t *testing.T) {
	dash, err := dashboard.Read(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	queried := dashboard.MetricNames(dash.Queries)
	described := describedNames(t)
	if len(queried) == 0 {
		t.Fatal("the dashboard queries no podfence metric")
	}
	for _, m := range queried {
		if !slices.Contains(described, m) {
			t.Errorf("the dashboard queries %s, which the collector does not report (it reports %q)", m, described)
		}
	}
	ids := map[int]bool{}
	for _, p := range dash.Panels {
		if p.Title == "" || ids[p.ID] {
			t.Errorf("panel %d: untitled or its id is taken", p.ID)
		}
		ids[p.ID] = true
	}
	exprs := dash.PanelExprs()
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

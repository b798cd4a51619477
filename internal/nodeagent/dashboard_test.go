package nodeagent_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v2"

	"github.com/podfence/podfence/internal/dashboard"
)

const dashboardFile = "../../deploy/grafana/podfence-dashboard.json"

// TestDashboardPanels: titled panels with distinct ids, each graph with a query, and the
// views the dashboard promises. TestOperations checks that the metrics exist.
func TestDashboardPanels(t *testing.T) {
	dash, err := dashboard.Read(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[int]bool{}
	for _, p := range dash.Panels {
		if p.Title == "" || ids[p.ID] || p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %d %q: untitled, its id taken, or no query", p.ID, p.Title)
		}
		ids[p.ID] = true
	}
	exprs := dash.PanelExprs()
	for _, want := range []string{
		`podfence_pool_allocated_cpus.* / on\(instance, pool\) podfence_pool_cpus`,      // exclusive utilisation
		`podfence_pool_shared_millicpu_granted`,                                         // shared utilisation
		`rate\(podfence_coresched_cookie_operations_total`,                              // cookie operations
		`histogram_quantile\(0.99, .*podfence_coresched_exec_to_cookie_seconds_bucket`,  // exec-to-cookie delay
		`podfence_epc_container_usage_bytes.* ; .*podfence_epc_container_limit_bytes`,   // EPC usage vs limit
		`podfence_vm_sandbox_cpu_quota_cores`, `podfence_vm_sandbox_memory_limit_bytes`, // sandbox limits
		`podfence_agent_ready`, `podfence_refused_containers_total`,
	} {
		re := regexp.MustCompile(want)
		if !slices.ContainsFunc(exprs, re.MatchString) {
			t.Errorf("no panel queries %s", want)
		}
	}
}

// dashboardQueries returns the dashboard's queries, variables included.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	dash, err := dashboard.Read(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	return dash.Queries
}

// registered reports whether the registry gathers name, or has a collector that describes
// it (a vector with no series yet): registering another descriptor of that name with other
// labels then fails.
func registered(t *testing.T, reg *prometheus.Registry, name string) bool {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		name = strings.TrimSuffix(name, suffix)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return true
		}
	}
	c := probeCollector{prometheus.NewDesc(name, "probe", []string{"podfence_probe"}, nil)}
	if err := reg.Register(c); err != nil {
		return strings.Contains(err.Error(), "has different label names or a different help string")
	}
	reg.Unregister(c)
	return false
}

type probeCollector struct{ d *prometheus.Desc }

func (p probeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- p.d }
func (probeCollector) Collect(chan<- prometheus.Metric)      {}

// help returns the HELP and TYPE lines the registry gives name.
func help(t *testing.T, reg *prometheus.Registry, name string) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return "# HELP " + name + " " + mf.GetHelp() + "\n# TYPE " + name + " " + strings.ToLower(mf.GetType().String()) + "\n"
		}
	}
	t.Fatalf("%s not gathered", name)
	return ""
}

type rule struct {
	Alert       string
	Expr        string
	For         string
	Labels      map[string]string
	Annotations map[string]string
}

// alertExprs reads deploy/prometheus/alerts.yaml, checks each rule's shape and returns
// their expressions.
func alertExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../deploy/prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string
			Rules []rule
		}
	}
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	var out []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if !strings.HasPrefix(r.Alert, "Podfence") || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %+v: want an alert Podfence…, an expr, a severity and a summary", r)
			}
			out = append(out, r.Expr)
		}
	}
	if len(out) < 5 {
		t.Errorf("%d alert rules", len(out))
	}
	return out
}

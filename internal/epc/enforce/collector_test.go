package enforce_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/epc"
	"github.com/podfence/podfence/internal/nodeagent/cgroups/cgroupstest"
)

// tracked puts the tree's two containers (see cgroupstest) into n as the runtime reports
// them at Synchronize: "enclave" of pod p1 with a 1 MiB limit, "plain" of p2 without.
func tracked(t *testing.T, n *node, layout string) (*api.PodSandbox, *api.Container, *api.PodSandbox, *api.Container) {
	t.Helper()
	p1 := pod("p1", map[string]string{"epc-limit.nri.io/container.enclave": "1Mi"})
	p2 := pod("p2", nil)
	path2 := cgroupstest.ContainerCgroupfsV2
	if layout == "v1" {
		path2 = cgroupstest.ContainerCgroupfsV1
	}
	c1, c2 := ctr("c1", p1, "enclave", cgroupstest.ContainerSystemd), ctr("c2", p2, "plain", path2)
	if err := n.Synchronize(ctx, []*api.PodSandbox{p1, p2}, []*api.Container{c1, c2}); err != nil {
		t.Fatal(err)
	}
	return p1, c1, p2, c2
}

const helpText = `
# HELP podfence_epc_capacity_bytes SGX EPC on the node (sgx_epc in the root cgroup's misc.capacity).
# TYPE podfence_epc_capacity_bytes gauge
# HELP podfence_epc_container_limit_bytes The container's SGX EPC cap (sgx_epc in its misc.max); absent when it has none.
# TYPE podfence_epc_container_limit_bytes gauge
# HELP podfence_epc_container_max_events_total Times the container's SGX EPC use was about to go over its cap (sgx_epc.max in its misc.events).
# TYPE podfence_epc_container_max_events_total counter
# HELP podfence_epc_container_peak_bytes Most SGX EPC the container has used (sgx_epc in its misc.peak), on kernels that have misc.peak.
# TYPE podfence_epc_container_peak_bytes gauge
# HELP podfence_epc_container_usage_bytes SGX EPC the container uses (sgx_epc in its misc.current).
# TYPE podfence_epc_container_usage_bytes gauge
# HELP podfence_epc_read_errors_total Failed reads of a container's misc cgroup files during scrapes (containers removed meanwhile are not counted).
# TYPE podfence_epc_read_errors_total counter
# HELP podfence_epc_supported 1 if the node's misc cgroup controller lists sgx_epc in misc.capacity, so SGX EPC limits can be enforced; else 0.
# TYPE podfence_epc_supported gauge
# HELP podfence_epc_unenforced_containers Containers whose SGX EPC limit annotation is not in force (best-effort policy on a node without support, or a cap found missing).
# TYPE podfence_epc_unenforced_containers gauge
# HELP podfence_epc_usage_bytes SGX EPC in use on the node: the root cgroup's misc.current, or on kernels without it the sum over the agent's containers.
# TYPE podfence_epc_usage_bytes gauge
# HELP podfence_epc_yielded_containers Containers with an SGX EPC limit annotation whose misc.max another owner set (an NRI plugin such as nri-plugins sgx-epc, or the runtime): podfence stands aside for them.
# TYPE podfence_epc_yielded_containers gauge
`

// TestCollector scrapes both captured trees: per-container usage, cap, peak and limit hits,
// node capacity and use.
func TestCollector(t *testing.T) {
	for _, layout := range []string{"v1", "v2"} {
		t.Run(layout, func(t *testing.T) {
			n := newNode(t, layout, epc.Strict, nil)
			tracked(t, n, layout)
			want := helpText + `
podfence_epc_capacity_bytes 1.34217728e+08
podfence_epc_container_limit_bytes{container="enclave",namespace="ns",pod="p1"} 1.048576e+06
podfence_epc_container_max_events_total{container="enclave",namespace="ns",pod="p1"} 3
podfence_epc_container_max_events_total{container="plain",namespace="ns",pod="p2"} 0
podfence_epc_container_peak_bytes{container="enclave",namespace="ns",pod="p1"} 1.048576e+06
podfence_epc_container_usage_bytes{container="enclave",namespace="ns",pod="p1"} 1.048576e+06
podfence_epc_container_usage_bytes{container="plain",namespace="ns",pod="p2"} 2.097152e+06
podfence_epc_read_errors_total 0
podfence_epc_supported{cgroup="` + layout + `"} 1
podfence_epc_unenforced_containers 0
podfence_epc_usage_bytes 3.145728e+06
podfence_epc_yielded_containers 0
`
			if err := testutil.CollectAndCompare(n.Collector(), strings.NewReader(want)); err != nil {
				t.Error(err)
			}
			if problems, err := testutil.CollectAndLint(n.Collector()); err != nil || len(problems) > 0 {
				t.Errorf("lint: %v %+v", err, problems)
			}
		})
	}
}

// TestCollectorLimitHit: a container at its cap gets more max events, and the scrape shows them.
func TestCollectorLimitHit(t *testing.T) {
	n := newNode(t, "v2", epc.Strict, nil)
	_, c1, _, _ := tracked(t, n, "v2")
	dir := n.misc("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0b9c5b1e_4a0e_4d5c_9a51_1f0e0c2f7a11.slice/cri-containerd-c0ffee01.scope")
	writeFile(t, dir+"/misc.events", "sgx_epc.max 8\n")
	if got := value(t, n, "podfence_epc_container_max_events_total", "ns/p1/enclave"); got != 8 {
		t.Errorf("max events %v, want 8 (container %s)", got, c1.Id)
	}
}

// TestCollectorRemovedMidScrape: a container whose cgroup goes between two reads of one
// scrape is left out of it, without an error; the others are reported.
func TestCollectorRemovedMidScrape(t *testing.T) {
	n := newNode(t, "v1", epc.Strict, nil)
	tracked(t, n, "v1")
	n.k.OnRead = func(dir, name string) error {
		if name == "misc.max" && strings.HasSuffix(dir, "c0ffee02") {
			return os.RemoveAll(dir) // the runtime removed it after misc.current was read
		}
		return nil
	}
	if got := series(t, n, "podfence_epc_container_usage_bytes"); !slices.Equal(got, []string{"ns/p1/enclave"}) {
		t.Errorf("usage series %q, want only the container still there", got)
	}
	if got := value(t, n, "podfence_epc_read_errors_total", ""); got != 0 {
		t.Errorf("read errors %v: a removed container is not an error", got)
	}
	if got := value(t, n, "podfence_epc_usage_bytes", ""); got != 3<<20 {
		t.Errorf("node usage %v", got)
	}
}

// TestCollectorOldKernel: without misc.peak and a root misc.current, the node's use is the
// sum over the containers; a broken file counts a read error.
func TestCollectorOldKernel(t *testing.T) {
	n := newNode(t, "v2", epc.Strict, func(root string) {
		removeFile(t, root+"/misc.current")
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Name() == "misc.peak" {
				removeFile(t, p)
			}
			return err
		})
	})
	tracked(t, n, "v2")
	if got := series(t, n, "podfence_epc_container_peak_bytes"); len(got) != 0 {
		t.Errorf("peak series %q", got)
	}
	if got := value(t, n, "podfence_epc_usage_bytes", ""); got != 3<<20 {
		t.Errorf("node usage %v, want the sum 3 MiB", got)
	}
	writeFile(t, n.misc("/kubepods/besteffort/pod7d3e2f10-8c4b-4f6a-b2d9-55a1c3e4f6b2/crio-c0ffee02")+"/misc.current", "garbage\n")
	if got := value(t, n, "podfence_epc_read_errors_total", ""); got != 1 {
		t.Errorf("read errors %v, want 1", got)
	}
}

// TestCollectorUnsupported: on a node without sgx_epc only the node's state is reported:
// no capacity, no per-container reads, the unenforced and refused counts.
func TestCollectorUnsupported(t *testing.T) {
	for _, p := range []epc.Policy{epc.BestEffort, epc.Strict} {
		n := newNode(t, "v1", p, func(root string) { removeFile(t, root+"/misc/misc.capacity") })
		tracked(t, n, "v1")
		pd := pod("p3", map[string]string{epc.Annotation: "1Mi"})
		_, err := n.CreateContainer(ctx, pd, ctr("c3", pd, "app", ctrPath), plan.Decision{})
		refused, running := "", 2 // best effort: p1 (from Synchronize) and p3 run uncapped
		if p == epc.Strict {
			refused, running = `# HELP podfence_epc_refused_containers_total Containers refused at creation for their SGX EPC limit, by reason: annotation, unsupported, cgroup.
# TYPE podfence_epc_refused_containers_total counter
podfence_epc_refused_containers_total{reason="unsupported"} 1
`, 1
		}
		want := helpText + refused + fmt.Sprintf(`podfence_epc_read_errors_total 0
podfence_epc_supported{cgroup="v1"} 0
podfence_epc_unenforced_containers %d
podfence_epc_yielded_containers 0
`, running)
		if (err != nil) != (p == epc.Strict) {
			t.Errorf("%s: create error %v", p, err)
		}
		if err := testutil.CollectAndCompare(n.Collector(), strings.NewReader(want)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
		if len(n.k.Writes()) > 0 {
			t.Errorf("%s: wrote %q", p, n.k.Writes())
		}
	}
}

// TestCollectorRestartedContainer: two instances of one container (the old not yet
// removed) give one series, the newer's.
func TestCollectorRestartedContainer(t *testing.T) {
	n := newNode(t, "v2", epc.Strict, nil)
	_, _, p2, _ := tracked(t, n, "v2")
	newer := ctr("c2-restarted", p2, "plain", cgroupstest.ContainerSystemd) // the other container's cgroup: 1 MiB in use
	if _, err := n.CreateContainer(ctx, p2, newer, plan.Decision{}); err != nil {
		t.Fatal(err)
	}
	if got := value(t, n, "podfence_epc_container_usage_bytes", "ns/p2/plain"); got != 1<<20 {
		t.Errorf("usage %v, want the newer instance's 1 MiB", got)
	}
}

// gather scrapes n's collector through a pedantic registry, which checks every metric
// against its description.
func gather(t *testing.T, n *node) []*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(n.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// series returns the namespace/pod/container of name's series, sorted.
func series(t *testing.T, n *node, name string) []string {
	t.Helper()
	var out []string
	for _, mf := range gather(t, n) {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				out = append(out, labels(m))
			}
		}
	}
	slices.Sort(out)
	return out
}

// value returns the value of name's series for "namespace/pod/container" ("" for none).
func value(t *testing.T, n *node, name, ctr string) float64 {
	t.Helper()
	for _, mf := range gather(t, n) {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == name && labels(m) == ctr {
				return m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s for %q", name, ctr)
	return 0
}

func labels(m *dto.Metric) string {
	v := map[string]string{}
	for _, l := range m.GetLabel() {
		v[l.GetName()] = l.GetValue()
	}
	if len(v) == 0 {
		return ""
	}
	return v["namespace"] + "/" + v["pod"] + "/" + v["container"]
}

func unenforced(t *testing.T, n *node) float64 {
	return value(t, n, "podfence_epc_unenforced_containers", "")
}

package pools

import (
	"os"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/topology"
)

// newTopo builds a one-socket node of cores physical cores with threads SMT threads each,
// numbered as Linux numbers x86 CPUs: thread t of core c is CPU c+t*cores. offline lists
// CPUs that are present but not online.
func newTopo(t testing.TB, cores, threads int, offline string) *topology.Topology {
	t.Helper()
	off, err := topology.ParseCPUList(offline)
	if err != nil {
		t.Fatal(err)
	}
	topo := &topology.Topology{Source: "test", CPUs: map[int]topology.CPU{}, Offline: off}
	for id := 0; id < cores*threads; id++ {
		if !off.Contains(id) {
			topo.CPUs[id] = topology.CPU{ID: id, Core: id % cores, L3: 0}
		}
	}
	return topo
}

func mustParse(t testing.TB, source, text string) *Config {
	t.Helper()
	cfg, err := Parse(source, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestResolve(t *testing.T) {
	caas, err := os.ReadFile("testdata/poolconfig-caas.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dpdk, err := os.ReadFile("testdata/poolconfig-dpdk.yml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name                                   string
		yaml                                   string
		topo                                   *topology.Topology
		wantPools, wantWarnings                string
		wantDefault, wantUnpooled, wantOffline string
	}{{
		name: "CPU-Pooler example on 24 cores x 2 threads",
		yaml: string(caas), topo: newTopo(t, 24, 2, ""),
		wantPools: "default default 0-1,8-47 singleThreaded\n" +
			"exclusive_caas exclusive 2-5 singleThreaded\n" + "shared_caas shared 6-7 singleThreaded\n",
		wantDefault: "default 0-1,8-47", wantUnpooled: "8-47",
		wantWarnings: `CPUs 8-47 are in no pool: they join the default pool "default"` + "\n" +
			`pool "exclusive_caas": CPUs 2-5 share physical cores with their SMT siblings 26-29 in pool "default", so its containers ` +
			`are not alone on their cores; give exclusive pools whole cores`,
	}, {
		name: "no default pool declared, whole cores",
		yaml: string(dpdk), topo: newTopo(t, 24, 2, ""),
		wantPools: "default default 0-3,24-27 singleThreaded\n" + "exclusive_dpdk exclusive 4-11,28-35 multiThreaded\n" +
			"exclusive_rt exclusive 12-15,36-39 singleThreaded\n" + "shared_ops shared 16-23,40-47 singleThreaded\n",
		wantDefault: "default 0-3,24-27", wantUnpooled: "0-3,24-27",
		wantWarnings: `CPUs 0-3,24-27 are in no pool: they join the default pool "default"`,
	}, {
		name: "every CPU pooled, no SMT",
		yaml: "pools: {reserved: {cpus: 0-1}, exclusive_a: {cpus: 2-7}}", topo: newTopo(t, 8, 1, ""),
		wantPools:   "exclusive_a exclusive 2-7 singleThreaded\n" + "reserved default 0-1 singleThreaded\n",
		wantDefault: "reserved 0-1", wantUnpooled: "",
	}, {
		name: "one unpooled CPU joins a default pool with another name; offline CPUs join nothing",
		yaml: "pools: {reserved: {cpus: 0-1}, exclusive_a: {cpus: 2-5}}", topo: newTopo(t, 8, 1, "7"),
		wantPools:   "exclusive_a exclusive 2-5 singleThreaded\n" + "reserved default 0-1,6 singleThreaded\n",
		wantDefault: "reserved 0-1,6", wantUnpooled: "6",
		wantWarnings: `CPU 6 is in no pool: it joins the default pool "reserved"`,
	}, {
		name: "exclusive pool splits cores with two pools",
		yaml: "pools: {exclusive_a: {cpus: 0-1}, shared_a: {cpus: 4}, default: {cpus: \"2-3,5-7\"}}", topo: newTopo(t, 4, 2, ""),
		wantPools: "default default 2-3,5-7 singleThreaded\n" + "exclusive_a exclusive 0-1 singleThreaded\n" +
			"shared_a shared 4 singleThreaded\n",
		wantDefault: "default 2-3,5-7", wantUnpooled: "",
		wantWarnings: `pool "exclusive_a": CPU 1 shares a physical core with its SMT sibling 5 in pool "default", so its ` +
			`containers are not alone on their cores; give exclusive pools whole cores` + "\n" +
			`pool "exclusive_a": CPU 0 shares a physical core with its SMT sibling 4 in pool "shared_a", so its containers are not ` +
			`alone on their cores; give exclusive pools whole cores`,
	}, {
		name: "SMT4: one thread of a core",
		yaml: "pools: {exclusive_a: {cpus: 0}}", topo: newTopo(t, 2, 4, ""),
		wantPools:   "default default 1-7 singleThreaded\n" + "exclusive_a exclusive 0 singleThreaded\n",
		wantDefault: "default 1-7", wantUnpooled: "1-7",
		wantWarnings: `CPUs 1-7 are in no pool: they join the default pool "default"` + "\n" +
			`pool "exclusive_a": CPU 0 shares a physical core with its SMT siblings 2,4,6 in pool "default", so its containers are ` +
			`not alone on their cores; give exclusive pools whole cores`,
	}, {
		name: "offline pool CPUs: the pool runs degraded on its online ones",
		yaml: `pools: {default: {cpus: 0-1}, exclusive_a: {cpus: "2-5"}, shared_s: {cpus: "6-7"}}`, topo: newTopo(t, 8, 1, "5-7"),
		wantPools:   "default default 0-1 singleThreaded\n" + "exclusive_a exclusive 2-4 singleThreaded\n" + "shared_s shared  singleThreaded\n",
		wantDefault: "default 0-1", wantOffline: "exclusive_a=5 shared_s=6-7",
		wantWarnings: `pool "exclusive_a" runs degraded: CPU 5 is offline; it has 2-4` + "\n" +
			`pool "shared_s" runs degraded: CPUs 6-7 are offline; it has none`,
	}, {
		name: "offline sibling is no warning",
		yaml: "pools: {exclusive_a: {cpus: 0}, default: {cpus: \"1,3\"}}", topo: newTopo(t, 2, 2, "2"),
		wantPools:   "default default 1,3 singleThreaded\n" + "exclusive_a exclusive 0 singleThreaded\n",
		wantDefault: "default 1,3",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node, err := Resolve(mustParse(t, "poolconfig-a.yaml", tt.yaml), tt.topo)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if got := poolsText(node.Pools); got != tt.wantPools {
				t.Errorf("pools:\n%s\nwant:\n%s", got, tt.wantPools)
			}
			if got := node.Default.Name + " " + node.Default.CPUs.String(); got != tt.wantDefault {
				t.Errorf("default %q, want %q", got, tt.wantDefault)
			}
			if got := node.Unpooled.String(); got != tt.wantUnpooled {
				t.Errorf("unpooled %q, want %q", got, tt.wantUnpooled)
			}
			if got := strings.Join(node.Warnings, "\n"); got != tt.wantWarnings {
				t.Errorf("warnings:\n%s\nwant:\n%s", got, tt.wantWarnings)
			}
			var off []string
			for _, name := range sortedKeys(node.Offline) {
				off = append(off, name+"="+node.Offline[name].String())
			}
			if got := strings.Join(off, " "); got != tt.wantOffline {
				t.Errorf("offline %q, want %q", got, tt.wantOffline)
			}
			if node.Source != "poolconfig-a.yaml" {
				t.Errorf("source %q", node.Source)
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	const src = "poolconfig-a.yaml: "
	tests := []struct {
		name string
		cfg  *Config
		topo *topology.Topology
		want string // without the leading src
	}{{
		name: "CPU not present", cfg: mustParse(t, "poolconfig-a.yaml", `pools: {exclusive_a: {cpus: "0-3,99"}}`),
		topo: newTopo(t, 24, 2, ""),
		want: `pool "exclusive_a": cpus "0-3,99": CPU 99 is not present on this node (present CPUs: 0-47)`,
	}, {
		name: "CPUs not present, present ones offline", cfg: mustParse(t, "poolconfig-a.yaml", `pools: {exclusive_a: {cpus: "4-9"}}`),
		topo: newTopo(t, 4, 2, "4-5"),
		want: `pool "exclusive_a": cpus "4-9": CPUs 8-9 are not present on this node (present CPUs: 0-7)`,
	}, {
		name: "no CPU left for the default pool", cfg: mustParse(t, "poolconfig-a.yaml",
			`pools: {exclusive_a: {cpus: 0-5}, shared_a: {cpus: 6-7}}`),
		topo: newTopo(t, 4, 2, ""),
		want: `pools: no CPU is left for the default pool: every online CPU (0-7) is in an exclusive or shared pool, ` +
			`but pod sandboxes and containers that ask for no pool need CPUs to run on; add a pool named "default" or leave some CPUs ` +
			`out of the other pools`,
	}, {
		name: "config built by hand is validated", topo: newTopo(t, 4, 2, ""),
		cfg:  &Config{Source: "poolconfig-a.yaml", Pools: []Pool{{Name: "default", Type: allocation.TypeDefault, CPUs: cpuset.New(0)}}},
		want: `pool "default": hyperThreadingPolicy: unknown policy (allowed: singleThreaded, multiThreaded; unset means singleThreaded)`,
	}, {
		name: "pool defined twice in a config built by hand", topo: newTopo(t, 4, 2, ""),
		cfg: &Config{Source: "poolconfig-a.yaml", Pools: []Pool{
			{Name: "default", CPUs: cpuset.New(0), HTPolicy: MultiThreaded}, {Name: "default", CPUs: cpuset.New(1), HTPolicy: MultiThreaded}}},
		want: `pool "default": defined more than once`,
	}, {
		name: "empty config built by hand", topo: newTopo(t, 4, 2, ""), cfg: &Config{Source: "poolconfig-a.yaml"},
		want: `pools: no pools defined (want at least one, such as pools: {default: {cpus: "0-1"}})`,
	}, {
		name: "empty topology", cfg: mustParse(t, "poolconfig-a.yaml", `pools: {default: {cpus: 0}}`), topo: &topology.Topology{},
		want: `pool "default": cpus "0": CPU 0 is not present on this node (present CPUs: none)`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node, err := Resolve(tt.cfg, tt.topo)
			if err == nil {
				t.Fatalf("Resolve succeeded: pools\n%s", poolsText(node.Pools))
			}
			if got, want := err.Error(), src+tt.want; got != want {
				t.Errorf("error:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestSelect(t *testing.T) {
	a := mustParse(t, "poolconfig-a.yaml", "pools: {default: {cpus: 0}}\nnodeSelector: {nodeType: caas}")
	b := mustParse(t, "poolconfig-b.yaml", "pools: {default: {cpus: 0}}\nnodeSelector: {nodeType: dpdk, zone: \"1\"}")
	all := mustParse(t, "poolconfig-c.yaml", "pools: {default: {cpus: 0}}")
	node := map[string]string{"kubernetes.io/hostname": "n1", "nodeType": "dpdk", "zone": "1"}
	tests := []struct {
		name    string
		configs []*Config
		labels  map[string]string
		want    string // the chosen source, or the error
	}{
		{name: "one label", configs: []*Config{a, b}, labels: map[string]string{"nodeType": "caas"}, want: "poolconfig-a.yaml"},
		{name: "every label must match", configs: []*Config{a, b}, labels: node, want: "poolconfig-b.yaml"},
		{name: "empty selector matches any node", configs: []*Config{all}, labels: node, want: "poolconfig-c.yaml"},
		{name: "empty selector matches a node without labels", configs: []*Config{all}, want: "poolconfig-c.yaml"},
		{name: "no match", configs: []*Config{a, b}, labels: map[string]string{"nodeType": "dpdk", "zone": "2"},
			want: "no pool config matches this node (node labels: nodeType=dpdk, zone=2): poolconfig-a.yaml wants nodeType=caas; " +
				"poolconfig-b.yaml wants nodeType=dpdk, zone=1"},
		{name: "no match, labels unset", configs: []*Config{a, b},
			want: "no pool config matches this node (node labels: nodeType unset, zone unset): poolconfig-a.yaml wants nodeType=caas; " +
				"poolconfig-b.yaml wants nodeType=dpdk, zone=1"},
		{name: "two match", configs: []*Config{a, b, all}, labels: node,
			want: "more than one pool config matches this node: poolconfig-b.yaml, poolconfig-c.yaml (give them nodeSelectors that " +
				"match different nodes)"},
		{name: "no configs", labels: node, want: "no pool configs to select from"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Select(tt.configs, tt.labels)
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				got = cfg.Source
			}
			if got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

func TestResolveHandBuilt(t *testing.T) {
	cfg := &Config{Source: "by hand", Pools: []Pool{ // unsorted, types left out
		{Name: "shared_a", CPUs: cpuset.New(3), HTPolicy: MultiThreaded},
		{Name: "reserved", CPUs: cpuset.New(0), HTPolicy: MultiThreaded},
		{Name: "exclusive_a", CPUs: cpuset.New(1, 2), HTPolicy: SingleThreaded},
	}}
	node, err := Resolve(cfg, newTopo(t, 4, 1, ""))
	if err != nil {
		t.Fatal(err)
	}
	want := "exclusive_a exclusive 1-2 singleThreaded\n" + "reserved default 0 multiThreaded\n" + "shared_a shared 3 multiThreaded\n"
	if got := poolsText(node.Pools); got != want {
		t.Errorf("pools:\n%s\nwant:\n%s", got, want)
	}
	if node.Default.Type != allocation.TypeDefault || node.Default.Name != "reserved" {
		t.Errorf("default %+v", node.Default)
	}
}

package pools

import (
	"fmt"
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
	const threads = "exclusiveCPUs: threads\n"
	const joinDefault = "unpooledCPUs: default\n"
	tests := []struct {
		name                                   string
		yaml                                   string
		topo                                   *topology.Topology
		wantPools, wantWarnings                string
		wantDefault, wantUnpooled, wantOffline string
		wantUnused                             string
	}{{
		name: "CPU-Pooler example on 24 cores x 2 threads: the exclusive pool owns its cores, unpooled CPUs stay unused",
		yaml: string(caas), topo: newTopo(t, 24, 2, ""),
		wantPools: "default default 0-1 singleThreaded\n" +
			"exclusive_caas exclusive 2-5,26-29 singleThreaded\n" + "shared_caas shared 6-7 singleThreaded\n",
		wantDefault: "default 0-1", wantUnpooled: "8-25,30-47", wantUnused: "8-25,30-47",
	}, {
		name: "cores: a sibling another pool lists stays there",
		yaml: `pools: {default: {cpus: "0,10"}, exclusive_a: {cpus: "2-3"}}`, topo: newTopo(t, 8, 2, ""),
		wantPools:   "default default 0,10 singleThreaded\n" + "exclusive_a exclusive 2-3,11 singleThreaded\n",
		wantDefault: "default 0,10", wantUnpooled: "1,4-9,12-15", wantUnused: "1,4-9,12-15",
		wantWarnings: `pool "exclusive_a": CPU 2 shares a physical core with its SMT sibling 10 in pool "default", so its ` +
			`containers are not alone on their cores; give exclusive pools whole cores`,
	}, {
		name: "cores: a core listed twice counts once",
		yaml: `pools: {default: {cpus: 0}, exclusive_a: {cpus: "2-3,10", hyperThreadingPolicy: multiThreaded}}`, topo: newTopo(t, 8, 2, ""),
		wantPools:   "default default 0 singleThreaded\n" + "exclusive_a exclusive 2-3,10-11 multiThreaded\n",
		wantDefault: "default 0", wantUnpooled: "1,4-9,12-15", wantUnused: "1,4-9,12-15",
		wantWarnings: `pool "exclusive_a" lists CPU 10 of physical cores it already lists (2): each listed CPU of an exclusive ` +
			`pool stands for its whole core (exclusiveCPUs: cores, CPU-Pooler's meaning), so such a core counts once; list one CPU ` +
			`per core, or set exclusiveCPUs: threads to list threads`,
	}, {
		name: "cores, no default pool declared: the unpooled CPUs are the default pool",
		yaml: `pools: {exclusive_a: {cpus: 2}}`, topo: newTopo(t, 4, 2, ""),
		wantPools:   "default default 0-1,3-5,7 singleThreaded\n" + "exclusive_a exclusive 2,6 singleThreaded\n",
		wantDefault: "default 0-1,3-5,7", wantUnpooled: "0-1,3-5,7",
		wantWarnings: `CPUs 0-1,3-5,7 are in no pool: they join the default pool "default"`,
	}, {
		name: "cores, SMT4: the pool owns all four threads",
		yaml: `pools: {exclusive_a: {cpus: 0}, default: {cpus: 1}}`, topo: newTopo(t, 2, 4, ""),
		wantPools:   "default default 1 singleThreaded\n" + "exclusive_a exclusive 0,2,4,6 singleThreaded\n",
		wantDefault: "default 1", wantUnpooled: "3,5,7", wantUnused: "3,5,7",
	}, {
		name: "threads, unpooled CPUs join the default pool (podfence's own meaning)",
		yaml: threads + joinDefault + string(caas), topo: newTopo(t, 24, 2, ""),
		wantPools: "default default 0-1,8-47 singleThreaded\n" +
			"exclusive_caas exclusive 2-5 singleThreaded\n" + "shared_caas shared 6-7 singleThreaded\n",
		wantDefault: "default 0-1,8-47", wantUnpooled: "8-47",
		wantWarnings: `CPUs 8-47 are in no pool: they join the default pool "default"` + "\n" +
			`pool "exclusive_caas": CPUs 2-5 share physical cores with their SMT siblings 26-29 in pool "default", so its containers ` +
			`are not alone on their cores; give exclusive pools whole cores`,
	}, {
		name: "threads, unused siblings are no warning",
		yaml: threads + string(caas), topo: newTopo(t, 24, 2, ""),
		wantPools: "default default 0-1 singleThreaded\n" +
			"exclusive_caas exclusive 2-5 singleThreaded\n" + "shared_caas shared 6-7 singleThreaded\n",
		wantDefault: "default 0-1", wantUnpooled: "8-47", wantUnused: "8-47",
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
		yaml: joinDefault + "pools: {reserved: {cpus: 0-1}, exclusive_a: {cpus: 2-5}}", topo: newTopo(t, 8, 1, "7"),
		wantPools:   "exclusive_a exclusive 2-5 singleThreaded\n" + "reserved default 0-1,6 singleThreaded\n",
		wantDefault: "reserved 0-1,6", wantUnpooled: "6",
		wantWarnings: `CPU 6 is in no pool: it joins the default pool "reserved"`,
	}, {
		name: "exclusive pool splits cores with two pools",
		yaml: threads + "pools: {exclusive_a: {cpus: 0-1}, shared_a: {cpus: 4}, default: {cpus: \"2-3,5-7\"}}", topo: newTopo(t, 4, 2, ""),
		wantPools: "default default 2-3,5-7 singleThreaded\n" + "exclusive_a exclusive 0-1 singleThreaded\n" +
			"shared_a shared 4 singleThreaded\n",
		wantDefault: "default 2-3,5-7", wantUnpooled: "",
		wantWarnings: `pool "exclusive_a": CPU 1 shares a physical core with its SMT sibling 5 in pool "default", so its ` +
			`containers are not alone on their cores; give exclusive pools whole cores` + "\n" +
			`pool "exclusive_a": CPU 0 shares a physical core with its SMT sibling 4 in pool "shared_a", so its containers are not ` +
			`alone on their cores; give exclusive pools whole cores`,
	}, {
		name: "SMT4: one thread of a core",
		yaml: threads + joinDefault + "pools: {exclusive_a: {cpus: 0}}", topo: newTopo(t, 2, 4, ""),
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
			if got := node.Unused.String(); got != tt.wantUnused {
				t.Errorf("unused %q, want %q", got, tt.wantUnused)
			}
			for _, cpu := range node.Unused.List() {
				if p, ok := node.PoolOf(cpu); ok {
					t.Errorf("unused CPU %d is in pool %q", cpu, p.Name)
				}
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
	all2 := mustParse(t, "poolconfig-d.yaml", "pools: {default: {cpus: 0}}")
	strict := "nodeSelectorMatch: all\npools: {default: {cpus: 0}}\nnodeSelector: "
	sb := mustParse(t, "poolconfig-sb.yaml", strict+"{nodeType: dpdk, zone: \"1\"}")
	sz := mustParse(t, "poolconfig-sz.yaml", strict+"{zone: \"1\"}")
	node := map[string]string{"kubernetes.io/hostname": "n1", "nodeType": "dpdk", "zone": "1"}
	tests := []struct {
		name    string
		configs []*Config
		labels  map[string]string
		want    string // the chosen source, or the error
	}{
		{name: "one label", configs: []*Config{a, b}, labels: map[string]string{"nodeType": "caas"}, want: "poolconfig-a.yaml"},
		{name: "any label is enough (CPU-Pooler)", configs: []*Config{a, b}, labels: map[string]string{"zone": "1"}, want: "poolconfig-b.yaml"},
		{name: "the first match wins (CPU-Pooler)", configs: []*Config{b, sz}, labels: node, want: "poolconfig-b.yaml"},
		{name: "all: every label must match", configs: []*Config{sb}, labels: map[string]string{"zone": "1"},
			want: "no pool config matches this node (node labels: nodeType unset, zone=1): poolconfig-sb.yaml wants all of " +
				"nodeType=dpdk, zone=1"},
		{name: "all: two matches are an error", configs: []*Config{sb, sz}, labels: node,
			want: "more than one pool config with nodeSelectorMatch: all matches this node: poolconfig-sb.yaml, poolconfig-sz.yaml " +
				"(give them nodeSelectors that match different nodes)"},
		{name: "an empty selector is the fallback", configs: []*Config{all, b}, labels: node, want: "poolconfig-b.yaml"},
		{name: "empty selector matches when nothing else does", configs: []*Config{a, all}, labels: node, want: "poolconfig-c.yaml"},
		{name: "empty selector matches a node without labels", configs: []*Config{all}, want: "poolconfig-c.yaml"},
		{name: "two fallbacks", configs: []*Config{a, all, all2}, labels: node,
			want: "no pool config's nodeSelector matches this node, and more than one has none: poolconfig-c.yaml, poolconfig-d.yaml " +
				"(give all but one a nodeSelector)"},
		{name: "no match", configs: []*Config{a, b}, labels: map[string]string{"nodeType": "rt", "zone": "2"},
			want: "no pool config matches this node (node labels: nodeType=rt, zone=2): poolconfig-a.yaml wants one of nodeType=caas; " +
				"poolconfig-b.yaml wants one of nodeType=dpdk, zone=1"},
		{name: "no match, labels unset", configs: []*Config{a, b},
			want: "no pool config matches this node (node labels: nodeType unset, zone unset): poolconfig-a.yaml wants one of " +
				"nodeType=caas; poolconfig-b.yaml wants one of nodeType=dpdk, zone=1"},
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

// TestResolveDevices pins the request units of exclusive pools under each meaning: the
// devices (one per unit) and whether a unit is a whole core.
func TestResolveDevices(t *testing.T) {
	topo := newTopo(t, 4, 2, "") // core c: CPUs c and c+4
	for _, tc := range []struct {
		name, yaml string
		want       string // "cpus devices wholeCores"
	}{
		{name: "cores, singleThreaded", yaml: `exclusive_a: {cpus: "1-2"}`, want: "1-2,5-6 1-2 false"},
		{name: "cores, multiThreaded", yaml: `exclusive_a: {cpus: "1-2", hyperThreadingPolicy: multiThreaded}`, want: "1-2,5-6 1-2 true"},
		{name: "cores, the listed thread names the core", yaml: `exclusive_a: {cpus: "5-6"}`, want: "1-2,5-6 5-6 false"},
		{name: "threads, singleThreaded: the lowest thread of each core", yaml: `exclusive_a: {cpus: "1-2,5-6"}`,
			want: "1-2,5-6 1-2 false"},
		{name: "threads, multiThreaded: every thread", yaml: `exclusive_a: {cpus: "1-2,5", hyperThreadingPolicy: multiThreaded}`,
			want: "1-2,5 1-2,5 false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yaml := "pools: {default: {cpus: 0}, " + tc.yaml + "}"
			if strings.HasPrefix(tc.name, "threads") {
				yaml = "exclusiveCPUs: threads\n" + yaml
			}
			node, err := Resolve(mustParse(t, "poolconfig-a.yaml", yaml), topo)
			if err != nil {
				t.Fatal(err)
			}
			p, _ := node.Pool("exclusive_a")
			if got := fmt.Sprintf("%s %s %v", p.CPUs, p.Devices, p.WholeCores); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
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

// TestConfigText: the layout written as a config resolves to the same layout (pools, CPUs,
// devices, units, request API, unused CPUs, domain), for each meaning and for unpooled CPUs joining the
// default pool or not.
func TestConfigText(t *testing.T) {
	topo := newTopo(t, 8, 2, "") // core c: CPUs c and c+8
	for _, yaml := range []string{
		"resourceBaseName: nokia.k8s.io\npools: {default: {cpus: 0}, shared_s: {cpus: \"1,9\"}, exclusive_m: {cpus: \"2-3\", " +
			"hyperThreadingPolicy: multiThreaded}, exclusive_s: {cpus: \"12,4\"}}",
		"pools: {exclusive_m: {cpus: \"2-3\", hyperThreadingPolicy: multiThreaded}}",
		"exclusiveCPUs: threads\nunpooledCPUs: default\npools: {default: {cpus: 0}, exclusive_m: {cpus: \"2-3,10\", " +
			"hyperThreadingPolicy: multiThreaded}, exclusive_s: {cpus: \"4,12\"}}",
		"pools: {default: {cpus: \"0,10\"}, exclusive_s: {cpus: \"2\"}}",
		"pools: {default: {cpus: 0}, shared_d: {cpus: 1, requestAPI: dra}, exclusive_d: {cpus: \"2-3\", requestAPI: dra}}",
		"pools: {default: {cpus: 0}, exclusive_i: {cpus: \"2-3\", isolatedCPUs: require, irqLoadBalancing: disable, " +
			"cpuLoadBalancing: enable, isolationPolicy: required}}",
	} {
		first, err := Resolve(mustParse(t, "poolconfig-a.yaml", yaml), topo)
		if err != nil {
			t.Fatal(err)
		}
		text := first.ConfigText()
		again, err := Resolve(mustParse(t, "in-force.yaml", text), topo)
		if err != nil {
			t.Fatalf("%s\n%v", text, err)
		}
		describe := func(n *Node) string {
			s := fmt.Sprintf("unused %s domain %s\n", n.Unused, n.Config.ResourceBaseName)
			for _, p := range n.Pools {
				s += fmt.Sprintf("%s %s %s devices %s whole %v dra %v isolation %+v\n", p.Name, p.CPUs, p.HTPolicy, p.Devices,
					p.WholeCores, p.ViaDRA(), p.Isolation)
			}
			return s
		}
		if describe(again) != describe(first) {
			t.Errorf("config:\n%s\nwritten:\n%s\nresolves to:\n%s\nwant:\n%s", yaml, text, describe(again), describe(first))
		}
	}
}

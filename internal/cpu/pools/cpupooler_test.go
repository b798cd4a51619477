package pools

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/podfence/podfence/internal/cpu/topology"
)

// CPU-Pooler's own inputs (testdata/cpupooler, see its README) with what CPU-Pooler makes of
// them.

const peerDir = "testdata/cpupooler/"

// PeerTopology is the node CPU-Pooler's tests run on, as a synthetic spec: 80 CPUs, CPU c and
// c+40 one core, cores 0-19 on NUMA node 0. TestPeerTopology proves it equals the fakelscpu
// output CPU-Pooler's tests read; other packages' tests use the spec.
const PeerTopology = "sockets=2,cores=20,threads=2"

func TestPeerTopology(t *testing.T) {
	topo, err := topology.Synthetic(PeerTopology)
	if err != nil {
		t.Fatal(err)
	}
	core, node := lscpu(t, peerDir+"fakelscpu.core"), lscpu(t, peerDir+"fakelscpu.node")
	if len(core) != topo.NumCPUs() || len(node) != topo.NumCPUs() {
		t.Fatalf("fakelscpu has %d/%d CPUs, the spec %d", len(core), len(node), topo.NumCPUs())
	}
	for id, c := range topo.CPUs {
		// lscpu numbers cores 0..39; podfence names a core by its lowest CPU, here the same.
		if core[id] != c.Core || node[id] != c.NUMA {
			t.Errorf("CPU %d: fakelscpu core %d node %d, spec core %d node %d", id, core[id], node[id], c.Core, c.NUMA)
		}
	}
}

// lscpu reads `lscpu -p=cpu,<attr>` output: CPU → attribute.
func lscpu(t *testing.T, path string) map[int]int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		cpu, attr, ok := strings.Cut(sc.Text(), ",")
		if !ok || strings.HasPrefix(cpu, "#") {
			continue
		}
		c, err1 := strconv.Atoi(cpu)
		a, err2 := strconv.Atoi(attr)
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: line %q", path, sc.Text())
		}
		out[c] = a
	}
	return out
}

func peerTopo(t *testing.T) *topology.Topology {
	t.Helper()
	topo, err := topology.Synthetic(PeerTopology)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// TestPeerConfigs resolves every pool config CPU-Pooler's tests and deployment read, on its
// test node (the ConfigMap's on a 16-CPU SMT2 node): each is accepted, resourceBaseName
// included, exclusive pools own their cores' siblings, and CPUs no pool owns stay unused.
func TestPeerConfigs(t *testing.T) {
	configMap := peerConfigMap(t)
	for _, tc := range []struct {
		name, file, data string
		topo             string
		want             string // pools text, then "unused <cpus>"
		wantErr          string
	}{{
		name: "singleThreadExclusive: cores 21-39, siblings 61-79 idle beside them", file: "singleThreadExclusive.yaml",
		want: "default default 0-8 singleThreaded\nexclusive_caas exclusive 21-39,61-79 singleThreaded\n" +
			"shared_caas shared 9-20 singleThreaded\nunused 40-60",
	}, {
		name: "multiThreadExclusive: the same CPUs, a unit is a whole core", file: "multiThreadExclusive.yaml",
		want: "default default 0-8 singleThreaded\nexclusive_caas exclusive 21-39,61-79 multiThreaded\n" +
			"shared_caas shared 9-20 singleThreaded\nunused 40-60",
	}, {
		name: "testpoolconfig2: no default pool, so the unpooled CPUs are the default pool", file: "testpoolconfig2.yaml",
		want: "default default 8-43,48-79 singleThreaded\nexclusive_caas exclusive 4-7,44-47 singleThreaded\n" +
			"shared_caas shared 0-3 singleThreaded\nunused ",
	}, {
		// CPU-Pooler accepts it and then gives CPU 12 to the shared pool and to exclusive
		// containers alike; podfence refuses a CPU in two pools (a deliberate difference).
		name: "testpoolconfig1: CPU 12 in two pools is refused", file: "testpoolconfig1.yaml",
		wantErr: `testpoolconfig1.yaml: pool "shared_caas": cpus "9-12,15,17": CPU 12 is also in pool "exclusive_caas" (a CPU ` +
			`belongs to at most one pool)`,
	}, {
		name: "the README's ConfigMap, controller entry", file: "poolconfig-controller.yaml", data: configMap["poolconfig-controller.yaml"],
		topo: "cores=8,threads=2",
		want: "default default 0 singleThreaded\nexclusive-pool exclusive 4-5,12-13 singleThreaded\n" +
			"exclusive-pool-2 exclusive 2-3,10-11 multiThreaded\nshared-pool shared 1 singleThreaded\nunused 6-9,14-15",
	}, {
		name: "the README's ConfigMap, dpdk entry", file: "poolconfig-dpdk.yaml", data: configMap["poolconfig-dpdk.yaml"],
		topo: "cores=8,threads=2",
		want: "default default 0 singleThreaded\nexclusive-pool exclusive 2-7,10-15 singleThreaded\n" +
			"shared-pool shared 1 singleThreaded\nunused 8-9",
	}, {
		name: "the tests' ConfigMap, controller entry (resourceBaseName)", file: "configmap/poolconfig-controller.yaml",
		want: "default default 0,6-41,46-79 singleThreaded\nexclusive-cpupool1 exclusive 4-5,44-45 singleThreaded\n" +
			"exclusive-cpupool2 exclusive 2-3,42-43 singleThreaded\nsharedpool shared 1 singleThreaded\nunused ",
	}, {
		// Never read by CPU-Pooler (not poolconfig-*); read directly, two unprefixed pools are
		// two default pools, which podfence refuses (CPU-Pooler would leave them unused).
		name: "the early-format poolconfig.yaml", file: "configmap/poolconfig.yaml",
		wantErr: `poolconfig.yaml: pool "cpupool2": more than one default-type pool (also "cpupool1"): a node has at most one; ` +
			`pool names that start with neither "exclusive" nor "shared" make default-type pools`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.data)
			if tc.data == "" {
				var err error
				if data, err = os.ReadFile(peerDir + tc.file); err != nil {
					t.Fatal(err)
				}
			}
			topo := peerTopo(t)
			if tc.topo != "" {
				var err error
				if topo, err = topology.Synthetic(tc.topo); err != nil {
					t.Fatal(err)
				}
			}
			cfg, err := Parse(filepath.Base(tc.file), data)
			var node *Node
			if err == nil {
				node, err = Resolve(cfg, topo)
			}
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error:\n%v\nwant:\n%s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := poolsText(node.Pools) + "unused " + node.Unused.String(); got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// peerConfigMap returns the data entries of CPU-Pooler's example ConfigMap.
func peerConfigMap(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(peerDir + "deployment-cpu-pooler-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(raw, &cm); err != nil {
		t.Fatal(err)
	}
	if len(cm.Data) != 2 {
		t.Fatalf("ConfigMap has %d entries, want 2", len(cm.Data))
	}
	return cm.Data
}

// TestPeerReadPoolConfig is CPU-Pooler's TestReadPoolConfig (pkg/types/pool_test.go) on its
// test directory laid out as a ConfigMap volume: with node labels nodeType=dpdk and
// label1=label1, the config whose nodeSelector says nodeType: dpdk applies.
func TestPeerReadPoolConfig(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "..2018.765432")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"poolconfig-controller.yaml", "poolconfig-dpdk.yaml", "poolconfig.yaml"} {
		b, err := os.ReadFile(peerDir + "configmap/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(peerDir + "configmap/cpu-pooler.yaml")
	if err != nil {
		t.Fatal(err)
	}
	mustDo(t, os.WriteFile(filepath.Join(dir, "cpu-pooler.yaml"), b, 0o644))
	mustDo(t, os.Symlink("..2018.765432", filepath.Join(dir, "..data")))
	for _, f := range []string{"poolconfig-controller.yaml", "poolconfig-dpdk.yaml"} {
		mustDo(t, os.Symlink(filepath.Join("..data", f), filepath.Join(dir, f)))
	}
	configs, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(configs) != 2 {
		t.Fatalf("read %d configs, want the 2 poolconfig-* entries", len(configs))
	}
	cfg, err := Select(configs, map[string]string{"nodeType": "dpdk", "label1": "label1"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NodeSelector["nodeType"] != "dpdk" || cfg.ResourceBaseName != CPUPoolerDomain {
		t.Errorf("chose %s (nodeSelector %v, resourceBaseName %q), want the nodeType: dpdk config", cfg.Source, cfg.NodeSelector,
			cfg.ResourceBaseName)
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

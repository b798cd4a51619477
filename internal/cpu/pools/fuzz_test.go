package pools

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/topology"
)

// FuzzParse checks that Parse never panics, that what it accepts is a valid config of at
// most MaxConfigBytes whose CPU sets round-trip through their text form, that every error is a *ConfigError naming the
// source, and that Resolve on a 64-CPU SMT2 node places every online CPU in exactly one pool
// or among the unused ones, gives every exclusive pool devices among its CPUs, and keeps the
// CPUs isolcpus= took out of load balancing out of the default and shared pools.
func FuzzParse(f *testing.F) {
	peer, err := filepath.Glob("testdata/cpupooler/*.yaml")
	if err != nil || len(peer) == 0 {
		f.Fatalf("CPU-Pooler's configs: %v", err)
	}
	for _, name := range append([]string{"testdata/poolconfig-caas.yaml", "testdata/poolconfig-dpdk.yml", "testdata/other.yaml",
		"testdata/cpupooler/configmap/poolconfig.yaml", "testdata/cpupooler/configmap/poolconfig-controller.yaml"}, peer...) {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"", "pools: {}", "pools: {default: {cpus: 0}}\n---\n", "pools:\n  exclusive_a:\n",
		`pools: {exclusive_a: {cpus: "0-3,99", hyperThreadingPolicy: singleThreaded}, shared_a: {cpus: 4-7}}`,
		"pools: {shared_a: {cpus: 0-3,8}}", "pools: {~: {cpus: 1}, 1: {cpus: 2}}", "nodeSelector: {a: yes}",
		"pools: {a: &x {cpus: 1}, b: *x}", "resourceBaseName: x.io\nexclusiveCPUs: threads\nunpooledCPUs: default\npools: {e: {cpus: 1}}",
		"nodeSelectorMatch: all\npools: {exclusive_a: {cpus: \"0,32\", pooltype: shared}}", "- 1", "pools: [1]", "pools: {default: {cpus: [1]}}",
		`pools: {default: {cpus: "0-2000000"}}`, `pools: {default: {cpus: "0-8191` + strings.Repeat(",0-8191", 5000) + `"}}`,
		sized(MaxConfigBytes), sized(MaxConfigBytes + 1),
	} {
		f.Add([]byte(s))
	}
	topo := newTopo(f, 32, 2, "60-63")
	topo.Isolation = topology.CmdlineIsolation("isolcpus=8-11,40-43 nohz_full=12", topo.Online().Union(topo.Offline))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("fuzz.yaml", data)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), "fuzz.yaml: ") {
				t.Fatalf("error is not a *ConfigError naming the source: %v", err)
			}
			return
		}
		if len(data) > MaxConfigBytes {
			t.Fatalf("accepted a %d-byte config, over the limit of %d", len(data), MaxConfigBytes)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Parse accepted a config that Validate rejects: %v", err)
		}
		for i, p := range cfg.Pools {
			if p.Name == "" || p.CPUs.IsEmpty() || p.Type != TypeOf(p.Name) {
				t.Fatalf("bad pool %+v", p)
			}
			if i > 0 && cfg.Pools[i-1].Name >= p.Name {
				t.Fatalf("pools not sorted: %q before %q", cfg.Pools[i-1].Name, p.Name)
			}
			back, err := topology.ParseCPUList(p.CPUs.String())
			if err != nil || !back.Equals(p.CPUs) {
				t.Fatalf("pool %q: CPUs %q do not round-trip: %v, %v", p.Name, p.CPUs, back, err)
			}
		}
		node, err := Resolve(cfg, topo)
		if err != nil {
			return
		}
		seen := map[int]string{}
		for _, p := range node.Pools {
			for _, cpu := range p.CPUs.List() {
				if other, dup := seen[cpu]; dup {
					t.Fatalf("CPU %d in pools %q and %q", cpu, other, p.Name)
				}
				seen[cpu] = p.Name
			}
		}
		for _, cpu := range node.Unused.List() {
			if p, dup := seen[cpu]; dup {
				t.Fatalf("unused CPU %d is in pool %q", cpu, p)
			}
			seen[cpu] = "(unused)"
		}
		if len(seen) != topo.NumCPUs() {
			t.Fatalf("pools and unused CPUs hold %d CPUs, the node has %d online", len(seen), topo.NumCPUs())
		}
		for _, p := range node.Pools {
			if p.Type == allocation.TypeExclusive && (p.Devices.IsEmpty() != p.CPUs.IsEmpty() || !p.Devices.IsSubsetOf(p.CPUs)) {
				t.Fatalf("exclusive pool %q: devices %s are not a non-empty part of its CPUs %s", p.Name, p.Devices, p.CPUs)
			}
			if p.Type != allocation.TypeExclusive && p.CPUs.Intersection(topo.Isolation.Domain).Size() > 0 {
				t.Fatalf("%s pool %q has CPUs %s the kernel does not balance", p.Type, p.Name, p.CPUs.Intersection(topo.Isolation.Domain))
			}
			if !p.HostIsolated.IsSubsetOf(p.CPUs.Intersection(topo.Isolation.Isolated())) {
				t.Fatalf("pool %q: host-isolated %s are not its isolated CPUs", p.Name, p.HostIsolated)
			}
		}
	})
}

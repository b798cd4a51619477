package pools

import (
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/cpu/topology"
)

// TestResolveHostIsolation: CPUs the kernel does not balance leave the default and shared
// pools (warned, unused), a pool left empty is refused naming the fix, and exclusive pools
// that mix isolated CPUs with others are warned about.
func TestResolveHostIsolation(t *testing.T) {
	// 8 cores, core c = CPUs c and c+8; isolcpus (domain) 2-5,10-13; nohz_full alone on 6,14.
	const spec = "cores=8,threads=2,isolcpus=2-5,10-13,nohz_full=2-6,10-14"
	for _, tc := range []struct {
		name, yaml string
		pools      string // name=cpus/hostIsolated ...
		unused     string
		warnings   []string // each contained in one warning, in order
		err        string
	}{{
		name:   "shared and default lose domain CPUs, keep nohz_full ones",
		yaml:   `pools: {default: {cpus: "0,8,2"}, shared_s: {cpus: "1,9,3,6,14"}, exclusive_e: {cpus: "4-5"}}`,
		pools:  "default=0,8/ exclusive_e=4-5,12-13/4-5,12-13 shared_s=1,6,9,14/",
		unused: "2-3,7,10-11,15",
		warnings: []string{`pool "shared_s": CPU 3 is isolated from the kernel's load balancing (isolcpus=): left out of the pool ` +
			`(no container runs there), as a container on them would never be migrated off a busy CPU; put them in an exclusive pool`,
			`pool "default": CPU 2 is isolated from the kernel's load balancing`},
	}, {
		name:     "unpooled domain CPUs do not join the default pool",
		yaml:     "unpooledCPUs: default\npools: {exclusive_e: {cpus: \"2-3\"}}",
		pools:    "default=0-1,6-9,14-15/ exclusive_e=2-3,10-11/2-3,10-11",
		unused:   "4-5,12-13",
		warnings: []string{`CPUs 0-1,6-9,14-15 are in no pool: they join the default pool "default"`, `pool "default": CPUs 4-5,12-13 are isolated`},
	}, {
		name: "exclusive pool mixing isolated and other CPUs",
		yaml: `pools: {default: {cpus: "0"}, exclusive_a: {cpus: "4-7"}, exclusive_p: {cpus: "1-2", isolatedCPUs: prefer}, ` +
			`exclusive_r: {cpus: "3", isolatedCPUs: require}}`,
		pools:  "default=0/ exclusive_a=4-7,12-15/4-6,12-14 exclusive_p=1-2,9-10/2,10 exclusive_r=3,11/3,11",
		unused: "8",
		warnings: []string{`pool "exclusive_a" mixes CPUs the host isolated (4-6,12-14: isolcpus=, nohz_full=) with others (7,15): ` +
			`a container's isolation depends on which it is given; set isolatedCPUs: prefer or require, or give the pool CPUs of one kind`,
			`pool "exclusive_p" mixes CPUs the host isolated (2,10: isolcpus=, nohz_full=) with others (1,9): a container's isolation ` +
				`depends on which it is given; isolatedCPUs: prefer hands out the isolated ones first`},
	}, {
		name:  "isolatedCPUs on a pool the host isolated none of",
		yaml:  `pools: {default: {cpus: "0"}, exclusive_r: {cpus: "1", isolatedCPUs: require}, exclusive_p: {cpus: "7", isolatedCPUs: prefer}}`,
		pools: "default=0/ exclusive_p=7,15/ exclusive_r=1,9/",
		warnings: []string{`pool "exclusive_p": isolatedCPUs: prefer, but the host isolated none of its CPUs (isolcpus=, nohz_full=): ` +
			`it hands out the others`, `pool "exclusive_r": isolatedCPUs: require, but the host isolated none of its CPUs`},
		unused: "2-6,8,10-14",
	}, {
		name: "a shared pool of isolated CPUs only",
		yaml: `pools: {default: {cpus: "0"}, shared_s: {cpus: "2-3"}}`,
		err: `poolconfig-a.yaml: pool "shared_s": cpus "2-3": every CPU of this shared pool is isolated from the kernel's load ` +
			`balancing (isolcpus=, domain: 2-5,10-13), where a container would never be migrated off a busy CPU; give the pool ` +
			`CPUs outside isolcpus= (isolated CPUs belong in an exclusive pool), or boot with isolcpus=nohz,managed_irq,<cpus>, ` +
			`which keeps load balancing`,
	}, {
		name: "a default pool of isolated CPUs only",
		yaml: `pools: {default: {cpus: "4-5"}, exclusive_e: {cpus: "0-1"}}`,
		err:  `poolconfig-a.yaml: pool "default": cpus "4-5": every CPU of this default pool is isolated`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			topo, err := topology.Synthetic(spec)
			if err != nil {
				t.Fatal(err)
			}
			n, err := Resolve(mustParse(t, "poolconfig-a.yaml", tc.yaml), topo)
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
					t.Fatalf("Resolve error = %v\nwant %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range n.Pools {
				got = append(got, p.Name+"="+p.CPUs.String()+"/"+p.HostIsolated.String())
			}
			if g := strings.Join(got, " "); g != tc.pools {
				t.Errorf("pools %s, want %s", g, tc.pools)
			}
			if n.Unused.String() != tc.unused {
				t.Errorf("Unused = %s, want %s", n.Unused, tc.unused)
			}
			if len(n.Warnings) != len(tc.warnings) {
				t.Fatalf("warnings:\n%s\nwant %d", strings.Join(n.Warnings, "\n"), len(tc.warnings))
			}
			for i, w := range tc.warnings {
				if !strings.Contains(n.Warnings[i], w) {
					t.Errorf("warning %q\nwant one containing %q", n.Warnings[i], w)
				}
			}
		})
	}
}

// TestConfigTextHostIsolation: the layout in force, written without the domain CPUs the
// default and shared pools lost, resolves to the same layout on the same host.
func TestConfigTextHostIsolation(t *testing.T) {
	topo, err := topology.Synthetic("cores=8,threads=2,isolcpus=2-5,10-13")
	if err != nil {
		t.Fatal(err)
	}
	first, err := Resolve(mustParse(t, "poolconfig-a.yaml", "unpooledCPUs: default\n"+
		`pools: {default: {cpus: "0,2"}, shared_s: {cpus: "1,3"}, exclusive_e: {cpus: "4", isolatedCPUs: prefer}}`), topo)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Resolve(mustParse(t, "in-force.yaml", first.ConfigText()), topo)
	if err != nil {
		t.Fatalf("%s\n%v", first.ConfigText(), err)
	}
	describe := func(n *Node) string {
		s := "unused " + n.Unused.String()
		for _, p := range n.Pools {
			s += " " + p.Name + "=" + p.CPUs.String() + "/" + string(p.Isolation.IsolatedCPUs)
		}
		return s
	}
	if describe(again) != describe(first) {
		t.Errorf("written:\n%s\nresolves to %s\nwant %s", first.ConfigText(), describe(again), describe(first))
	}
}

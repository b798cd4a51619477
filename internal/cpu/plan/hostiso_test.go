package plan

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"
)

// isoSpec: 2 NUMA nodes x 4 cores x 2 threads; core c = CPUs {c, c+8}; NUMA 0 = cores 0-3.
// The host isolated cores 1, 5 and 6 (isolcpus, nohz_full) and thread 7 of core 7.
const isoSpec = "sockets=2,numa=2,cores=4,threads=2,isolcpus=managed_irq,domain,1,5-6,9,13-14,nohz_full=7"

const isoPools = `
exclusiveCPUs: threads
pools:
  default: {cpus: "0,8"}
  exclusive_r: {cpus: "1-3,9-11", hyperThreadingPolicy: multiThreaded, isolatedCPUs: require}
  exclusive_p: {cpus: "4-7,12-15", hyperThreadingPolicy: multiThreaded, isolatedCPUs: prefer}
`

// TestIsolatedCPUs: require takes only the CPUs the host isolated and refuses naming those
// free; prefer takes them first, then others.
func TestIsolatedCPUs(t *testing.T) {
	n := nodeOf(t, isoSpec, isoPools)
	s := NewLedger(n)
	for _, step := range []struct {
		c          Container
		cpus, code string
		reason     string
	}{
		{c: ctr("r1", req("exclusive_r", "1")), cpus: "1"},
		{c: ctr("r2", req("exclusive_r", "2")), code: CodeNotEnoughIsolatedCPUs,
			reason: `exclusive pool "exclusive_r" takes only CPUs the host isolated (isolatedCPUs: require): not enough free CPUs: ` +
				`requested=2, free=1; its isolated CPUs free: 9 (of 1,9)`},
		{c: ctr("r3", req("exclusive_r", "1")), cpus: "9"},
		{c: ctr("r4", req("exclusive_r", "1")), code: CodeNotEnoughIsolatedCPUs,
			reason: `its isolated CPUs free: none (of 1,9)`},
		// prefer: the isolated cores 5-6 (whole cores); then 7, the last isolated thread, and
		// its sibling 15 (a partly used core before a whole one); then core 4.
		{c: ctr("p1", req("exclusive_p", "4")), cpus: "5-6,13-14"},
		{c: ctr("p2", req("exclusive_p", "2")), cpus: "7,15"},
		{c: ctr("p3", req("exclusive_p", "2")), cpus: "4,12"},
	} {
		d, err := n.Allocate(s, step.c)
		if step.code != "" {
			var r *Refusal
			if !errors.As(err, &r) || r.Code != step.code || !strings.Contains(r.Reason, step.reason) {
				t.Fatalf("%s: err %v, want %s containing %q", step.c.Name, err, step.code, step.reason)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", step.c.Name, err)
		}
		if want, _ := cpuset.Parse(step.cpus); !d.CPUs.Equals(want) {
			t.Errorf("%s: CPUs %s, want %s", step.c.Name, d.CPUs, want)
		}
	}
}

// TestIsolatedCPUsGiven: CPUs chosen elsewhere (the device plugin) of a require pool must be
// isolated ones.
func TestIsolatedCPUsGiven(t *testing.T) {
	n := nodeOf(t, isoSpec, isoPools)
	c := ctr("g", req("exclusive_r", "1"))
	c.ExclusiveCPUs = cpuset.New(2)
	_, err := n.Allocate(NewLedger(n), c)
	var r *Refusal
	want := `given CPUs 2 of pool "exclusive_r" are not all isolated by the host (isolatedCPUs: require): 2 are not; ` +
		`its isolated CPUs free: 1,9`
	if !errors.As(err, &r) || r.Code != CodeCPUsNotIsolated || r.Reason != want {
		t.Fatalf("err %v, want %s: %s", err, CodeCPUsNotIsolated, want)
	}
	c.ExclusiveCPUs = cpuset.New(9)
	if d, err := n.Allocate(NewLedger(n), c); err != nil || d.CPUs.String() != "9" {
		t.Fatalf("given isolated CPU 9: %v, %v", d.CPUs, err)
	}
}

// TestWriteTextHostIsolation: the plan names the host's isolation under the node, each
// exclusive pool's isolated CPUs and choice, and warns about pools that mix.
func TestWriteTextHostIsolation(t *testing.T) {
	text := textOf(t, nodeOf(t, isoSpec, isoPools))
	for _, want := range []string{
		"\nHost isolation: isolcpus domain 1,5-6,9,13-14 (not load balanced), nohz_full 7, rcu_nocbs 7, managed_irq 1,5-6,9,13-14\n",
		"exclusive_p  exclusive  4-7,12-15  0/8 CPUs held (0%), 0 containers; host-isolated 5-7,13-14 (isolatedCPUs: prefer)\n",
		"exclusive_r  exclusive  1-3,9-11   0/6 CPUs held (0%), 0 containers; host-isolated 1,9 (isolatedCPUs: require)\n",
		`pool "exclusive_p" mixes CPUs the host isolated (5-7,13-14: isolcpus=, nohz_full=) with others (4,12,15)`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("plan text lacks %q:\n%s", want, text)
		}
	}
	if n := nodeOf(t, "cores=2", "pools: {default: {cpus: 0-1}}"); strings.Contains(textOf(t, n), "Host isolation") {
		t.Error("a host without isolation gets a Host isolation line")
	}
}

func textOf(t *testing.T, n *Node) string {
	t.Helper()
	var buf strings.Builder
	if err := n.WriteText(&buf, n.PlanPods(NewLedger(n), nil)); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

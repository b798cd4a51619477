package plan

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
)

// testNode: 2 sockets x 4 cores x 2 threads; core c = CPUs {c, c+8}; NUMA 0 = cores 0-3.
// default: core 0; shared_s: core 1 (2 CPUs = 2000m); exclusive_m: cores 2-5 (multi);
// exclusive_st: cores 6-7 (singleThreaded). A podfence-own config: it lists threads.
const testPools = `
exclusiveCPUs: threads
pools:
  default: {cpus: "0,8"}
  shared_s: {cpus: "1,9"}
  exclusive_m: {cpus: "2-5,10-13", hyperThreadingPolicy: multiThreaded}
  exclusive_st: {cpus: "6-7,14-15", hyperThreadingPolicy: singleThreaded}
`

func testNode(t testing.TB) *Node {
	return nodeOf(t, "sockets=2,numa=2,cores=4,threads=2", testPools)
}

// nodeOf builds a planning node from a synthetic topology spec and a pool config, with
// podfence's former CFS quotas (QuotasSum) that the tests below were written for.
func nodeOf(t testing.TB, spec, poolConfig string) *Node {
	return nodeWith(t, spec, poolConfig, Policy{CFSQuotas: QuotasSum})
}

// nodeWith builds a planning node with the given policy.
func nodeWith(t testing.TB, spec, poolConfig string, pol Policy) *Node {
	t.Helper()
	topo, err := topology.Synthetic(spec)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pools.Parse("test.yaml", []byte(poolConfig))
	if err != nil {
		t.Fatal(err)
	}
	layout, err := pools.Resolve(cfg, topo)
	if err != nil {
		t.Fatal(err)
	}
	return NewNode(topo, layout, pol)
}

func req(kv ...string) Request {
	r := Request{}
	for i := 0; i < len(kv); i += 2 {
		r[kv[i]] = resource.MustParse(kv[i+1])
	}
	return r
}

func ctr(name string, r Request) Container {
	return Container{PodUID: "uid-" + name, Namespace: "ns", Pod: "pod-" + name, Name: name, Request: r}
}

func TestPlanDecisions(t *testing.T) {
	for _, tc := range []struct {
		name      string
		c         Container
		pool      string
		cpus      string
		mems      string
		quota     int64
		idled     string
		exclusive string // EXCLUSIVE_CPUS
		shared    string // SHARED_CPUS
	}{
		{name: "no request: default pool", c: ctr("a", nil), pool: "default", cpus: "0,8", mems: "0"},
		{name: "sandbox: default pool whatever it asks", c: Container{PodUID: "u", Name: "", Sandbox: true, Request: req("exclusive_m", "2")},
			pool: "default", cpus: "0,8", mems: "0"},
		{name: "shared: pool cpuset, quota from millicpu", c: ctr("s", req("shared_s", "500")), pool: "shared_s", cpus: "1,9", mems: "0",
			quota: 50000, shared: "1,9"},
		{name: "exclusive: whole core, its NUMA node", c: ctr("e", req("exclusive_m", "2")), pool: "exclusive_m", cpus: "2,10", mems: "0",
			exclusive: "2,10"},
		{name: "exclusive across NUMA nodes", c: ctr("e", req("exclusive_m", "8")), pool: "exclusive_m", cpus: "2-5,10-13", mems: "0-1",
			exclusive: "2,3,4,5,10,11,12,13"},
		{name: "singleThreaded idles siblings", c: ctr("st", req("exclusive_st", "2")), pool: "exclusive_st", cpus: "6-7", mems: "1",
			idled: "14-15", exclusive: "6,7"},
		{name: "exclusive plus shared: union cpuset, quota covers both", c: ctr("m", req("exclusive_m", "2", "shared_s", "200")),
			pool: "exclusive_m", cpus: "1-2,9-10", mems: "0", quota: 220000, exclusive: "2,10", shared: "1,9"},
		{name: "a default-type pool beside an exclusive one is passed over", c: ctr("d", req("default", "1", "exclusive_m", "2")),
			pool: "exclusive_m", cpus: "2,10", mems: "0", exclusive: "2,10"},
		{name: "given CPUs used as given", c: func() Container {
			c := ctr("g", req("exclusive_m", "2"))
			c.ExclusiveCPUs = cpuset.New(4, 12)
			return c
		}(), pool: "exclusive_m", cpus: "4,12", mems: "1", exclusive: "4,12"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := testNode(t)
			s := NewLedger(n)
			d, err := n.Allocate(s, tc.c)
			if err != nil {
				t.Fatal(err)
			}
			got := []string{d.Allocation.Pool, d.CPUs.String(), d.Mems.String(), d.Allocation.Idled.String(),
				d.EnvValue(EnvExclusiveCPUs), d.EnvValue(EnvSharedCPUs)}
			want := []string{tc.pool, tc.cpus, tc.mems, tc.idled, tc.exclusive, tc.shared}
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("pool|cpus|mems|idled|EXCLUSIVE|SHARED = %q, want %q", got, want)
			}
			if d.Quota != tc.quota || (tc.quota != 0 && d.Period != DefaultCFSPeriod) {
				t.Errorf("quota %d/%d, want %d/%d", d.Quota, d.Period, tc.quota, DefaultCFSPeriod)
			}
			again, err := n.Plan(s, tc.c)
			if err != nil || !again.Existing || !again.CPUs.Equals(d.CPUs) {
				t.Errorf("re-plan = %v existing=%v err=%v: want the same CPUs, existing", again.CPUs, again.Existing, err)
			}
		})
	}
}

func TestPlanRefusals(t *testing.T) {
	given := func(c Container, cpus ...int) Container { c.ExclusiveCPUs = cpuset.New(cpus...); return c }
	for _, tc := range []struct {
		name   string
		before []Container // allocated first
		c      Container
		code   string
		reason string
	}{
		{name: "unknown pool", c: ctr("x", req("exclusive_nope", "1")), code: CodeUnknownPool,
			reason: `pool "exclusive_nope" (resource podfence.io/exclusive_nope) does not exist on this node; its pools are [default ` +
				`exclusive_m exclusive_st shared_s]`},
		{name: "fractional exclusive", c: ctr("x", req("exclusive_m", "1500m")), code: CodeFractionalExclusive,
			reason: `exclusive pool "exclusive_m" counts whole CPUs: podfence.io/exclusive_m=1500m is not a whole number above 0 (ask ` +
				`for 1, 2, ...)`},
		{name: "not enough CPUs", before: []Container{ctr("a", req("exclusive_m", "6"))}, c: ctr("x", req("exclusive_m", "3")),
			code:   CodeNotEnoughCPUs,
			reason: `exclusive pool "exclusive_m": not enough free CPUs: requested=3, free=2`},
		{name: "singleThreaded lacks whole cores", before: []Container{ctr("a", req("exclusive_st", "1"))},
			c: ctr("x", req("exclusive_st", "2")), code: CodeNotEnoughCPUs,
			reason: `exclusive pool "exclusive_st": not enough whole free cores: requested=2 CPUs needs 2 whole cores ` +
				`(singleThreaded), whole free cores=1, free CPUs=2`},
		{name: "singleThreaded: more than its cores", c: ctr("x", req("exclusive_st", "3")), code: CodeExclusiveTooLarge,
			reason: `asks podfence.io/exclusive_st=3, but exclusive pool "exclusive_st" has 2 physical cores`},
		{name: "exclusive zero", c: ctr("x", req("exclusive_m", "0")), code: CodeFractionalExclusive,
			reason: `exclusive pool "exclusive_m" counts whole CPUs: podfence.io/exclusive_m=0 is not a whole number above 0 (ask ` +
				`for 1, 2, ...)`},
		{name: "exclusive larger than the pool", c: ctr("x", req("exclusive_m", "9")), code: CodeExclusiveTooLarge,
			reason: `asks podfence.io/exclusive_m=9, but exclusive pool "exclusive_m" has 8 CPUs`},
		{name: "shared zero", c: ctr("x", req("shared_s", "0")), code: CodeInvalidRequest,
			reason: `shared pool "shared_s" counts millicpu as a whole number: podfence.io/shared_s=0 is not one above 0 (ask 500 ` +
				`for half a CPU)`},
		{name: "shared larger than the pool", c: ctr("x", req("shared_s", "2500")), code: CodeSharedTooLarge,
			reason: `asks 2500 millicpu of shared pool "shared_s", which has 2 CPUs (2000 millicpu)`},
		{name: "shared pool full", before: []Container{ctr("a", req("shared_s", "1500"))}, c: ctr("x", req("shared_s", "600")),
			code:   CodeNotEnoughShared,
			reason: `asks 600 millicpu of shared pool "shared_s": requested=600, free=500 of 2000`},
		{name: "shared in fractions of a device", c: ctr("x", req("shared_s", "500m")), code: CodeInvalidRequest,
			reason: `shared pool "shared_s" counts millicpu as a whole number: podfence.io/shared_s=0.5 is not one above 0 (ask 500 ` +
				`for half a CPU)`},
		{name: "given CPUs outside the pool", c: given(ctr("x", req("exclusive_m", "2")), 6, 14), code: CodeCPUsUnavailable,
			reason: `given CPUs 6,14 are not all in exclusive pool "exclusive_m" (2-5,10-13)`},
		{name: "given CPUs held by another", before: []Container{given(ctr("a", req("exclusive_m", "2")), 2, 10)},
			c: given(ctr("x", req("exclusive_m", "2")), 10, 3), code: CodeCPUsUnavailable,
			reason: `given CPUs 10 of pool "exclusive_m" are held by [pod-a/a]`},
		{name: "given CPUs held: only their holders named", before: []Container{given(ctr("a", req("exclusive_m", "2")), 2, 10),
			given(ctr("b", req("exclusive_m", "2")), 4, 12), given(ctr("c", req("exclusive_m", "1")), 11)},
			c: given(ctr("x", req("exclusive_m", "3")), 10, 3, 11), code: CodeCPUsUnavailable,
			reason: `given CPUs 10-11 of pool "exclusive_m" are held by [pod-a/a pod-c/c]`},
		{name: "given CPUs of the wrong count", c: given(ctr("x", req("exclusive_m", "2")), 2), code: CodeInvalidRequest,
			reason: `given CPUs 2 are 1 CPU, but the container asks 2 of pool "exclusive_m"`},
		{name: "given CPUs of a singleThreaded pool on one core", c: given(ctr("x", req("exclusive_st", "2")), 6, 14),
			code: CodeInvalidRequest, reason: `given CPUs 6,14 are 1 physical core, but the container asks 2 of pool "exclusive_st"`},
		{name: "given CPUs of two pools, one outside both", c: given(ctr("x", req("exclusive_m", "1", "exclusive_st", "1")), 2, 0),
			code: CodeCPUsUnavailable, reason: `given CPUs 0,2 are not all in exclusive pool "exclusive_m" (2-5,10-13) or ` +
				`"exclusive_st" (6-7,14-15)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := testNode(t)
			s := NewLedger(n)
			for _, b := range tc.before {
				if _, err := n.Allocate(s, b); err != nil {
					t.Fatal(err)
				}
			}
			before := s.Len()
			_, err := n.Allocate(s, tc.c)
			var r *Refusal
			if !errors.As(err, &r) {
				t.Fatalf("err = %v, want a *Refusal", err)
			}
			if r.Code != tc.code || r.Reason != tc.reason || r.Pod != "ns/pod-x" || r.Container != "x" {
				t.Errorf("refusal = %+v\nwant code %s reason %q", r, tc.code, tc.reason)
			}
			if s.Len() != before {
				t.Errorf("a refusal changed the state: %d allocations, want %d", s.Len(), before)
			}
		})
	}
}

func TestReleaseFrees(t *testing.T) {
	n := testNode(t)
	s := NewLedger(n)
	c := ctr("a", req("exclusive_m", "8", "shared_s", "2000"))
	if _, err := n.Allocate(s, c); err != nil {
		t.Fatal(err)
	}
	if s.Free("exclusive_m").Size() != 0 || s.SharedUsed() != 2000 {
		t.Fatalf("after allocate: free %s, shared %d", s.Free("exclusive_m"), s.SharedUsed())
	}
	if !s.Release(c.Key()) || s.Release(c.Key()) {
		t.Fatal("Release should report true once, then false")
	}
	if s.Free("exclusive_m").String() != "2-5,10-13" || s.SharedUsed() != 0 {
		t.Errorf("after release: free %s, shared %d", s.Free("exclusive_m"), s.SharedUsed())
	}
}

func TestRestore(t *testing.T) {
	alloc := func(pool string, typ allocation.PoolType, cpus string) allocation.Allocation {
		set, _ := topology.ParseCPUList(cpus)
		return allocation.Allocation{PodUID: "u-" + cpus, Container: "c", Pool: pool, Type: typ, CPUs: set}
	}
	for _, tc := range []struct {
		name   string
		allocs []allocation.Allocation
		err    string
	}{
		{name: "valid", allocs: []allocation.Allocation{alloc("exclusive_m", "exclusive", "2,10"), alloc("exclusive_m", "exclusive", "3")}},
		{name: "pool gone", allocs: []allocation.Allocation{alloc("exclusive_old", "exclusive", "2")},
			err: `restore allocation of u-2/c: pool "exclusive_old" is not an exclusive pool of this node (exclusive pools: ` +
				`[exclusive_m exclusive_st])`},
		{name: "CPU moved out of the pool", allocs: []allocation.Allocation{alloc("exclusive_m", "exclusive", "1-2")},
			err: `restore allocation of u-1-2/c: CPUs 1-2 are not all in pool "exclusive_m" (2-5,10-13)`},
		{name: "CPU held twice", allocs: []allocation.Allocation{alloc("exclusive_m", "exclusive", "2"), alloc("exclusive_m",
			"exclusive", "2-3")},
			err: `restore allocation of u-2-3/c: CPUs 2 of pool "exclusive_m" are held by another container ([/c])`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := NewLedger(testNode(t)).Restore(tc.allocs)
			if (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
				t.Errorf("err = %v, want %q", err, tc.err)
			}
		})
	}
}

package plan

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/pinning"
)

// coresPools is testPools in CPU-Pooler's meaning: exclusive pools list physical cores.
// Cores: default 0, shared_s 1 (with 9: 2 CPUs), exclusive_m 2-5 (multi), exclusive_st 6-7.
const coresPools = `
pools:
  default: {cpus: "0,8"}
  shared_s: {cpus: "1,9"}
  exclusive_m: {cpus: "2-5", hyperThreadingPolicy: multiThreaded}
  exclusive_st: {cpus: "6-7"}
`

// TestCFSQuotas pins the quota of each kind of container under each CFSQuotas mode:
// CPU-Pooler's all (the default) and shared, and podfence's former sum. Units are what the
// container asked: physical cores of exclusive_m (2 threads each), cores of exclusive_st.
func TestCFSQuotas(t *testing.T) {
	for _, tc := range []struct {
		name             string
		request          Request
		all, shared, sum string // the quota in µs per 100 ms ("-" for none), then the cpuset when given
	}{
		{name: "shared only", request: req("shared_s", "250"), all: "25000 1,9", shared: "25000 1,9", sum: "25000 1,9"},
		{name: "exclusive singleThreaded: units plus 100 millicpu", request: req("exclusive_st", "2"),
			all: "210000 6-7", shared: "-", sum: "-"},
		{name: "exclusive multiThreaded: units (cores), not threads, plus 100 millicpu", request: req("exclusive_m", "2"),
			all: "210000 2-3,10-11", shared: "-", sum: "-"},
		{name: "exclusive and shared: units plus the whole shared pool; shared: the share alone", request: req("exclusive_m", "1",
			"shared_s", "300"), all: "300000 1-2,9-10", shared: "30000 1-2,9-10", sum: "230000 1-2,9-10"},
		{name: "two exclusive pools: their units together", request: req("exclusive_m", "1", "exclusive_st", "1"),
			all: "210000 2,6,10", shared: "-", sum: "-"},
		{name: "default pool", request: nil, all: "- 0,8", shared: "- 0,8", sum: "- 0,8"},
	} {
		for _, mode := range []struct {
			q    CFSQuotas
			want string
		}{{"", tc.all}, {QuotasAll, tc.all}, {QuotasShared, tc.shared}, {QuotasSum, tc.sum}} {
			t.Run(tc.name+"/"+string(mode.q), func(t *testing.T) {
				n := nodeWith(t, "sockets=2,numa=2,cores=4,threads=2", coresPools, Policy{CFSQuotas: mode.q})
				d, err := n.Allocate(NewLedger(n), ctr("c", tc.request))
				if err != nil {
					t.Fatal(err)
				}
				got := "-"
				if d.Quota > 0 {
					got = fmt.Sprint(d.Quota)
					if d.Period != DefaultCFSPeriod {
						t.Errorf("period %d, want %d", d.Period, DefaultCFSPeriod)
					}
				}
				if strings.Contains(mode.want, " ") {
					got += " " + d.CPUs.String()
				}
				if got != mode.want {
					t.Errorf("quota and cpus %q, want %q", got, mode.want)
				}
			})
		}
	}
}

// TestCFSQuotasFlag: the flag takes the three modes and names them when refusing another.
func TestCFSQuotasFlag(t *testing.T) {
	var q CFSQuotas
	if q.String() != "all" {
		t.Errorf("zero value reads %q, want all", q.String())
	}
	for _, v := range []string{"all", "shared", "sum"} {
		if err := q.Set(v); err != nil || q.String() != v {
			t.Errorf("Set(%q) = %v, reads %q", v, err, q.String())
		}
	}
	if err := q.Set("exclusive"); err == nil || err.Error() != `"exclusive": want all (CPU-Pooler's default), shared or sum` {
		t.Errorf("Set(exclusive) = %v", err)
	}
}

// TestEnv pins the environment CPU-Pooler gives: EXCLUSIVE_CPUS, SHARED_CPUS, CPU_POOLS for a
// container with a pool, CONTAINER_NAME for an exclusive one or one the pinning annotation
// names; nothing for a default-pool container.
func TestEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		request Request
		pinned  bool
		want    string
	}{
		{name: "exclusive", request: req("exclusive_st", "1"),
			want: "EXCLUSIVE_CPUS=6 CPU_POOLS=exclusive CONTAINER_NAME=c"},
		{name: "shared", request: req("shared_s", "100"), want: "SHARED_CPUS=1,9 CPU_POOLS=shared"},
		{name: "shared, pinned", request: req("shared_s", "100"), pinned: true,
			want: "SHARED_CPUS=1,9 CPU_POOLS=shared CONTAINER_NAME=c"},
		{name: "exclusive and shared", request: req("exclusive_m", "1", "shared_s", "100"),
			want: "EXCLUSIVE_CPUS=2,10 SHARED_CPUS=1,9 CPU_POOLS=exclusive&shared CONTAINER_NAME=c"},
		{name: "exclusive, pinned: CONTAINER_NAME once", request: req("exclusive_st", "1"), pinned: true,
			want: "EXCLUSIVE_CPUS=6 CPU_POOLS=exclusive CONTAINER_NAME=c"},
		{name: "default", want: "-"},
		{name: "default, pinned", pinned: true, want: "CONTAINER_NAME=c"},
		{name: "a default-type pool resource: the default pool", request: req("reserved", "1"), want: "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := nodeOf(t, "sockets=2,numa=2,cores=4,threads=2", coresPools)
			c := ctr("c", tc.request)
			c.Pinned = tc.pinned
			d, err := n.Allocate(NewLedger(n), c)
			if err != nil {
				t.Fatal(err)
			}
			if got := envText(d.Env); got != tc.want {
				t.Errorf("env %q, want %q", got, tc.want)
			}
		})
	}
}

// TestTwoExclusivePools: a container may ask two exclusive pools (CPU-Pooler admits it): it
// gets CPUs of both, each pool keeps its own count, the device plugin's CPUs are used for the
// pool they are in and the allocator chooses for the other, and releasing frees both.
func TestTwoExclusivePools(t *testing.T) {
	n := nodeOf(t, "sockets=2,numa=2,cores=4,threads=2", coresPools)
	s := NewLedger(n)
	c := ctr("two", req("exclusive_m", "1", "exclusive_st", "1"))
	c.ExclusiveCPUs = cpuset.New(7)
	d, err := n.Allocate(s, c)
	if err != nil {
		t.Fatal(err)
	}
	a := d.Allocation
	if got := fmt.Sprintf("%s %v %s idled %s", a.Pool, a.ExtraPools, a.CPUs, a.Idled); got != "exclusive_m [exclusive_st] 2,7,10 idled 15" {
		t.Errorf("allocation %q", got)
	}
	if s.Free("exclusive_m").String() != "3-5,11-13" || s.Free("exclusive_st").String() != "6,14" {
		t.Errorf("free exclusive_m %s, exclusive_st %s", s.Free("exclusive_m"), s.Free("exclusive_st"))
	}
	rep := n.Usage(s, []Placed{{Pod: "ns/pod-two", Container: "two", Decision: d}})
	for _, u := range rep {
		if u.Type == "exclusive" && (u.Containers != 1 || (u.Pool == "exclusive_st" && (u.Held != 2 || u.Idled != 1))) {
			t.Errorf("usage %+v", u)
		}
	}
	// The record restores into a fresh ledger, and the same CPUs cannot be restored twice.
	fresh := NewLedger(n)
	if err := fresh.Restore(s.Allocations()); err != nil {
		t.Fatal(err)
	}
	again := a
	again.Container = "copy"
	if err := fresh.Add(again); err == nil || !strings.Contains(err.Error(), "held by another container") {
		t.Errorf("adding the same CPUs again: %v", err)
	}
	if !s.Release(a.Key()) || s.Free("exclusive_m").Size() != 8 || s.Free("exclusive_st").Size() != 4 {
		t.Errorf("after release: free exclusive_m %s, exclusive_st %s", s.Free("exclusive_m"), s.Free("exclusive_st"))
	}
}

// TestLedgerExtraPoolsChecked: a record read back from disk that names extra pools wrongly is
// refused with the reason.
func TestLedgerExtraPoolsChecked(t *testing.T) {
	n := nodeOf(t, "sockets=2,numa=2,cores=4,threads=2", coresPools)
	for _, tc := range []struct {
		name string
		edit func(a *allocation.Allocation)
		want string
	}{
		{name: "a pool twice", edit: func(a *allocation.Allocation) { a.ExtraPools = []string{"exclusive_m"} },
			want: `exclusive pool "exclusive_m" is named twice (pool "exclusive_m", extraPools [exclusive_m])`},
		{name: "a shared pool as extra", edit: func(a *allocation.Allocation) { a.ExtraPools = []string{"shared_s"} },
			want: `pool "shared_s" is not an exclusive pool of this node (exclusive pools: [exclusive_m exclusive_st])`},
		{name: "CPUs outside every pool named", edit: func(a *allocation.Allocation) { a.CPUs = cpuset.New(2, 1) },
			want: `CPUs 1-2 are not all in pool "exclusive_m" or "exclusive_st" (2-7,10-15)`},
		{name: "extra pools on a shared record", edit: func(a *allocation.Allocation) {
			a.Type, a.Pool, a.CPUs, a.SharedPool, a.MilliCPU = allocation.TypeShared, "shared_s", cpuset.New(), "shared_s", 100
		}, want: `shared allocation names extra exclusive pools [exclusive_st]: only exclusive allocations do`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := allocation.Allocation{PodUID: "u", Container: "c", Pool: "exclusive_m", Type: allocation.TypeExclusive,
				CPUs: cpuset.New(2), ExtraPools: []string{"exclusive_st"}}
			tc.edit(&a)
			if err := NewLedger(n).Add(a); err == nil || err.Error() != tc.want {
				t.Errorf("Add: %v\nwant: %s", err, tc.want)
			}
		})
	}
}

// TestWriteTextUnused: the CPUs no pool owns are listed after the pools.
func TestWriteTextUnused(t *testing.T) {
	n := nodeWith(t, "sockets=2,numa=2,cores=4,threads=2", strings.Replace(coresPools, `default: {cpus: "0,8"}`, `default: {cpus: "0"}`, 1),
		Policy{})
	var buf bytes.Buffer
	if err := n.WriteText(&buf, n.PlanPods(NewLedger(n), nil)); err != nil {
		t.Fatal(err)
	}
	want := "(no pool)     -          8          unused: no container runs there (unpooledCPUs: default gives them to the default pool)\n"
	if !strings.Contains(buf.String(), want) {
		t.Errorf("text report:\n%s\nwant the line %q", buf.String(), want)
	}
}

// TestPinningChecked: a pinned container's processes must fit what it gets, in the webhook's
// words (pinning.Check): more CPUs than it got, or a pool that is not its own, refuse it;
// processes that fit leave the decision as it is.
func TestPinningChecked(t *testing.T) {
	procs := func(pool string, cpus int) []pinning.Process {
		return []pinning.Process{{Path: "/bin/dp", Pool: pool, CPUs: cpus}, {Pool: pool, CPUs: 1}}
	}
	for _, tc := range []struct {
		name  string
		procs []pinning.Process
		want  string
	}{
		{name: "fits", procs: procs("exclusive_m", 1)},
		{name: "more CPUs than given", procs: procs("exclusive_m", 2), want: `pod ns/pod-c container "c" refused (ProcessPinning): ` +
			`process pinning: not enough CPUs: exclusive processes ask for 3 CPUs, the container has 2: lower their cpus in the ` +
			`annotation or raise the container's exclusive pool request`},
		{name: "another pool", procs: procs("exclusive_st", 1), want: `pod ns/pod-c container "c" refused (ProcessPinning): ` +
			`process pinning: process 0 (/bin/dp): exclusive pool "exclusive_st" is not the container's: it asks for 2 CPUs of ` +
			`exclusive pool "exclusive_m"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := testNode(t)
			s := NewLedger(n)
			c := ctr("c", req("exclusive_m", "2"))
			c.Pinned, c.Processes = true, tc.procs
			d, err := n.Allocate(s, c)
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want == "" && d.EnvValue(EnvContainerName) != "c":
				t.Errorf("env %v, want CONTAINER_NAME=c", d.Env)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Errorf("err %v\nwant %s", err, tc.want)
			case tc.want != "" && s.Len() != 0:
				t.Errorf("a refused container holds %v", s.Allocations())
			}
		})
	}
}

package plan

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

// TestRestoreRefuses: what a restore (checkpoint or runtime resync) refuses, with the record
// named; every case but the first is a record that must not be counted.
func TestRestoreRefuses(t *testing.T) {
	share := func(uid string, typ allocation.PoolType, pool, sharedPool string, milli int64) allocation.Allocation {
		return allocation.Allocation{PodUID: uid, Container: "c", Pool: pool, Type: typ, SharedPool: sharedPool, MilliCPU: milli}
	}
	excl := func(uid, pool, cpus, idled string) allocation.Allocation {
		c, errC := cpuset.Parse(cpus)
		i, errI := cpuset.Parse(idled)
		if errC != nil || errI != nil {
			t.Fatal(errC, errI)
		}
		return allocation.Allocation{PodUID: uid, Container: "c", Pool: pool, Type: allocation.TypeExclusive, CPUs: c, Idled: i}
	}
	withShare := excl("u2", "exclusive_m", "2", "")
	withShare.SharedPool, withShare.MilliCPU = "shared_s", 300
	for _, tc := range []struct {
		name   string
		allocs []allocation.Allocation
		err    string
	}{
		{name: "shared pool filled exactly", allocs: []allocation.Allocation{
			share("u1", allocation.TypeShared, "shared_s", "shared_s", 1700), withShare, share("u3", allocation.TypeDefault, "default", "", 0)}},
		{name: "share of a shared pool the node does not have",
			allocs: []allocation.Allocation{share("u1", allocation.TypeShared, "shared_old", "shared_old", 100)},
			err:    `restore allocation of u1/c: shared pool "shared_old" is not this node's shared pool`},
		{name: "exclusive with a share of another shared pool", allocs: []allocation.Allocation{func() allocation.Allocation {
			a := withShare
			a.SharedPool = "shared_old"
			return a
		}()},
			err: `restore allocation of u2/c: shared pool "shared_old" is not this node's shared pool`},
		{name: "shared pool over capacity", allocs: []allocation.Allocation{share("u1", allocation.TypeShared, "shared_s", "shared_s", 1500),
			share("u2", allocation.TypeShared, "shared_s", "shared_s", 501)},
			err: `restore allocation of u2/c: milliCPU 501: shared pool "shared_s" has 500 of 2000 millicpu left`},
		{name: "negative share", allocs: []allocation.Allocation{share("u1", allocation.TypeShared, "shared_s", "shared_s", -5)},
			err: `restore allocation of u1/c: milliCPU -5: want 0 or more`},
		{name: "shared pool without a share", allocs: []allocation.Allocation{share("u1", allocation.TypeDefault, "default", "shared_s", 0)},
			err: `restore allocation of u1/c: sharedPool "shared_s" with milliCPU 0: want a share above 0 or no shared pool`},
		{name: "shared allocation naming another pool than its share",
			allocs: []allocation.Allocation{share("u1", allocation.TypeShared, "shared_s", "shared_x", 100)},
			err: `restore allocation of u1/c: shared allocation in pool "shared_s": want milliCPU above 0 and sharedPool "shared_s" ` +
				`(got 100, "shared_x")`},
		{name: "default allocation in another pool", allocs: []allocation.Allocation{share("u1", allocation.TypeDefault, "exclusive_m", "", 0)},
			err: `restore allocation of u1/c: default-pool allocation names pool "exclusive_m": want "default"`},
		{name: "unknown type", allocs: []allocation.Allocation{share("u1", "burst", "default", "", 0)},
			err: `restore allocation of u1/c: type "burst": want exclusive, shared or default`},
		{name: "shared allocation holding CPUs", allocs: []allocation.Allocation{func() allocation.Allocation {
			a := share("u1", allocation.TypeShared, "shared_s", "shared_s", 100)
			a.CPUs = cpuset.New(1)
			return a
		}()},
			err: `restore allocation of u1/c: shared allocation holds CPUs 1 idled : only exclusive allocations hold CPUs`},
		{name: "default allocation idling CPUs", allocs: []allocation.Allocation{func() allocation.Allocation {
			a := share("u1", allocation.TypeDefault, "default", "", 0)
			a.Idled = cpuset.New(8)
			return a
		}()},
			err: `restore allocation of u1/c: default allocation holds CPUs  idled 8: only exclusive allocations hold CPUs`},
		{name: "exclusive without CPUs", allocs: []allocation.Allocation{excl("u1", "exclusive_m", "", "")},
			err: `restore allocation of u1/c: exclusive allocation in pool "exclusive_m" has no CPUs`},
		{name: "idled CPUs that are not siblings", allocs: []allocation.Allocation{excl("u1", "exclusive_st", "6", "7")},
			err: `restore allocation of u1/c: idled CPUs 7 are not siblings that pool "exclusive_st" keeps idle beside CPUs 6`},
		{name: "idled CPUs in a multiThreaded pool", allocs: []allocation.Allocation{excl("u1", "exclusive_m", "2", "10")},
			err: `restore allocation of u1/c: idled CPUs 10 are not siblings that pool "exclusive_m" keeps idle beside CPUs 2`},
		{name: "idled sibling held by another", allocs: []allocation.Allocation{excl("u1", "exclusive_st", "14", ""),
			excl("u2", "exclusive_st", "6", "14")},
			err: `restore allocation of u2/c: CPUs 14 of pool "exclusive_st" are held by another container ([/c])`},
		{name: "same container twice", allocs: []allocation.Allocation{excl("u1", "exclusive_m", "2", ""), excl("u1", "exclusive_m", "3", "")},
			err: `restore allocation of u1/c: container u1/c already holds an allocation`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewLedger(testNode(t))
			err := s.Restore(tc.allocs)
			if (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
				t.Fatalf("err = %v\nwant %q", err, tc.err)
			}
			if tc.err == "" {
				if s.Len() != len(tc.allocs) || s.SharedUsed() != 2000 || s.Free("exclusive_m").String() != "3-5,10-13" {
					t.Errorf("restored %d allocations, %dm shared, exclusive_m free %s; want %d, 2000m, 3-5,10-13", s.Len(),
						s.SharedUsed(), s.Free("exclusive_m"), len(tc.allocs))
				}
				return
			}
			// The refused record counts nowhere: the pools are as the earlier records left them.
			ok := slices.Clone(tc.allocs[:s.Len()])
			fresh := NewLedger(testNode(t))
			if err := fresh.Restore(ok); err != nil {
				t.Fatal(err)
			}
			if s.SharedUsed() != fresh.SharedUsed() || !s.Free("exclusive_m").Equals(fresh.Free("exclusive_m")) ||
				!s.Free("exclusive_st").Equals(fresh.Free("exclusive_st")) {
				t.Errorf("after the refusal: %dm shared, free %s / %s; want %dm, %s / %s", s.SharedUsed(), s.Free("exclusive_m"),
					s.Free("exclusive_st"), fresh.SharedUsed(), fresh.Free("exclusive_m"), fresh.Free("exclusive_st"))
			}
		})
	}
}

// TestRestoreDegradedPools: with CPUs offline, records made before they went offline are
// still accepted: an exclusive record may hold an offline CPU of its pool (which stays
// held, so it is not free when it comes back), and shares count against the configured
// capacity of the shared pool, while planning new shares uses the online CPUs.
func TestRestoreDegradedPools(t *testing.T) {
	n := nodeOf(t, "sockets=2,numa=2,cores=4,threads=2,offline=9,13", testPools)
	s := NewLedger(n)
	err := s.Restore([]allocation.Allocation{
		{PodUID: "u1", Container: "c", Pool: "exclusive_m", Type: allocation.TypeExclusive, CPUs: cpuset.New(5, 13)},
		{PodUID: "u2", Container: "c", Pool: "shared_s", Type: allocation.TypeShared, SharedPool: "shared_s", MilliCPU: 1800},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Free("exclusive_m").String(); got != "2-4,10-12" {
		t.Errorf("exclusive_m free = %s, want 2-4,10-12", got)
	}
	// The container runs on its online CPUs only.
	a, _ := s.Get(allocation.Key{PodUID: "u1", Container: "c"})
	if d := n.Decide(a); d.CPUs.String() != "5" || d.EnvValue(EnvExclusiveCPUs) != "5" {
		t.Errorf("decision: cpus %s, %s=%s; want 5 alone", d.CPUs, EnvExclusiveCPUs, d.EnvValue(EnvExclusiveCPUs))
	}
	err = s.Add(allocation.Allocation{PodUID: "u3", Container: "c", Pool: "shared_s", Type: allocation.TypeShared, SharedPool: "shared_s",
		MilliCPU: 201})
	if want := `milliCPU 201: shared pool "shared_s" has 200 of 2000 millicpu left`; err == nil || err.Error() != want {
		t.Errorf("Add over the configured capacity: err = %v, want %s", err, want)
	}
	// Planning counts the online CPUs only (1000m), of which the restored shares take more than all.
	_, err = n.Plan(s, ctr("x", req("shared_s", "100")))
	var r *Refusal
	if !errors.As(err, &r) || r.Code != CodeNotEnoughShared || !strings.HasSuffix(r.Reason, " of 1000") {
		t.Errorf("Plan on the degraded shared pool: err = %v, want a %s refusal out of 1000 millicpu", err, CodeNotEnoughShared)
	}
}

// TestAllocationsSorted: Allocations lists by pod UID, then container name.
func TestAllocationsSorted(t *testing.T) {
	s := NewLedger(testNode(t))
	var in []allocation.Allocation
	for _, k := range []string{"b/2", "a/9", "b/1", "a/10", "c/0"} {
		uid, c, _ := strings.Cut(k, "/")
		in = append(in, allocation.Allocation{PodUID: uid, Container: c, Pool: "default", Type: allocation.TypeDefault})
	}
	if err := s.Restore(in); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range s.Allocations() {
		got = append(got, a.Key().String())
	}
	if want := "a/10 a/9 b/1 b/2 c/0"; strings.Join(got, " ") != want {
		t.Errorf("Allocations() = %s, want %s", strings.Join(got, " "), want)
	}
}

// TestGivenCPUsSingleThreaded: CPUs chosen by the device plugin in a singleThreaded pool
// idle their siblings, and are refused when a sibling is held by another container.
func TestGivenCPUsSingleThreaded(t *testing.T) {
	n := testNode(t)
	s := NewLedger(n)
	c := ctr("g", req("exclusive_st", "1"))
	c.ExclusiveCPUs = cpuset.New(7)
	d, err := n.Allocate(s, c)
	if err != nil {
		t.Fatal(err)
	}
	if d.CPUs.String() != "7" || d.Allocation.Idled.String() != "15" || s.Free("exclusive_st").String() != "6,14" {
		t.Errorf("cpus %s idled %s, free %s; want 7, 15 and 6,14 free", d.CPUs, d.Allocation.Idled, s.Free("exclusive_st"))
	}
	// A record restored without its idled sibling holds 14 alone; 6 is free but shares its core.
	if err := s.Add(allocation.Allocation{PodUID: "u-r", Pod: "r", Container: "r", Pool: "exclusive_st", Type: allocation.TypeExclusive,
		CPUs: cpuset.New(14)}); err != nil {
		t.Fatal(err)
	}
	x := ctr("x", req("exclusive_st", "1"))
	x.ExclusiveCPUs = cpuset.New(6)
	_, err = n.Allocate(s, x)
	var r *Refusal
	want := `given CPUs 6 of singleThreaded pool "exclusive_st" share cores with CPUs 14 held by [r/r]: ` +
		`a singleThreaded container has its cores to itself`
	if !errors.As(err, &r) || r.Code != CodeCPUsUnavailable || r.Reason != want {
		t.Errorf("err = %v, want a %s refusal: %s", err, CodeCPUsUnavailable, want)
	}
	if s.Len() != 2 {
		t.Errorf("%d allocations after the refusal, want 2", s.Len())
	}
}

// TestSharedFractionMessage: the refusal of a share in fractions of a device shows the
// amount asked, in millicpu devices.
func TestSharedFractionMessage(t *testing.T) {
	n := testNode(t)
	for _, q := range []string{"1250m", "1m"} {
		_, err := n.Plan(NewLedger(n), ctr("x", req("shared_s", q)))
		want := fmt.Sprintf("podfence.io/shared_s=%s is not one above 0", map[string]string{"1250m": "1.25", "1m": "0.001"}[q])
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("shared_s=%s: err = %v, want it to contain %q", q, err, want)
		}
	}
}

// TestAddRefusalKeepsCPUsFree: a record refused for its share (another shared pool, or more
// than is left) must not take its exclusive CPUs. Add moved them out of the free set before it
// checked the share and left them out when it refused, so they were lost until a restart.
func TestAddRefusalKeepsCPUsFree(t *testing.T) {
	for _, sharedPool := range []string{"shared_old", "shared_s"} {
		s := NewLedger(testNode(t))
		a := allocation.Allocation{PodUID: "u", Container: "c", Pool: "exclusive_m", Type: allocation.TypeExclusive, CPUs: cpuset.New(2),
			SharedPool: sharedPool, MilliCPU: 2001}
		if err := s.Add(a); err == nil {
			t.Fatalf("Add(%+v) accepted", a)
		}
		if got := s.Free("exclusive_m").String(); got != "2-5,10-13" || s.Len() != 0 {
			t.Errorf("share of %s refused: exclusive_m free %s with %d allocations, want 2-5,10-13 and none", sharedPool, got, s.Len())
		}
	}
}

// TestQuotaMinimum: a share whose CFS quota would be under the kernel's minimum (1000µs of
// 100000µs: 10 millicpu) gets the minimum and says so; one at the minimum is left as it is.
func TestQuotaMinimum(t *testing.T) {
	n := testNode(t)
	for _, tc := range []struct {
		milli  string
		quota  int64
		raised bool
		text   string
	}{
		{milli: "9", quota: 1000, raised: true, text: "1000/100000µs (kernel minimum)"},
		{milli: "10", quota: 1000, text: "1000/100000µs"},
		{milli: "11", quota: 1100, text: "1100/100000µs"},
	} {
		d, err := n.Plan(NewLedger(n), ctr("s", req("shared_s", tc.milli)))
		if err != nil {
			t.Fatal(err)
		}
		if d.Quota != tc.quota || d.QuotaRaised != tc.raised || quota(d) != tc.text {
			t.Errorf("shared_s=%s: quota %d raised=%v %q, want %d raised=%v %q", tc.milli, d.Quota, d.QuotaRaised, quota(d), tc.quota,
				tc.raised, tc.text)
		}
	}
}

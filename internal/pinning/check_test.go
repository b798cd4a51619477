package pinning

import (
	"errors"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

func TestCheck(t *testing.T) {
	both := Pools{Exclusive: "exclusive_a", CPUs: 3, Shared: "shared_a", MilliCPU: 500}
	for _, tc := range []struct {
		name  string
		procs []Process
		pools Pools
		want  string // "" for none
	}{
		{name: "exact fit", procs: []Process{excl(2), shared(500), excl(1)}, pools: both},
		{name: "default with shared left", procs: []Process{excl(3), dflt()}, pools: both},
		{name: "default only, no pool", procs: []Process{dflt(), {Pool: "default"}}},
		{name: "another exclusive pool", procs: []Process{dflt(), {Path: "/x", Pool: "exclusive_b", CPUs: 1}}, pools: both,
			want: `process 1 (/x): exclusive pool "exclusive_b" is not the container's: it asks for 3 CPUs of exclusive pool "exclusive_a"`},
		{name: "a further exclusive pool of the container", procs: []Process{excl(1), {Path: "/x", Pool: "exclusive_b", CPUs: 2}},
			pools: Pools{Exclusive: "exclusive_a", MoreExclusive: []string{"exclusive_b"}, CPUs: 3}},
		{name: "exclusive without the pool", procs: []Process{excl(1)}, pools: Pools{Shared: "shared_a", MilliCPU: 100},
			want: `process 0 (/bin/e): exclusive pool "exclusive_a" is not the container's: it asks for no exclusive pool in its resources`},
		{name: "another shared pool", procs: []Process{{Pool: "shared_b", CPUs: 100}}, pools: both,
			want: `process 0 (the container's command): shared pool "shared_b" is not the container's: it asks for 500 millicpu of ` +
				`shared pool "shared_a"`},
		{name: "shared without the pool", procs: []Process{excl(1), shared(100)}, pools: Pools{Exclusive: "exclusive_a", CPUs: 2},
			want: `process 1 (/bin/s): shared pool "shared_a" is not the container's: it asks for no shared pool in its resources`},
		{name: "more exclusive CPUs", procs: []Process{excl(2), excl(2)}, pools: both,
			want: `not enough CPUs: exclusive processes ask for 4 CPUs, the container has 3: lower their cpus in the annotation or ` +
				`raise the container's exclusive pool request`},
		{name: "more millicpu", procs: []Process{shared(300), shared(300)}, pools: both,
			want: `not enough CPUs: processes ask for 600 millicpu of shared pool "shared_a", the container has 500: lower their cpus ` +
				`in the annotation or raise the container's shared pool request`},
		{name: "nothing left for default", procs: []Process{excl(2), dflt()}, pools: Pools{Exclusive: "exclusive_a", CPUs: 2},
			want: `not enough CPUs: process 1 (/bin/d) is in default pool "default" and gets the exclusive CPUs no exclusive process ` +
				`takes, but exclusive processes take all 2 of them and the container has no shared CPUs: leave one CPU or request a shared pool`},
		{name: "exclusive cpus below 1", procs: []Process{excl(0)}, pools: both,
			want: `process 0 (/bin/e): exclusive pool "exclusive_a": cpus 0: want at least 1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.procs, tc.pools)
			if got := errString(err); got != tc.want {
				t.Errorf("Check:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestCheckAgreesWithPlan: on CPU counts, Check (the webhook, the agent) and Plan (podfence
// start) refuse the same processes with the same words.
func TestCheckAgreesWithPlan(t *testing.T) {
	sets := [][]Process{
		{excl(1)}, {excl(2), dflt()}, {excl(1), shared(100), dflt()}, {shared(100)}, {dflt()},
		{excl(3)}, {excl(1), excl(1), dflt()}, {shared(200), excl(2)}, {excl(-1)},
	}
	for _, procs := range sets {
		for n := range 4 {
			for _, withShared := range []bool{false, true} {
				pools, shared := Pools{Exclusive: "exclusive_a", CPUs: n}, cpuset.New()
				if withShared {
					pools.Shared, pools.MilliCPU, shared = "shared_a", 1000, cpuset.New(40)
				}
				if n == 0 {
					pools.Exclusive = ""
				}
				ids := make([]int, n)
				for i := range ids {
					ids[i] = 10 + i
				}
				_, perr := Plan(procs, cpuset.New(ids...), shared)
				cerr := Check(procs, pools)
				lacks := false // a pool the container lacks is Check's own rule, said first
				for _, p := range procs {
					lacks = lacks || (p.Type() == allocation.TypeExclusive && n == 0) || (p.Type() == allocation.TypeShared && !withShared)
				}
				if !lacks && errString(cerr) != errString(perr) {
					t.Errorf("%v on %d CPUs (shared %v):\n Check %v\n Plan  %v", procs, n, withShared, cerr, perr)
				}
				if lacks && (cerr == nil || perr == nil) {
					t.Errorf("%v on %d CPUs (shared %v): Check %v, Plan %v; want both to refuse", procs, n, withShared, cerr, perr)
				}
			}
		}
	}
}

func TestSpecCheck(t *testing.T) {
	spec := Spec{Containers: []Container{
		{Name: "app", Processes: []Process{excl(2)}},
		{Name: "ghost", Processes: []Process{dflt()}},
		{Name: "side", Processes: []Process{shared(100)}},
	}}
	err := spec.Check(map[string]Pools{"app": {Exclusive: "exclusive_a", CPUs: 1}, "side": {Shared: "shared_a", MilliCPU: 100}, "init": {}})
	want := `container "app": not enough CPUs: exclusive processes ask for 2 CPUs, the container has 1: lower their cpus in the annotation or raise the container's exclusive pool request
container "ghost": no such container in the pod (it has app, init, side)`
	if got := errString(err); got != want {
		t.Errorf("Check:\n got %s\nwant %s", got, want)
	}
	if !errors.Is(err, ErrNotEnoughCPUs) {
		t.Errorf("%v does not wrap ErrNotEnoughCPUs", err)
	}
	if err := spec.Check(map[string]Pools{"app": {Exclusive: "exclusive_a", CPUs: 2}, "ghost": {}, "side": {Shared: "shared_a",
		MilliCPU: 100}}); err != nil {
		t.Errorf("fitting pools: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

package pinning

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/topology"
)

func mustCPUs(t testing.TB, s string) cpuset.CPUSet {
	t.Helper()
	set, err := topology.ParseCPUList(s)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func excl(n int) Process   { return Process{Path: "/bin/e", Pool: "exclusive_a", CPUs: n} }
func shared(m int) Process { return Process{Path: "/bin/s", Pool: "shared_a", CPUs: m} }
func dflt() Process        { return Process{Path: "/bin/d", Pool: "default"} }

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name              string
		procs             []Process
		exclusive, shared string
		// want is each process's CPUs, "" for not pinned.
		want []string
	}{
		{name: "exclusive in order", procs: []Process{excl(2), excl(1)}, exclusive: "4,2,9,7", want: []string{"2,4", "7"}},
		{name: "exact fit", procs: []Process{excl(1), excl(3)}, exclusive: "0-3", want: []string{"0", "1-3"}},
		{name: "shared get the whole shared set", procs: []Process{shared(100), shared(900)}, shared: "6-7", want: []string{"6-7", "6-7"}},
		{name: "exclusive beside shared", procs: []Process{shared(500), excl(2)}, exclusive: "2-3", shared: "6-7", want: []string{"6-7", "2-3"}},
		{name: "default gets what is left", procs: []Process{dflt(), excl(1), shared(100)}, exclusive: "2-4", shared: "8",
			want: []string{"3-4,8", "2", "8"}},
		{name: "default gets shared when exclusive is all taken", procs: []Process{excl(2), dflt()}, exclusive: "2-3", shared: "8-9",
			want: []string{"2-3", "8-9"}},
		{name: "default in a default-pool container is not pinned", procs: []Process{dflt(), dflt()}, want: []string{"", ""}},
		{name: "no process", procs: nil, exclusive: "1", want: []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Plan(tc.procs, mustCPUs(t, tc.exclusive), mustCPUs(t, tc.shared))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d assignments, want %d", len(got), len(tc.want))
			}
			for i, a := range got {
				if a.CPUs.String() != tc.want[i] || a.Process.Path != tc.procs[i].Path {
					t.Errorf("process %d: got %s on %q, want %s on %q", i, a.Process.Path, a.CPUs, tc.procs[i].Path, tc.want[i])
				}
			}
		})
	}
}

func TestPlanRefuses(t *testing.T) {
	for _, tc := range []struct {
		name              string
		procs             []Process
		exclusive, shared string
		want              string
	}{
		{
			name: "more exclusive CPUs than allocated", procs: []Process{excl(2), excl(2)}, exclusive: "2-4",
			want: `not enough CPUs: exclusive processes ask for 4 CPUs, the container has 3: lower their cpus in the annotation or ` +
				`raise the container's exclusive pool request`,
		},
		{
			name: "exclusive in a container without exclusive CPUs", procs: []Process{excl(1)}, shared: "5",
			want: `not enough CPUs: exclusive processes ask for 1 CPUs, the container has 0:`,
		},
		{
			name: "shared without shared CPUs", procs: []Process{excl(1), shared(200)}, exclusive: "1",
			want: `not enough CPUs: process 1 (/bin/s) is in shared pool "shared_a", but the container has no shared CPUs: request ` +
				`the pool in the container's resources`,
		},
		{
			name: "default with nothing left", procs: []Process{excl(2), {Pool: "default"}}, exclusive: "0-1",
			want: `not enough CPUs: process 1 (the container's command) is in default pool "default" and gets the exclusive CPUs no ` +
				`exclusive process takes, but exclusive processes take all 2 of them and the container has no shared CPUs: leave one CPU ` +
				`or request a shared pool`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Plan(tc.procs, mustCPUs(t, tc.exclusive), mustCPUs(t, tc.shared))
			if !errors.Is(err, ErrNotEnoughCPUs) {
				t.Fatalf("error %v does not wrap ErrNotEnoughCPUs", err)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error:\n got %v\nwant %s", err, tc.want)
			}
		})
	}
}

// Plan takes processes that did not come from Parse, so it checks exclusive counts itself.
func TestPlanRejectsNonPositiveExclusive(t *testing.T) {
	_, err := Plan([]Process{excl(3), excl(-2)}, mustCPUs(t, "0-1"), cpuset.New())
	if err == nil || err.Error() != `process 1 (/bin/e): exclusive pool "exclusive_a": cpus -2: want at least 1` {
		t.Errorf("error = %v", err)
	}
}

func TestDemand(t *testing.T) {
	e, s := Demand([]Process{excl(2), shared(250), dflt(), excl(1), shared(50)})
	if e != 3 || s != 300 {
		t.Errorf("Demand = %d CPUs, %d millicpu; want 3, 300", e, s)
	}
}

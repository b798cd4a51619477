package sandbox_test

import (
	"math"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/sandbox"
)

const mi = 1 << 20

func mustCPUs(t *testing.T, list string) cpuset.CPUSet {
	t.Helper()
	s, err := topology.ParseCPUList(list)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ctr is a member on CPUs/mems lists with quota/period, memory and pids.
func ctr(t *testing.T, cpus string, quota, period, memory, pids int64) sandbox.Member {
	return sandbox.Member{Resources: sandbox.Resources{Quota: quota, Period: period, Memory: memory, Pids: pids},
		CPUs: mustCPUs(t, cpus), Mems: mustCPUs(t, "0")}
}

func TestSize(t *testing.T) {
	kata := sandbox.Resources{Quota: 25000, Period: 100000, Memory: 160 * mi} // 250m, 160Mi
	for _, tc := range []struct {
		name     string
		overhead sandbox.Resources
		members  func(t *testing.T) []sandbox.Member
		want     sandbox.Limits
	}{
		{name: "empty sandbox, no overhead: only the default pool",
			want: sandbox.Limits{CPUs: cpuset.New(0)}},
		{name: "empty sandbox: the overhead alone", overhead: kata,
			want: sandbox.Limits{CPUs: cpuset.New(0), Quota: 25000, Memory: 160 * mi}},
		{name: "one container, no overhead",
			members: func(t *testing.T) []sandbox.Member { return []sandbox.Member{ctr(t, "1", 50000, 100000, 64*mi, 0)} },
			want:    sandbox.Limits{CPUs: cpuset.New(1), Mems: cpuset.New(0), Quota: 50000, Memory: 64 * mi}},
		{name: "one container plus the overhead", overhead: kata,
			members: func(t *testing.T) []sandbox.Member { return []sandbox.Member{ctr(t, "1", 50000, 100000, 64*mi, 0)} },
			want:    sandbox.Limits{CPUs: cpuset.New(1), Mems: cpuset.New(0), Quota: 75000, Memory: 224 * mi}},
		{name: "mixed periods normalised to 100ms", overhead: sandbox.Resources{Quota: 5000, Period: 10000},
			members: func(t *testing.T) []sandbox.Member {
				return []sandbox.Member{ctr(t, "0", 25000, 50000, mi, 0), ctr(t, "0", 10000, 100000, mi, 0), ctr(t, "0", 400000, 1000000, mi, 0)}
			},
			want: sandbox.Limits{CPUs: cpuset.New(0), Mems: cpuset.New(0), Quota: 50000 + 10000 + 40000 + 50000, Memory: 3 * mi}},
		{name: "a third of a CPU rounds up",
			members: func(t *testing.T) []sandbox.Member { return []sandbox.Member{ctr(t, "0", 1, 3, mi, 0)} },
			want:    sandbox.Limits{CPUs: cpuset.New(0), Mems: cpuset.New(0), Quota: 33334, Memory: mi}},
		{name: "tiny quota raised to the kernel's 1ms",
			members: func(t *testing.T) []sandbox.Member { return []sandbox.Member{ctr(t, "0", 100, 100000, mi, 0)} },
			want:    sandbox.Limits{CPUs: cpuset.New(0), Mems: cpuset.New(0), Quota: sandbox.MinQuota, Memory: mi}},
		{name: "a container without a CPU limit: no quota, memory still summed", overhead: kata,
			members: func(t *testing.T) []sandbox.Member {
				return []sandbox.Member{ctr(t, "1", 50000, 100000, 64*mi, 0), ctr(t, "0", -1, 100000, 32*mi, 0)}
			},
			want: sandbox.Limits{CPUs: cpuset.New(0, 1), Mems: cpuset.New(0), Memory: 256 * mi}},
		{name: "a quota without a period is no limit",
			members: func(t *testing.T) []sandbox.Member { return []sandbox.Member{ctr(t, "1", 50000, 0, 64*mi, 0)} },
			want:    sandbox.Limits{CPUs: cpuset.New(1), Mems: cpuset.New(0), Memory: 64 * mi}},
		{name: "an unlimited container: no memory limit, quota still summed", overhead: kata,
			members: func(t *testing.T) []sandbox.Member {
				return []sandbox.Member{ctr(t, "1", 50000, 100000, 64*mi, 0), ctr(t, "1", 20000, 100000, 0, 0)}
			},
			want: sandbox.Limits{CPUs: cpuset.New(1), Mems: cpuset.New(0), Quota: 95000}},
		{name: "pids when every container has a limit", overhead: sandbox.Resources{Pids: 10},
			members: func(t *testing.T) []sandbox.Member {
				return []sandbox.Member{ctr(t, "1", 0, 0, 0, 100), ctr(t, "1", 0, 0, 0, 50)}
			},
			want: sandbox.Limits{CPUs: cpuset.New(1), Mems: cpuset.New(0), Pids: 160}},
		{name: "no pids limit when one container has none",
			members: func(t *testing.T) []sandbox.Member {
				return []sandbox.Member{ctr(t, "1", 0, 0, 0, 100), ctr(t, "1", 0, 0, 0, 0)}
			},
			want: sandbox.Limits{CPUs: cpuset.New(1), Mems: cpuset.New(0)}},
		{name: "cpusets and memory nodes are united",
			members: func(t *testing.T) []sandbox.Member {
				a, b := ctr(t, "0-1", 0, 0, 0, 0), ctr(t, "4,6", 0, 0, 0, 0)
				b.Mems = cpuset.New(1)
				return []sandbox.Member{a, b}
			},
			want: sandbox.Limits{CPUs: cpuset.New(0, 1, 4, 6), Mems: cpuset.New(0, 1)}},
		{name: "a container without a cpuset: any CPU",
			members: func(t *testing.T) []sandbox.Member {
				return []sandbox.Member{ctr(t, "1", 0, 0, 0, 0), {Resources: sandbox.Resources{Memory: mi}}}
			},
			want: sandbox.Limits{}},
		{name: "quota past the kernel's maximum: no limit", overhead: kata,
			members: func(t *testing.T) []sandbox.Member {
				return []sandbox.Member{ctr(t, "1", math.MaxInt64, 1, mi, 0)}
			},
			want: sandbox.Limits{CPUs: cpuset.New(1), Mems: cpuset.New(0), Memory: 161 * mi}},
		{name: "memory past MaxInt64: no limit", overhead: kata,
			members: func(t *testing.T) []sandbox.Member {
				return []sandbox.Member{ctr(t, "1", 1000, 100000, math.MaxInt64-mi, 0)}
			},
			want: sandbox.Limits{CPUs: cpuset.New(1), Mems: cpuset.New(0), Quota: 26000}},
		{name: "an overhead without a period adds no CPU", overhead: sandbox.Resources{Quota: 25000},
			members: func(t *testing.T) []sandbox.Member { return []sandbox.Member{ctr(t, "1", 50000, 100000, 0, 0)} },
			want:    sandbox.Limits{CPUs: cpuset.New(1), Mems: cpuset.New(0), Quota: 50000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var members []sandbox.Member
			if tc.members != nil {
				members = tc.members(t)
			}
			got := sandbox.Size(tc.overhead, members, cpuset.New(0))
			if !got.Equal(tc.want) {
				t.Errorf("Size = %+v\nwant   %+v", got, tc.want)
			}
		})
	}
}

func TestLimitsEqual(t *testing.T) {
	a := sandbox.Limits{CPUs: cpuset.New(1), Quota: 1000}
	if !a.Equal(sandbox.Limits{CPUs: cpuset.New(1), Quota: 1000}) || a.Equal(sandbox.Limits{CPUs: cpuset.New(1)}) ||
		a.Equal(sandbox.Limits{CPUs: cpuset.New(2), Quota: 1000}) || !(sandbox.Limits{}).Equal(sandbox.Limits{CPUs: cpuset.New()}) {
		t.Error("Equal compares every field, and the zero cpuset is the empty one")
	}
}

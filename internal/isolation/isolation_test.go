package isolation

import (
	"maps"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/podapi"
)

func set(s string) cpuset.CPUSet {
	c, err := cpuset.Parse(s)
	if err != nil {
		panic(err)
	}
	return c
}

func TestParseFormatMask(t *testing.T) {
	for _, tc := range []struct{ mask, cpus, canon string }{
		{"0000000f", "0-3", "0000000f"},
		{"f", "0-3", "0000000f"},
		{"00000000,0000000f", "0-3", "0000000f"},
		{"ff,ffffffff", "0-39", "000000ff,ffffffff"},
		{"80000000,00000001", "0,63", "80000000,00000001"},
		{"0", "", "00000000"},
		{"00000000\n", "", "00000000"},
	} {
		got, err := ParseMask(tc.mask)
		if err != nil || !got.Equals(set(tc.cpus)) {
			t.Errorf("ParseMask(%q) = %s, %v; want %s", tc.mask, got, err, tc.cpus)
		}
		if f := FormatMask(got); f != tc.canon {
			t.Errorf("FormatMask(%s) = %q, want %q", got, f, tc.canon)
		}
	}
	for _, bad := range []string{"", "g", "123456789", "f,,f", ",f"} {
		if _, err := ParseMask(bad); err == nil {
			t.Errorf("ParseMask(%q): no error", bad)
		}
	}
}

func FuzzParseMask(f *testing.F) {
	for _, s := range []string{"f", "ff,ffffffff", "0", "x", "1,2,3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cpus, err := ParseMask(s)
		if err != nil {
			return
		}
		again, err := ParseMask(FormatMask(cpus))
		if err != nil || !again.Equals(cpus) {
			t.Errorf("%q: %s formats as %q, which reads back %s, %v", s, cpus, FormatMask(cpus), again, err)
		}
	})
}

func TestWantOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		pool pools.Isolation
		pod  podapi.Isolation
		want Want
	}{
		{"nothing", pools.Isolation{}, podapi.Isolation{}, Want{}},
		{"pod asks", pools.Isolation{}, podapi.Isolation{NoIRQs: true}, Want{NoIRQs: true}},
		{"pool asks", pools.Isolation{IRQLoadBalancing: pools.Disable, CPULoadBalancing: pools.Disable}, podapi.Isolation{},
			Want{NoIRQs: true, NoLoadBalance: true}},
		{"pool enables, pod disables", pools.Isolation{CPULoadBalancing: pools.Enable}, podapi.Isolation{NoLoadBalance: true},
			Want{NoLoadBalance: true}},
		{"required", pools.Isolation{Policy: pools.Required}, podapi.Isolation{NoIRQs: true}, Want{NoIRQs: true, Required: true}},
		{"required, nothing asked", pools.Isolation{Policy: pools.Required}, podapi.Isolation{}, Want{}},
	} {
		if got := WantOf(tc.pool, tc.pod); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestPlanIRQs(t *testing.T) {
	base := IRQBaseline{IRQs: map[int]cpuset.CPUSet{
		1:  set("0-7"), // everywhere: loses the held CPUs
		24: set("2-3"), // only on held CPUs: goes to housekeeping
		25: set("0"),   // untouched
		26: set("6-9"), // 8-9 offline since: left out
	}, Default: set("0-7")}
	got := PlanIRQs(base, set("0-7"), set("2-3,6"))
	want := map[int]cpuset.CPUSet{1: set("0-1,4-5,7"), 24: set("0-1,4-5,7"), 25: set("0"), 26: set("7")}
	if !maps.EqualFunc(got.IRQs, want, cpuset.CPUSet.Equals) || !got.Default.Equals(set("0-1,4-5,7")) ||
		!got.Housekeeping.Equals(set("0-1,4-5,7")) {
		t.Errorf("PlanIRQs: %v default %s housekeeping %s; want %v default 0-1,4-5,7", got.IRQs, got.Default, got.Housekeeping, want)
	}
	none := PlanIRQs(base, set("0-7"), cpuset.New())
	for irq, b := range base.IRQs {
		if irq != 26 && !none.IRQs[irq].Equals(b) {
			t.Errorf("nothing held: IRQ %d gets %s, want its baseline %s", irq, none.IRQs[irq], b)
		}
	}
	all := PlanIRQs(base, set("0-7"), set("0-7"))
	if !all.IRQs[24].Equals(set("2-3")) || !all.Housekeeping.IsEmpty() {
		t.Errorf("every CPU held: IRQ 24 gets %s (want its baseline 2-3), housekeeping %s", all.IRQs[24], all.Housekeeping)
	}
}

func TestExclusive(t *testing.T) {
	held := []Held{
		{ID: "a", CPUs: set("2-3"), Want: Want{NoLoadBalance: true}, Cgroup: "/kubepods/burstable/pod1/a"},
		{ID: "b", CPUs: set("4"), Want: Want{NoLoadBalance: true}, Cgroup: "/kubepods/pod2/b"},
		{ID: "c", CPUs: set("5"), Want: Want{NoIRQs: true}, Cgroup: "/kubepods/pod3/c"}, // no partition
	}
	got := Exclusive(held)
	want := map[string]cpuset.CPUSet{"/kubepods": set("2-4"), "/kubepods/burstable": set("2-3"),
		"/kubepods/burstable/pod1": set("2-3"), "/kubepods/burstable/pod1/a": set("2-3"), "/kubepods/pod2": set("4"),
		"/kubepods/pod2/b": set("4")}
	if !maps.EqualFunc(got, want, cpuset.CPUSet.Equals) {
		t.Errorf("Exclusive: %v\nwant %v", got, want)
	}
	if td := TopDown([]string{"/a/b/c", "/a", "/b", "/a/b"}); td[0] != "/a" || td[1] != "/b" || td[2] != "/a/b" || td[3] != "/a/b/c" {
		t.Errorf("TopDown: %v", td)
	}
	if got := NoIRQCPUs(held); !got.Equals(set("5")) {
		t.Errorf("NoIRQCPUs: %s", got)
	}
	if got := IsolatedCPUs(held); !got.Equals(set("2-4")) {
		t.Errorf("IsolatedCPUs: %s", got)
	}
}

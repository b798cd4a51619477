package nriplugin_test

import (
	"fmt"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
)

// describeUpdates is the agent's answer to a resource update, as "cpus mems quota/period"
// per update ("-" for a value the update leaves alone), or "none".
func describeUpdates(us []*api.ContainerUpdate) string {
	if len(us) == 0 {
		return "none"
	}
	out := ""
	for _, u := range us {
		cpu := u.GetLinux().GetResources().GetCpu()
		quota, period := "-", "-"
		if q := cpu.GetQuota(); q != nil {
			quota = fmt.Sprint(q.GetValue())
		}
		if p := cpu.GetPeriod(); p != nil {
			period = fmt.Sprint(p.GetValue())
		}
		mems := cpu.GetMems()
		if mems == "" {
			mems = "-"
		}
		out += fmt.Sprintf("%s: cpus %s mems %s quota %s/%s;", u.GetContainerId(), cpu.GetCpus(), mems, quota, period)
	}
	return out
}

// TestUpdateContainerAnswers: on the test node, the agent answers a CRI resource update with
// an update that restores exactly what it set (cpuset, memory nodes, and a share's CFS quota
// and period), and only when the update would change one of them; an update that restates
// them, or that touches only what the agent does not set, passes without an answer, as does
// any update of a container the agent does not hold.
func TestUpdateContainerAnswers(t *testing.T) {
	rt := newRuntime(t)
	wide := rt.addRunning(rt.addPod("wide"), "app", "0-15", 0) // spans pools: never held
	ar := startAgent(t, rt, newNode(t, testTopology, testPools), openStore(t, t.TempDir()), nriplugin.Options{})
	excl := rt.mustCreate(rt.runPod("excl", poolReq(`{"app": {"exclusive_b": 2}}`)), "app", nil)    // 4,12 mems 1
	shared := rt.mustCreate(rt.runPod("shared", poolReq(`{"app": {"shared_s": 500}}`)), "app", nil) // 1,9 50000/100000
	plain := rt.mustCreate(rt.runPod("plain", nil), "app", nil)                                     // 0,8 no quota
	ctrs := map[string]*api.Container{"excl": excl.ctr, "shared": shared.ctr, "plain": plain.ctr, "wide": wide}
	keepExcl := excl.ctr.Id + ": cpus 4,12 mems 1 quota -/-;"
	keepShared := shared.ctr.Id + ": cpus 1,9 mems 0 quota 50000/100000;"
	for _, tc := range []struct {
		name, ctr string
		cpu       *api.LinuxCPU
		want      string
	}{
		{name: "exclusive: the same CPUs, written another way", ctr: "excl", cpu: &api.LinuxCPU{Cpus: "12,4"}, want: "none"},
		{name: "exclusive: other CPUs", ctr: "excl", cpu: &api.LinuxCPU{Cpus: "4-5,12"}, want: keepExcl},
		{name: "exclusive: unparsable CPUs", ctr: "excl", cpu: &api.LinuxCPU{Cpus: "x"}, want: keepExcl},
		{name: "exclusive: the same memory node", ctr: "excl", cpu: &api.LinuxCPU{Mems: "1"}, want: "none"},
		{name: "exclusive: other memory nodes alone", ctr: "excl", cpu: &api.LinuxCPU{Mems: "0-1"}, want: keepExcl},
		{name: "exclusive: a CPU limit is the kubelet's", ctr: "excl",
			cpu: &api.LinuxCPU{Quota: api.Int64(200000), Period: api.UInt64(100000)}, want: "none"},
		{name: "shared: nothing of the agent's", ctr: "shared", cpu: &api.LinuxCPU{Shares: api.UInt64(512)}, want: "none"},
		{name: "shared: the same quota and period", ctr: "shared",
			cpu: &api.LinuxCPU{Quota: api.Int64(50000), Period: api.UInt64(100000)}, want: "none"},
		{name: "shared: another quota alone", ctr: "shared", cpu: &api.LinuxCPU{Quota: api.Int64(20000)}, want: keepShared},
		{name: "shared: another period alone", ctr: "shared", cpu: &api.LinuxCPU{Period: api.UInt64(50000)}, want: keepShared},
		{name: "shared: no limit", ctr: "shared", cpu: &api.LinuxCPU{Quota: api.Int64(-1)}, want: keepShared},
		{name: "default: a CPU limit is the kubelet's", ctr: "plain",
			cpu: &api.LinuxCPU{Quota: api.Int64(20000), Period: api.UInt64(100000)}, want: "none"},
		{name: "default: other CPUs keep the pool and leave the limit", ctr: "plain",
			cpu:  &api.LinuxCPU{Cpus: "0-15", Quota: api.Int64(20000), Period: api.UInt64(100000)},
			want: plain.ctr.Id + ": cpus 0,8 mems 0 quota -/-;"},
		{name: "a container the agent does not hold", ctr: "wide", cpu: &api.LinuxCPU{Cpus: "0,8", Mems: "0"}, want: "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctr := ctrs[tc.ctr]
			rt.mu.Lock()
			pod := rt.podOf(ctr)
			rt.mu.Unlock()
			upd, err := ar.UpdateContainer(t.Context(), pod, ctr, &api.LinuxResources{Cpu: tc.cpu})
			if err != nil {
				t.Fatal(err)
			}
			if got := describeUpdates(upd); got != tc.want {
				t.Errorf("answer %q, want %q", got, tc.want)
			}
		})
	}

	// Through the runtime: the default-pool container keeps its pool, and the kubelet's CPU
	// limit, asked in the same update, takes effect.
	rt.updateResources(plain.ctr, &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: "0-15", Quota: api.Int64(20000),
		Period: api.UInt64(100000)}})
	check(t, plain, want{cpus: "0,8", mems: "0", quota: 20000, period: 100000})
	rt.updateResources(shared.ctr, &api.LinuxResources{Cpu: &api.LinuxCPU{Quota: api.Int64(20000)}})
	check(t, shared, want{cpus: "1,9", mems: "0", quota: 50000, period: 100000, shared: "1,9"})
}

// TestCreateLeavesTheKubeletsLimit: a container in the default pool or an exclusive pool gets
// no CFS quota from the agent, so the kubelet's CPU limit in its spec stays in force.
func TestCreateLeavesTheKubeletsLimit(t *testing.T) {
	rt, _ := setup(t, nriplugin.Options{})
	for _, tc := range []struct {
		name string
		ann  map[string]string
		want want
	}{
		{name: "default", want: want{cpus: "0,8", mems: "0", quota: 30000, period: 100000}},
		{name: "exclusive", ann: poolReq(`{"app": {"exclusive_b": 1}}`),
			want: want{cpus: "4", mems: "1", quota: 30000, period: 100000, exclusive: "4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := rt.mustCreateWith(rt.runPod(tc.name, tc.ann), "app", &api.LinuxCPU{Quota: api.Int64(30000), Period: api.UInt64(100000)})
			if q := c.adjust.GetLinux().GetResources().GetCpu().GetQuota(); q != nil {
				t.Errorf("the adjustment sets a CFS quota of %d", q.GetValue())
			}
			check(t, c, tc.want)
		})
	}
}

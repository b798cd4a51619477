package nriplugin

import (
	"fmt"
	"maps"
	"strings"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/topology"
)

// adjustment turns a decision into the container's OCI adjustment: cpuset CPUs and memory
// nodes, the CFS bandwidth of a shared-pool share, and the CPU environment variables.
func adjustment(d plan.Decision) *api.ContainerAdjustment {
	adj := &api.ContainerAdjustment{}
	adj.SetLinuxCPUSetCPUs(d.CPUs.String())
	if !d.Mems.IsEmpty() {
		adj.SetLinuxCPUSetMems(d.Mems.String())
	}
	if d.Quota > 0 {
		adj.SetLinuxCPUQuota(d.Quota)
		adj.SetLinuxCPUPeriod(d.Period)
	}
	for _, e := range d.Env {
		adj.AddEnv(e.Name, e.Value)
	}
	return adj
}

// merge adds an extension's fragment to adj: its Args, Env, Mounts, Annotations and unified
// cgroup v2 resources.
func merge(adj, frag *api.ContainerAdjustment) {
	if frag == nil {
		return
	}
	if len(frag.Args) > 0 {
		adj.Args = frag.Args
	}
	adj.Env = append(adj.Env, frag.Env...)
	adj.Mounts = append(adj.Mounts, frag.Mounts...)
	if len(frag.Annotations) > 0 {
		if adj.Annotations == nil {
			adj.Annotations = map[string]string{}
		}
		maps.Copy(adj.Annotations, frag.Annotations)
	}
	for k, v := range frag.GetLinux().GetResources().GetUnified() {
		adj.AddLinuxUnified(k, v)
	}
}

// keep returns the update that keeps d's settings on container id when the resource update
// res would change them, with a description of what res asked; nil if res leaves them be.
// An empty cpuset or an absent quota in res leaves the current value in place.
func keep(id string, d plan.Decision, res *api.LinuxResources) (*api.ContainerUpdate, string) {
	cpu := res.GetCpu()
	var asked []string
	if v := cpu.GetCpus(); v != "" && !sameSet(v, d.CPUs) {
		asked = append(asked, "cpus="+v)
	}
	if v := cpu.GetMems(); v != "" && !d.Mems.IsEmpty() && !sameSet(v, d.Mems) {
		asked = append(asked, "mems="+v)
	}
	if d.Quota > 0 {
		if q := cpu.GetQuota(); q != nil && q.GetValue() != d.Quota {
			asked = append(asked, fmt.Sprintf("quota=%d", q.GetValue()))
		}
		if p := cpu.GetPeriod(); p != nil && int64(p.GetValue()) != d.Period {
			asked = append(asked, fmt.Sprintf("period=%d", p.GetValue()))
		}
	}
	if len(asked) == 0 {
		return nil, ""
	}
	u := &api.ContainerUpdate{}
	u.SetContainerId(id)
	u.SetLinuxCPUSetCPUs(d.CPUs.String())
	if !d.Mems.IsEmpty() {
		u.SetLinuxCPUSetMems(d.Mems.String())
	}
	if d.Quota > 0 {
		u.SetLinuxCPUQuota(d.Quota)
		u.SetLinuxCPUPeriod(d.Period)
	}
	return u, strings.Join(asked, " ")
}

// sameSet reports whether the CPU list text equals set; unparsable text never does.
func sameSet(text string, set cpuset.CPUSet) bool {
	s, err := topology.ParseCPUList(text)
	return err == nil && s.Equals(set)
}

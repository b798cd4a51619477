package nriplugin_test

import (
	"context"

	"github.com/containerd/nri/pkg/api"
	"google.golang.org/protobuf/proto"
)

// created is the outcome of a CreateContainer.
type created struct {
	ctr    *api.Container // as the runtime now runs it
	adjust *api.ContainerAdjustment
	update []*api.ContainerUpdate // updates to other containers
}

// env returns the value the adjustment gives an environment variable.
func (c created) env(key string) string {
	for _, kv := range c.adjust.GetEnv() {
		if kv.Key == key {
			return kv.Value
		}
	}
	return ""
}

func (c created) cpus() string { return c.ctr.GetLinux().GetResources().GetCpu().GetCpus() }
func (c created) mems() string { return c.ctr.GetLinux().GetResources().GetCpu().GetMems() }
func (c created) quota() int64 { return c.ctr.GetLinux().GetResources().GetCpu().GetQuota().GetValue() }
func (c created) period() uint64 {
	return c.ctr.GetLinux().GetResources().GetCpu().GetPeriod().GetValue()
}

// create creates and starts a container in pod. The runtime applies the adjustment's CPU
// settings, as containerd does to the OCI spec.
func (rt *runtime) create(pod *api.PodSandbox, name string, annotations map[string]string) (created, error) {
	return rt.createSpec(pod, name, annotations, &api.LinuxCPU{})
}

// mustCreateWith creates a container whose spec, as the kubelet made it, has the CPU settings
// cpu (a CPU limit's CFS quota, say), and fails the test on error.
func (rt *runtime) mustCreateWith(pod *api.PodSandbox, name string, cpu *api.LinuxCPU) created {
	rt.tb.Helper()
	c, err := rt.createSpec(pod, name, nil, cpu)
	if err != nil {
		rt.tb.Fatalf("CreateContainer %s/%s: %v", pod.Name, name, err)
	}
	return c
}

// createSpec is create from a spec with the CPU settings cpu.
func (rt *runtime) createSpec(pod *api.PodSandbox, name string, annotations map[string]string, cpu *api.LinuxCPU) (created, error) {
	return rt.createFrom(pod, &api.Container{Name: name, Annotations: annotations, Linux: &api.LinuxContainer{
		Resources: &api.LinuxResources{Cpu: cpu}}})
}

// createCtr creates and starts a container whose spec has args and env (the kubelet's
// command and the environment the CDI devices of its DRA claims set).
func (rt *runtime) createCtr(pod *api.PodSandbox, name string, args, env []string) (created, error) {
	c, err := rt.createFrom(pod, &api.Container{Name: name, Args: args, Env: env, Linux: &api.LinuxContainer{
		Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{}}}})
	if err == nil {
		rt.startCtr(c.ctr)
	}
	return c, err
}

// createFrom relays the creation of ctr (its name and spec) in pod: it gets a new ID.
func (rt *runtime) createFrom(pod *api.PodSandbox, ctr *api.Container) (created, error) {
	id := rt.nextID("ctr")
	ctr.Id, ctr.PodSandboxId, ctr.State = id, pod.Id, api.ContainerState_CONTAINER_CREATED
	b := rt.nri.BlockPluginSync()
	rpl, err := rt.nri.CreateContainer(context.Background(), &api.CreateContainerRequest{Pod: pod,
		Container: proto.Clone(ctr).(*api.Container)})
	b.Unblock()
	if err != nil {
		return created{}, err
	}
	applyCPU(ctr.Linux.Resources.Cpu, rpl.GetAdjust().GetLinux().GetResources().GetCpu())
	ctr.State = api.ContainerState_CONTAINER_RUNNING
	rt.mu.Lock()
	rt.ctrs[id] = ctr
	rt.mu.Unlock()
	return created{ctr: ctr, adjust: rpl.GetAdjust(), update: rpl.GetUpdate()}, nil
}

// mustCreate is create that fails the test on error.
func (rt *runtime) mustCreate(pod *api.PodSandbox, name string, annotations map[string]string) created {
	rt.tb.Helper()
	c, err := rt.create(pod, name, annotations)
	if err != nil {
		rt.tb.Fatalf("CreateContainer %s/%s: %v", pod.Name, name, err)
	}
	return c
}

// updateResources relays a CRI UpdateContainerResources and applies the outcome for ctr.
// It returns the updates to other containers.
func (rt *runtime) updateResources(ctr *api.Container, res *api.LinuxResources) []*api.ContainerUpdate {
	rt.tb.Helper()
	rt.mu.Lock()
	pod := rt.podOf(ctr)
	rt.mu.Unlock()
	b := rt.nri.BlockPluginSync()
	rpl, err := rt.nri.UpdateContainer(context.Background(), &api.UpdateContainerRequest{Pod: pod, Container: ctr, LinuxResources: res})
	b.Unblock()
	if err != nil {
		rt.tb.Fatalf("UpdateContainer %s: %v", ctr.Name, err)
	}
	var others []*api.ContainerUpdate
	effective := res // no plugin answered for ctr: the request stands
	for _, u := range rpl.GetUpdate() {
		switch {
		case u == nil:
		case u.ContainerId == ctr.Id:
			effective = u.GetLinux().GetResources()
		default:
			others = append(others, u)
		}
	}
	rt.mu.Lock()
	applyCPU(ctr.Linux.Resources.Cpu, effective.GetCpu())
	rt.mu.Unlock()
	return others
}

// removeCtr stops and removes a container.
func (rt *runtime) removeCtr(ctr *api.Container) {
	rt.tb.Helper()
	rt.stopCtr(ctr)
	rt.mu.Lock()
	pod := rt.podOf(ctr)
	rt.mu.Unlock()
	b := rt.nri.BlockPluginSync()
	defer b.Unblock()
	if err := rt.nri.RemoveContainer(context.Background(), &api.RemoveContainerRequest{Pod: pod, Container: ctr}); err != nil {
		rt.tb.Fatalf("RemoveContainer %s: %v", ctr.Name, err)
	}
	rt.mu.Lock()
	delete(rt.ctrs, ctr.Id)
	rt.mu.Unlock()
}

// removePod stops and removes a pod sandbox, leaving its containers to RemovePodSandbox.
func (rt *runtime) removePod(pod *api.PodSandbox) {
	rt.tb.Helper()
	b := rt.nri.BlockPluginSync()
	defer b.Unblock()
	if err := rt.nri.StopPodSandbox(context.Background(), &api.StopPodSandboxRequest{Pod: pod}); err != nil {
		rt.tb.Fatal(err)
	}
	if err := rt.nri.RemovePodSandbox(context.Background(), &api.RemovePodSandboxRequest{Pod: pod}); err != nil {
		rt.tb.Fatal(err)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	delete(rt.pods, pod.Id)
	for id, c := range rt.ctrs {
		if c.PodSandboxId == pod.Id {
			delete(rt.ctrs, id)
		}
	}
}

// addRunning puts a container the agent never saw into the runtime, running on cpus.
func (rt *runtime) addRunning(pod *api.PodSandbox, name, cpus string, quota int64) *api.Container {
	id := rt.nextID("old")
	cpu := &api.LinuxCPU{Cpus: cpus}
	if quota > 0 {
		cpu.Quota, cpu.Period = api.Int64(quota), api.UInt64(100000)
	}
	ctr := &api.Container{Id: id, PodSandboxId: pod.Id, Name: name, State: api.ContainerState_CONTAINER_RUNNING,
		Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: cpu}}}
	rt.mu.Lock()
	rt.ctrs[id] = ctr
	rt.mu.Unlock()
	return ctr
}

// runPodUID starts a pod sandbox under the given UID (runPod makes one up).
func (rt *runtime) runPodUID(name, uid string, annotations map[string]string) *api.PodSandbox {
	rt.tb.Helper()
	id := rt.nextID("pod")
	pod := &api.PodSandbox{Id: id, Name: name, Uid: uid, Namespace: "ns", Annotations: annotations}
	b := rt.nri.BlockPluginSync()
	defer b.Unblock()
	if err := rt.nri.RunPodSandbox(context.Background(), &api.RunPodSandboxRequest{Pod: pod}); err != nil {
		rt.tb.Fatalf("RunPodSandbox %s: %v", name, err)
	}
	rt.mu.Lock()
	rt.pods[id] = pod
	rt.mu.Unlock()
	return pod
}

// podsNow returns the runtime's pods.
func (rt *runtime) podsNow() []*api.PodSandbox {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := make([]*api.PodSandbox, 0, len(rt.pods))
	for _, p := range rt.pods {
		out = append(out, p)
	}
	return out
}

// addPod puts a running pod into the runtime without telling plugins.
func (rt *runtime) addPod(name string) *api.PodSandbox {
	id := rt.nextID("pod")
	pod := &api.PodSandbox{Id: id, Name: name, Uid: "uid-" + id, Namespace: "ns"}
	rt.mu.Lock()
	rt.pods[id] = pod
	rt.mu.Unlock()
	return pod
}

// podOf returns ctr's pod; the caller holds mu.
func (rt *runtime) podOf(ctr *api.Container) *api.PodSandbox { return rt.pods[ctr.PodSandboxId] }

func applyCPU(dst, src *api.LinuxCPU) {
	if src == nil {
		return
	}
	if src.Cpus != "" {
		dst.Cpus = src.Cpus
	}
	if src.Mems != "" {
		dst.Mems = src.Mems
	}
	if src.Quota != nil {
		dst.Quota = src.Quota
	}
	if src.Period != nil {
		dst.Period = src.Period
	}
}

// startCtr relays a StartContainer for ctr.
func (rt *runtime) startCtr(ctr *api.Container) {
	rt.tb.Helper()
	rt.mu.Lock()
	pod := rt.podOf(ctr)
	rt.mu.Unlock()
	b := rt.nri.BlockPluginSync()
	defer b.Unblock()
	if err := rt.nri.StartContainer(context.Background(), &api.StartContainerRequest{Pod: pod, Container: ctr}); err != nil {
		rt.tb.Fatalf("StartContainer %s: %v", ctr.Name, err)
	}
}

// rerunPod starts a new sandbox for the pod of old, under old's UID: the kubelet re-creating
// a dead pod sandbox. The old sandbox stays until removePod.
func (rt *runtime) rerunPod(old *api.PodSandbox) *api.PodSandbox {
	rt.tb.Helper()
	id := rt.nextID("pod")
	pod := proto.Clone(old).(*api.PodSandbox)
	pod.Id = id
	b := rt.nri.BlockPluginSync()
	defer b.Unblock()
	if err := rt.nri.RunPodSandbox(context.Background(), &api.RunPodSandboxRequest{Pod: pod}); err != nil {
		rt.tb.Fatalf("RunPodSandbox %s again: %v", old.Name, err)
	}
	rt.mu.Lock()
	rt.pods[id] = pod
	rt.mu.Unlock()
	return pod
}

// stopCtr relays a StopContainer: the container stays in the runtime, stopped.
func (rt *runtime) stopCtr(ctr *api.Container) {
	rt.tb.Helper()
	rt.mu.Lock()
	pod := rt.podOf(ctr)
	rt.mu.Unlock()
	b := rt.nri.BlockPluginSync()
	defer b.Unblock()
	if _, err := rt.nri.StopContainer(context.Background(), &api.StopContainerRequest{Pod: pod, Container: ctr}); err != nil {
		rt.tb.Fatalf("StopContainer %s: %v", ctr.Name, err)
	}
	rt.mu.Lock()
	ctr.State = api.ContainerState_CONTAINER_STOPPED
	rt.mu.Unlock()
}

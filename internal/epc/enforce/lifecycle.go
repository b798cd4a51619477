package enforce

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/epc"
	"github.com/podfence/podfence/internal/nodeagent/cgroups"
)

// StartContainer checks that an enforced cap is in force now that the container's cgroup
// exists and its entrypoint has not run: misc.max holds it and, on cgroup v1, the
// container's pid is in the cgroup. If a later NRI plugin gave the container another
// cgroups path, the cap is written there first (v1). With ApplyAt start (v2) the cap is
// written now, unless an NRI plugin that ran after the agent set misc.max: then it stands
// aside. A failed check marks the limit unenforced and returns why (the agent logs it).
func (x *Extension) StartContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	x.mu.Lock()
	e, ok := x.ctrs[ctr.GetId()]
	var cp entry
	if ok {
		cp = *e
	}
	x.mu.Unlock()
	if !ok || !cp.inForce && cp.mode != epc.ViaStart {
		return nil
	}
	var err error
	if cp.mode == epc.ViaStart {
		err = x.applyAtStart(&cp, ctr)
		if cp.mode == epc.Yielded {
			x.logYield(pod, ctr, &cp, "an NRI plugin that ran after the agent")
		}
	} else {
		err = x.check(&cp, ctr)
	}
	switch {
	case err != nil:
		cp.inForce = false
	case cp.mode != epc.Yielded: // a yielded cap is in force if its owner's value is the limit
		cp.inForce = true
	}
	x.mu.Lock()
	if e, ok := x.ctrs[ctr.GetId()]; ok {
		e.dir, e.created, e.inForce, e.mode, e.yielded, e.started = cp.dir, cp.created, cp.inForce, cp.mode, cp.yielded, true
	}
	x.mu.Unlock()
	if err != nil {
		return fmt.Errorf("pod %s container %q: SGX EPC limit %s bytes not in force: %w", podName(pod), ctr.GetName(), cp.limit, err)
	}
	return nil
}

// applyAtStart sets e's cap on the started container ctr (ApplyAt start), or stands aside
// when its misc.max has an owner: the container's final unified resources hold it (a later
// plugin's adjustment) or its cgroup already has a cap.
func (x *Extension) applyAtStart(e *entry, ctr *api.Container) error {
	if v, ok := epc.SetBy(ctr.GetLinux().GetResources().GetUnified()); ok {
		e.mode, e.yielded, e.inForce = epc.Yielded, v, v == e.limit.MiscMax()
		return nil
	}
	dir, err := x.dirOf(ctr)
	if err != nil {
		return fmt.Errorf("find the container's misc cgroup: %w", err)
	}
	e.dir = dir
	if got, err := x.readMax(dir); err == nil && got != cgroups.Max {
		e.mode, e.yielded = epc.Yielded, epc.Resource+" "+maxText(got)
		e.inForce = got == e.limit.Bytes()
		return nil
	}
	if err := x.fs.Write(dir, epc.UnifiedKey, e.limit.MiscMax()); err != nil {
		return fmt.Errorf("set it at StartContainer: %w", err)
	}
	return x.check(e, ctr)
}

// check verifies e's cap on the started container ctr, moving e to ctr's final cgroup.
func (x *Extension) check(e *entry, ctr *api.Container) error {
	dir, err := x.dirOf(ctr)
	if err != nil {
		return fmt.Errorf("find the container's misc cgroup: %w", err)
	}
	if dir != e.dir && !x.cap.Node.Unified {
		x.removeDirs(e.created)
		e.dir, e.created = dir, nil
		if err := x.fs.Write(dir, epc.UnifiedKey, e.limit.MiscMax()); err != nil {
			return fmt.Errorf("the container's cgroups path changed after CreateContainer: %w", err)
		}
	}
	e.dir = dir
	got, err := x.readMax(dir)
	if err != nil {
		return err
	}
	if got != e.limit.Bytes() {
		return fmt.Errorf("%s/%s holds %s %s, not the limit", dir, epc.UnifiedKey, epc.Resource, maxText(got))
	}
	if pid := ctr.GetPid(); pid != 0 && !x.cap.Node.Unified {
		b, err := x.fs.Read(dir, "cgroup.procs")
		if err != nil {
			return err
		}
		if !slices.Contains(strings.Fields(string(b)), strconv.FormatUint(uint64(pid), 10)) {
			return fmt.Errorf("the container's process %d is not in %s: the runtime does not join the v1 misc hierarchy", pid, dir)
		}
	}
	return nil
}

// readMax returns the sgx_epc value of dir's misc.max (cgroups.Max for "max").
func (x *Extension) readMax(dir string) (uint64, error) {
	b, err := x.fs.Read(dir, epc.UnifiedKey)
	if err != nil {
		return 0, err
	}
	f, err := cgroups.ParseFlat(b)
	if err != nil {
		return 0, fmt.Errorf("%s/%s: %w", dir, epc.UnifiedKey, err)
	}
	v, ok, err := f.Uint(epc.Resource)
	if err != nil || !ok {
		return 0, errors.Join(err, fmt.Errorf("%s/%s lists no %s", dir, epc.UnifiedKey, epc.Resource))
	}
	return v, nil
}

func maxText(v uint64) string {
	if v == cgroups.Max {
		return "max"
	}
	return strconv.FormatUint(v, 10)
}

// RemoveContainer forgets the container and removes the cgroups the extension made for it
// that the runtime has not removed (a container whose creation failed later).
func (x *Extension) RemoveContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container) {
	x.mu.Lock()
	e, ok := x.ctrs[ctr.GetId()]
	delete(x.ctrs, ctr.GetId())
	x.mu.Unlock()
	if ok {
		x.removeDirs(e.created)
	}
}

// RemovePodSandbox forgets the pod's containers that are still tracked.
func (x *Extension) RemovePodSandbox(_ context.Context, pod *api.PodSandbox) {
	var gone []*entry
	x.mu.Lock()
	for id, e := range x.ctrs {
		if e.podID == pod.GetId() {
			gone = append(gone, e)
			delete(x.ctrs, id)
		}
	}
	x.mu.Unlock()
	for _, e := range gone {
		x.removeDirs(e.created)
	}
}

// Synchronize rebuilds the tracked containers from the runtime's live ones, after a
// (re)connection. It writes nothing: a limit found not in force is reported as unenforced.
// Exited containers are left out, as StopContainer forgets them: one in a dead sandbox the
// kubelet re-created has its cgroup gone and a running instance under its name.
func (x *Extension) Synchronize(_ context.Context, pods []*api.PodSandbox, ctrs []*api.Container) error {
	byID := map[string]*api.PodSandbox{}
	for _, p := range pods {
		byID[p.GetId()] = p
	}
	next := map[string]*entry{}
	for _, ctr := range ctrs {
		if ctr.GetState() == api.ContainerState_CONTAINER_STOPPED {
			continue
		}
		pod := byID[ctr.GetPodSandboxId()]
		limit, _, err := epc.Resolve(pod.GetAnnotations(), ctr.GetName())
		if err != nil {
			x.log.Warn("running container with a bad SGX EPC limit annotation", "pod", podName(pod), "container", ctr.GetName(), "err", err)
		}
		if !limit.IsSet() && !x.cap.Node.Supported {
			continue
		}
		e := x.newEntry(pod, ctr, limit)
		if limit.IsSet() && x.cap.Node.Supported && e.unresolved == nil {
			v, err := x.readMax(e.dir)
			e.inForce = err == nil && v == limit.Bytes()
		}
		if other, ok := epc.SetBy(ctr.GetLinux().GetResources().GetUnified()); ok && limit.IsSet() && !e.inForce {
			e.mode, e.yielded = epc.Yielded, other // another owner's value: not podfence's to report
		}
		if limit.IsSet() && !e.inForce && e.mode != epc.Yielded {
			x.log.Warn("SGX EPC limit not in force on a running container", "pod", podName(pod), "container", ctr.GetName(),
				"limit", limit, "cgroup", e.dir)
		}
		next[ctr.GetId()] = e
	}
	var gone []*entry
	x.mu.Lock()
	for id, e := range x.ctrs { // keep what the extension made for containers still there
		if n, ok := next[id]; ok {
			n.created = e.created
		} else {
			gone = append(gone, e)
		}
	}
	x.ctrs = next
	x.mu.Unlock()
	for _, e := range gone {
		x.removeDirs(e.created)
	}
	return nil
}

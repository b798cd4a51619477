package enforce

import (
	"context"
	"fmt"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
)

var (
	_ nriplugin.ContainerCreator = (*Manager)(nil)
	_ nriplugin.ContainerStarter = (*Manager)(nil)
	_ nriplugin.ContainerRemover = (*Manager)(nil)
	_ nriplugin.PodRunner        = (*Manager)(nil)
	_ nriplugin.PodRemover       = (*Manager)(nil)
	_ nriplugin.Synchronizer     = (*Manager)(nil)
)

// groupOf maps an NRI pod to its group: a labelled group is its namespace's unless the
// operator shares it with that namespace; the QoS class's knobs apply.
func (m *Manager) groupOf(pod *api.PodSandbox) (coresched.Group, error) {
	rules := coresched.Rules{Default: m.cfg.DefaultGroup, Shared: m.cfg.Shared, QoS: m.cfg.QoS}
	return rules.GroupOf(coresched.Pod{UID: pod.GetUid(), Namespace: pod.GetNamespace(), Labels: pod.GetLabels()})
}

// CreateContainer refuses a container whose pod explicitly asks for core scheduling
// (a group, exclusive, or a label podfence cannot read) when this node cannot give it a
// cookie and the policy is strict. It changes nothing in the container.
func (m *Manager) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container,
	_ plan.Decision) (*api.ContainerAdjustment, error) {
	g, gerr := m.groupOf(pod)
	m.mu.Lock()
	why := m.unusable
	m.mu.Unlock()
	switch {
	case gerr != nil && m.cfg.Policy == coresched.Strict:
		return nil, fmt.Errorf("core scheduling: %w", gerr)
	case gerr != nil:
		m.log.Warn("core scheduling label unreadable; container runs without a cookie (best-effort)",
			"pod", podName(pod), "container", ctr.GetName(), "err", gerr)
	case why == nil || g.None() || !g.Explicit():
	case m.cfg.Policy == coresched.Strict:
		return nil, fmt.Errorf("pod asks for core-scheduling group %s, but this node cannot give it a cookie: %w "+
			"(run it on a node with SMT and core scheduling, or set the agent's --coresched-policy best-effort)", g, why)
	default:
		m.log.Warn("core scheduling unavailable; container runs without a cookie (best-effort)",
			"pod", podName(pod), "container", ctr.GetName(), "group", g.String(), "reason", why)
	}
	return nil, nil
}

// RunPodSandbox gives the pod sandbox's process (pause) its pod's cookie, sets cpu.idle on
// the pod's cgroup when its QoS class asks for it, and notes an unknown Koordinator policy
// value. A failure is logged, never returned: it would fail the pod for a process that runs
// no user code.
func (m *Manager) RunPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	g, err := m.groupOf(pod)
	if err != nil {
		return nil // refused or reported at CreateContainer
	}
	m.noteUnknown(pod, g)
	m.setIdle(pod)
	mem := member{ID: pod.GetId(), Pod: podName(pod), Sandbox: pod.GetId(), Group: g}
	if err := m.start(mem, int(pod.GetPid()), pod.GetLinux().GetCgroupsPath()); err != nil {
		m.log.Warn("core scheduling: pod sandbox without its cookie", "pod", podName(pod), "err", err)
	}
	return nil
}

// StartContainer gives the container's init process its group's cookie: it exists and has
// not run the entrypoint yet. The first member of a group creates the cookie, later ones
// share it from a live member.
func (m *Manager) StartContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	g, err := m.groupOf(pod)
	if err != nil {
		return nil
	}
	mem := member{ID: ctr.GetId(), Pod: podName(pod), Sandbox: sandboxOf(pod, ctr), Name: ctr.GetName(), Group: g}
	return m.start(mem, int(ctr.GetPid()), ctr.GetLinux().GetCgroupsPath())
}

// RemoveContainer forgets the container; its group's cookie goes with its last member.
func (m *Manager) RemoveContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container) {
	m.forget(ctr.GetId())
}

// RemovePodSandbox forgets the pod sandbox and any of its containers still recorded. The
// pod's UID is no key: the kubelet removes a dead sandbox after it has re-created the pod
// in a new one, whose members stay.
func (m *Manager) RemovePodSandbox(_ context.Context, pod *api.PodSandbox) {
	m.mu.Lock()
	ids := m.book.inSandbox(pod.GetId())
	m.mu.Unlock()
	for _, id := range ids {
		m.forget(id)
	}
	m.forgetIdle(pod.GetId())
	m.mu.Lock()
	delete(m.unknown, pod.GetId())
	m.mu.Unlock()
}

func (m *Manager) forget(id string) {
	m.mu.Lock()
	mem, ok := m.book.members[id]
	g := m.book.remove(id)
	if ok {
		m.unpublish(mem)
		m.met.groups.Set(float64(len(m.book.groups)))
	}
	m.mu.Unlock()
	if g != "" {
		m.log.Info("core scheduling group has no member left; its cookie is forgotten", "group", g)
	}
}

// unpublish drops the metric series of mem, a member just forgotten. Another instance of
// the container (restarted, or in the pod's re-created sandbox) has the same labels: its
// series is set again instead. The caller holds m.mu.
func (m *Manager) unpublish(mem member) {
	if o, ok := m.book.namesake(mem); ok {
		m.met.setMember(o)
		return
	}
	m.met.dropMember(mem)
}

// sandboxOf returns the ID of ctr's pod sandbox.
func sandboxOf(pod *api.PodSandbox, ctr *api.Container) string {
	if id := ctr.GetPodSandboxId(); id != "" {
		return id
	}
	return pod.GetId()
}

func podName(pod *api.PodSandbox) string { return pod.GetNamespace() + "/" + pod.GetName() }

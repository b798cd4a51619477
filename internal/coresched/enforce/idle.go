package enforce

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/internal/nodeagent/cgroups"
)

// CgroupWriter is the cgroupfs edge of cpu.idle; cgroups.OS is the real one.
type CgroupWriter interface {
	Write(dir, name, value string) error
}

var _ CgroupWriter = cgroups.OS{}

// idleRec is a pod sandbox whose QoS class asks for cpu.idle, and how that went.
type idleRec struct {
	pod string // namespace/name
	dir string // the pod cgroup's directory in the cpu hierarchy ("" when unknown)
	err error  // nil: cpu.idle is 1
}

// idleSupport says whether this node's cgroups have cpu.idle: nil, or ErrNoCPUIdle with the
// reason (cgroup v1, no v2 cpu controller, or the layout unreadable).
func idleSupport(l cgroups.Layout, detectErr error) error {
	if detectErr != nil {
		return fmt.Errorf("%w: %v", cgroups.ErrNoCPUIdle, detectErr)
	}
	_, err := l.CPUIdleDir("/")
	return err
}

// setIdle sets cpu.idle=1 on the cgroup of a pod whose QoS class has the idle knob (the
// cgroup the kubelet made for the pod, so the pod is idle against the other pods of its
// Kubernetes QoS cgroup) and records the outcome. A failure is recorded and logged: it never
// fails the pod. Pods of other classes are left alone.
func (m *Manager) setIdle(pod *api.PodSandbox) {
	k, _ := m.cfg.QoS.For(pod.GetLabels())
	if !k.Idle {
		return
	}
	rec := idleRec{pod: podName(pod)}
	rec.dir, rec.err = m.idleDir(pod)
	if rec.err == nil {
		rec.err = m.cfg.IdleFS.Write(rec.dir, cgroups.CPUIdle, "1")
	}
	m.mu.Lock()
	m.idle[pod.GetId()] = rec
	m.mu.Unlock()
	if rec.err != nil {
		m.log.Warn("cpu.idle not set: the pod runs at normal CPU priority", "pod", rec.pod,
			"class", pod.GetLabels()[coresched.KoordLabelQoS], "err", rec.err)
		return
	}
	m.log.Info("cpu.idle set", "pod", rec.pod, "class", pod.GetLabels()[coresched.KoordLabelQoS], "cgroup", rec.dir)
}

// idleDir finds the directory of the pod's cgroup in the cpu hierarchy: its cgroup parent,
// or else the parent of its sandbox container's cgroup.
func (m *Manager) idleDir(pod *api.PodSandbox) (string, error) {
	if m.idleErr != nil {
		return "", m.idleErr
	}
	path, err := cgroups.ParentPath(pod.GetLinux().GetCgroupParent())
	if err != nil {
		p, _, perr := cgroups.Path(pod.GetLinux().GetCgroupsPath())
		if perr != nil {
			return "", fmt.Errorf("find the pod's cgroup: %w", errors.Join(err, perr))
		}
		path = filepath.Dir(p)
	}
	return m.layout.CPUIdleDir(path)
}

// forgetIdle drops a removed pod sandbox's record.
func (m *Manager) forgetIdle(sandbox string) {
	m.mu.Lock()
	delete(m.idle, sandbox)
	m.mu.Unlock()
}

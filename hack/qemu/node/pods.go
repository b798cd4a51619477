//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// podSpec is a pod as kubelet would hand it to CRI: host network (there is no CNI in the
// guest), a PID namespace per container, and kubelet's cgroupfs-driver cgroup parent
// /kubepods/burstable/pod<uid>.
type podSpec struct {
	name, uid   string
	labels      map[string]string
	annotations map[string]string
	runtime     string    // "" (runc) or "kata"
	overhead    *limits   // a RuntimeClass overhead (VM sandboxes)
	ctr         []ctrSpec // containers, created and started in order
}

// ctrSpec is one busybox container.
type ctrSpec struct {
	name        string
	annotations map[string]string
	res         *limits
}

// limits are CRI LinuxContainerResources (0: none).
type limits struct{ quota, period, memory int64 }

const namespace = "tenant"

// cgroupParent is kubelet's cgroupfs-driver pod cgroup.
func (p podSpec) cgroupParent() string { return "/kubepods/burstable/pod" + p.uid }

var hostNetwork = map[string]any{"namespace_options": map[string]any{"network": 2, "pid": 1}}

// podJSON is the CRI PodSandboxConfig crictl runp reads.
func podJSON(p podSpec) ([]byte, error) {
	labels := map[string]string{"io.kubernetes.pod.name": p.name, "io.kubernetes.pod.namespace": namespace,
		"io.kubernetes.pod.uid": p.uid}
	for k, v := range p.labels {
		labels[k] = v
	}
	linux := map[string]any{"cgroup_parent": p.cgroupParent(), "security_context": hostNetwork}
	if p.overhead != nil {
		linux["overhead"] = resourcesJSON(*p.overhead)
	}
	return json.MarshalIndent(map[string]any{
		"metadata":      map[string]any{"name": p.name, "namespace": namespace, "uid": p.uid, "attempt": 0},
		"labels":        labels,
		"annotations":   orEmpty(p.annotations),
		"log_directory": filepath.Join(work, "logs", p.name),
		"linux":         linux,
	}, "", "  ")
}

// ctrJSON is the CRI ContainerConfig crictl create reads: busybox sleeping, in its own PID
// namespace (kubelet's default: its process is PID 1 there).
func ctrJSON(c ctrSpec) ([]byte, error) {
	linux := map[string]any{"security_context": hostNetwork}
	if c.res != nil {
		linux["resources"] = resourcesJSON(*c.res)
	}
	return json.MarshalIndent(map[string]any{
		"metadata":    map[string]any{"name": c.name},
		"image":       map[string]any{"image": busyboxImage},
		"command":     []string{"sleep", "86400"},
		"annotations": orEmpty(c.annotations),
		"log_path":    c.name + ".log",
		"linux":       linux,
	}, "", "  ")
}

func resourcesJSON(l limits) map[string]any {
	return map[string]any{"cpu_quota": l.quota, "cpu_period": l.period, "memory_limit_in_bytes": l.memory}
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// pod is a running pod: its sandbox and containers by name.
type pod struct {
	spec podSpec
	id   string
	ctr  map[string]string // container name → ID
}

// runPod runs the pod's sandbox; then its containers, stopping at the first that fails
// (the error names the step: runp, create or start, with crictl's message).
func (n *node) runPod(ctx context.Context, p podSpec) (*pod, error) {
	dir := filepath.Join(work, "specs")
	if err := os.MkdirAll(filepath.Join(work, "logs", p.name), 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	b, err := podJSON(p)
	if err != nil {
		return nil, err
	}
	podFile := filepath.Join(dir, p.name+".pod.json")
	if err := os.WriteFile(podFile, b, 0o644); err != nil {
		return nil, err
	}
	args := []string{"runp"}
	if p.runtime != "" {
		args = append(args, "--runtime", p.runtime)
	}
	id, err := n.crictl(ctx, append(args, podFile)...)
	if err != nil {
		return nil, err
	}
	out := &pod{spec: p, id: id, ctr: map[string]string{}}
	for _, c := range p.ctr {
		if err := n.addContainer(ctx, out, c); err != nil {
			return out, err
		}
	}
	return out, nil
}

// addContainer creates and starts container c in pod p.
func (n *node) addContainer(ctx context.Context, p *pod, c ctrSpec) error {
	b, err := ctrJSON(c)
	if err != nil {
		return err
	}
	dir := filepath.Join(work, "specs")
	ctrFile := filepath.Join(dir, p.spec.name+"."+c.name+".ctr.json")
	if err := os.WriteFile(ctrFile, b, 0o644); err != nil {
		return err
	}
	cid, err := n.crictl(ctx, "create", p.id, ctrFile, filepath.Join(dir, p.spec.name+".pod.json"))
	if err != nil {
		return err
	}
	if _, err := n.crictl(ctx, "start", cid); err != nil {
		return err
	}
	p.ctr[c.name] = cid
	return nil
}

// removeContainer stops and removes container name of pod p.
func (n *node) removeContainer(ctx context.Context, p *pod, name string) error {
	if _, err := n.crictl(ctx, "rm", "-f", p.ctr[name]); err != nil {
		return err
	}
	delete(p.ctr, name)
	return nil
}

// removePod stops and removes the pod with its containers.
func (n *node) removePod(ctx context.Context, p *pod) error {
	_, err := n.crictl(ctx, "rmp", "-f", p.id)
	return err
}

// pid is the host PID of a container's process (or, for the sandbox ID, of the pause).
func (n *node) pid(ctx context.Context, id string, sandbox bool) (int, error) {
	cmd := "inspect"
	if sandbox {
		cmd = "inspectp"
	}
	out, err := n.crictl(ctx, cmd, "-o", "go-template", "--template", "{{.info.pid}}", id)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(out)
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("crictl %s %s: pid %q: want a positive number", cmd, id, out)
	}
	return pid, nil
}

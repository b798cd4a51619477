package enforce_test

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
	"github.com/podfence/podfence/internal/sandbox"
	"github.com/podfence/podfence/internal/sandbox/enforce"
	"github.com/podfence/podfence/internal/sandbox/host"
	"github.com/podfence/podfence/internal/sandbox/host/hosttest"
)

const (
	mi     = 1 << 20
	podID  = "5ab0c"
	podDir = "/kubepods/burstable/pod1"
)

// sbPath is the sandbox cgroup's path.
var sbPath = podDir + "/" + host.Name(podID)

// fixture is a fake node with a Kata pod's shim (100, 3 threads) and hypervisor (200, ppid
// 100, 4 threads) in the root cgroup, and the extension on it, logging to log.
type fixture struct {
	n   *hosttest.Node
	x   *enforce.Extension
	log *syncBuffer
}

func newFixture(t *testing.T, layout string) *fixture {
	f := &fixture{n: hosttest.New(t, layout), log: &syncBuffer{}}
	f.n.PodCgroup(podDir)
	f.n.Spawn(100, 1, "containerd-shim", 3, "/")
	f.n.Spawn(200, 100, "qemu-system-x86", 4, "/")
	f.x = f.newExtension(t)
	return f
}

// newExtension is an extension on the fixture's node: VM runtimes kata, kata-*; the empty
// sandbox on CPU 0.
func (f *fixture) newExtension(t *testing.T) *enforce.Extension {
	rts, err := sandbox.ParseRuntimes(sandbox.DefaultRuntimes())
	if err != nil {
		t.Fatal(err)
	}
	return enforce.New(enforce.Config{Root: f.n.Root, Proc: f.n.Proc, Runtimes: rts, EmptyCPUs: cpuset.New(0), FS: f.n},
		nritest.Logger(f.log))
}

// sb reads an interface file of the sandbox cgroup in hierarchy h ("" on v2).
func (f *fixture) sb(h, name string) string { return f.n.ReadFile(filepath.Join(h, sbPath, name)) }

// kataPod is the Kata pod with the RuntimeClass overhead 250m CPU / 160Mi.
func kataPod() *api.PodSandbox {
	q, p, m := int64(25000), uint64(100000), int64(160*mi)
	return &api.PodSandbox{Id: podID, Name: "vm", Namespace: "ns", Uid: "pod1", RuntimeHandler: "kata", Pid: 200,
		Linux: &api.LinuxPodSandbox{CgroupParent: podDir, CgroupsPath: podDir + "/" + podID,
			PodOverhead: &api.LinuxResources{Cpu: &api.LinuxCPU{Quota: api.Int64(&q), Period: api.UInt64(&p)},
				Memory: &api.LinuxMemory{Limit: api.Int64(&m)}}}}
}

// container is a container of the Kata pod with a CFS quota/period and a memory limit
// (0: unset) and, as the runtime reports it at Synchronize, a cpuset.
func container(id string, quota int64, period uint64, memory int64, cpus string) *api.Container {
	r := &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: cpus, Mems: "0"}, Memory: &api.LinuxMemory{}}
	if quota != 0 {
		r.Cpu.Quota, r.Cpu.Period = api.Int64(&quota), api.UInt64(&period)
	}
	if memory != 0 {
		r.Memory.Limit = api.Int64(&memory)
	}
	return &api.Container{Id: id, PodSandboxId: podID, Name: id, State: api.ContainerState_CONTAINER_RUNNING,
		Linux: &api.LinuxContainer{CgroupsPath: podDir + "/" + id, Resources: r}}
}

// syncBuffer is a log sink safe for concurrent handlers.
type syncBuffer struct{ nritest.LogBuffer }

// lines returns the log lines holding every part.
func (s *syncBuffer) lines(parts ...string) []string {
	var out []string
next:
	for _, l := range strings.Split(s.String(), "\n") {
		for _, p := range parts {
			if !strings.Contains(l, p) {
				continue next
			}
		}
		out = append(out, l)
	}
	return out
}

func testLogger(w *syncBuffer) *slog.Logger {
	return nritest.Logger(w)
}

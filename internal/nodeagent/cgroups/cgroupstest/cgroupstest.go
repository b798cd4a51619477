// Package cgroupstest gives tests cgroup trees: the captured layouts under
// cgroups/testdata/cgroup/{v1,v2} copied into a temporary directory, and a Kernel that
// stands in for cgroupfs on such a copy (mkdir shows interface files, rmdir refuses a busy
// cgroup, reads and writes can be made to fail).
package cgroupstest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/podfence/podfence/internal/nodeagent/cgroups"
)

// Tree copies layout "v1", "v2", "v1-systemd" or "v2-systemd" into a new temporary
// directory and returns its root.
//
// The v2 tree has misc in cgroup.controllers; the v1 tree has a misc hierarchy beside
// cpuset, memory, pids, cpu,cpuacct, systemd and a hybrid unified mount. Both list
// sgx_epc in misc.capacity (128 MiB, 3 MiB in use) and hold two containers, ContainerSystemd
// and ContainerCgroupfsV1 or ContainerCgroupfsV2.
//
// The systemd trees are a node whose kubelet and containerd use the systemd cgroup driver,
// trimmed: SystemdPods (one per QoS class, each a sandbox and a container scope) under
// kubepods.slice, containerd.service and kubelet.service under system.slice. On v2 every
// slice enables all controllers but the burstable pod's slice, which lacks cpuset (none of
// its scopes asked for one). The v1 tree is hybrid: cpuset, cpu,cpuacct, memory, pids and
// the name=systemd hierarchy hold the same slices and scopes, unified only its root (add the
// cpu and cpuacct symlinks of a real node yourself: os.CopyFS copies no symlink).
func Tree(tb testing.TB, layout string) string {
	tb.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("cgroupstest: cannot find the testdata directory")
	}
	src := filepath.Join(filepath.Dir(file), "..", "testdata", "cgroup", layout)
	dst := filepath.Join(tb.TempDir(), "cgroup")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		tb.Fatalf("cgroupstest: copy %s: %v", src, err)
	}
	return dst
}

// The containers of both trees, by the cgroups path their runtime gives NRI.
const (
	// ContainerSystemd: containerd, systemd driver; misc.max 1 MiB reached 3 times,
	// misc.current 1 MiB, misc.peak 1 MiB, pids 4242 and 4243.
	ContainerSystemd = "kubepods-burstable-pod0b9c5b1e_4a0e_4d5c_9a51_1f0e0c2f7a11.slice:cri-containerd:c0ffee01"
	// ContainerCgroupfsV1 and ContainerCgroupfsV2: cgroupfs driver (containerd on the v1
	// tree, CRI-O on v2); no limit, misc.current 2 MiB, no misc.peak (an older kernel), pid 5151.
	ContainerCgroupfsV1 = "/kubepods/besteffort/pod7d3e2f10-8c4b-4f6a-b2d9-55a1c3e4f6b2/c0ffee02"
	ContainerCgroupfsV2 = "/kubepods/besteffort/pod7d3e2f10-8c4b-4f6a-b2d9-55a1c3e4f6b2/crio-c0ffee02"
)

// SystemdPod is a pod of the systemd trees, by the names kubelet and containerd give it.
type SystemdPod struct {
	QoS string
	// Parent is kubelet's CRI cgroup parent (a slice name); Dir the cgroup path it expands to.
	Parent, Dir string
	// SandboxID, ContainerID: containerd's IDs; their scopes are
	// Dir/cri-containerd-<id>.scope, holding the processes SandboxPID and ContainerPID.
	SandboxID, ContainerID   string
	SandboxPID, ContainerPID int
}

// CgroupsPath is the systemd-driver cgroups path containerd gives runc and NRI for id.
func (p SystemdPod) CgroupsPath(id string) string { return p.Parent + ":cri-containerd:" + id }

// SystemdPods are the pods of the trees "v1-systemd" and "v2-systemd".
var SystemdPods = []SystemdPod{
	{QoS: "guaranteed", Parent: "kubepods-pod5c3a9e1f_2b7d_4c8e_9f10_a1b2c3d4e5f6.slice",
		Dir:       "/kubepods.slice/kubepods-pod5c3a9e1f_2b7d_4c8e_9f10_a1b2c3d4e5f6.slice",
		SandboxID: "f933648e990ace23662c75211f1fca9f4c164c0a28fd527bcf796c097cf64985", SandboxPID: 2101,
		ContainerID: "82d09898ea003cbf23a5fd036c36c9d616ac203ed0ca1504788be5ab14e37e3a", ContainerPID: 2144},
	{QoS: "burstable", Parent: "kubepods-burstable-pod0b9c5b1e_4a0e_4d5c_9a51_1f0e0c2f7a11.slice",
		Dir:       "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0b9c5b1e_4a0e_4d5c_9a51_1f0e0c2f7a11.slice",
		SandboxID: "27235d5b44b8b8276d21ea984b9d90c775148dee45fc44ed896b773efaa72ef6", SandboxPID: 2301,
		ContainerID: "3230f737b03de3d001a61e82d2dcd0845794301a4779370e04fadee8a0e9e5e4", ContainerPID: 2352},
	{QoS: "besteffort", Parent: "kubepods-besteffort-pod7d3e2f10_8c4b_4f6a_b2d9_55a1c3e4f6b2.slice",
		Dir:       "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod7d3e2f10_8c4b_4f6a_b2d9_55a1c3e4f6b2.slice",
		SandboxID: "9bd6c761efe750a1076b2a5dd7cbc08e674fc08385c5c5b879c7d99311b01d44", SandboxPID: 2501,
		ContainerID: "860967675df26aa773b5eefd85bc3bb40a7ef0e4409700e5da779ccd5d76caa3", ContainerPID: 2533},
}

// Kernel stands in for cgroupfs on a copied tree. Its zero value is ready.
type Kernel struct {
	// OnRead, if set, runs before every Read; an error it returns fails the read.
	OnRead func(dir, name string) error
	// WriteErr fails writes to files of these names (EINVAL, say) without writing.
	WriteErr map[string]error

	mu     sync.Mutex
	writes []string
}

// newCgroupFiles are what the kernel shows in a new cgroup for the misc controller.
var newCgroupFiles = map[string]string{
	"misc.max":     "sgx_epc max\n",
	"misc.current": "sgx_epc 0\n",
	"misc.events":  "sgx_epc.max 0\n",
	"cgroup.procs": "",
}

// Mkdir creates cgroups like mkdir -p and fills each new one with interface files.
func (k *Kernel) Mkdir(dir string) ([]string, error) {
	created, err := cgroups.Mkdir(dir)
	for _, d := range created {
		for name, content := range newCgroupFiles {
			if werr := os.WriteFile(filepath.Join(d, name), []byte(content), 0o644); werr != nil {
				return created, werr
			}
		}
	}
	return created, err
}

// Rmdir removes a cgroup with its interface files; like the kernel, it refuses (EBUSY) one
// with child cgroups or processes.
func (k *Kernel) Rmdir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("remove cgroup %s: %w", dir, err)
	}
	procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	for _, e := range entries {
		if e.IsDir() || strings.TrimSpace(string(procs)) != "" {
			return fmt.Errorf("remove cgroup %s: %w", dir, syscall.EBUSY)
		}
	}
	return os.RemoveAll(dir)
}

// Read reads an interface file after OnRead.
func (k *Kernel) Read(dir, name string) ([]byte, error) {
	if k.OnRead != nil {
		if err := k.OnRead(dir, name); err != nil {
			return nil, err
		}
	}
	return cgroups.Read(dir, name)
}

// Write writes an interface file, or fails as WriteErr says; it records the writes.
func (k *Kernel) Write(dir, name, value string) error {
	if err := k.WriteErr[name]; err != nil {
		return fmt.Errorf("write %q to %s: %w", value, filepath.Join(dir, name), err)
	}
	k.mu.Lock()
	k.writes = append(k.writes, filepath.Join(dir, name)+"="+value)
	k.mu.Unlock()
	return cgroups.Write(dir, name, value)
}

// Writes returns the writes made so far, as "<path>=<value>".
func (k *Kernel) Writes() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.writes...)
}

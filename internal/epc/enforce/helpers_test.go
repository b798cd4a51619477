package enforce_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/epc"
	"github.com/podfence/podfence/internal/epc/enforce"
	"github.com/podfence/podfence/internal/nodeagent/cgroups/cgroupstest"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
)

// node is an extension on a copy of a captured cgroup tree, with a stand-in kernel.
type node struct {
	*enforce.Extension
	root string
	k    *cgroupstest.Kernel
	logs *syncBuffer
}

// newNode copies layout ("v1", "v2") into a temp dir, lets edit change the copy (nil: no
// change), and starts an extension on it.
func newNode(t *testing.T, layout string, p epc.Policy, edit func(root string)) *node {
	t.Helper()
	n := &node{root: cgroupstest.Tree(t, layout), k: &cgroupstest.Kernel{}, logs: &syncBuffer{}}
	if edit != nil {
		edit(n.root)
	}
	n.Extension = enforce.New(enforce.Config{Root: n.root, Policy: p, FS: n.k}, nritest.Logger(n.logs))
	return n
}

// misc returns the misc cgroup directory of a path under the tree's misc hierarchy.
func (n *node) misc(path string) string {
	if n.Capability().Node.Unified {
		return filepath.Join(n.root, path)
	}
	return filepath.Join(n.root, "misc", path)
}

func (n *node) readFile(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func removeFile(t *testing.T, path string) {
	t.Helper()
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
}

func pod(id string, annotations map[string]string) *api.PodSandbox {
	return &api.PodSandbox{Id: id, Uid: "uid-" + id, Name: id, Namespace: "ns", Annotations: annotations}
}

func ctr(id string, p *api.PodSandbox, name, cgroupsPath string) *api.Container {
	return &api.Container{Id: id, PodSandboxId: p.Id, Name: name,
		Linux: &api.LinuxContainer{CgroupsPath: cgroupsPath, Resources: &api.LinuxResources{}}}
}

// syncBuffer is a log sink safe for concurrent handlers.
type syncBuffer = nritest.LogBuffer

// testLog logs to the test's log.
func testLog(t *testing.T) *slog.Logger {
	return nritest.Logger(tWriter{t})
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

package enforce

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/isolation"
	"github.com/podfence/podfence/internal/nodeagent/cgroups"
)

func set(s string) cpuset.CPUSet {
	c, err := cpuset.Parse(s)
	if err != nil {
		panic(err)
	}
	return c
}

// procIRQ copies a captured /proc/irq tree into a temp dir, every IRQ's affinity set to all.
func procIRQ(t *testing.T, capture, all string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "irq")
	if err := os.CopyFS(dst, os.DirFS(filepath.Join("testdata", "procirq", capture))); err != nil {
		t.Fatal(err)
	}
	irqs, err := ProcIRQ{Root: dst}.IRQs()
	if err != nil || len(irqs) == 0 {
		t.Fatalf("capture %s: %v, %v", capture, irqs, err)
	}
	for _, n := range irqs {
		write(t, filepath.Join(dst, fmt.Sprint(n), "smp_affinity_list"), all+"\n")
	}
	return dst
}

func write(t *testing.T, file, v string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// affinities reads every IRQ's smp_affinity_list of a tree: "24=0 25=0 ...".
func affinities(t *testing.T, root string) map[int]string {
	t.Helper()
	p := ProcIRQ{Root: root}
	irqs, err := p.IRQs()
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	for _, n := range irqs {
		c, err := p.Affinity(n)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = c.String()
	}
	return out
}

// unmovable makes SetAffinity of some IRQs fail as the kernel's EIO does.
type unmovable struct {
	ProcIRQ
	irqs map[int]bool
}

func (u unmovable) SetAffinity(irq int, cpus cpuset.CPUSet) error {
	if u.irqs[irq] {
		return fmt.Errorf("write: %w", ErrUnmovable)
	}
	return u.ProcIRQ.SetAffinity(irq, cpus)
}

// kernelCgroups is a cgroup v2 cpuset fake that keeps the kernel's partition rules
// (Documentation/admin-guide/cgroup-v2.rst, Linux 6.12): a non-root cgroup's
// cpuset.cpus.exclusive must be within its parent's (the root's is every CPU) and apart
// from its siblings'; an isolated partition is valid when its exclusive CPUs are not empty
// and every ancestor but the root holds them. Writes breaking a rule fail as the kernel's
// do (EINVAL); every write is logged.
type kernelCgroups struct {
	root string
	mu   sync.Mutex
	excl map[string]cpuset.CPUSet // by dir
	part map[string]string
	log  []string
}

func newKernelCgroups(t *testing.T) (*kernelCgroups, cgroups.Layout) {
	t.Helper()
	root := t.TempDir()
	write(t, filepath.Join(root, "cgroup.controllers"), "cpuset cpu memory\n")
	write(t, filepath.Join(root, fileIsolated), "\n")
	l, err := cgroups.Detect(root)
	if err != nil {
		t.Fatal(err)
	}
	return &kernelCgroups{root: root, excl: map[string]cpuset.CPUSet{}, part: map[string]string{}}, l
}

func (k *kernelCgroups) Read(dir, name string) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch name {
	case fileExclusive:
		return []byte(k.excl[dir].String() + "\n"), nil
	case filePartition:
		st := k.part[dir]
		if st == "" {
			return []byte(Member + "\n"), nil
		}
		if why := k.invalidLocked(dir); st == Isolated && why != "" {
			return []byte(Isolated + " invalid (" + why + ")\n"), nil
		}
		return []byte(st + "\n"), nil
	}
	return nil, &fs.PathError{Op: "open", Path: filepath.Join(dir, name), Err: fs.ErrNotExist}
}

func (k *kernelCgroups) invalidLocked(dir string) string {
	own := k.excl[dir]
	if own.IsEmpty() {
		return "cpuset.cpus.exclusive is empty"
	}
	for p := filepath.Dir(dir); p != k.root && p != "/" && p != "."; p = filepath.Dir(p) {
		if !own.IsSubsetOf(k.excl[p]) {
			return "Invalid cpu list in cpuset.cpus.exclusive"
		}
	}
	return ""
}

func (k *kernelCgroups) Write(dir, name, value string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	rel := strings.TrimPrefix(dir, k.root)
	k.log = append(k.log, fmt.Sprintf("%s/%s=%s", rel, name, strings.TrimSpace(value)))
	switch name {
	case fileExclusive:
		c, err := topology.ParseCPUList(strings.TrimSpace(value))
		if err != nil {
			return err
		}
		if parent := filepath.Dir(dir); parent != k.root && !c.IsSubsetOf(k.excl[parent]) {
			return fmt.Errorf("write %s %s: invalid argument (not within the parent's %s)", rel, c, k.excl[parent])
		}
		for d, sib := range k.excl {
			if d != dir && filepath.Dir(d) == filepath.Dir(dir) && sib.Intersection(c).Size() > 0 {
				return fmt.Errorf("write %s %s: invalid argument (sibling %s holds %s)", rel, c, d, sib)
			}
		}
		for d, child := range k.excl {
			if filepath.Dir(d) == dir && !child.IsSubsetOf(c) {
				return fmt.Errorf("write %s %s: invalid argument (child %s holds %s)", rel, c, d, child)
			}
		}
		k.excl[dir] = c
	case filePartition:
		k.part[dir] = strings.TrimSpace(value)
	default:
		return fmt.Errorf("no file %s", name)
	}
	return nil
}

// node is a planner node of spec with pool config yaml.
func node(t *testing.T, spec, yaml string) *plan.Node {
	t.Helper()
	topo, err := topology.Synthetic(spec)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pools.Parse("poolconfig-test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	layout, err := pools.Resolve(cfg, topo)
	if err != nil {
		t.Fatal(err)
	}
	return plan.NewNode(topo, layout, plan.Policy{})
}

func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func pod(uid string, ann map[string]string) *api.PodSandbox {
	return &api.PodSandbox{Id: "sb-" + uid, Uid: uid, Namespace: "ns", Name: "p-" + uid, Annotations: ann}
}

func ctr(id string, p *api.PodSandbox, cgroup string, env ...string) *api.Container {
	return &api.Container{Id: id, PodSandboxId: p.Id, Name: "app", State: api.ContainerState_CONTAINER_RUNNING, Env: env,
		Linux: &api.LinuxContainer{CgroupsPath: cgroup}}
}

// exclusive is a decision for exclusive CPUs of pool.
func exclusive(pool, cpus string) plan.Decision {
	c := set(cpus)
	return plan.Decision{Allocation: allocation.Allocation{Pool: pool, Type: allocation.TypeExclusive, CPUs: c}, CPUs: c}
}

func cpusetOf(s string) (cpuset.CPUSet, error) { return cpuset.Parse(s) }

func maskOf(c cpuset.CPUSet) string { return isolation.FormatMask(c) }

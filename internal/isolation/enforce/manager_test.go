package enforce

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/nodeagent/cgroups"
	"github.com/podfence/podfence/podapi"
)

const (
	fourCPUs   = "sockets=1,cores=4,threads=1"
	poolsPlain = "pools:\n  default: {cpus: \"0\"}\n  exclusive_a: {cpus: \"1-3\"}\n"
	poolsIso   = "pools:\n  default: {cpus: \"0\"}\n  exclusive_a: {cpus: \"1-3\", irqLoadBalancing: disable, cpuLoadBalancing: disable}\n"
	cg1        = "/kubepods/burstable/pod1/c1"
	cg2        = "/kubepods/pod2/c2"
)

var noIRQs = map[string]string{podapi.AnnotationIRQLoadBalancing: "disable"}

type fixture struct {
	t        *testing.T
	irqRoot  string
	wqFile   string
	stateDir string
	cgroups  *kernelCgroups
	layout   cgroups.Layout
	node     *plan.Node
	m        *Manager
}

func newFixture(t *testing.T, poolsYAML string) *fixture {
	f := &fixture{t: t, irqRoot: procIRQ(t, "firecracker-2cpu", "0-3"), stateDir: t.TempDir(),
		node: node(t, fourCPUs, poolsYAML)}
	write(t, filepath.Join(f.irqRoot, "default_smp_affinity"), "f\n")
	f.wqFile = filepath.Join(t.TempDir(), "cpumask")
	write(t, f.wqFile, "0000000f\n")
	f.cgroups, f.layout = newKernelCgroups(t)
	f.open(nil)
	return f
}

// open (re)starts the manager on the same node, as an agent restart does.
func (f *fixture) open(stuck map[int]bool) {
	f.t.Helper()
	m, err := New(Config{ProcIRQ: f.irqRoot, Workqueue: f.wqFile, Cgroups: f.layout, CgroupFS: f.cgroups, StateDir: f.stateDir,
		Node: func() *plan.Node { return f.node }}, testLog(f.t))
	if err != nil {
		f.t.Fatal(err)
	}
	if stuck != nil {
		m.irq = unmovable{ProcIRQ: ProcIRQ{Root: f.irqRoot}, irqs: stuck}
	}
	f.m = m
}

// start creates and starts a container through the hooks.
func (f *fixture) start(uid, id, cgroup, cpus string, ann map[string]string) {
	f.t.Helper()
	p := pod(uid, ann)
	c := ctr(id, p, cgroup, plan.EnvExclusiveCPUs+"="+strings.ReplaceAll(set(cpus).String(), "-", ","))
	if _, err := f.m.CreateContainer(context.Background(), p, c, exclusive("exclusive_a", cpus)); err != nil {
		f.t.Fatal(err)
	}
	if err := f.m.StartContainer(context.Background(), p, c); err != nil {
		f.t.Fatalf("StartContainer: %v", err)
	}
}

func (f *fixture) stop(uid, id string) {
	p := pod(uid, nil)
	f.m.RemoveContainer(context.Background(), p, ctr(id, p, ""))
}

// irqs wants every IRQ's affinity to be cpus, and default_smp_affinity mask.
func (f *fixture) irqs(when, cpus, mask string) {
	f.t.Helper()
	for n, got := range affinities(f.t, f.irqRoot) {
		if got != cpus {
			f.t.Errorf("%s: IRQ %d affinity %s, want %s", when, n, got, cpus)
		}
	}
	if got := read(f.t, filepath.Join(f.irqRoot, "default_smp_affinity")); got != mask {
		f.t.Errorf("%s: default_smp_affinity %s, want %s", when, got, mask)
	}
}

func TestIRQsKeptOffWhileTheContainerRuns(t *testing.T) {
	f := newFixture(t, poolsPlain)
	f.irqs("before", "0-3", "f")
	f.start("1", "c1", cg1, "2-3", noIRQs)
	f.irqs("while c1 runs on 2-3", "0-1", "00000003")
	f.start("2", "c2", cg2, "1", map[string]string{podapi.CRIOIRQLoadBalancing: "disable"}) // CRI-O's name
	f.irqs("while c1 and c2 run", "0", "00000001")
	f.start("3", "c3", "/kubepods/pod3/c3", "1", nil) // asks nothing: changes nothing
	f.stop("1", "c1")
	f.irqs("after c1 (c2 still on 1)", "0,2-3", "0000000d")
	f.stop("2", "c2")
	f.irqs("after c2", "0-3", "0000000f")
	if got := read(t, f.wqFile); got != "0000000f" {
		t.Errorf("workqueue cpumask %s: changed for containers that asked only for interrupts", got)
	}
}

// An IRQ the operator pinned keeps its own affinity, less the held CPUs, and gets it back.
func TestIRQBaselineKept(t *testing.T) {
	f := newFixture(t, poolsPlain)
	write(t, filepath.Join(f.irqRoot, "36", "smp_affinity_list"), "2-3\n") // virtio1-req.0 pinned
	write(t, filepath.Join(f.irqRoot, "38", "smp_affinity_list"), "3\n")
	f.start("1", "c1", cg1, "3", noIRQs)
	got := affinities(t, f.irqRoot)
	if got[36] != "2" || got[38] != "0-2" || got[24] != "0-2" {
		t.Errorf("while c1 runs on 3: IRQ 36 %s (want 2), 38 %s (want the housekeeping CPUs 0-2), 24 %s (want 0-2)", got[36], got[38], got[24])
	}
	f.stop("1", "c1")
	got = affinities(t, f.irqRoot)
	if got[36] != "2-3" || got[38] != "3" || got[24] != "0-3" {
		t.Errorf("after c1: IRQ 36 %s, 38 %s, 24 %s; want their own 2-3, 3, 0-3 back", got[36], got[38], got[24])
	}
}

func TestUnmovableIRQReportedOnce(t *testing.T) {
	f := newFixture(t, poolsPlain)
	f.open(map[int]bool{25: true}) // effective_affinity_list 1: delivered to CPU 1
	f.start("1", "c1", cg1, "1", noIRQs)
	f.start("2", "c2", cg2, "2", noIRQs)
	if got := affinities(t, f.irqRoot)[25]; got != "0-3" {
		t.Errorf("unmovable IRQ 25: affinity %s, want it untouched (0-3)", got)
	}
	r := f.m.State().(Report)
	if !slices.Equal(r.UnmovableIRQs, []int{25}) || r.NoIRQCPUs != "1-2" {
		t.Errorf("report: unmovable %v, no-IRQ CPUs %s; want [25], 1-2", r.UnmovableIRQs, r.NoIRQCPUs)
	}
	deg := f.m.Degraded()
	if len(deg) != 1 || deg[0].Pod != "p-1" || deg[0].Reason != "IsolationDegraded" ||
		!strings.Contains(deg[0].Message, "interrupts 25: the kernel does not let them move off CPUs 1") {
		t.Errorf("degraded: %+v; want only p-1's container (IRQ 25 is delivered to its CPU 1)", deg)
	}
}

func TestRestartRebuildsFromRunningContainers(t *testing.T) {
	f := newFixture(t, poolsIso)
	f.start("1", "c1", cg1, "2-3", nil) // the pool asks
	f.m.Flush()
	f.irqs("c1 runs", "0-1", "00000003")

	// The agent dies; c1 keeps running. A new agent synchronizes.
	f.open(nil)
	p := pod("1", nil)
	if err := f.m.Synchronize(context.Background(), []*api.PodSandbox{p}, []*api.Container{ctr("c1", p, cg1, plan.EnvExclusiveCPUs+"=2,3")}); err != nil {
		t.Fatal(err)
	}
	f.irqs("after a restart with c1 running", "0-1", "00000003")
	if st := f.cgroups.part[filepath.Join(f.layout.Root, cg1)]; st != Isolated {
		t.Errorf("partition of c1 after a restart: %q", st)
	}
	f.m.Flush()

	// It dies again and c1 ends meanwhile: the next agent gives everything back.
	f.open(nil)
	if err := f.m.Synchronize(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	f.irqs("after a restart with nothing running", "0-3", "0000000f")
	if got := read(t, f.wqFile); got != "0000000f" {
		t.Errorf("workqueue cpumask %s after a restart with nothing running, want 0000000f", got)
	}
	for d, c := range f.cgroups.excl {
		if !c.IsEmpty() {
			t.Errorf("cgroup %s keeps cpuset.cpus.exclusive %s", d, c)
		}
	}
}

func TestPartitions(t *testing.T) {
	f := newFixture(t, poolsIso)
	f.start("1", "c1", cg1, "2-3", nil)
	f.start("2", "c2", cg2, "1", nil)
	root := f.layout.Root
	excl := map[string]string{}
	for d, c := range f.cgroups.excl {
		excl[strings.TrimPrefix(d, root)] = c.String()
	}
	want := map[string]string{"/kubepods": "1-3", "/kubepods/burstable": "2-3", "/kubepods/burstable/pod1": "2-3",
		cg1: "2-3", "/kubepods/pod2": "1", cg2: "1"}
	if !maps.Equal(excl, want) {
		t.Errorf("cpuset.cpus.exclusive: %v\nwant %v", excl, want)
	}
	r := f.m.State().(Report)
	for _, c := range r.Containers {
		if c.Partition != Isolated || len(c.Degraded) > 0 {
			t.Errorf("container %s/%s: partition %q, degraded %v; want a valid isolated partition", c.Pod, c.Container, c.Partition, c.Degraded)
		}
	}
	if got := read(t, f.wqFile); got != "00000001" {
		t.Errorf("workqueue cpumask %s, want 00000001 (CPUs 1-3 isolated)", got)
	}
	f.stop("1", "c1")
	excl = map[string]string{}
	for d, c := range f.cgroups.excl {
		if !c.IsEmpty() {
			excl[strings.TrimPrefix(d, root)] = c.String()
		}
	}
	want = map[string]string{"/kubepods": "1", "/kubepods/pod2": "1", cg2: "1"}
	if !maps.Equal(excl, want) || f.cgroups.part[filepath.Join(root, cg1)] != Member {
		t.Errorf("after c1: exclusive %v (want %v), c1's partition %q (want member)\nwrites: %v", excl, want,
			f.cgroups.part[filepath.Join(root, cg1)], f.cgroups.log)
	}
	f.stop("2", "c2")
	if got := read(t, f.wqFile); got != "0000000f" {
		t.Errorf("workqueue cpumask %s after both, want 0000000f", got)
	}
}

func TestRequiredRefusedWhereImpossible(t *testing.T) {
	f := newFixture(t, "pools:\n  default: {cpus: \"0\"}\n  exclusive_a: {cpus: \"1-3\", cpuLoadBalancing: disable, isolationPolicy: required}\n")
	v1 := t.TempDir()
	write(t, filepath.Join(v1, "README"), "no cgroup.controllers: cgroup v1\n")
	l, err := cgroups.Detect(v1)
	if err != nil {
		t.Fatal(err)
	}
	f.m.parts.Layout = l
	p := pod("1", nil)
	_, err = f.m.CreateContainer(context.Background(), p, ctr("c1", p, cg1), exclusive("exclusive_a", "2"))
	if err == nil || !strings.HasPrefix(err.Error(), "isolation required by pool exclusive_a, which this node cannot give: no "+
		"isolated cpuset partition: cgroup v1: ") {
		t.Errorf("CreateContainer: %v", err)
	}
	// best-effort (the default) runs it, degraded with the reason.
	f2 := newFixture(t, poolsIso)
	f2.m.parts.Layout = l
	f2.start("1", "c1", cg1, "2", nil)
	deg := f2.m.Degraded()
	if len(deg) != 1 || !strings.Contains(deg[0].Message, "load balancing: cgroup v1: ") {
		t.Errorf("degraded: %+v", deg)
	}
}

func TestBadAnnotationRefused(t *testing.T) {
	f := newFixture(t, poolsPlain)
	p := pod("1", map[string]string{podapi.AnnotationCPULoadBalancing: "off"})
	_, err := f.m.CreateContainer(context.Background(), p, ctr("c1", p, cg1), exclusive("exclusive_a", "2"))
	if err == nil || !strings.Contains(err.Error(), `annotation podfence.io/cpu-load-balancing="off": want "disable"`) {
		t.Errorf("CreateContainer: %v", err)
	}
}

func TestReleaseGivesEverythingBack(t *testing.T) {
	f := newFixture(t, poolsIso)
	f.start("1", "c1", cg1, "2-3", nil)
	if err := f.m.Release(); err != nil {
		t.Fatal(err)
	}
	f.irqs("after Release", "0-3", "0000000f")
	if st := f.cgroups.part[filepath.Join(f.layout.Root, cg1)]; st != Member {
		t.Errorf("c1's partition %q after Release, want member", st)
	}
	if _, ok, _ := loadRecord(f.stateDir); ok {
		t.Error("record left after Release")
	}
}

// The periodic pass gives an interrupt moved back onto held CPUs its affinity again, unless
// an irqbalance runs: then it reports it and leaves it.
func TestRecheckBesideIRQBalance(t *testing.T) {
	f := newFixture(t, poolsPlain)
	proc := t.TempDir()
	f.m.cfg.Proc = proc
	f.start("1", "c1", cg1, "2-3", noIRQs)
	irq24 := filepath.Join(f.irqRoot, "24", "smp_affinity_list")
	write(t, irq24, "0-3\n") // someone moved it back
	recheck := func() {
		f.m.mu.Lock()
		defer f.m.mu.Unlock()
		if err := f.m.recheckLocked(); err != nil {
			t.Fatal(err)
		}
	}
	recheck()
	if got := read(t, irq24); got != "0-1" {
		t.Errorf("no irqbalance: IRQ 24 %s after the periodic pass, want 0-1 again", got)
	}
	if err := os.Mkdir(filepath.Join(proc, "4242"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(proc, "4242", "comm"), "irqbalance\n") // as /proc/4242/comm
	write(t, irq24, "0-3\n")
	recheck()
	if got := read(t, irq24); got != "0-3" {
		t.Errorf("beside irqbalance: IRQ 24 %s after the periodic pass, want it left where irqbalance put it", got)
	}
	r := f.m.State().(Report)
	if !strings.Contains(r.IRQBalance, "irqbalance (pid 4242) runs and moved interrupts 24 back onto CPUs 2-3") {
		t.Errorf("report: %q", r.IRQBalance)
	}
	if deg := f.m.Degraded(); len(deg) != 1 || !strings.Contains(deg[0].Message, "IRQBALANCE_BANNED_CPULIST") {
		t.Errorf("degraded: %+v", deg)
	}
}

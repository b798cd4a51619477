package enforce

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/internal/cpu/plan"
)

// syncBuffer is a log sink safe for the manager's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// managerLogged is n.manager with the log kept.
func (n *fakeNode) managerLogged(cfg Config) (*Manager, *syncBuffer) {
	n.t.Helper()
	cfg.ProcRoot, cfg.CgroupRoot = n.proc, n.cg
	var buf syncBuffer
	m, err := New(cfg, n, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(&buf, nil)))
	if err != nil {
		n.t.Fatal(err)
	}
	n.takeCalls()
	return m, &buf
}

// TestUnknownPolicy: a Koordinator policy value podfence does not know reads as the default
// (the pod joins its namespace's group and gets its cookie), is logged once per pod, and is
// listed once, as a pod-level entry for the agent's Event, until the pod sandbox goes.
func TestUnknownPolicy(t *testing.T) {
	n := newFakeNode(t)
	m, logs := n.managerLogged(Config{})
	pod := fakePod("p1", "shop", coresched.KoordLabelPolicy, "strict")
	other := fakePod("p2", "shop")
	a, b := fakeCtr(pod, "a", 110), fakeCtr(other, "b", 120)
	n.spawn(cgroupOf(a), 110)
	n.spawn(cgroupOf(b), 120)
	for _, p := range []*api.PodSandbox{pod, pod, other} { // RunPodSandbox twice: noted once
		must(t, m.RunPodSandbox(ctx, p))
	}
	if _, err := m.CreateContainer(ctx, pod, a, plan.Decision{}); err != nil {
		t.Fatalf("CreateContainer refused the pod: %v", err)
	}
	must(t, m.StartContainer(ctx, pod, a))
	must(t, m.StartContainer(ctx, other, b))
	if n.cookieOf(110) == 0 || n.cookieOf(110) != n.cookieOf(120) {
		t.Errorf("cookies %#x and %#x: want the namespace group's, shared", n.cookieOf(110), n.cookieOf(120))
	}
	d := m.Degraded()
	want := `label koordinator.sh/core-sched-policy="strict" is not a core-scheduling policy (want "exclusive", "none" or empty): ` +
		`read as empty, as Koordinator does, so the pod is in core-scheduling group ns:shop`
	if len(d) != 1 || d[0].Namespace != "shop" || d[0].Pod != "p1" || d[0].Container != "" || d[0].Reason != ReasonUnknownPolicy ||
		d[0].Message != want {
		t.Errorf("degraded %+v\nwant one pod-level entry: %s", d, want)
	}
	if got := strings.Count(logs.String(), "unknown core-scheduling policy"); got != 1 {
		t.Errorf("logged %d times, want once:\n%s", got, logs)
	}
	must(t, m.Synchronize(ctx, []*api.PodSandbox{pod, other}, nil)) // a reconnection: still listed, not logged again
	if d := m.Degraded(); len(d) != 1 || strings.Count(logs.String(), "unknown core-scheduling policy") != 1 {
		t.Errorf("after Synchronize: degraded %+v, log:\n%s", d, logs)
	}
	must(t, m.Synchronize(ctx, []*api.PodSandbox{other}, nil)) // the pod went while the agent was away
	if d := m.Degraded(); len(d) != 0 {
		t.Errorf("after Synchronize without the pod: %+v", d)
	}
	must(t, m.Synchronize(ctx, []*api.PodSandbox{pod}, nil))
	m.RemovePodSandbox(ctx, pod)
	if d := m.Degraded(); len(d) != 0 {
		t.Errorf("after RemovePodSandbox: %+v", d)
	}
}

// idleNode is a fake node whose pod cgroups (/kubepods/pod<id>) have cpu.idle "0", as a
// kernel of 5.15 or later shows it.
func idleNode(t *testing.T, ids ...string) *fakeNode {
	n := newFakeNode(t)
	for _, id := range ids {
		n.write(filepath.Join(n.cg, "kubepods", "pod"+id, "cpu.idle"), "0\n")
	}
	return n
}

func (n *fakeNode) cpuIdle(path string) string {
	n.t.Helper()
	b, err := os.ReadFile(filepath.Join(n.cg, path, "cpu.idle"))
	if err != nil {
		n.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestCPUIdleKoordinator: koordlet's cpu.idle cases (testdata/koordinator/rules.json: the
// value it sets for a Kubernetes QoS class under a rule) on a fake cgroup v2 tree: a pod of
// the Koordinator class that Kubernetes class maps to has cpu.idle as koordlet sets it.
func TestCPUIdleKoordinator(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "testdata", "koordinator", "rules.json"))
	must(t, err)
	var f struct {
		CPUIdle []struct {
			Name, Flag, Class string
			CPUIdle           int
		}
	}
	must(t, json.Unmarshal(b, &f))
	if len(f.CPUIdle) == 0 {
		t.Fatal("no cases")
	}
	for _, tc := range f.CPUIdle {
		t.Run(tc.Name, func(t *testing.T) {
			qos, err := coresched.ParseQoS(tc.Flag)
			must(t, err)
			n := idleNode(t, "p1")
			m, _ := n.manager(Config{QoS: qos})
			must(t, m.RunPodSandbox(ctx, fakePod("p1", "batch", coresched.KoordLabelQoS, tc.Class)))
			if got, want := n.cpuIdle("/kubepods/podp1"), map[int]string{0: "0", 1: "1"}[tc.CPUIdle]; got != want {
				t.Errorf("cpu.idle %q, koordlet %q", got, want)
			}
			if d := m.Degraded(); len(d) != 0 {
				t.Errorf("degraded %+v", d)
			}
		})
	}
}

// TestCPUIdle: only pods of an idle class get cpu.idle=1, on their own cgroup (the cgroup
// parent the kubelet gives, either driver, or the sandbox cgroup's parent); the report
// counts them; a restarted agent writes the same value.
func TestCPUIdle(t *testing.T) {
	qos, err := coresched.ParseQoS("BE=on+idle")
	must(t, err)
	n := idleNode(t, "be", "ls", "none")
	n.write(filepath.Join(n.cg, "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podsd.slice/cpu.idle"), "0\n")
	m, _ := n.manager(Config{QoS: qos})
	be := fakePod("be", "batch", coresched.KoordLabelQoS, "BE")
	sd := fakePod("sd", "batch", coresched.KoordLabelQoS, "BE")
	sd.Linux.CgroupParent = "kubepods-besteffort-podsd.slice"
	for _, p := range []*api.PodSandbox{be, sd, fakePod("ls", "web", coresched.KoordLabelQoS, "LS"), fakePod("none", "web")} {
		must(t, m.RunPodSandbox(ctx, p))
	}
	for path, want := range map[string]string{"/kubepods/podbe": "1", "/kubepods/podls": "0", "/kubepods/podnone": "0",
		"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podsd.slice": "1"} {
		if got := n.cpuIdle(path); got != want {
			t.Errorf("%s: cpu.idle %q, want %q", path, got, want)
		}
	}
	r := m.State().(Report)
	if want := (IdleReport{Supported: true, Set: 2}); r.CPUIdle != want || r.QoS != "LSR=on+expeller,LS=on+expeller,BE=on+idle,SYSTEM=on" {
		t.Errorf("report: %+v qos %q", r.CPUIdle, r.QoS)
	}
	// A restart: Synchronize writes the value again (here it was reset behind our back).
	n.write(filepath.Join(n.cg, "kubepods/podbe/cpu.idle"), "0\n")
	m2, _ := n.manager(Config{QoS: qos})
	must(t, m2.Synchronize(ctx, []*api.PodSandbox{be}, nil))
	if got := n.cpuIdle("/kubepods/podbe"); got != "1" {
		t.Errorf("after Synchronize: cpu.idle %q, want 1", got)
	}
	if r := m2.State().(Report); r.CPUIdle.Set != 1 {
		t.Errorf("after Synchronize: %+v, want the live pod counted", r.CPUIdle)
	}
	must(t, m2.Synchronize(ctx, nil, nil)) // the pod went while the agent was away
	if r := m2.State().(Report); r.CPUIdle.Set != 0 {
		t.Errorf("after Synchronize without the pod: %+v, want it forgotten", r.CPUIdle)
	}
	m.RemovePodSandbox(ctx, be)
	if r := m.State().(Report); r.CPUIdle.Set != 1 {
		t.Errorf("after RemovePodSandbox: %+v", r.CPUIdle)
	}
}

// TestCPUIdleUnsupported: on cgroup v1 (this host's kind) and on a kernel without cpu.idle,
// the pod runs, and the report and Degraded say why.
func TestCPUIdleUnsupported(t *testing.T) {
	qos, err := coresched.ParseQoS("BE=on+idle")
	must(t, err)
	pod := fakePod("be", "batch", coresched.KoordLabelQoS, "BE")

	v1 := newFakeNode(t)
	must(t, os.Remove(filepath.Join(v1.cg, "cgroup.controllers")))
	v1.write(filepath.Join(v1.cg, "pids", "cgroup.procs"), "")
	v1.write(filepath.Join(v1.cg, "cpu,cpuacct", "cgroup.procs"), "")
	m, logs := v1.managerLogged(Config{QoS: qos})
	must(t, m.RunPodSandbox(ctx, pod))
	wantWhy := "no cpu.idle: cgroup v1 at " + v1.cg + " has none (it is a cgroup v2 file, Linux 5.15)"
	r := m.State().(Report)
	if r.CPUIdle != (IdleReport{Reason: wantWhy, Failed: 1}) {
		t.Errorf("v1 report %+v, want reason %s", r.CPUIdle, wantWhy)
	}
	d := m.Degraded()
	if len(d) != 1 || d[0].Reason != "CPUIdleNotSet" || d[0].Pod != "be" ||
		d[0].Message != "the pod's QoS class asks for cpu.idle=1, which is not set: "+wantWhy {
		t.Errorf("v1 degraded %+v", d)
	}
	if !strings.Contains(logs.String(), "cpu.idle unsupported") {
		t.Errorf("no start-up warning:\n%s", logs)
	}

	old := newFakeNode(t) // cgroup v2 with cpu, but a kernel before 5.15: no cpu.idle file
	old.write(filepath.Join(old.cg, "kubepods", "podbe", "cpu.weight"), "100\n")
	m, _ = old.manager(Config{QoS: qos})
	must(t, m.RunPodSandbox(ctx, pod))
	if r := m.State().(Report); !r.CPUIdle.Supported || r.CPUIdle.Failed != 1 {
		t.Errorf("old kernel report %+v", r.CPUIdle)
	}
	if _, err := os.Stat(filepath.Join(old.cg, "kubepods", "podbe", "cpu.idle")); err == nil {
		t.Error("cpu.idle was created: the kernel makes interface files, the agent never does")
	}
}

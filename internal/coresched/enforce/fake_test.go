package enforce

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/podfence/podfence/internal/coresched/kernel"
)

// fakeNode is a fake /proc and cgroup v2 tree in temporary directories, and a Kernel that
// keeps cookies per task over them. Task ids below 1000 keep clear of the test's own pid.
type fakeNode struct {
	t         *testing.T
	proc, cg  string
	mu        sync.Mutex
	owner     map[int]int // live tid → its process
	cookie    map[int]kernel.Cookie
	next      kernel.Cookie
	calls     []string
	fail      map[string]error // op ("create", "share", "get") → error of its next call
	support   kernel.Support
	unread    int // probes still to read cookies back as 0, as in the first seconds after boot
	probes    int
	startTick int
}

func newFakeNode(t *testing.T) *fakeNode {
	n := &fakeNode{t: t, proc: t.TempDir(), cg: t.TempDir(), owner: map[int]int{}, cookie: map[int]kernel.Cookie{},
		next: 0xc00c1e00, fail: map[string]error{}, support: kernel.Support{Readable: true, CapSysPtrace: true}}
	n.write(filepath.Join(n.cg, "cgroup.controllers"), "cpuset cpu pids\n")
	return n
}

func (n *fakeNode) write(path, s string) {
	n.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		n.t.Fatal(err)
	}
}

// spawn starts process pid with threads (pid itself first) in cgroup path, cookie 0.
func (n *fakeNode) spawn(path string, pid int, threads ...int) {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	n.startTick++
	for _, tid := range append([]int{pid}, threads...) {
		n.owner[tid] = pid
		n.cookie[tid] = 0
		n.write(filepath.Join(n.proc, strconv.Itoa(pid), "task", strconv.Itoa(tid), "comm"), "fake\n")
		n.write(filepath.Join(n.proc, strconv.Itoa(tid), "cgroup"), "0::"+path+"\n")
	}
	stat := fmt.Sprintf("%d (fake (x)) S 1 %d %d 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n",
		pid, pid, pid, 1000+n.startTick)
	n.write(filepath.Join(n.proc, strconv.Itoa(pid), "stat"), stat)
	n.setProcs(path, func(p []int) []int { return append(p, pid) })
}

// kill ends process pid and its threads.
func (n *fakeNode) kill(pid int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for tid, p := range n.owner {
		if p == pid {
			delete(n.owner, tid)
			delete(n.cookie, tid)
			_ = os.RemoveAll(filepath.Join(n.proc, strconv.Itoa(tid)))
		}
	}
	_ = filepath.WalkDir(n.cg, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "cgroup.procs" {
			n.setProcs(strings.TrimPrefix(filepath.Dir(path), n.cg), func(p []int) []int {
				return slices.DeleteFunc(p, func(x int) bool { return x == pid })
			})
		}
		return nil
	})
}

func (n *fakeNode) setProcs(path string, f func([]int) []int) {
	file := filepath.Join(n.cg, path, "cgroup.procs")
	b, _ := os.ReadFile(file)
	var pids []int
	for _, s := range strings.Fields(string(b)) {
		p, _ := strconv.Atoi(s)
		pids = append(pids, p)
	}
	var out strings.Builder
	for _, p := range f(pids) {
		fmt.Fprintln(&out, p)
	}
	n.write(file, out.String())
}

// setCookie gives tasks a cookie directly, as an earlier agent would have.
func (n *fakeNode) setCookie(c kernel.Cookie, tids ...int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, t := range tids {
		n.cookie[t] = c
	}
}

func (n *fakeNode) cookieOf(tid int) kernel.Cookie {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cookie[tid]
}

// takeCalls returns the kernel calls since the last takeCalls.
func (n *fakeNode) takeCalls() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.calls
	n.calls = nil
	return c
}

// tasks returns the tids pid names at scope; the caller holds n.mu.
func (n *fakeNode) tasks(pid int, s kernel.Scope) ([]int, error) {
	p, ok := n.owner[pid]
	if !ok {
		return nil, fmt.Errorf("fake pid %d: %w", pid, kernel.ErrNoTask)
	}
	if s == kernel.Thread {
		return []int{pid}, nil
	}
	var out []int
	for tid, o := range n.owner {
		if o == p {
			out = append(out, tid)
		}
	}
	return out, nil
}

// failNext makes the next call of op ("create", "share", "get") fail with err.
func (n *fakeNode) failNext(op string, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.fail[op] = err
}

func (n *fakeNode) failed(op string) error {
	err := n.fail[op]
	delete(n.fail, op)
	return err
}

func (n *fakeNode) Create(pid int, s kernel.Scope) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls = append(n.calls, fmt.Sprintf("create %d %s", pid, s))
	if err := n.failed("create"); err != nil {
		return err
	}
	tids, err := n.tasks(pid, s)
	n.next += 0x100
	for _, t := range tids {
		n.cookie[t] = n.next
	}
	return err
}

func (n *fakeNode) Share(from, pid int, s kernel.Scope) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls = append(n.calls, fmt.Sprintf("share %d>%d %s", from, pid, s))
	if err := n.failed("share"); err != nil {
		return err
	}
	if _, ok := n.owner[from]; !ok {
		return fmt.Errorf("fake share from %d: %w", from, kernel.ErrNoTask)
	}
	tids, err := n.tasks(pid, s)
	for _, t := range tids {
		n.cookie[t] = n.cookie[from]
	}
	return err
}

func (n *fakeNode) Get(pid int) (kernel.Cookie, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls = append(n.calls, fmt.Sprintf("get %d", pid))
	if err := n.failed("get"); err != nil {
		return 0, err
	}
	if _, ok := n.owner[pid]; !ok {
		return 0, fmt.Errorf("fake get %d: %w", pid, kernel.ErrNoTask)
	}
	return n.cookie[pid], nil
}

func (n *fakeNode) Probe() kernel.Support {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.probes++
	s := n.support
	if n.unread > 0 {
		n.unread--
		s.Readable = false
	}
	return s
}

// manager starts a Manager on the fake node with cfg's policy fields.
func (n *fakeNode) manager(cfg Config) (*Manager, *prometheus.Registry) {
	n.t.Helper()
	cfg.ProcRoot, cfg.CgroupRoot = n.proc, n.cg
	reg := prometheus.NewRegistry()
	m, err := New(cfg, n, reg, slog.New(slog.NewTextHandler(n.t.Output(), nil)))
	if err != nil {
		n.t.Fatal(err)
	}
	n.takeCalls()
	return m, reg
}

// fakePod is a pod sandbox; labels alternate keys and values.
func fakePod(id, ns string, labels ...string) *api.PodSandbox {
	l := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		l[labels[i]] = labels[i+1]
	}
	return &api.PodSandbox{Id: id, Name: id, Uid: "uid-" + id, Namespace: ns, Labels: l,
		Linux: &api.LinuxPodSandbox{CgroupsPath: "/kubepods/pod" + id + "/" + id}}
}

// fakeCtr is a container of pod with its cgroup under the pod's.
func fakeCtr(pod *api.PodSandbox, name string, pid int) *api.Container {
	id := pod.Id + "-" + name
	return &api.Container{Id: id, PodSandboxId: pod.Id, Name: name, Pid: uint32(pid),
		State: api.ContainerState_CONTAINER_RUNNING,
		Linux: &api.LinuxContainer{CgroupsPath: "/kubepods/pod" + pod.Id + "/" + id}}
}

func cgroupOf(ctr *api.Container) string { return ctr.Linux.CgroupsPath }

package nriplugin_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"google.golang.org/protobuf/proto"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/kube/podresources"
	"github.com/podfence/podfence/internal/kube/podresources/podresourcestest"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
)

// kubeletPools are the test node's pools with singleThreaded exclusive pools: one device
// per core, its lowest thread, which is what a container gets (the other stays idle).
const kubeletPools = `
pools:
  default:     {cpus: "0,8"}
  shared_s:    {cpus: "1,9"}
  exclusive_a: {cpus: "2-3,10-11"}
  exclusive_b: {cpus: "4-7,12-15"}
`

// setupKubelet starts a runtime and an agent on kubeletPools that reads the kubelet's
// devices from a fake kubelet, through client.
func setupKubelet(t *testing.T, opts nriplugin.Options) (rt *runtime, ar *agentRun, kubelet *podresourcestest.Server,
	client *patient) {
	t.Helper()
	kubelet, client = fakeKubelet(t)
	opts.PodResources = client
	rt = newRuntime(t)
	return rt, startAgent(t, rt, newNode(t, testTopology, kubeletPools), openStore(t, t.TempDir()), opts), kubelet, client
}

// has checks what a container runs on: its cpuset and CPU variables, and, where want sets
// one, its CFS quota (a shared-pool share).
func has(t *testing.T, c created, w want) {
	t.Helper()
	if c.cpus() != w.cpus || c.env("EXCLUSIVE_CPUS") != w.exclusive || c.env("SHARED_CPUS") != w.shared ||
		w.quota != 0 && c.quota() != w.quota {
		t.Errorf("container %s runs on %s with EXCLUSIVE_CPUS=%q SHARED_CPUS=%q quota %d; want %+v", c.ctr.Name, c.cpus(),
			c.env("EXCLUSIVE_CPUS"), c.env("SHARED_CPUS"), c.quota(), w)
	}
}

// fakeKubelet serves the pod resources API on a unix socket and returns it with a client.
func fakeKubelet(t testing.TB) (*podresourcestest.Server, *patient) {
	t.Helper()
	srv := podresourcestest.Start(t, filepath.Join(nritest.ShortDir(t), "kubelet.sock"))
	c, err := podresources.Dial(srv.Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return srv, &patient{Client: c}
}

// patient is a pod resources client whose calls drop the agent's bound on them
// (Options.PodResourcesTimeout, a second for Synchronize's List) unless bounded is set: the
// answer of a kubelet that answers comes however slow the machine. Tests of the bound set
// bounded.
type patient struct {
	*podresources.Client
	bounded atomic.Bool
}

func (p *patient) ctx(ctx context.Context) context.Context {
	if p.bounded.Load() {
		return ctx
	}
	return context.WithoutCancel(ctx)
}

func (p *patient) Pod(ctx context.Context, ref podresources.Ref, container string) (podresources.Pod, error) {
	return p.Client.Pod(p.ctx(ctx), ref, container)
}

func (p *patient) List(ctx context.Context) (map[podresources.Ref]podresources.Pod, error) {
	return p.Client.List(p.ctx(ctx))
}

// millicpu returns n shared-pool device IDs as CPU-Pooler names them ("0", "1", ...).
func millicpu(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint(i)
	}
	return ids
}

// createEnv is runtime.create with the container's environment (what the kubelet put there,
// the device plugins' Allocate answers included).
func (rt *runtime) createEnv(pod *api.PodSandbox, name string, env ...string) (created, error) {
	id := rt.nextID("ctr")
	ctr := &api.Container{Id: id, PodSandboxId: pod.Id, Name: name, State: api.ContainerState_CONTAINER_CREATED, Env: env,
		Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{}}}}
	b := rt.nri.BlockPluginSync()
	rpl, err := rt.nri.CreateContainer(context.Background(), &api.CreateContainerRequest{Pod: pod,
		Container: proto.Clone(ctr).(*api.Container)})
	b.Unblock()
	if err != nil {
		return created{}, err
	}
	applyCPU(ctr.Linux.Resources.Cpu, rpl.GetAdjust().GetLinux().GetResources().GetCpu())
	ctr.State = api.ContainerState_CONTAINER_RUNNING
	rt.mu.Lock()
	rt.ctrs[id] = ctr
	rt.mu.Unlock()
	return created{ctr: ctr, adjust: rpl.GetAdjust(), update: rpl.GetUpdate()}, nil
}

// TestKubeletDevices: containers of pods without a pool request annotation get the pools of
// the devices the kubelet allocated them (exclusive CPUs as allocated, a share of as many
// millicpu as devices), asked once per pod; annotated pods are not asked about.
func TestKubeletDevices(t *testing.T) {
	rt, _, kubelet, _ := setupKubelet(t, nriplugin.Options{})
	for _, tc := range []struct {
		pod  string
		devs map[string][]string
		want want
	}{
		{pod: "dp", devs: map[string][]string{"podfence.io/exclusive_b": {"5", "6"}, "gpu.example/g": {"g0"}},
			want: want{cpus: "5-6", exclusive: "5,6"}},
		{pod: "cpupooler-shared", devs: map[string][]string{"nokia.k8s.io/shared_s": millicpu(300)},
			want: want{cpus: "1,9", quota: 30000, shared: "1,9"}},
		{pod: "mixed", devs: map[string][]string{"podfence.io/exclusive_a": {"3"}, "podfence.io/shared_s": millicpu(100)},
			want: want{cpus: "1,3,9", exclusive: "3", shared: "1,9"}},
		{pod: "plain", want: want{cpus: "0,8"}},
	} {
		t.Run(tc.pod, func(t *testing.T) {
			kubelet.SetPod("ns", tc.pod, map[string]map[string][]string{"app": tc.devs, "side": nil})
			pod := rt.runPod(tc.pod, nil)
			has(t, rt.mustCreate(pod, "app", nil), tc.want)
			has(t, rt.mustCreate(pod, "side", nil), want{cpus: "0,8"})
		})
	}
	if gets, lists := kubelet.Calls(); gets != 4 || lists != 1 {
		t.Errorf("the kubelet was asked %d times (Get) and listed %d times; want once per pod, and one List before connecting",
			gets, lists)
	}

	kubelet.SetPod("ns", "annotated", map[string]map[string][]string{"app": {"podfence.io/exclusive_b": {"7"}}})
	has(t, rt.mustCreate(rt.runPod("annotated", poolReq(`{"app": {"exclusive_a": 1}}`)), "app", nil),
		want{cpus: "2", exclusive: "2"})
	if gets, _ := kubelet.Calls(); gets != 4 {
		t.Errorf("the kubelet was asked about an annotated pod")
	}

	kubelet.SetPod("ns", "bad", map[string]map[string][]string{"app": {"podfence.io/exclusive_b": {"7", "x"}}})
	_, err := rt.create(rt.runPod("bad", nil), "app", nil)
	if err == nil || !strings.Contains(err.Error(), `pod ns/bad container "app": kubelet allocated device "x" of podfence.io/exclusive_b: `+
		`want a CPU ID (a whole number 0-8191)`) {
		t.Errorf("create with a bad device ID: %v", err)
	}
}

// TestKubeletDevicesForgottenWithTheSandbox: RemovePodSandbox drops what the kubelet said of
// the pod, so a new sandbox of it asks again.
func TestKubeletDevicesForgottenWithTheSandbox(t *testing.T) {
	rt, _, kubelet, _ := setupKubelet(t, nriplugin.Options{})
	kubelet.SetPod("ns", "web", map[string]map[string][]string{"app": {"podfence.io/exclusive_b": {"4"}}})
	old := rt.runPod("web", nil)
	rt.removeCtr(rt.mustCreate(old, "app", nil).ctr)
	pod := rt.rerunPod(old)
	has(t, rt.mustCreate(pod, "app", nil), want{cpus: "4", exclusive: "4"}) // from the cache
	rt.removePod(old)
	kubelet.SetPod("ns", "web", map[string]map[string][]string{"app": {"podfence.io/exclusive_b": {"5"}}})
	rt.removeCtr(rt.ctrNamed(t, pod, "app"))
	has(t, rt.mustCreate(pod, "app", nil), want{cpus: "5", exclusive: "5"})
	if gets, _ := kubelet.Calls(); gets != 2 {
		t.Errorf("%d Gets; want 2: one per sandbox removal", gets)
	}
}

// ctrNamed returns pod's running container named name.
func (rt *runtime) ctrNamed(t *testing.T, pod *api.PodSandbox, name string) *api.Container {
	t.Helper()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, c := range rt.ctrs {
		if c.PodSandboxId == pod.Id && c.Name == name && c.State != api.ContainerState_CONTAINER_STOPPED {
			return c
		}
	}
	t.Fatalf("no container %s in pod %s", name, pod.Name)
	return nil
}

// TestKubeletSilent: a kubelet that does not answer holds no creation past the bound (the
// runtime side would fail the call itself after 2 s): a container without CPU pool devices in
// its environment is created in the default pool; one with them is refused, and created once
// the kubelet answers. The kubelet waits for the call's deadline: the bound is met however
// slow the machine; the answer after it is awaited without the bound.
func TestKubeletSilent(t *testing.T) {
	rt, _, kubelet, client := setupKubelet(t, nriplugin.Options{PodResourcesTimeout: 50 * time.Millisecond})
	client.bounded.Store(true)
	kubelet.SetPod("ns", "plain", map[string]map[string][]string{"app": nil})
	kubelet.SetPod("ns", "shared", map[string]map[string][]string{"app": {"podfence.io/shared_s": millicpu(200)}})
	kubelet.Block()

	c, err := rt.createEnv(rt.runPod("plain", nil), "app", "PATH=/bin")
	if err != nil {
		t.Fatalf("a container without pool devices waited for the kubelet: %v", err)
	}
	has(t, c, want{cpus: "0,8"})

	pod := rt.runPod("shared", nil)
	_, err = rt.createEnv(pod, "app", "SHARED_CPUS=1,9")
	late := err != nil && (strings.Contains(err.Error(), "DeadlineExceeded") || // the Get's, or the wait for RunPodSandbox's
		strings.Contains(err.Error(), "deadline exceeded"))
	if !late || !strings.Contains(err.Error(), "its environment has SHARED_CPUS") {
		t.Fatalf("a container with pool devices the kubelet did not tell: %v; want refused", err)
	}
	kubelet.Unblock()
	client.bounded.Store(false) // the kubelet answers now: past the 50 ms, if the machine is slow
	c, err = rt.createEnv(pod, "app", "SHARED_CPUS=1,9")
	if err != nil {
		t.Fatal(err)
	}
	has(t, c, want{cpus: "1,9", quota: 20000, shared: "1,9"})
}

// TestKubeletDevicesRebuild: after a restart without checkpoint, a container placed by its
// kubelet devices is rebuilt from them exactly: 5 millicpu, though its quota was raised to
// the kernel's minimum (adopted from its cpuset and quota alone it would hold 10).
func TestKubeletDevicesRebuild(t *testing.T) {
	kubelet, client := fakeKubelet(t)
	rt := newRuntime(t)
	node := newNode(t, testTopology, kubeletPools)
	ar := startAgent(t, rt, node, nritest.NoCheckpoint{}, nriplugin.Options{PodResources: client})
	kubelet.SetPod("ns", "tiny", map[string]map[string][]string{"app": {"podfence.io/shared_s": millicpu(5)}})
	has(t, rt.mustCreate(rt.runPod("tiny", nil), "app", nil), want{cpus: "1,9", quota: 1000, shared: "1,9"})
	ar.stop()

	for _, devices := range []bool{true, false} {
		opts := nriplugin.Options{}
		if devices {
			opts.PodResources = client
		}
		ar = startAgent(t, rt, node, nritest.NoCheckpoint{}, opts)
		var got []int64
		for _, al := range ar.Allocations() {
			if al.Type == allocation.TypeShared {
				got = append(got, al.MilliCPU)
			}
		}
		if want := map[bool]int64{true: 5, false: 10}[devices]; len(got) != 1 || got[0] != want {
			t.Errorf("with the kubelet's devices %v: rebuilt shares %v, want [%d]", devices, got, want)
		}
		ar.stop()
	}
	if _, lists := kubelet.Calls(); lists != 2 {
		t.Errorf("%d Lists; want 2: before each connection of an agent with the kubelet's pod resources", lists)
	}
}

// BenchmarkUnannotatedPod is RunPodSandbox and the first CreateContainer of a pod without a
// pool request annotation (no devices: the common pod), relayed through the NRI runtime side,
// without the kubelet's pod resources and with them (one Get per pod, at RunPodSandbox,
// through a fake kubelet on a unix socket). Reported: µs per RunPodSandbox and per
// CreateContainer.
func BenchmarkUnannotatedPod(b *testing.B) {
	for _, withKubelet := range []bool{false, true} {
		b.Run(fmt.Sprint("kubelet=", withKubelet), func(b *testing.B) {
			kubelet, client := fakeKubelet(b)
			var opts nriplugin.Options
			if withKubelet {
				opts.PodResources = client
			}
			rt := newRuntime(b)
			startAgent(b, rt, newNode(b, testTopology, kubeletPools), nritest.NoCheckpoint{}, opts)
			var run, create time.Duration
			n := 0
			for b.Loop() {
				n++
				name := fmt.Sprint("p", n)
				kubelet.SetPod("ns", name, map[string]map[string][]string{"app": nil})
				t0 := time.Now()
				pod := rt.runPod(name, nil)
				t1 := time.Now()
				c := rt.mustCreate(pod, "app", nil)
				run, create = run+t1.Sub(t0), create+time.Since(t1)
				rt.removePod(pod)
				if c.cpus() != "0,8" {
					b.Fatalf("cpus %s", c.cpus())
				}
			}
			b.ReportMetric(float64(run.Microseconds())/float64(n), "runpod-µs")
			b.ReportMetric(float64(create.Microseconds())/float64(n), "create-µs")
			if gets, _ := kubelet.Calls(); withKubelet && gets != n {
				b.Errorf("%d Gets for %d pods", gets, n)
			}
		})
	}
}

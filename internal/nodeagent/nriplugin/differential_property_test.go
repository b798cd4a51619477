package nriplugin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	jsonpatch "github.com/evanphx/json-patch/v5"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podfence/podfence/internal/admission"
	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/nodeagent"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
	"github.com/podfence/podfence/internal/pinning"
)

// diffSeedsEnv, when set to a number, runs that many seeds of TestPlanAgentDifferential
// instead of the fixed set (PODFENCE_DIFF_SEEDS=5000 go test -run Differential ./internal/nodeagent/nriplugin/).
const diffSeedsEnv = "PODFENCE_DIFF_SEEDS"

// The differential node: the test topology with an exclusive pool of each thread policy, the
// shared pool and the default pool.
const diffPools = `
pools:
  default:     {cpus: "0,8"}
  shared_s:    {cpus: "1,9"}
  exclusive_a: {cpus: "2-3,10-11", hyperThreadingPolicy: multiThreaded}
  exclusive_b: {cpus: "4-7,12-15", hyperThreadingPolicy: singleThreaded}
`

// diffEnvNames are the variables the planner decides (plan.Decision.Env); the agent's
// extensions may add others.
var diffEnvNames = []string{plan.EnvExclusiveCPUs, plan.EnvSharedCPUs, plan.EnvCPUPools, plan.EnvContainerName}

// agentOptions are the agent's as `podfence agent` runs it, less what needs the host: the
// process starter wraps pinned containers (and refuses those whose processes do not fit).
func agentOptions() nriplugin.Options {
	return nriplugin.Options{Extensions: []nriplugin.Extension{nodeagent.Starter{Binary: "/opt/podfence/bin/podfence"}}}
}

// outcome is what one container got, or why it was refused, in words both sides give.
type outcome struct {
	cpus, mems, quota, env string
	refused                string // the refusal code, "" if created
	reason                 string // the planner's refusal text, when it is one
	detail                 string // the agent's error, for the failure message
}

func (o outcome) String() string {
	if o.refused != "" {
		return "refused " + o.refused
	}
	return fmt.Sprintf("cpus=%s mems=%s quota=%s env=[%s]", o.cpus, o.mems, o.quota, o.env)
}

// TestPlanAgentDifferential: random pods, admitted by the webhook (Mutate, then Validate: a
// pod it refuses reaches no node), are planned by `podfence plan`'s code path (plan.PlanPods
// on the pod manifests) and created through the real NRI runtime side against the agent, as
// the kubelet and containerd create them: init containers in order, a plain one stopped
// (its exit) before the next container, a sidecar left running, then the app containers; a
// pod with a refused container is removed whole. Both must give every container the same
// cpuset, memory nodes, CFS quota and CPU environment, and refuse the same containers for the
// same reason. After each seed every pod is removed and the agent must hold nothing.
func TestPlanAgentDifferential(t *testing.T) {
	seeds := 48
	if v := os.Getenv(diffSeedsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a number of seeds above 0", diffSeedsEnv, v)
		}
		seeds = n
	}
	rt := newRuntime(t)
	topo, err := topology.Synthetic(testTopology)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pools.Parse("differential pools", []byte("exclusiveCPUs: threads\nunpooledCPUs: default\n"+diffPools))
	if err != nil {
		t.Fatal(err)
	}
	layout, err := pools.Resolve(cfg, topo)
	if err != nil {
		t.Fatal(err)
	}
	admit := &admission.Config{Pools: []*pools.Config{cfg}}
	var nodes []*plan.Node
	for _, q := range plan.CFSQuotaModes() {
		nodes = append(nodes, plan.NewNode(topo, layout, plan.Policy{CFSQuotas: q}))
	}
	stats := map[string]int{}
	for pi, node := range nodes { // one agent per policy, the seeds of that policy in turn
		ar := startAgentLog(t, rt, node, nritest.NoCheckpoint{}, agentOptions(), discard)
		for seed := pi; seed < seeds; seed += len(nodes) {
			diffSeed(t, rt, ar, node, admit, seed, stats)
		}
		ar.stop()
	}
	t.Logf("%d seeds: %v", seeds, stats)
}

// diffSeed plans and creates one seed's pods and compares the outcomes.
func diffSeed(t *testing.T, rt *runtime, ar *agentRun, node *plan.Node, admit *admission.Config, seed int, stats map[string]int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(seed), 28))
	var admitted []*corev1.Pod
	for i := range 3 + rng.IntN(5) {
		pod, err := webhook(randomPod(rng, seed, i), admit)
		if err != nil {
			stats["pods refused by the webhook"]++
			continue
		}
		admitted = append(admitted, pod)
	}
	want := planned(node.PlanPods(plan.NewLedger(node), admitted))
	got := map[string]outcome{}
	for _, pod := range admitted {
		createPod(t, rt, pod, got)
	}
	for _, k := range slices.Sorted(mapsKeys(want, got)) {
		w, g := want[k], got[k]
		if w.refused != "" {
			stats["containers refused"]++
		} else {
			stats["containers placed"]++
		}
		if w.String() != g.String() || w.reason != g.reason {
			t.Errorf("seed %d: %s:\n  podfence plan: %s %s\n  agent:         %s %s", seed, k, w, w.reason, g, g.detail)
		}
	}
	if t.Failed() {
		t.Fatalf("seed %d: pods:\n%s", seed, podsYAML(admitted))
	}
	for _, pod := range rt.podsNow() {
		rt.removePod(pod)
	}
	if held := ar.Allocations(); len(held) > 0 {
		t.Fatalf("seed %d: every pod removed, the agent still holds %v", seed, held)
	}
}

func mapsKeys[V any](ms ...map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		seen := map[string]bool{}
		for _, m := range ms {
			for k := range m {
				if !seen[k] {
					seen[k] = true
					if !yield(k) {
						return
					}
				}
			}
		}
	}
}

// planned is the report as outcomes by "pod/container". A container of a refused pod that
// the plan placed before the refusal does not appear: the pod never ran.
func planned(rep plan.Report) map[string]outcome {
	out := map[string]outcome{}
	for _, p := range rep.Placed {
		d := p.Decision
		var env []string
		for _, e := range d.Env {
			env = append(env, e.Name+"="+e.Value)
		}
		out[p.Pod+"/"+p.Container] = outcome{cpus: d.CPUs.String(), mems: d.Mems.String(), quota: quotaText(d.Quota, d.Period),
			env: strings.Join(env, " ")}
	}
	for _, r := range rep.Refusals {
		out[r.Pod+"/"+r.Container] = outcome{refused: r.Code, reason: r.Error()}
	}
	return out
}

func quotaText(quota, period int64) string {
	if quota <= 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%d", quota, period)
}

var refusalCode = regexp.MustCompile(`refused \((\w+)\)`)

// createPod runs pod through the runtime as the kubelet does and records each container's
// outcome; a refused container ends the pod, which is removed.
func createPod(t *testing.T, rt *runtime, pod *corev1.Pod, out map[string]outcome) {
	t.Helper()
	sb := rt.runPodUID(pod.Name, string(pod.UID), pod.Annotations)
	name := pod.Namespace + "/" + pod.Name
	create := func(c corev1.Container) (*api.Container, bool) {
		ctr, adj, err := rt.createCtr(sb, c.Name, []string{"/bin/" + c.Name}, nil)
		if err != nil {
			o := outcome{refused: plan.CodeInvalidRequest, detail: err.Error()}
			if m := refusalCode.FindStringSubmatch(err.Error()); m != nil {
				o.refused = m[1]
				o.reason = err.Error()[strings.Index(err.Error(), "pod "+name):]
			}
			out[name+"/"+c.Name] = o
			rt.removePod(sb)
			return nil, false
		}
		var env []string
		for _, kv := range adj.GetEnv() {
			if slices.Contains(diffEnvNames, kv.Key) {
				env = append(env, kv.Key+"="+kv.Value)
			}
		}
		cpu := ctr.GetLinux().GetResources().GetCpu()
		out[name+"/"+c.Name] = outcome{cpus: cpu.GetCpus(), mems: cpu.GetMems(),
			quota: quotaText(cpu.GetQuota().GetValue(), int64(cpu.GetPeriod().GetValue())), env: strings.Join(env, " ")}
		return ctr, true
	}
	var created []string
	for _, c := range pod.Spec.InitContainers {
		ctr, ok := create(c)
		if !ok {
			dropCreated(out, name, created)
			return
		}
		created = append(created, c.Name)
		if !plan.IsSidecar(c) {
			rt.stopCtr(ctr) // it ran to completion: its exit reaches the agent as StopContainer
		}
	}
	for _, c := range pod.Spec.Containers {
		if _, ok := create(c); !ok {
			dropCreated(out, name, created)
			return
		}
		created = append(created, c.Name)
	}
}

// dropCreated forgets the outcomes of a refused pod's other containers: like the plan's, they
// never run as a pod.
func dropCreated(out map[string]outcome, pod string, names []string) {
	for _, n := range names {
		delete(out, pod+"/"+n)
	}
}

// webhook admits pod as the API server would with podfence's webhook: the mutation applied,
// then validated.
func webhook(pod *corev1.Pod, cfg *admission.Config) (*corev1.Pod, error) {
	ops, _, err := admission.Mutate(pod, cfg)
	if err != nil {
		return nil, err
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	doc, err := json.Marshal(pod)
	if err != nil {
		return nil, err
	}
	if len(ops) > 0 {
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, err
		}
		if doc, err = p.Apply(doc); err != nil {
			return nil, err
		}
	}
	var out corev1.Pod
	if err := json.Unmarshal(doc, &out); err != nil {
		return nil, err
	}
	return &out, admission.Validate(&out, cfg)
}

// randomPod is pod i of a seed: up to two init containers (each a sidecar or not) and one to
// three app containers, each asking for a random mix of pools (under either domain, one of
// the default type now and then), some with an SGX EPC limit, and now and then a process
// pinning annotation (podfence's or CPU-Pooler's key) naming some of them.
func randomPod(rng *rand.Rand, seed, i int) *corev1.Pod {
	name := fmt.Sprintf("p%d-%d", seed, i)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}}
	n := 0
	ctr := func() corev1.Container {
		n++
		c := corev1.Container{Name: fmt.Sprintf("c%d", n), Resources: corev1.ResourceRequirements{Limits: randomPools(rng)}}
		if rng.IntN(4) == 0 {
			c.Resources.Limits[admission.ResourceEPC] = resource.MustParse("1Mi")
		}
		return c
	}
	for range rng.IntN(3) {
		c := ctr()
		if rng.IntN(2) == 0 {
			always := corev1.ContainerRestartPolicyAlways
			c.RestartPolicy = &always
		}
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
	}
	for range 1 + rng.IntN(3) {
		pod.Spec.Containers = append(pod.Spec.Containers, ctr())
	}
	if rng.IntN(3) == 0 {
		key := pinning.Key
		if rng.IntN(2) == 0 {
			key = pinning.CPUPoolerKey
		}
		var entries []pinning.Container
		for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
			if rng.IntN(2) == 0 {
				entries = append(entries, pinning.Container{Name: c.Name, Processes: processes(rng, c)})
			}
		}
		if len(entries) > 0 {
			pod.Annotations = map[string]string{key: pinning.Encode(entries...)}
		}
	}
	return pod
}

// randomPools is a random set of pool resources.
func randomPools(rng *rand.Rand) corev1.ResourceList {
	l := corev1.ResourceList{}
	set := func(domain, pool string, n int) {
		l[corev1.ResourceName(domain+"/"+pool)] = *resource.NewQuantity(int64(n), resource.DecimalSI)
	}
	switch rng.IntN(9) {
	case 0:
	case 1:
		set(pools.DefaultDomain, "shared_s", 1+rng.IntN(1200))
	case 2:
		set(pools.DefaultDomain, "exclusive_a", 1+rng.IntN(3))
	case 3:
		set(pools.DefaultDomain, "exclusive_b", 1+rng.IntN(5))
	case 4:
		set(pools.DefaultDomain, "exclusive_a", 1+rng.IntN(2))
		set(pools.DefaultDomain, "shared_s", 1+rng.IntN(600))
	case 5:
		set(pools.CPUPoolerDomain, "exclusive_b", 1+rng.IntN(2))
	case 6:
		set(pools.DefaultDomain, "default", 1)
	case 7:
		set(pools.DefaultDomain, "exclusive_a", 1)
		set(pools.DefaultDomain, "exclusive_b", 1)
	default:
		l[corev1.ResourceCPU] = resource.MustParse("500m")
	}
	return l
}

// processes is a pinning entry for c: one process per pool it asks for (its whole amount, or
// now and then one more), or one default-pool process.
func processes(rng *rand.Rand, c corev1.Container) []pinning.Process {
	var procs []pinning.Process
	var names []string
	for name := range c.Resources.Limits {
		names = append(names, string(name))
	}
	slices.Sort(names)
	for _, name := range names {
		pool, ok := pools.ParseResourceName(name)
		if !ok || pools.TypeOf(pool) == allocation.TypeDefault {
			continue
		}
		q := c.Resources.Limits[corev1.ResourceName(name)]
		n := int(q.Value()) + rng.IntN(4)/3
		procs = append(procs, pinning.Process{Path: "/bin/p" + strconv.Itoa(len(procs)), Pool: pool, CPUs: n})
	}
	if len(procs) == 0 {
		procs = []pinning.Process{{Path: "/bin/p", Pool: "default", CPUs: 1}}
	}
	return procs
}

// podsYAML renders pods for a failure message.
func podsYAML(pods []*corev1.Pod) string {
	var b strings.Builder
	for _, p := range pods {
		doc, _ := json.Marshal(p)
		b.Write(doc)
		b.WriteString("\n")
	}
	return b.String()
}

// runPodUID starts a pod sandbox with the given UID.
func (rt *runtime) runPodUID(name, uid string, annotations map[string]string) *api.PodSandbox {
	rt.tb.Helper()
	id := rt.nextID("pod")
	pod := &api.PodSandbox{Id: id, Name: name, Uid: uid, Namespace: "ns", Annotations: annotations}
	b := rt.nri.BlockPluginSync()
	defer b.Unblock()
	if err := rt.nri.RunPodSandbox(context.Background(), &api.RunPodSandboxRequest{Pod: pod}); err != nil {
		rt.tb.Fatalf("RunPodSandbox %s: %v", name, err)
	}
	rt.mu.Lock()
	rt.pods[id] = pod
	rt.mu.Unlock()
	return pod
}

// createCtr creates and starts a container with args and env; the runtime applies the
// adjustment's CPU settings.
func (rt *runtime) createCtr(pod *api.PodSandbox, name string, args, env []string) (*api.Container, *api.ContainerAdjustment, error) {
	id := rt.nextID("ctr")
	ctr := &api.Container{Id: id, PodSandboxId: pod.Id, Name: name, State: api.ContainerState_CONTAINER_CREATED, Args: args, Env: env,
		Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{}}}}
	b := rt.nri.BlockPluginSync()
	rpl, err := rt.nri.CreateContainer(context.Background(), &api.CreateContainerRequest{Pod: pod,
		Container: proto.Clone(ctr).(*api.Container)})
	b.Unblock()
	if err != nil {
		return nil, nil, err
	}
	applyCPU(ctr.Linux.Resources.Cpu, rpl.GetAdjust().GetLinux().GetResources().GetCpu())
	ctr.State = api.ContainerState_CONTAINER_RUNNING
	rt.mu.Lock()
	rt.ctrs[id] = ctr
	rt.mu.Unlock()
	rt.startCtr(ctr)
	return ctr, rpl.GetAdjust(), nil
}

// podsNow returns the runtime's pods by ID.
func (rt *runtime) podsNow() map[string]*api.PodSandbox {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := make(map[string]*api.PodSandbox, len(rt.pods))
	for id, p := range rt.pods {
		out[id] = p
	}
	return out
}

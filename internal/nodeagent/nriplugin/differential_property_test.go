package nriplugin_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"

	"github.com/podfence/podfence/internal/admission"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/dra/grant"
	"github.com/podfence/podfence/internal/nodeagent"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
	"github.com/podfence/podfence/podapi"
)

// diffSeedsEnv, when set to a number, runs that many seeds of TestPlanAgentDifferential
// instead of the fixed set (PODFENCE_DIFF_SEEDS=5000 go test -run Differential ./internal/nodeagent/nriplugin/).
const diffSeedsEnv = "PODFENCE_DIFF_SEEDS"

// diffLayout is a node's pool config for the differential test, on the test topology.
type diffLayout struct {
	yaml   string
	domain string   // the resource domain pods use most (the config's resourceBaseName, else podfence.io)
	pools  []string // pools pods ask for as resources: exclusive ones, then the shared one if any
	dra    []string // pools pods ask for through DRA claims
}

var diffLayouts = []diffLayout{
	{ // podfence's own: pools list threads, an exclusive pool of each thread policy
		yaml: `
exclusiveCPUs: threads
unpooledCPUs: default
pools:
  default:     {cpus: "0,8"}
  shared_s:    {cpus: "1,9"}
  exclusive_a: {cpus: "2-3,10-11", hyperThreadingPolicy: multiThreaded}
  exclusive_b: {cpus: "4-7,12-15", hyperThreadingPolicy: singleThreaded}
`,
		domain: pools.DefaultDomain, pools: []string{"exclusive_a", "exclusive_b", "shared_s"},
	},
	{ // CPU-Pooler's meaning (pools list cores) and domain, and pools requested through DRA
		yaml: `
resourceBaseName: nokia.k8s.io
pools:
  default:     {cpus: "0,8"}
  shared_s:    {cpus: "1,9", requestAPI: dra}
  exclusive_a: {cpus: "2-3", hyperThreadingPolicy: multiThreaded}
  exclusive_b: {cpus: "4-5"}
  exclusive_d: {cpus: "6-7", hyperThreadingPolicy: multiThreaded, requestAPI: dra}
`,
		domain: pools.CPUPoolerDomain, pools: []string{"exclusive_a", "exclusive_b"}, dra: []string{"exclusive_d", "shared_s"},
	},
}

// diffEnvNames are the variables the planner decides (plan.Decision.Env); the agent's
// extensions may add others.
var diffEnvNames = []string{plan.EnvExclusiveCPUs, plan.EnvSharedCPUs, plan.EnvCPUPools, plan.EnvContainerName}

// agentOptions are the agent's as `podfence agent` runs it, less what needs the host: the
// process starter wraps pinned containers, grants are read from dra.
func agentOptions(dra string) nriplugin.Options {
	return nriplugin.Options{DRAStateDir: dra, Extensions: []nriplugin.Extension{nodeagent.Starter{Binary: "/opt/podfence/bin/podfence"}}}
}

// outcome is what one container got, or why it was refused, in words both sides give.
type outcome struct {
	cpus, mems, quota, env string
	refused                string // the refusal code, "" if created
	reason                 string // why: the planner's refusal text, the agent's error (which ends with it)
}

func (o outcome) String() string {
	if o.refused != "" {
		return "refused " + o.refused
	}
	return fmt.Sprintf("cpus=%s mems=%s quota=%s env=[%s]", o.cpus, o.mems, o.quota, o.env)
}

// TestPlanAgentDifferential: random pods, admitted by the webhook (Mutate, then Validate: a
// pod it refuses reaches no node), are planned by `podfence plan`'s code path (plan.PlanPods
// on the pod manifests and the node's DRA grants) and created through the real NRI runtime
// side against the agent, as the kubelet and containerd create them: init containers in
// order, a plain one stopped (its exit) before the next container, a sidecar left running,
// then the app containers, each with the markers of the DRA claims it uses; a pod with a
// refused container is removed whole. Both must give every container the same cpuset, memory
// nodes, CFS quota and CPU environment, and refuse the same containers with the same code and
// reason. After each seed every pod is removed and the agent must hold nothing. Each layout
// runs under each CFS quota policy, with the seeds spread over them.
func TestPlanAgentDifferential(t *testing.T) {
	seeds := 60
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
	stats := map[string]int{}
	runs := len(diffLayouts) * len(plan.CFSQuotaModes())
	run := 0
	for _, l := range diffLayouts {
		cfg, err := pools.Parse("differential pools", []byte(l.yaml))
		if err != nil {
			t.Fatal(err)
		}
		layout, err := pools.Resolve(cfg, topo)
		if err != nil {
			t.Fatal(err)
		}
		d := &differ{t: t, rt: rt, layout: l, admit: &admission.Config{Pools: []*pools.Config{cfg}},
			store: grant.Store{Dir: t.TempDir()}, stats: stats}
		for _, q := range plan.CFSQuotaModes() { // one agent each, the seeds of the run in turn
			d.node = plan.NewNode(topo, layout, plan.Policy{CFSQuotas: q})
			d.agent = startAgentLog(t, rt, d.node, nritest.NoCheckpoint{}, agentOptions(d.store.Dir), discard)
			for seed := run; seed < seeds; seed += runs {
				d.seed(seed)
			}
			d.agent.stop()
			run++
		}
	}
	t.Logf("%d seeds: %v", seeds, stats)
}

// differ runs seeds on one node and agent.
type differ struct {
	t      *testing.T
	rt     *runtime
	layout diffLayout
	admit  *admission.Config
	store  grant.Store
	node   *plan.Node
	agent  *agentRun
	stats  map[string]int
}

// seed plans and creates one seed's pods and compares the outcomes.
func (d *differ) seed(seed int) {
	t := d.t
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(seed), 28))
	var admitted []*corev1.Pod
	var grants []grant.Grant
	for i := range 3 + rng.IntN(5) {
		pod, g := d.randomPod(rng, seed, i)
		pod, err := webhook(pod, d.admit)
		if err != nil {
			d.stats["pods refused by the webhook"]++
			continue
		}
		admitted = append(admitted, pod)
		for _, g := range g {
			if err := d.store.Put(g); err != nil {
				t.Fatal(err)
			}
			grants = append(grants, g)
		}
	}
	want := planned(d.node.PlanPods(plan.NewLedger(d.node), admitted, grants...))
	got := map[string]outcome{}
	for _, pod := range admitted {
		d.createPod(rng, pod, got)
	}
	for _, k := range slices.Sorted(mapsKeys(want, got)) {
		w, g := want[k], got[k]
		if w.refused != "" {
			d.stats["containers refused "+w.refused]++
		} else {
			d.stats["containers placed"]++
		}
		if w.String() != g.String() || !strings.HasSuffix(g.reason, w.reason) {
			t.Errorf("seed %d: %s:\n  podfence plan: %s %s\n  agent:         %s %s", seed, k, w, w.reason, g, g.reason)
		}
	}
	if t.Failed() {
		t.Fatalf("seed %d: pods:\n%s\ngrants: %+v", seed, podsJSON(admitted), grants)
	}
	for _, pod := range d.rt.podsNow() {
		d.rt.removePod(pod)
	}
	if held := d.agent.Allocations(); len(held) > 0 {
		t.Fatalf("seed %d: every pod removed, the agent still holds %v", seed, held)
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
		out[r.Pod+"/"+r.Container] = outcome{refused: r.Code, reason: r.Reason}
	}
	return out
}

func quotaText(quota, period int64) string {
	if quota <= 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%d", quota, period)
}

// createPod runs pod through the runtime as the kubelet does and records each container's
// outcome; a refused container ends the pod, which is removed. Now and then a sidecar crashes
// right after it started, and comes back (a new instance) once the pod's other containers
// run: what it runs with then is its outcome. Only a sidecar the webhook named
// (podfence.io/sidecars) crashes: the agent cannot tell another from an app container.
func (d *differ) createPod(rng *rand.Rand, pod *corev1.Pod, out map[string]outcome) {
	rt := d.rt
	sb := rt.runPodUID(pod.Name, string(pod.UID), pod.Annotations)
	name := pod.Namespace + "/" + pod.Name
	var created []string
	var crashed []corev1.Container
	create := func(c corev1.Container) bool {
		ctr, err := rt.createCtr(sb, c.Name, []string{"/bin/" + c.Name}, claimMarkers(pod, c))
		if err != nil {
			out[name+"/"+c.Name] = outcome{refused: refusalCode(err), reason: err.Error()}
			for _, n := range created { // like the plan's, they never run as a pod
				delete(out, name+"/"+n)
			}
			rt.removePod(sb)
			return false
		}
		var env []string
		for _, kv := range ctr.adjust.GetEnv() {
			if slices.Contains(diffEnvNames, kv.Key) {
				env = append(env, kv.Key+"="+kv.Value)
			}
		}
		out[name+"/"+c.Name] = outcome{cpus: ctr.cpus(), mems: ctr.mems(), quota: quotaText(ctr.quota(), int64(ctr.period())),
			env: strings.Join(env, " ")}
		created = append(created, c.Name)
		init := slices.ContainsFunc(pod.Spec.InitContainers, func(i corev1.Container) bool { return i.Name == c.Name })
		switch {
		case init && !plan.IsSidecar(c):
			rt.stopCtr(ctr.ctr) // it ran to completion: its exit reaches the agent as StopContainer
		case init && podapi.IsSidecar(pod.Annotations, c.Name) && rng.IntN(3) == 0 &&
			!slices.ContainsFunc(crashed, func(x corev1.Container) bool { return x.Name == c.Name }):
			rt.stopCtr(ctr.ctr) // a sidecar crashed
			crashed = append(crashed, c)
		}
		return true
	}
	for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
		if !create(c) {
			return
		}
	}
	for _, c := range crashed {
		if !create(c) {
			return
		}
	}
}

// refusalCode classifies the agent's error as the planner codes its refusals (plan.refusalOf).
func refusalCode(err error) string {
	msg := err.Error()
	if _, rest, ok := strings.Cut(msg, " refused ("); ok {
		code, _, _ := strings.Cut(rest, ")")
		return code
	}
	if strings.Contains(msg, ": DRA claim ") {
		return plan.CodeDRAClaim
	}
	return plan.CodeInvalidRequest
}

// claimMarkers is the environment the CDI devices of c's DRA claims give it: one marker per
// claim of the pod's that c names (the test's claims are named for their pod).
func claimMarkers(pod *corev1.Pod, c corev1.Container) []string {
	if len(c.Resources.Claims) == 0 {
		return nil
	}
	return []string{claimEnv("claim-" + string(pod.UID))}
}

// webhook admits pod as the API server would with podfence's webhook: the mutation applied,
// then validated, when the pod meets the webhook configuration's match conditions.
func webhook(pod *corev1.Pod, cfg *admission.Config) (*corev1.Pod, error) {
	if !carriesPodfence(pod) {
		return pod, nil
	}
	ops, _, err := admission.Mutate(pod, cfg)
	if err != nil {
		return nil, err
	}
	doc, err := json.Marshal(pod)
	if err != nil {
		return nil, err
	}
	if len(ops) > 0 {
		patch, err := json.Marshal(ops)
		if err != nil {
			return nil, err
		}
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

// carriesPodfence is deploy/webhook/mutating.yaml's match condition: a container asks for a
// podfence.io/ or nokia.k8s.io/ resource or sgx.intel.com/epc, or the pod has an annotation of
// those domains or epc-limit.nri.io.
func carriesPodfence(pod *corev1.Pod) bool {
	ours := func(k string) bool {
		return strings.HasPrefix(k, pools.DefaultDomain+"/") || strings.HasPrefix(k, pools.CPUPoolerDomain+"/")
	}
	for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
		for _, l := range []corev1.ResourceList{c.Resources.Limits, c.Resources.Requests} {
			for r := range l {
				if ours(string(r)) || r == admission.ResourceEPC {
					return true
				}
			}
		}
	}
	for k := range pod.Annotations {
		if ours(k) || strings.HasPrefix(k, "epc-limit.nri.io") {
			return true
		}
	}
	return false
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

// podsJSON renders pods for a failure message.
func podsJSON(pods []*corev1.Pod) string {
	var b strings.Builder
	for _, p := range pods {
		doc, _ := json.Marshal(p)
		b.Write(doc)
		b.WriteString("\n")
	}
	return b.String()
}

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/example"
	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/dra/grant"
	"github.com/podfence/podfence/internal/manifest"
	"github.com/podfence/podfence/internal/nodeagent/checkpoint"
)

// TestPlanEmbeddedExample runs `podfence plan` with no arguments, as the README's first
// command does, and checks the facts the example is there to show.
func TestPlanEmbeddedExample(t *testing.T) {
	var out bytes.Buffer
	if err := runPlan(&out, planFlags{output: "text"}, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Node: 2 sockets, 2 NUMA nodes, 16 cores, 32 CPUs (SMT2), 2 L3 groups",
		"telco/dpdk-router  fwd           exclusive_dp        4-5,20-21  n0: c4{4,20} c5{5,21}",
		"EXCLUSIVE_CPUS=4,5,20,21",
		"telco/rt-control   loop          exclusive_rt        12-13      n1: c12{12} c13{13}; idles 28-29",
		"shop/billing       app           shared_caas (500m)  2-3,18-19",
		"50000/100000µs",
		`pod research/ml-batch container "train" (NotEnoughCPUs): exclusive pool "exclusive_dp": not enough free CPUs: requested=10, free=9`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plan output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestPlanJSONAndInputs(t *testing.T) {
	dir := t.TempDir()
	pools := filepath.Join(dir, "poolconfig-a.yaml")
	os.WriteFile(pools, []byte("pools:\n  exclusive_a: {cpus: \"2-3\", hyperThreadingPolicy: multiThreaded}\n"), 0o644)
	pods := filepath.Join(dir, "pods.yaml")
	os.WriteFile(pods, []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: c, resources: "+
		"{limits: {podfence.io/exclusive_a: \"1\"}}}\n"), 0o644)
	var out bytes.Buffer
	err := runPlan(&out, planFlags{topology: "sockets=1,cores=4", pools: dir, output: "json"}, []string{pods})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Containers []struct {
			Decision struct{ CPUs string } `json:"decision"`
		} `json:"containers"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Containers) != 1 || got.Containers[0].Decision.CPUs != "2" {
		t.Errorf("json = %s, want one container on CPU 2", out.String())
	}
	for _, tc := range []struct {
		f    planFlags
		args []string
		err  string
	}{
		{planFlags{output: "yaml"}, nil, `flag --output "yaml": want text or json`},
		{planFlags{output: "text", topology: "/no/such/dir"}, nil, `flag --topology "/no/such/dir": want "host", a sysfs root directory`},
		{planFlags{output: "text", labels: []string{"novalue"}}, nil, `flag --node-label "novalue": want key=value`},
		{planFlags{output: "text"}, []string{filepath.Join(dir, "missing.yaml")}, "read pods: open"},
		{planFlags{output: "text", checkpoint: filepath.Join(dir, "nocp")}, nil, "flag --checkpoint: stat"},
	} {
		if err := runPlan(&bytes.Buffer{}, tc.f, tc.args); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("runPlan(%+v) err = %v, want %q", tc.f, err, tc.err)
		}
	}
}

// TestPlanFromCheckpoint: recorded allocations are held before planning, and records that no
// longer fit the node stop the plan with the checkpoint's advice.
func TestPlanFromCheckpoint(t *testing.T) {
	dir := t.TempDir()
	pools := filepath.Join(dir, "poolconfig-a.yaml")
	os.WriteFile(pools, []byte("pools:\n  exclusive_a: {cpus: \"2-3\", hyperThreadingPolicy: multiThreaded}\n"), 0o644)
	pods := filepath.Join(dir, "pods.yaml")
	os.WriteFile(pods, []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: c, resources: "+
		"{limits: {podfence.io/exclusive_a: \"1\"}}}\n"), 0o644)
	for _, tc := range []struct{ name, pool, want, err string }{
		{name: "held CPU is skipped", pool: "exclusive_a", want: `"cpus": "3"`},
		{name: "pool gone", pool: "exclusive_gone",
			err: `pool "exclusive_gone" (CPU 2) is not in the pool config: restore the pool config, or drain the node and delete`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := filepath.Join(t.TempDir(), "cp")
			store, err := checkpoint.Open(cp)
			if err != nil {
				t.Fatal(err)
			}
			if err := store.Put(allocation.Allocation{PodUID: "old", Container: "x", Pool: tc.pool, Type: allocation.TypeExclusive,
				CPUs: cpuset.New(2)}); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			err = runPlan(&out, planFlags{topology: "sockets=1,cores=4", pools: pools, checkpoint: cp, output: "json"}, []string{pods})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !strings.Contains(out.String(), tc.want) {
				t.Errorf("err %v, output lacks %s:\n%s", err, tc.want, out.String())
			}
		})
	}
}

// TestPlanCFSQuotasAndDomain: --cfs-quotas picks whose quota the plan shows (all, CPU-Pooler's
// default: an exclusive container too), and pods ask under the config's resourceBaseName.
func TestPlanCFSQuotasAndDomain(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "poolconfig-a.yaml"), []byte("resourceBaseName: cpu.example.com\npools:\n  default: {cpus: \"0\"}\n"+
		"  exclusive_a: {cpus: \"1-2\", hyperThreadingPolicy: multiThreaded}\n"), 0o644)
	pods := filepath.Join(dir, "pods.yaml")
	os.WriteFile(pods, []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: c, resources: "+
		"{limits: {cpu.example.com/exclusive_a: \"1\"}}}\n"), 0o644)
	for _, tc := range []struct {
		quotas, want string
	}{
		{"", "110000/100000µs"}, {"all", "110000/100000µs"}, {"shared", "  -  "}, {"sum", "  -  "},
	} {
		f := planFlags{topology: "sockets=1,cores=4,threads=2", pools: dir, output: "text"}
		if tc.quotas != "" {
			if err := f.cfsQuotas.Set(tc.quotas); err != nil {
				t.Fatal(err)
			}
		}
		var out bytes.Buffer
		if err := runPlan(&out, f, []string{pods}); err != nil {
			t.Fatal(err)
		}
		row := ""
		for _, line := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(line, "default/p") {
				row = line
			}
		}
		if !strings.Contains(row, "1,5") || !strings.Contains(row, tc.want) || !strings.Contains(row, "CPU_POOLS=exclusive") {
			t.Errorf("--cfs-quotas %q: row %q, want CPUs 1,5, quota %q and CPU_POOLS", tc.quotas, row, tc.want)
		}
	}
}

// TestPlanHostIsolation: a captured sysfs tree of a node booted with isolcpus= gives the
// isolated CPUs to the plan (header, JSON), which keeps them out of the default pool and
// gives an isolatedCPUs: require pool only them.
func TestPlanHostIsolation(t *testing.T) {
	dir := t.TempDir()
	pools := filepath.Join(dir, "poolconfig-a.yaml")
	os.WriteFile(pools, []byte("unpooledCPUs: default\npools:\n  exclusive_r: {cpus: \"1-3\", isolatedCPUs: require}\n"), 0o644)
	pods := filepath.Join(dir, "pods.yaml")
	os.WriteFile(pods, []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: c, resources: "+
		"{limits: {podfence.io/exclusive_r: \"3\"}}}\n"), 0o644)
	sysfs := "../../internal/cpu/topology/testdata/sysfs/isolcpus-smt-apart" // isolcpus 2-7,18-23
	var out bytes.Buffer
	if err := runPlan(&out, planFlags{topology: sysfs, pools: pools, output: "text"}, []string{pods}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Host isolation: isolcpus domain 2-7,18-23 (not load balanced), nohz_full 2-7,18-23, rcu_nocbs 2-7,18-23\n",
		`pod default/p container "c" (NotEnoughIsolatedCPUs): exclusive pool "exclusive_r" takes only CPUs the host isolated ` +
			`(isolatedCPUs: require): not enough whole free cores: requested=3 CPUs needs 3 whole cores (singleThreaded), ` +
			`whole free cores=2, free CPUs=4; its isolated CPUs free: 2-3,18-19 (of 2-3,18-19)`,
		`pool "default": CPUs 4-7,20-23 are isolated from the kernel's load balancing (isolcpus=): left out of the pool`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plan output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := runPlan(&out, planFlags{topology: "cores=4,isolcpus=nohz,managed_irq,3", pools: pools, output: "json"}, nil); err != nil {
		t.Fatal(err)
	}
	var got struct {
		HostIsolation struct{ NoHZFull, ManagedIRQ, Domain string } `json:"hostIsolation"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if h := got.HostIsolation; h.NoHZFull != "3" || h.ManagedIRQ != "3" || h.Domain != "" {
		t.Errorf("hostIsolation = %+v, want nohz_full and managed_irq 3, no domain", h)
	}
}

// TestPlanDRAClaims: with --dra-state-dir, a container gets the CPUs the grant of its pod's
// claim gives (the claim named directly, or made from a template as the pod's status says), as
// the agent gives them; a claim without a grant is another driver's and changes nothing.
func TestPlanDRAClaims(t *testing.T) {
	dir := t.TempDir()
	pools := filepath.Join(dir, "poolconfig-a.yaml")
	os.WriteFile(pools, []byte("pools:\n  exclusive_d: {cpus: \"1-3\", hyperThreadingPolicy: multiThreaded, requestAPI: dra}\n"), 0o644)
	pods := filepath.Join(dir, "pods.yaml")
	os.WriteFile(pods, []byte(`apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ns, uid: pod-1}
spec:
  resourceClaims:
  - {name: cpus, resourceClaimName: c-direct}
  - {name: gpu, resourceClaimName: some-gpu}
  containers:
  - {name: a, resources: {claims: [{name: cpus}, {name: gpu}]}}
---
apiVersion: v1
kind: Pod
metadata: {name: q, namespace: ns, uid: pod-2}
spec:
  resourceClaims:
  - {name: cpus, resourceClaimTemplateName: two-cpus}
  containers:
  - {name: b, resources: {claims: [{name: cpus}]}}
status:
  resourceClaimStatuses:
  - {name: cpus, resourceClaimName: q-cpus-x7}
`), 0o644)
	store := grant.Store{Dir: filepath.Join(dir, "claims")}
	for _, g := range []grant.Grant{
		{ClaimUID: "u1", Namespace: "ns", Name: "c-direct", PodUIDs: []string{"pod-1"}, Exclusive: map[string]cpuset.CPUSet{"exclusive_d": cpuset.New(3)}},
		{ClaimUID: "u2", Namespace: "ns", Name: "q-cpus-x7", PodUIDs: []string{"pod-2"}, Exclusive: map[string]cpuset.CPUSet{"exclusive_d": cpuset.New(1, 2)}},
	} {
		if err := store.Put(g); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := runPlan(&out, planFlags{topology: "sockets=1,cores=4", pools: pools, draState: store.Dir, output: "text"},
		[]string{pods}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"EXCLUSIVE_CPUS=3 ", "EXCLUSIVE_CPUS=1,2 "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plan output lacks %q:\n%s", want, out.String())
		}
	}
	err := runPlan(&out, planFlags{output: "text", draState: filepath.Join(dir, "none")}, nil)
	if err == nil || !strings.Contains(err.Error(), "flag --dra-state-dir: stat") {
		t.Errorf("err %v, want the missing directory named", err)
	}
}

// TestPlanREADMEFirstCommand: `podfence plan` with no arguments, the README's first command,
// prints exactly the plan the README shows (the golden output), and so does the example's
// node named by its spec.
func TestPlanREADMEFirstCommand(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "`podfence plan` with no arguments plans the embedded example")
	_, after, ok2 := strings.Cut(after, "\n```\n")
	golden, _, ok3 := strings.Cut(after, "```\n")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README.md: no plan output block after \"`podfence plan` with no arguments plans the embedded example\"")
	}
	for _, f := range []planFlags{{output: "text"}, {output: "text", topology: example.Topology}} {
		var out bytes.Buffer
		if err := runPlan(&out, f, nil); err != nil {
			t.Fatal(err)
		}
		if out.String() != golden {
			t.Errorf("podfence plan --topology %q prints\n%s\nREADME.md shows\n%s", f.topology, out.String(), golden)
		}
	}
}

// TestPlanDerivedPools: without --pools, plan on any node plans the sample pods on a layout
// derived from the node, says so in its header with how to use one's own, and never fails;
// the plan is valid: every container runs inside its pool, no two hold the same exclusive
// CPU, and what a small node lacks is a refusal, not an error.
func TestPlanDerivedPools(t *testing.T) {
	for _, spec := range []string{
		"cores=1", "cores=2", "cores=1,threads=2", "cores=4", "cores=2,threads=2", "sockets=4,cores=1",
		"sockets=2,numa=4,cores=16,threads=2", "cores=64", "sockets=8,cores=8", "cores=32,threads=2,numbering=adjacent",
		"sockets=2,numa=8,cores=128,threads=2", "sockets=8,cores=64", "sockets=4,numa=8,cores=32,threads=4",
		"cores=8,threads=2,isolcpus=managed_irq,domain,6-7,14-15",
	} {
		t.Run(spec, func(t *testing.T) { checkDerivedPlan(t, spec) })
	}
	fixtures, err := filepath.Glob("../../internal/cpu/topology/testdata/sysfs/*")
	if err != nil || len(fixtures) == 0 {
		t.Fatalf("sysfs fixtures: %v", err)
	}
	for _, dir := range fixtures {
		t.Run(filepath.Base(dir), func(t *testing.T) { checkDerivedPlan(t, dir) })
	}
	t.Run("host", func(t *testing.T) {
		if _, err := topology.DiscoverHost("/sys", "/proc"); err != nil {
			t.Skipf("this machine's topology: %v", err)
		}
		checkDerivedPlan(t, "host")
	})
}

// checkDerivedPlan runs plan on node (a --topology value) without --pools, in text and JSON:
// it succeeds, the header names the pool layout derived from the node (the embedded one on
// the example's node), and the plan is valid (checkValidPlan).
func checkDerivedPlan(t *testing.T, node string) {
	t.Helper()
	var text bytes.Buffer
	if err := runPlan(&text, planFlags{topology: node, output: "text"}, nil); err != nil {
		t.Fatalf("podfence plan --topology %s: %v", node, err)
	}
	topo, err := loadTopology(node)
	if err != nil {
		t.Fatal(err)
	}
	want := "Pool config: " + derivedPools + "\n"
	if isExampleNode(topo) {
		want = "Pool config: embedded " + example.PoolConfigName + "\n"
	}
	if !strings.Contains(text.String(), want) {
		t.Errorf("header lacks %q:\n%s", want, text.String())
	}
	var out bytes.Buffer
	if err := runPlan(&out, planFlags{topology: node, output: "json"}, nil); err != nil {
		t.Fatal(err)
	}
	checkValidPlan(t, out.Bytes())
}

// checkValidPlan checks a JSON plan of the sample pods: each container's CPUs are in its
// pool, exclusive CPUs are held once, every sample container is placed or its pod refused,
// and refusals are for a pool the node lacks or too few CPUs.
func checkValidPlan(t *testing.T, js []byte) {
	t.Helper()
	var rep struct {
		Containers []struct {
			Pod, Container string
			Decision       struct {
				Allocation struct{ Pool, Type string }
				CPUs       string
			}
		}
		Refusals []struct{ Pod, Code, Reason string }
		Pools    []struct{ Pool, CPUs string }
	}
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatal(err)
	}
	pools := map[string]cpuset.CPUSet{}
	for _, p := range rep.Pools {
		pools[p.Pool] = mustCPUs(t, p.CPUs)
	}
	held := cpuset.New()
	placed := map[string]bool{}
	for _, c := range rep.Containers {
		cpus, a := mustCPUs(t, c.Decision.CPUs), c.Decision.Allocation
		if pool, ok := pools[a.Pool]; !ok || cpus.IsEmpty() || !cpus.IsSubsetOf(pool) {
			t.Errorf("%s/%s: CPUs %s not in pool %q (%s)", c.Pod, c.Container, cpus, a.Pool, pool)
		}
		if a.Type == "exclusive" {
			if !held.Intersection(cpus).IsEmpty() {
				t.Errorf("%s/%s: CPUs %s already held", c.Pod, c.Container, held.Intersection(cpus))
			}
			held = held.Union(cpus)
		}
		placed[c.Pod] = true
	}
	for _, r := range rep.Refusals {
		switch r.Code {
		case "UnknownPool", "NotEnoughCPUs", "ExclusiveTooLarge":
		default:
			t.Errorf("pod %s refused (%s): %s", r.Pod, r.Code, r.Reason)
		}
		placed[r.Pod] = true
	}
	pods, err := manifest.ReadPods(bytes.NewReader(example.Pods), "example")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if name := p.Namespace + "/" + p.Name; !placed[name] {
			t.Errorf("pod %s neither placed nor refused", name)
		}
	}
}

func mustCPUs(t *testing.T, s string) cpuset.CPUSet {
	t.Helper()
	cpus, err := cpuset.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return cpus
}

// TestPlanPoolsDoNotFit: a pool config that does not fit the node says which file and which
// flags to change, then every problem.
func TestPlanPoolsDoNotFit(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "poolconfig-a.yaml")
	os.WriteFile(file, []byte("pools:\n  default: {cpus: \"0\"}\n  exclusive_a: {cpus: \"1,16-17\"}\n  shared_s: {cpus: \"18\"}\n"), 0o644)
	write := func(name, text string) string {
		name = filepath.Join(t.TempDir(), name)
		os.WriteFile(name, []byte(text), 0o644)
		return name
	}
	for _, tc := range []struct {
		f    planFlags
		want string
	}{
		{planFlags{topology: "cores=2", pools: dir}, "pool config " + file + " does not fit the node of --topology cores=2 " +
			"(1 socket, 1 NUMA node, 2 cores, 2 CPUs (no SMT), 1 L3 group): change the pools' cpus in " + file +
			", or pass --topology for the node it is written for, or leave out --pools to plan on a layout derived from the node\n" +
			file + `: pool "exclusive_a": cpus "1,16-17": CPUs 16-17 are not present on this node (present CPUs: 0-1)` + "\n" +
			file + `: pool "shared_s": cpus "18": CPU 18 is not present on this node (present CPUs: 0-1)`},
		{planFlags{topology: "cores=2,isolcpus=0", pools: write("poolconfig-b.yaml", `pools: {default: {cpus: "0"}, exclusive_b: {cpus: "1"}}`)},
			"does not fit the node of --topology cores=2,isolcpus=0 "},
		{planFlags{pools: write("poolconfig-c.yaml", `pools: {default: {cpus: "0-40"}}`), labels: []string{"a=b"}},
			"does not fit the node of --topology " + example.Topology + " (the default) "},
	} {
		tc.f.output = "text"
		err := runPlan(&bytes.Buffer{}, tc.f, nil)
		if tc.f.topology == "cores=2" && (err == nil || err.Error() != tc.want) {
			t.Errorf("err = %v\nwant %s", err, tc.want)
		} else if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want %q", err, tc.want)
		}
	}
}

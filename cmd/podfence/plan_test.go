package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/dra/grant"
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

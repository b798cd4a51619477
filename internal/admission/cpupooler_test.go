package admission

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/pinning"
	"github.com/podfence/podfence/podapi"
)

// CPU-Pooler's webhook tests and example pods (testdata/cpupooler, see its README) with what
// CPU-Pooler does with them: admitted or refused, and the environment and CFS limit it gives
// each container, which podfence's agent sets (checked here on the planner's decisions).

const peerDir = "testdata/cpupooler/"

// peerContainer is what CPU-Pooler gives one container: CPU_POOLS, CONTAINER_NAME and the CFS
// quota (µs per 100 ms; 0 for none) under --cfs-quotas all and shared.
type peerContainer struct {
	name, pools, ctrName string
	all, shared          int64
}

func TestPeerWebhookFixtures(t *testing.T) {
	srv := newTestServer(t, nil) // no pool configs: CPU-Pooler's webhook checks no pool names either
	for _, tc := range []struct {
		file       string
		admitted   bool
		config     string // the node's pool config, to plan the admitted pod on
		containers []peerContainer
	}{
		{file: "pod-spec-both-pool-types-req.json", admitted: true, config: peerDir + "poolconfig-fixture-a.yaml",
			containers: []peerContainer{{name: "cputestcontainer", pools: "exclusive&shared", ctrName: "cputestcontainer",
				all: 600000, shared: 20000}}},
		{file: "pod-spec-exclusive-pool-req.json", admitted: true, config: peerDir + "poolconfig-fixture-a.yaml",
			containers: []peerContainer{{name: "cputestcontainer", pools: "exclusive", ctrName: "cputestcontainer", all: 610000}}},
		{file: "pod-spec-shared-pool-req.json", admitted: true, config: peerDir + "poolconfig-fixture-b.yaml",
			containers: []peerContainer{{name: "cputestcontainer", pools: "shared", ctrName: "cputestcontainer", all: 16000,
				shared: 16000}, {name: "busyloop"}}},
		{file: "pod-spec-wrong-excl-pool-value-req.json", admitted: true, config: peerDir + "poolconfig-fixture-a.yaml",
			containers: []peerContainer{{name: "cputestcontainer", pools: "exclusive", ctrName: "cputestcontainer", all: 310000}}},
		{file: "pod-spec-wrong-pool-value-req.json"},
		{file: "pod-spec-pool-req-missing.json"},
		{file: "pod-spec-excl-pool-req-missing.json"},
		{file: "deployment-cpu-test.yaml", admitted: true, config: configMapEntry,
			containers: []peerContainer{{name: "sharedtestcontainer", pools: "shared", all: 16000, shared: 16000},
				{name: "exclusivetestcontainer", pools: "exclusive&shared", ctrName: "exclusivetestcontainer", all: 300000,
					shared: 10000}, {name: "defaulttestcontainer"}}},
		{file: "deployment-cpu-test-exclusive.yaml", admitted: true, config: configMapEntry,
			containers: []peerContainer{{name: "cputest-exclusive", pools: "exclusive", ctrName: "cputest-exclusive", all: 210000}}},
		{file: "deployment-cpu-test-shared-exclusive.yaml", admitted: true, config: configMapEntry,
			containers: []peerContainer{{name: "cputest-exclusive", pools: "exclusive&shared", ctrName: "cputest-exclusive",
				all: 300000, shared: 50000}}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			pod := peerPod(t, tc.file)
			_, raw, resp := post(t, srv, PathMutate, reviewJSON(t, pod))
			if resp == nil || !resp.Allowed {
				t.Fatalf("/mutate refused: %s", raw)
			}
			mutated := applyPatch(t, pod, resp.Patch)
			_, raw, resp = post(t, srv, PathValidate, reviewJSON(t, mutated))
			if resp == nil || resp.Allowed != tc.admitted {
				t.Fatalf("/validate: admitted %v, CPU-Pooler: %v: %s", resp != nil && resp.Allowed, tc.admitted, raw)
			}
			if !tc.admitted {
				if resp.Result.Code != http.StatusForbidden {
					t.Errorf("refused with code %d", resp.Result.Code)
				}
				return
			}
			for _, q := range []plan.CFSQuotas{plan.QuotasAll, plan.QuotasShared} {
				node := peerPlanNode(t, tc.config, q)
				decided := planPod(t, node, mutated)
				for _, want := range tc.containers {
					d := decided[want.name]
					quota := want.all
					if q == plan.QuotasShared {
						quota = want.shared
					}
					got := fmt.Sprintf("CPU_POOLS=%q CONTAINER_NAME=%q quota %d", d.EnvValue(plan.EnvCPUPools),
						d.EnvValue(plan.EnvContainerName), d.Quota)
					if w := fmt.Sprintf("CPU_POOLS=%q CONTAINER_NAME=%q quota %d", want.pools, want.ctrName, quota); got != w {
						t.Errorf("--cfs-quotas %s, container %s: %s; CPU-Pooler: %s", q, want.name, got, w)
					}
				}
			}
		})
	}
}

// configMapEntry names the controller entry of CPU-Pooler's example ConfigMap.
const configMapEntry = "configmap:poolconfig-controller.yaml"

// peerPod reads a fixture: the pod of an AdmissionReview (JSON) or a pod manifest (YAML).
func peerPod(t *testing.T, file string) *corev1.Pod {
	t.Helper()
	data, err := os.ReadFile(peerDir + file)
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if strings.HasSuffix(file, ".json") {
		var review struct {
			APIVersion string `json:"apiVersion"`
			Request    struct {
				Object json.RawMessage `json:"object"`
			} `json:"request"`
		}
		if err := json.Unmarshal(data, &review); err != nil {
			t.Fatal(err)
		}
		if review.APIVersion != "admission.k8s.io/v1beta1" {
			t.Fatalf("apiVersion %q", review.APIVersion)
		}
		data = review.Request.Object
	}
	if err := yaml.Unmarshal(data, &pod); err != nil {
		t.Fatal(err)
	}
	if pod.Namespace == "" {
		pod.Namespace = "default"
	}
	return &pod
}

// peerPlanNode resolves a pool config (a file, or an entry of CPU-Pooler's example
// ConfigMap) on a 16-core SMT2 node, with the CFS quota mode q.
func peerPlanNode(t *testing.T, config string, q plan.CFSQuotas) *plan.Node {
	t.Helper()
	var data []byte
	if entry, ok := strings.CutPrefix(config, "configmap:"); ok {
		raw, err := os.ReadFile("../cpu/pools/testdata/cpupooler/deployment-cpu-pooler-config.yaml")
		if err != nil {
			t.Fatal(err)
		}
		var cm struct {
			Data map[string]string `json:"data"`
		}
		if err := yaml.Unmarshal(raw, &cm); err != nil {
			t.Fatal(err)
		}
		data = []byte(cm.Data[entry])
	} else {
		var err error
		if data, err = os.ReadFile(config); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := pools.Parse(config, data)
	if err != nil {
		t.Fatal(err)
	}
	topo, err := topology.Synthetic("cores=16,threads=2")
	if err != nil {
		t.Fatal(err)
	}
	layout, err := pools.Resolve(cfg, topo)
	if err != nil {
		t.Fatal(err)
	}
	return plan.NewNode(topo, layout, plan.Policy{CFSQuotas: q})
}

// planPod plans the pod's containers as the agent does, from the webhook's annotations.
func planPod(t *testing.T, node *plan.Node, pod *corev1.Pod) map[string]plan.Decision {
	t.Helper()
	reqs := map[string]plan.Request{}
	if v, ok := pod.Annotations[podapi.AnnotationCPUPools]; ok {
		var err error
		if reqs, err = podapi.ParseCPUPools(v); err != nil {
			t.Fatal(err)
		}
	}
	spec, _, err := pinning.FromAnnotations(pod.Annotations)
	if err != nil {
		t.Fatal(err)
	}
	ledger := plan.NewLedger(node)
	out := map[string]plan.Decision{}
	for _, c := range pod.Spec.Containers {
		_, pinned := spec.For(c.Name)
		d, err := node.Allocate(ledger, plan.Container{PodUID: "uid", Namespace: pod.Namespace, Pod: pod.Name, Name: c.Name,
			Request: reqs[c.Name], Pinned: pinned})
		if err != nil {
			t.Fatal(err)
		}
		out[c.Name] = d
	}
	return out
}

package admission

import (
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestRefusals checks every refusal message, through /mutate and /validate over HTTPS. Pool
// and EPC resource rules refuse in both; annotation and label rules in /validate only.
func TestRefusals(t *testing.T) {
	srv := newTestServer(t, testConfig(t))
	const (
		whole = `an exclusive pool counts whole CPUs: want a whole number from 1 to 8192, such as 2`
		milli = `the shared pool counts millicpu, one device each: want a whole number from 1 to 8192000, such as 500 for half a ` +
			`CPU (not 500m or 0.5)`
		mutated = `podfence's mutating webhook writes it from the resources: is it installed, and did it run?`
		app     = "annotation:" + pools1 + `={"app":{"exclusive_dp":2,"shared_caas":500}}`
	)
	// pinned is a pod whose container app asks for 2 exclusive CPUs and 500 millicpu.
	pinned := func(key, value string) *corev1.Pod {
		return testPod("shop", app, "annotation:"+key+"="+value,
			ctr("app", "podfence.io/exclusive_dp=2", "podfence.io/shared_caas=500"), ctr("side"))
	}
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		mutateOK bool // the mutating webhook admits it; only /validate refuses
		msg      string
	}{
		// Pool resources.
		{name: "fraction of an exclusive CPU", pod: testPod("s", ctr("app", "podfence.io/exclusive_dp=1500m")),
			msg: `container "app": resource podfence.io/exclusive_dp=1500m: ` + whole},
		{name: "no exclusive CPU", pod: testPod("s", ctr("app", "podfence.io/exclusive_dp=0")),
			msg: `container "app": resource podfence.io/exclusive_dp=0: ` + whole},
		{name: "more exclusive CPUs than any node has IDs", pod: testPod("s", ctr("app", "nokia.k8s.io/exclusive_dp=9000")),
			msg: `container "app": resource nokia.k8s.io/exclusive_dp=9k: ` + whole},
		{name: "one exclusive CPU more than the most", pod: testPod("s", ctr("app", "podfence.io/exclusive_dp=8193")),
			msg: `container "app": resource podfence.io/exclusive_dp=8193: ` + whole},
		{name: "one millicpu more than the most", pod: testPod("s", ctr("app", "podfence.io/shared_caas=8192001")),
			msg: `container "app": resource podfence.io/shared_caas=8192001: ` + milli},
		{name: "no millicpu", pod: testPod("s", ctr("app", "podfence.io/shared_caas=0")),
			msg: `container "app": resource podfence.io/shared_caas=0: ` + milli},
		{name: "every bad resource of a container, EPC too", pod: testPod("s", ctr("app", "req nokia.k8s.io/exclusive_rt=1",
			"podfence.io/exclusive_dp=0", "podfence.io/shared_caas=0.5", "podfence.io/shared_web=1", "sgx.intel.com/epc=0")),
			msg: `container "app": resource nokia.k8s.io/exclusive_rt=1: set in requests only: set limits (requests default to them)` +
				"\n" + `container "app": resource podfence.io/exclusive_dp=0: ` + whole +
				"\n" + `container "app": resource podfence.io/shared_caas=500m: ` + milli +
				"\n" + `container "app": resource sgx.intel.com/epc=0: want a whole number of bytes above 0, such as 64Mi (the ` +
				`agent reads 0 as no limit)`},
		{name: "negative", pod: testPod("s", ctr("app", "podfence.io/exclusive_dp=-1")),
			msg: `container "app": resource podfence.io/exclusive_dp=-1: ` + whole},
		{name: "requests differ from limits", pod: testPod("s", ctr("app", "podfence.io/exclusive_dp=2", "req podfence.io/exclusive_dp=1")),
			msg: `container "app": resource podfence.io/exclusive_dp=2: requests 1 differ from limits 2: want requests equal to limits`},
		{name: "requests without limits", pod: testPod("s", ctr("app", "req podfence.io/shared_caas=100")),
			msg: `container "app": resource podfence.io/shared_caas=100: set in requests only: set limits (requests default to them)`},
		{name: "shared pool in CPU units", pod: testPod("s", ctr("app", "podfence.io/shared_caas=0.5")),
			msg: `container "app": resource podfence.io/shared_caas=500m: ` + milli},
		{name: "two shared pools", pod: testPod("s", ctr("app", "nokia.k8s.io/shared_web=1", "podfence.io/shared_caas=1")),
			msg: `container "app": resource podfence.io/shared_caas=1: a container uses at most one shared pool, and it also asks for ` +
				`nokia.k8s.io/shared_web`},
		{name: "one pool under both domains", pod: testPod("s", ctr("app", "podfence.io/exclusive_dp=1", "nokia.k8s.io/exclusive_dp=1")),
			msg: `container "app": resource podfence.io/exclusive_dp=1: pool "exclusive_dp" is also asked for as ` +
				`nokia.k8s.io/exclusive_dp: name it once`},
		{name: "unknown pool", pod: testPod("s", "init", ctr("setup", "podfence.io/exclusive_x=1")),
			msg: `init container "setup": resource podfence.io/exclusive_x=1: pool "exclusive_x" is in no pool config; known pools: ` +
				`exclusive_dp, exclusive_rt, shared_caas, shared_web`},
		{name: "every problem, in container order", pod: testPod("s", ctr("app", "podfence.io/exclusive_dp=1.5"), ctr("b",
			"podfence.io/shared_caas=1m")),
			msg: `container "app": resource podfence.io/exclusive_dp=1500m: ` +
				`` + whole + "\n" + `container "b": resource podfence.io/shared_caas=1m: ` + milli},
		// The device plugin's annotation, set by a pod.
		{name: "a pod choosing its exclusive CPUs", pod: testPod("s", "annotation:podfence.io/exclusive-cpus=3",
			"annotation:podfence.io/exclusive-cpus.exclusive_dp=4-5", ctr("app")), mutateOK: true,
			msg: `annotation podfence.io/exclusive-cpus="3" is set on the pod: it is podfence's device plugin's, on containers only; ` +
				`a pod asks for exclusive CPUs with the resource podfence.io/<pool>` + "\n" +
				`annotation podfence.io/exclusive-cpus.exclusive_dp="4-5" is set on the pod: it is podfence's device plugin's, on ` +
				`containers only; a pod asks for exclusive CPUs with the resource podfence.io/<pool>`},
		// Isolation annotations: the agent would refuse the container; the webhook says so first.
		{name: "isolation: a value the agent cannot read", pod: testPod("s", "annotation:podfence.io/irq-load-balancing=off", ctr("app")), mutateOK: true,
			msg: `annotation podfence.io/irq-load-balancing="off": want "disable" (or "enable", the same as leaving it out; ` +
				`CRI-O's deprecated "true" means "disable")`},
		// EPC resources.
		{name: "EPC: a fraction of a byte", pod: testPod("s", "init", ctr("app", "sgx.intel.com/epc=1500m")),
			msg: `init container "app": resource sgx.intel.com/epc=1500m: want a whole number of bytes above 0, such as 64Mi (the ` +
				`agent reads 0 as no limit)`},
		{name: "EPC: zero", pod: testPod("s", ctr("app", "sgx.intel.com/epc=0")),
			msg: `container "app": resource sgx.intel.com/epc=0: want a whole number of bytes above 0, such as 64Mi (the agent reads ` +
				`0 as no limit)`},
		{name: "EPC: requests differ from limits", pod: testPod("s", ctr("app", "sgx.intel.com/epc=2Mi", "req sgx.intel.com/epc=1Mi")),
			msg: `container "app": resource sgx.intel.com/epc=2Mi: requests 1Mi differ from limits 2Mi: want requests equal to limits`},
		{name: "EPC: requests without limits", pod: testPod("s", ctr("app", "req sgx.intel.com/epc=1Mi")),
			msg: `container "app": resource sgx.intel.com/epc=1Mi: set in requests only: set limits (requests default to them)`},
		{name: "EPC: container name too long for the key", pod: testPod("s",
			ctr("a123456789a123456789a123456789a123456789a123456789abcd", "sgx.intel.com/epc=2")),
			msg: `container "a123456789a123456789a123456789a123456789a123456789abcd": resource sgx.intel.com/epc=2: the annotation ` +
				`epc-limit.nri.io/container.… allows container names of at most 53 characters; this one has 54`},
		// The cpu-pools annotation.
		{name: "cpu-pools missing", mutateOK: true, pod: testPod("s", ctr("app", "podfence.io/exclusive_dp=2")),
			msg: `annotation podfence.io/cpu-pools is missing; the pool resources call for {"app":{"exclusive_dp":2}}: ` + mutated},
		{name: "cpu-pools differs", mutateOK: true, pod: testPod("s", "annotation:"+pools1+`={"app":{"exclusive_dp":3}}`, ctr("app",
			"podfence.io/exclusive_dp=2")),
			msg: `annotation podfence.io/cpu-pools="{\"app\":{\"exclusive_dp\":3}}" differs from the pool resources, which call for ` +
				`{"app":{"exclusive_dp":2}}: ` + mutated},
		{name: "cpu-pools without pool resources", mutateOK: true, pod: testPod("s", "annotation:"+pools1+`={}`, ctr("app")),
			msg: `annotation podfence.io/cpu-pools="{}" is set, but no container asks for a pool resource: ` + mutated},
		{name: "cpu-pools written otherwise", mutateOK: true, pod: testPod("s",
			"annotation:"+pools1+`={"app": {"exclusive_dp": "2"}}`, ctr("app", "podfence.io/exclusive_dp=2")),
			msg: `annotation podfence.io/cpu-pools="{\"app\": {\"exclusive_dp\": \"2\"}}" differs from the pool resources, which call ` +
				`for {"app":{"exclusive_dp":2}}: ` + mutated},
		// The sidecars annotation.
		{name: "sidecars missing", mutateOK: true, pod: testPod("s", "annotation:"+pools1+`={"app":{"exclusive_dp":2}}`,
			ctr("app", "podfence.io/exclusive_dp=2"), "sidecar", ctr("proxy")),
			msg: `annotation podfence.io/sidecars is missing; the init containers call for "proxy": ` + mutated},
		{name: "sidecars differs", mutateOK: true, pod: testPod("s", "annotation:"+pools1+`={"app":{"exclusive_dp":2}}`,
			"annotation:podfence.io/sidecars=app", ctr("app", "podfence.io/exclusive_dp=2"), "sidecar", ctr("proxy")),
			msg: `annotation podfence.io/sidecars="app" differs from the init containers, which call for "proxy": ` + mutated},
		{name: "sidecars without a sidecar", mutateOK: true, pod: testPod("s", "annotation:"+pools1+`={"app":{"exclusive_dp":2}}`,
			"annotation:podfence.io/sidecars=app", ctr("app", "podfence.io/exclusive_dp=2")),
			msg: `annotation podfence.io/sidecars="app" is set, but the pod has no native sidecar (init container with restartPolicy ` +
				`Always): ` + mutated},
		// EPC annotations.
		{name: "EPC annotation missing", mutateOK: true, pod: testPod("s", ctr("app", "sgx.intel.com/epc=1Ki")),
			msg: `annotation epc-limit.nri.io/container.app is missing, but container "app" has sgx.intel.com/epc=1024: ` + mutated},
		{name: "EPC annotation differs", mutateOK: true, pod: testPod("s", "annotation:epc-limit.nri.io/container.app=1k", ctr("app",
			"sgx.intel.com/epc=1Ki")),
			msg: `annotation epc-limit.nri.io/container.app="1k": differs from the sgx.intel.com/epc limit of container "app" (1024 ` +
				`bytes): ` + mutated},
		{name: "EPC annotations the agent cannot read", mutateOK: true,
			pod: testPod("s", "annotation:epc-limit.nri.io/pod=lots", "annotation:epc-limit.nri.io=1Mi",
				"annotation:epc-limit.nri.io/container.side=-1", ctr("app"), ctr("side")),
			msg: `annotation epc-limit.nri.io/pod="lots": not a number of bytes: want a whole number of bytes, decimal ("1048576") or ` +
				`a Kubernetes quantity ("1Mi", "64M"); 0 means no limit` + "\n" +
				`annotation epc-limit.nri.io/container.side="-1": negative: want a whole number of bytes, decimal ("1048576") or a ` +
				`Kubernetes quantity ("1Mi", "64M"); 0 means no limit`},
		// Process pinning.
		{name: "pinning: valid", mutateOK: true, pod: pinned("podfence.io/cpus",
			`[{"container":"app","processes":[{"process":"/bin/dp","pool":"exclusive_dp","cpus":1},{"process":"","pool":"shared_caas","cpus":500}]}]`)},
		{name: "pinning: schema", mutateOK: true, pod: pinned("podfence.io/cpus", `[{"container":"app"}]`),
			msg: `annotation podfence.io/cpus="[{\"container\":\"app\"}]": entry 0: container "app": has 0 processes (want 1 to 256)`},
		{name: "pinning: no such container", mutateOK: true, pod: pinned("podfence.io/cpus",
			`[{"container":"x","processes":[{"process":"/a","pool":"default"}]}]`),
			msg: `annotation podfence.io/cpus="[{\"container\":\"x\",\"processes\":[{\"process\":\"/a\",\"pool\":\"default\"}]}]": ` +
				`container "x": no such container in the pod (it has app, side)`},
		{name: "pinning: an exclusive pool the container does not ask for", mutateOK: true, pod: pinned("podfence.io/cpus",
			`[{"container":"app","processes":[{"process":"/a","pool":"exclusive_rt","cpus":1}]}]`),
			msg: `annotation ` +
				`podfence.io/cpus="[{\"container\":\"app\",\"processes\":[{\"process\":\"/a\",\"pool\":\"exclusive_rt\",\"cpus\":1}]}]": container "app": process 0 (/a): exclusive pool "exclusive_rt" is not the container's: it asks for 2 CPUs of exclusive pool "exclusive_dp"`},
		{name: "pinning: a shared pool in a container without one", mutateOK: true, pod: pinned("podfence.io/cpus",
			`[{"container":"side","processes":[{"process":"/a","pool":"shared_caas","cpus":1}]}]`),
			msg: `annotation ` +
				`podfence.io/cpus="[{\"container\":\"side\",\"processes\":[{\"process\":\"/a\",\"pool\":\"shared_caas\",\"cpus\":1}]}]": ` +
				`container "side": process 0 (/a): shared pool "shared_caas" is not the container's: it asks for no shared pool in its resources`},
		{name: "pinning: more exclusive CPUs than requested", mutateOK: true, pod: pinned("podfence.io/cpus",
			`[{"container":"app","processes":[{"process":"/a","pool":"exclusive_dp","cpus":2},{"process":"","pool":"exclusive_dp","cpus":1}]}]`),
			msg: `annotation ` +
				`podfence.io/cpus="[{\"container\":\"app\",\"processes\":[{\"process\":\"/a\",\"pool\":\"exclusive_dp\",\"cpus\":2},{\"process\":\"\",\"pool\":\"exclusive_dp\",\"cpus\":1}]}]": container "app": not enough CPUs: exclusive processes ask for 3 CPUs, the container has 2: lower their cpus in the annotation or raise the container's exclusive pool request`},
		{name: "pinning: more millicpu than requested", mutateOK: true, pod: pinned("podfence.io/cpus",
			`[{"container":"app","processes":[{"process":"/a","pool":"shared_caas","cpus":300},{"process":"","pool":"shared_caas","cpus":300}]}]`),
			msg: `annotation ` +
				`podfence.io/cpus="[{\"container\":\"app\",\"processes\":[{\"process\":\"/a\",\"pool\":\"shared_caas\",\"cpus\":300},{\"process\":\"\",\"pool\":\"shared_caas\",\"cpus\":300}]}]": container "app": not enough CPUs: processes ask for 600 millicpu of shared pool "shared_caas", the container has 500: lower their cpus in the annotation or raise the container's shared pool request`},
		{name: "pinning: no CPU left for a default-pool process", mutateOK: true,
			pod: testPod("s", "annotation:"+pools1+`={"app":{"exclusive_dp":1}}`,
				"annotation:podfence.io/cpus="+`[{"container":"app","processes":[{"process":"/a","pool":"exclusive_dp","cpus":1},{"process":"","pool":"default"}]}]`,
				ctr("app", "podfence.io/exclusive_dp=1")),
			msg: `annotation ` +
				`podfence.io/cpus="[{\"container\":\"app\",\"processes\":[{\"process\":\"/a\",\"pool\":\"exclusive_dp\",\"cpus\":1},{\"process\":\"\",\"pool\":\"default\"}]}]": container "app": not enough CPUs: process 1 (the container's command) is in default pool "default" and gets the exclusive CPUs no exclusive process takes, but exclusive processes take all 1 of them and the container has no shared CPUs: leave one CPU or request a shared pool`},
		// Core-scheduling labels.
		{name: "unknown core-scheduling policy", mutateOK: true, pod: testPod("s", "label:podfence.io/core-sched-policy=strict", ctr("app")),
			msg: `label podfence.io/core-sched-policy="strict": unknown policy (want "exclusive", "none" or empty)`},
		{name: "unknown Koordinator policy: admitted (koordinator_test.go)", mutateOK: true,
			pod: testPod("s", "label:koordinator.sh/core-sched-policy=strict", ctr("app"))},
		{name: "bad group name, and a missing annotation", mutateOK: true, pod: testPod("s", "label:podfence.io/core-sched-group=a:b",
			ctr("app", "sgx.intel.com/epc=1")),
			msg: `annotation epc-limit.nri.io/container.app is missing, but container "app" has sgx.intel.com/epc=1: ` + mutated + "\n" +
				`label podfence.io/core-sched-group="a:b": group name has the character ':' (want letters, digits, '-', '_' or '.')`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := reviewJSON(t, tc.pod)
			for _, path := range []string{PathMutate, PathValidate} {
				want := tc.msg
				if path == PathMutate && tc.mutateOK {
					want = ""
				}
				status, raw, resp := post(t, srv, path, body)
				if status != http.StatusOK {
					t.Fatalf("%s: status %d: %s", path, status, raw)
				}
				got := ""
				if resp.Result != nil {
					got = resp.Result.Message
				}
				if resp.Allowed != (want == "") || got != want {
					t.Errorf("%s: allowed %v, message\n%s\nwant\n%s", path, resp.Allowed, got, want)
				}
				if !resp.Allowed && (resp.Result.Code != http.StatusForbidden || resp.Patch != nil) {
					t.Errorf("%s: a refusal with code %d and patch %s", path, resp.Result.Code, resp.Patch)
				}
			}
		})
	}
}

// TestValidateBoundsQuantities: Validate never hands the agent's parsers a quantity they
// cannot parse in bounded time (an annotation is no quantity field: the body check lets it
// through).
func TestValidateBoundsQuantities(t *testing.T) {
	pod := testPod("s", "annotation:epc-limit.nri.io= 1e-999999999", ctr("app"))
	want := `annotation epc-limit.nri.io=" 1e-999999999": not a number of bytes the agent can parse in bounded time`
	if err := Validate(pod, nil); err == nil || err.Error() != want {
		t.Errorf("error %v\nwant  %s", err, want)
	}
}

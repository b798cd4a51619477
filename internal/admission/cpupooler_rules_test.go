package admission

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/pinning"
)

// TestCPUPoolerRequests: pod requests CPU-Pooler admits are admitted, and the webhook's
// annotation says what the agent must do: two exclusive pools in one container, a pool of
// the default type (passed over with a warning: nothing advertises it), and resources under
// a pool config's resourceBaseName.
func TestCPUPoolerRequests(t *testing.T) {
	custom, err := pools.Parse("poolconfig-c.yaml", []byte("resourceBaseName: cpu.example.com\npools: {exclusive_x: {cpus: 1}, "+
		"default: {cpus: 0}}\nnodeSelector: {n: c}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.Pools = append(cfg.Pools, custom)
	for _, tc := range []struct {
		name     string
		cfg      *Config
		pod      string // the container's resources, comma-separated
		want     string // the cpu-pools annotation ("" for none)
		warnings string
		refusal  string
	}{
		{name: "two exclusive pools", cfg: cfg, pod: "nokia.k8s.io/exclusive_dp=2,nokia.k8s.io/exclusive_rt=1",
			want: `{"app":{"exclusive_dp":2,"exclusive_rt":1}}`},
		{name: "a default-type pool is passed over", pod: "nokia.k8s.io/cpupool1=2,nokia.k8s.io/shared_caas=100",
			want: `{"app":{"shared_caas":100}}`,
			warnings: `container "app": nokia.k8s.io/cpupool1: a pool of the default type (neither exclusive… nor shared…), which ` +
				`no device plugin advertises, so the pod stays Pending until something does; a container that asks for no pool runs ` +
				`on the default pool`},
		{name: "a default-type pool a config declares", cfg: cfg, pod: "podfence.io/default=1", warnings: `container "app": ` +
			`podfence.io/default: a pool of the default type (neither exclusive… nor shared…), which no device plugin advertises, so ` +
			`the pod stays Pending until something does; a container that asks for no pool runs on the default pool`},
		{name: "a default-type pool no config declares (with --pools)", cfg: cfg, pod: "nokia.k8s.io/cpupool1=2",
			refusal: `container "app": resource nokia.k8s.io/cpupool1=2: pool "cpupool1" is in no pool config; known pools: ` +
				`exclusive_dp, exclusive_rt, exclusive_x, shared_caas, shared_web`},
		{name: "a resourceBaseName domain", cfg: cfg, pod: "cpu.example.com/exclusive_x=1", want: `{"app":{"exclusive_x":1}}`},
		{name: "a domain no config names is not a pool resource", cfg: cfg, pod: "cpu.other.com/exclusive_x=1"},
		{name: "one exclusive pool twice", cfg: cfg, pod: "nokia.k8s.io/exclusive_dp=2,podfence.io/exclusive_dp=2",
			refusal: `container "app": resource podfence.io/exclusive_dp=2: pool "exclusive_dp" is also asked for as ` +
				`nokia.k8s.io/exclusive_dp: name it once`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod("s", ctr("app", strings.Split(tc.pod, ",")...))
			ops, warnings, err := Mutate(pod, tc.cfg)
			if tc.refusal != "" {
				if err == nil || err.Error() != tc.refusal {
					t.Fatalf("Mutate: %v\nwant: %s", err, tc.refusal)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(warnings, "\n"); got != tc.warnings {
				t.Errorf("warnings:\n%s\nwant:\n%s", got, tc.warnings)
			}
			mutated := applyPatch(t, pod, opsJSON(t, ops))
			if got := mutated.Annotations["podfence.io/cpu-pools"]; got != tc.want {
				t.Errorf("cpu-pools %q, want %q", got, tc.want)
			}
			if err := Validate(mutated, tc.cfg); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

// TestCPUPoolerPinningRules: under nokia.k8s.io/cpus the webhook applies CPU-Pooler's rules
// (its validateAnnotation): a pool's processes may ask up to twice its request, the shared
// processes must add up to the shared request, every process pool must be requested, and
// every process needs a binary and cpus. podfence.io/cpus keeps the agent's rules.
func TestCPUPoolerPinningRules(t *testing.T) {
	res := []string{"nokia.k8s.io/exclusive_dp=2", "nokia.k8s.io/shared_caas=100"}
	proc := func(path, pool string, cpus int) string {
		return `{"process":"` + path + `","pool":"` + pool + `","cpus":` + strconv.Itoa(cpus) + `}`
	}
	entry := func(procs ...string) string {
		return `[{"container":"app","processes":[` + strings.Join(procs, ",") + `]}]`
	}
	const rule = " (CPU-Pooler's rule)"
	for _, tc := range []struct {
		name, key, value string
		res              []string
		want             string // the refusal's reason after `container "app": `; "" admits
	}{
		{name: "up to twice the request (multiThreaded siblings)", value: entry(proc("/a", "exclusive_dp", 2),
			proc("/b", "exclusive_dp", 2), proc("/c", "shared_caas", 100))},
		{name: "more than twice", value: entry(proc("/a", "exclusive_dp", 5), proc("/c", "shared_caas", 100)),
			want: `its processes ask for 5 CPUs of pool "exclusive_dp", more than twice its request of 2 (the most, when a ` +
				`multiThreaded pool gives each core's sibling thread too)` + rule},
		{name: "twice is the agent's limit under podfence.io/cpus", key: "podfence.io/cpus",
			value: entry(proc("/a", "exclusive_dp", 4), proc("/c", "shared_caas", 100)),
			want: `not enough CPUs: exclusive processes ask for 4 CPUs, the container has 2: lower their cpus in the annotation or ` +
				`raise the container's exclusive pool request`},
		{name: "shared processes below the request", value: entry(proc("/a", "exclusive_dp", 1), proc("/c", "shared_caas", 50)),
			want: `its shared processes ask for 50 millicpu in all, its shared pool request is 100: want them equal` + rule},
		{name: "a pool the container does not ask for", value: entry(proc("/a", "exclusive_rt", 1), proc("/c", "shared_caas", 100)),
			want: `process pool "exclusive_rt" is not among its pool resources ([exclusive_dp shared_caas])` + rule},
		{name: "no pool resources", res: []string{}, value: entry(proc("/a", "cpupool1", 1)),
			want: `the annotation names it, but it asks for no pool resource` + rule},
		{name: "a default-type pool it asks for", res: []string{"nokia.k8s.io/cpupool1=2"}, value: entry(proc("/a", "cpupool1", 1))},
		{name: "no binary", value: entry(proc("/a", "exclusive_dp", 1), proc("", "shared_caas", 100)),
			want: `process 1: "process" is empty: want the binary to start` + rule},
		{name: "cpus 0", value: entry(proc("/a", "default", 0), proc("/c", "shared_caas", 100)),
			want: `process 0 (/a): "cpus" is 0 or missing: want the CPUs it runs on` + rule},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := tc.key
			if key == "" {
				key = "nokia.k8s.io/cpus"
			}
			r := res
			if tc.res != nil {
				r = tc.res
			}
			pod := testPod("s", "annotation:"+key+"="+tc.value, ctr("app", r...))
			ops, _, err := Mutate(pod, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = Validate(applyPatch(t, pod, opsJSON(t, ops)), nil)
			want := ""
			if tc.want != "" {
				want = "annotation " + key + "=" + strconv.Quote(tc.value) + `: container "app": ` + tc.want
			}
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != want {
				t.Errorf("Validate:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// opsJSON encodes a JSON patch.
func opsJSON(t *testing.T, ops []Op) []byte {
	t.Helper()
	b, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzCPUPoolerPinning feeds any nokia.k8s.io/cpus value to Validate beside two exclusive
// pools and a share: no panic, and what it admits keeps CPU-Pooler's bounds (each pool's
// processes at most twice its request, the shared processes exactly the shared request).
func FuzzCPUPoolerPinning(f *testing.F) {
	for _, s := range []string{
		`[{"container":"app","processes":[{"process":"/a","pool":"exclusive_dp","cpus":4},{"process":"/b","pool":"shared_caas","cpus":100}]}]`,
		`[{"container":"app","processes":[{"process":"/a","pool":"exclusive_rt","cpus":2},{"process":"/b","pool":"exclusive_dp","cpus":1},` +
			`{"process":"/c","pool":"shared_caas","cpus":60},{"process":"/d","pool":"shared_caas","cpus":40}]}]`,
		`[{"container":"app","processes":[{"process":"","pool":"default","cpus":0}]}]`, `[]`, `[{}]`, `{`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		pod := testPod("s", ctr("app", "nokia.k8s.io/exclusive_dp=2", "nokia.k8s.io/exclusive_rt=1", "nokia.k8s.io/shared_caas=100"))
		pod.Annotations = map[string]string{"nokia.k8s.io/cpus": value}
		ops, _, err := Mutate(pod, nil)
		if err != nil {
			t.Fatalf("Mutate: %v", err)
		}
		patched := applyPatch(t, pod, opsJSON(t, ops))
		if Validate(patched, nil) != nil {
			return
		}
		spec, ok, err := pinning.FromAnnotations(patched.Annotations)
		if !ok || err != nil {
			t.Fatalf("admitted an annotation that does not parse: %v", err)
		}
		limit := map[string]int{"exclusive_dp": 4, "exclusive_rt": 2}
		for _, c := range spec.Containers {
			sum, shared := map[string]int{}, 0
			for _, p := range c.Processes {
				sum[p.Pool] += p.CPUs
				if p.Pool == "shared_caas" {
					shared += p.CPUs
				}
			}
			for pool, n := range sum {
				if l, ok := limit[pool]; ok && n > l {
					t.Fatalf("admitted %d CPUs of %s, over twice its request", n, pool)
				}
			}
			if shared != 100 {
				t.Fatalf("admitted shared processes of %d millicpu for a request of 100", shared)
			}
		}
	})
}

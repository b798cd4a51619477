package plan

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/podfence/podfence/internal/manifest"
)

func pods(t testing.TB, yaml string) []*corev1.Pod {
	t.Helper()
	ps, err := manifest.ReadPods(strings.NewReader(yaml), "test")
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestContainerRequests(t *testing.T) {
	for _, tc := range []struct {
		name, resources, want, err string
	}{
		{name: "limits only", resources: `{limits: {podfence.io/exclusive_m: "2"}}`, want: "exclusive_m=2"},
		{name: "requests only", resources: `{requests: {podfence.io/shared_s: "300"}}`, want: "shared_s=300"},
		{name: "CPU-Pooler domain", resources: `{limits: {nokia.k8s.io/exclusive_m: "1"}}`, want: "exclusive_m=1"},
		{name: "requests equal to limits", resources: `{limits: {podfence.io/shared_s: "300"}, requests: {podfence.io/shared_s: "300"}}`,
			want: "shared_s=300"},
		{name: "one pool under two domains, same amount", resources: `{limits: {podfence.io/exclusive_m: "2", nokia.k8s.io/exclusive_m: "2"}}`,
			want: "exclusive_m=2"},
		{name: "other resources ignored", resources: `{limits: {cpu: "2", memory: 1Gi, example.com/gpu: "1"}}`, want: ""},
		{name: "other resources beside a pool", resources: `{limits: {cpu: "2", memory: 1Gi, podfence.io/exclusive_m: "2", ` +
			`example.com/gpu: "1"}}`, want: "exclusive_m=2"},
		{name: "a default-type pool left out", resources: `{limits: {nokia.k8s.io/default: "1", podfence.io/shared_s: "200"}}`,
			want: "shared_s=200"},
		{name: "requests differ from limits", resources: `{limits: {podfence.io/exclusive_m: "2"}, requests: {podfence.io/exclusive_m: "1"}}`,
			err: `container "c": resource podfence.io/exclusive_m: requests 1 differ from limits 2: extended resources need requests ` +
				`equal to limits`},
		{name: "one pool under two domains", resources: `{limits: {podfence.io/exclusive_m: "2", nokia.k8s.io/exclusive_m: "1"}}`,
			err: `pool "exclusive_m" is requested twice under different domains`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pods(t, fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    "+
				"resources: %s\n", tc.resources))
			for range 32 { // resources are read from maps: the answer must not depend on their order
				got, err := ContainerRequests(p[0])
				if tc.err != "" {
					if err == nil || !strings.Contains(err.Error(), tc.err) {
						t.Fatalf("err = %v, want it to contain %q", err, tc.err)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if got["c"].String() != tc.want {
					t.Fatalf("request = %q, want %q", got["c"].String(), tc.want)
				}
			}
		})
	}
}

const podList = `
apiVersion: v1
kind: Pod
metadata: {name: first, namespace: a}
spec:
  initContainers:
  - {name: init, resources: {limits: {podfence.io/exclusive_m: "8"}}}
  containers:
  - {name: main, resources: {limits: {podfence.io/exclusive_m: "4"}}}
---
apiVersion: v1
kind: Pod
metadata: {name: greedy, namespace: a}
spec:
  containers:
  - {name: ok, resources: {limits: {podfence.io/exclusive_m: "2", podfence.io/shared_s: "100"}}}
  - {name: toobig, resources: {limits: {podfence.io/exclusive_m: "4"}}}
---
apiVersion: v1
kind: Pod
metadata: {name: last, namespace: a}
spec:
  containers:
  - {name: fits, resources: {limits: {podfence.io/exclusive_m: "4"}}}
`

// TestPlanPods: the init container may take the whole pool because it is released before the
// app containers; a pod with a refused container is refused whole and its other container's
// CPUs go back, so the last pod still fits.
func TestPlanPods(t *testing.T) {
	n := testNode(t)
	s := NewLedger(n)
	rep := n.PlanPods(s, pods(t, podList))
	var got []string
	for _, p := range rep.Placed {
		got = append(got, fmt.Sprintf("%s/%s=%s", p.Pod, p.Container, p.Decision.CPUs))
	}
	want := []string{"a/first/init=2-5,10-13", "a/first/main=2-3,10-11", "a/last/fits=4-5,12-13"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("placed %v, want %v", got, want)
	}
	if len(rep.Refusals) != 1 || rep.Refusals[0].Pod != "a/greedy" || rep.Refusals[0].Container != "toobig" ||
		rep.Refusals[0].Code != CodeNotEnoughCPUs {
		t.Errorf("refusals = %+v, want a/greedy toobig NotEnoughCPUs", rep.Refusals)
	}
	if s.Len() != 2 || s.SharedUsed() != 0 {
		t.Errorf("state holds %d allocations and %dm shared, want 2 and 0 (greedy rolled back)", s.Len(), s.SharedUsed())
	}
	var buf bytes.Buffer
	if err := n.WriteText(&buf, rep); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"a/first  init (init)  exclusive_m  2-5,10-13",
		"exclusive_m   exclusive  2-5,10-13  8/8 CPUs held (100%), 2 containers",
		`pod a/greedy container "toobig" (NotEnoughCPUs): exclusive pool "exclusive_m": not enough free CPUs: requested=4, free=2`,
	} {
		if !strings.Contains(buf.String(), line) {
			t.Errorf("text report lacks %q:\n%s", line, buf.String())
		}
	}
}

const sidecarPod = `
apiVersion: v1
kind: Pod
metadata: {name: mesh, namespace: a}
spec:
  initContainers:
  - name: proxy
    restartPolicy: Always
    resources: {limits: {podfence.io/exclusive_m: "2", podfence.io/shared_s: "300"}}
  - {name: setup, resources: {limits: {podfence.io/exclusive_m: "2", podfence.io/shared_s: "1700"}}}
  containers:
  - {name: app, resources: {limits: {podfence.io/exclusive_m: "2", podfence.io/shared_s: "200"}}}
`

// TestPlanSidecarHoldsItsCPUs: an init container with restartPolicy Always (a native sidecar)
// runs for the pod's whole life, so the kubelet never hands its CPUs or its share to a
// container that follows it; a plain init container's go to what follows, as the kubelet's CPU
// and device managers reuse them. The sidecar, the plain init container and the app each get
// CPUs of their own (the plain one's are the app's), and the share the sidecar holds stays
// taken: the plain init container may use the rest of the pool, the app gets its share beside
// the sidecar's.
func TestPlanSidecarHoldsItsCPUs(t *testing.T) {
	n := testNode(t)
	s := NewLedger(n)
	rep := n.PlanPods(s, pods(t, sidecarPod))
	if len(rep.Refusals) != 0 {
		t.Fatalf("refusals: %+v", rep.Refusals)
	}
	var got []string
	for _, p := range rep.Placed {
		got = append(got, fmt.Sprintf("%s=%s init=%v sidecar=%v", p.Container, p.Decision.Allocation.CPUs, p.Init, p.Sidecar))
	}
	want := []string{"proxy=2,10 init=false sidecar=true", "setup=3,11 init=true sidecar=false", "app=3,11 init=false sidecar=false"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("placed %v, want %v", got, want)
	}
	if s.Len() != 2 || s.SharedUsed() != 500 {
		t.Errorf("state holds %d allocations and %dm shared, want 2 (proxy, app) and 500", s.Len(), s.SharedUsed())
	}
	var buf bytes.Buffer
	if err := n.WriteText(&buf, rep); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"a/mesh  proxy (sidecar)", "a/mesh  setup (init)", "4/8 CPUs held (50%), 2 containers",
		"500/2000 millicpu granted (25%), 2 containers"} {
		if !strings.Contains(buf.String(), line) {
			t.Errorf("text report lacks %q:\n%s", line, buf.String())
		}
	}
}

const pinnedPod = `
apiVersion: v1
kind: Pod
metadata:
  name: pinned
  namespace: a
  annotations:
    nokia.k8s.io/cpus: '[{"container": "app", "processes": [{"process": "/bin/app", "args": [], "pool": "shared_s", "cpus": 300}]}]'
spec:
  containers:
  - {name: app, resources: {limits: {podfence.io/shared_s: "300"}}}
  - {name: other, resources: {limits: {podfence.io/shared_s: "100"}}}
`

// TestPlanPinnedGetsContainerName: a shared-pool container that the process pinning annotation
// (here CPU-Pooler's nokia.k8s.io/cpus) names gets CONTAINER_NAME, as the agent gives it; one
// the annotation does not name does not.
func TestPlanPinnedGetsContainerName(t *testing.T) {
	n := testNode(t)
	rep := n.PlanPods(NewLedger(n), pods(t, pinnedPod))
	if len(rep.Placed) != 2 {
		t.Fatalf("placed %+v, refused %+v", rep.Placed, rep.Refusals)
	}
	for i, want := range []string{"SHARED_CPUS=1,9 CPU_POOLS=shared CONTAINER_NAME=app", "SHARED_CPUS=1,9 CPU_POOLS=shared"} {
		if got := envText(rep.Placed[i].Decision.Env); got != want {
			t.Errorf("%s: env %q, want %q", rep.Placed[i].Container, got, want)
		}
	}
}

const misfitPinnedPod = `
apiVersion: v1
kind: Pod
metadata:
  name: misfit
  namespace: a
  annotations:
    nokia.k8s.io/cpus: '[{"container": "app", "processes": [{"process": "/bin/app", "args": [], "pool": "exclusive_st", "cpus": 3}]}]'
spec:
  containers:
  - {name: app, resources: {limits: {podfence.io/exclusive_st: "2"}}}
`

// TestPlanRefusesMisfitPinning: a container whose pinning processes ask for more CPUs than it
// gets is refused, as the agent refuses it (the process starter could not run them): CPU-Pooler's
// webhook rules let a process ask up to twice the request, the CPUs given decide.
func TestPlanRefusesMisfitPinning(t *testing.T) {
	n := testNode(t)
	rep := n.PlanPods(NewLedger(n), pods(t, misfitPinnedPod))
	const want = `pod a/misfit container "app" refused (ProcessPinning): process pinning: not enough CPUs: exclusive processes ` +
		`ask for 3 CPUs, the container has 2: lower their cpus in the annotation or raise the container's exclusive pool request`
	if len(rep.Placed) != 0 || len(rep.Refusals) != 1 || rep.Refusals[0].Error() != want {
		t.Fatalf("placed %+v, refused %+v; want\n%s", rep.Placed, rep.Refusals, want)
	}
}

// TestPinningOf: the first annotation map with a pinning annotation decides (the pod's, then
// the container's where the runtime copied it): the container's processes when it names it;
// an annotation that does not parse is an error naming it.
func TestPinningOf(t *testing.T) {
	entry := `[{"container": "app", "processes": [{"process": "/bin/a", "pool": "exclusive_m", "cpus": 1}]}]`
	pod, ctr := map[string]string{"podfence.io/cpus": entry}, map[string]string{"nokia.k8s.io/cpus": entry}
	for _, tc := range []struct {
		name      string
		container string
		maps      []map[string]string
		want      string
	}{
		{name: "named by the pod's", container: "app", maps: []map[string]string{pod, nil}, want: "named [/bin/a]"},
		{name: "the container's when the pod has none", container: "app", maps: []map[string]string{{"x": "y"}, ctr},
			want: "named [/bin/a]"},
		{name: "not named", container: "other", maps: []map[string]string{pod, ctr}, want: "not named"},
		{name: "none", container: "app", maps: []map[string]string{nil, {}}, want: "not named"},
		{name: "does not parse", container: "app", maps: []map[string]string{{"podfence.io/cpus": "{"}, ctr},
			want: `error: annotation podfence.io/cpus="{"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			procs, named, err := PinningOf(tc.container, tc.maps...)
			got := "not named"
			switch {
			case err != nil:
				got = "error: " + err.Error()
			case named:
				var paths []string
				for _, p := range procs {
					paths = append(paths, p.Path)
				}
				got = fmt.Sprintf("named %v", paths)
			}
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestPlanPodRefusals: a pinning annotation that does not parse refuses the pod (InvalidRequest,
// the annotation named), and a pod refused after its sidecar was placed gives the sidecar's
// CPUs back.
func TestPlanPodRefusals(t *testing.T) {
	n := testNode(t)
	s := NewLedger(n)
	rep := n.PlanPods(s, pods(t, `
apiVersion: v1
kind: Pod
metadata: {name: bad, namespace: a, annotations: {podfence.io/cpus: "{"}}
spec:
  containers:
  - {name: app}
---
apiVersion: v1
kind: Pod
metadata: {name: big, namespace: a}
spec:
  initContainers:
  - {name: proxy, restartPolicy: Always, resources: {limits: {podfence.io/exclusive_m: "4"}}}
  containers:
  - {name: app, resources: {limits: {podfence.io/exclusive_m: "6"}}}
`))
	var got []string
	for _, r := range rep.Refusals {
		got = append(got, r.Pod+"/"+r.Container+" "+r.Code+": "+r.Reason)
	}
	want := []string{`a/bad/app InvalidRequest: annotation podfence.io/cpus="{"`, "a/big/app NotEnoughCPUs: "}
	if len(got) != 2 || !strings.HasPrefix(got[0], want[0]) || !strings.HasPrefix(got[1], want[1]) {
		t.Errorf("refusals %q, want them to start %q", got, want)
	}
	if len(rep.Placed) != 0 || s.Len() != 0 {
		t.Errorf("placed %+v, held %v; want nothing", rep.Placed, s.Allocations())
	}
}

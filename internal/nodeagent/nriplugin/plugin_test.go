package nriplugin_test

import (
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/podapi"
)

// setup starts a runtime and an agent with a fresh checkpoint on the test node.
func setup(t *testing.T, opts nriplugin.Options) (*runtime, *agentRun) {
	t.Helper()
	rt := newRuntime(t)
	ar := startAgent(t, rt, newNode(t, testTopology, testPools), openStore(t, t.TempDir()), opts)
	return rt, ar
}

func poolReq(v string) map[string]string { return map[string]string{podapi.AnnotationCPUPools: v} }

func exclusiveCPUs(v string) map[string]string {
	return map[string]string{podapi.AnnotationExclusiveCPUs: v}
}

// want is what a created container must run with.
type want struct {
	cpus, mems        string
	quota             int64
	period            uint64
	exclusive, shared string // EXCLUSIVE_CPUS, SHARED_CPUS
}

func check(t *testing.T, c created, w want) {
	t.Helper()
	got := want{cpus: c.cpus(), mems: c.mems(), quota: c.quota(), period: c.period(),
		exclusive: c.env("EXCLUSIVE_CPUS"), shared: c.env("SHARED_CPUS")}
	if got != w {
		t.Errorf("container %s runs with %+v, want %+v", c.ctr.Name, got, w)
	}
	if len(c.update) > 0 {
		t.Errorf("creating %s updated other containers: %v", c.ctr.Name, c.update)
	}
}

func TestCreateContainer(t *testing.T) {
	rt, _ := setup(t, nriplugin.Options{})
	for _, tc := range []struct {
		name    string
		podAnn  map[string]string
		ctrAnn  map[string]string
		want    want
		ctrName string
	}{
		{name: "default pool", want: want{cpus: "0,8", mems: "0"}},
		{name: "other container of an annotated pod", podAnn: poolReq(`{"other": {"shared_s": 500}}`),
			want: want{cpus: "0,8", mems: "0"}},
		{name: "shared", podAnn: poolReq(`{"app": {"shared_s": 500}}`),
			want: want{cpus: "1,9", mems: "0", quota: 50000, period: 100000, shared: "1,9"}},
		{name: "shared as a quantity string and resource name", podAnn: poolReq(`{"app": {"podfence.io/shared_s": "250"}}`),
			want: want{cpus: "1,9", mems: "0", quota: 25000, period: 100000, shared: "1,9"}},
		{name: "exclusive by pool request", podAnn: poolReq(`{"app": {"exclusive_b": 2}}`),
			want: want{cpus: "4,12", mems: "1", exclusive: "4,12"}},
		{name: "exclusive by device plugin CPUs", ctrAnn: exclusiveCPUs("6,14"),
			want: want{cpus: "6,14", mems: "1", exclusive: "6,14"}},
		{name: "pool request copied onto the container", ctrAnn: poolReq(`{"app": {"exclusive_a": 1}}`),
			want: want{cpus: "2", mems: "0", exclusive: "2"}},
		{name: "mixed exclusive and shared", podAnn: poolReq(`{"app": {"exclusive_a": 2, "shared_s": 200}}`),
			want: want{cpus: "1,3,9,11", mems: "0", quota: 220000, period: 100000, exclusive: "3,11", shared: "1,9"}},
		{name: "device plugin CPUs plus a shared share", podAnn: poolReq(`{"app": {"shared_s": 100}}`), ctrAnn: exclusiveCPUs("7"),
			want: want{cpus: "1,7,9", mems: "0-1", quota: 110000, period: 100000, exclusive: "7", shared: "1,9"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := rt.runPod(strings.ReplaceAll(tc.name, " ", "-"), tc.podAnn)
			check(t, rt.mustCreate(pod, "app", tc.ctrAnn), tc.want)
		})
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(rt.syncUpd)+len(rt.unsolicted) > 0 {
		t.Errorf("agent updated containers outside requests: sync %v, unsolicited %v", rt.syncUpd, rt.unsolicted)
	}
}

func TestRefusals(t *testing.T) {
	rt, ar := setup(t, nriplugin.Options{})
	holder := rt.mustCreate(rt.runPod("holder", nil), "app", exclusiveCPUs("4"))
	for _, tc := range []struct {
		name           string
		podAnn, ctrAnn map[string]string
		wantErr        []string // substrings of the error the runtime gets
	}{
		{name: "not JSON", podAnn: poolReq(`{app: 1}`),
			wantErr: []string{`annotation podfence.io/cpu-pools="{app: 1}"`, "decode JSON", `want JSON {"<container>": {"<pool>": <amount>}}`}},
		{name: "negative amount", podAnn: poolReq(`{"app": {"exclusive_a": -1}}`),
			wantErr: []string{"podfence.io/cpu-pools", `container "app" pool "exclusive_a": amount "-1" must be above 0`}},
		{name: "bad pool name", podAnn: poolReq(`{"app": {"example.com/x": 1}}`),
			wantErr: []string{"podfence.io/cpu-pools", `pool "example.com/x" is not a pool name`}},
		{name: "unknown pool", podAnn: poolReq(`{"app": {"exclusive_zz": 1}}`),
			wantErr: []string{`container "app" refused (UnknownPool)`, `pool "exclusive_zz"`}},
		{name: "fractional exclusive", podAnn: poolReq(`{"app": {"exclusive_a": "1.5"}}`),
			wantErr: []string{"FractionalExclusive", "whole number"}},
		{name: "CPU list typo", ctrAnn: exclusiveCPUs("4-x"),
			wantErr: []string{`annotation podfence.io/exclusive-cpus="4-x"`, `want a non-empty Linux CPU list such as "4-5,12"`}},
		{name: "CPUs outside exclusive pools", ctrAnn: exclusiveCPUs("0-1"),
			wantErr: []string{`podfence.io/exclusive-cpus="0-1"`, "CPUs 0-1 are in no exclusive pool", "exclusive_a (2-3,10-11)"}},
		{name: "CPUs held by another container", ctrAnn: exclusiveCPUs("4-5"),
			wantErr: []string{"CPUsUnavailable", "4", "holder/app"}},
		{name: "device plugin and pool request disagree", podAnn: poolReq(`{"app": {"exclusive_a": 1}}`), ctrAnn: exclusiveCPUs("5"),
			wantErr: []string{`CPUs 5 are in pool "exclusive_b"`, `does not ask pool "exclusive_b"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(ar.Allocations())
			pod := rt.runPod("bad", tc.podAnn)
			_, err := rt.create(pod, "app", tc.ctrAnn)
			if err == nil {
				t.Fatal("container created, want it refused")
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), "ns/bad") {
				t.Errorf("error %q does not name the pod", err)
			}
			if n := len(ar.Allocations()); n != before {
				t.Errorf("refusal changed the state: %d allocations, had %d", n, before)
			}
			// The next container is unaffected.
			ok := rt.mustCreate(rt.runPod("fine", nil), "app", exclusiveCPUs("5"))
			check(t, ok, want{cpus: "5", mems: "1", exclusive: "5"})
			rt.removeCtr(ok.ctr)
		})
	}
	check(t, holder, want{cpus: "4", mems: "1", exclusive: "4"})
}

func TestUpdateContainerKeepsCPUs(t *testing.T) {
	rt, _ := setup(t, nriplugin.Options{})
	excl := rt.mustCreate(rt.runPod("excl", poolReq(`{"app": {"exclusive_b": 2}}`)), "app", nil)
	shared := rt.mustCreate(rt.runPod("shared", poolReq(`{"app": {"shared_s": 500}}`)), "app", nil)
	plain := rt.mustCreate(rt.runPod("plain", nil), "app", nil)

	widen := &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: "0-15", Mems: "0-1"}}
	if others := rt.updateResources(excl.ctr, widen); len(others) > 0 {
		t.Errorf("update of one container updated others: %v", others)
	}
	check(t, excl, want{cpus: "4,12", mems: "1", exclusive: "4,12"})

	requota := &api.LinuxResources{Cpu: &api.LinuxCPU{Quota: api.Int64(0), Period: api.UInt64(100000), Cpus: "0-15"}}
	rt.updateResources(shared.ctr, requota)
	check(t, shared, want{cpus: "1,9", mems: "0", quota: 50000, period: 100000, shared: "1,9"})

	// An update that leaves the cpuset alone passes untouched.
	rt.updateResources(plain.ctr, &api.LinuxResources{Cpu: &api.LinuxCPU{Quota: api.Int64(20000), Period: api.UInt64(100000)}})
	check(t, plain, want{cpus: "0,8", mems: "0", quota: 20000, period: 100000})
}

func TestRemoveReleases(t *testing.T) {
	rt, ar := setup(t, nriplugin.Options{})
	pod := rt.runPod("p", poolReq(`{"a": {"exclusive_a": 4}, "b": {"exclusive_b": 8}}`))
	a := rt.mustCreate(pod, "a", nil)
	rt.mustCreate(pod, "b", nil)
	if _, err := rt.create(rt.runPod("q", poolReq(`{"x": {"exclusive_a": 1}}`)), "x", nil); err == nil {
		t.Fatal("pool exclusive_a is full, but a container got CPUs from it")
	}
	rt.removeCtr(a.ctr)
	check(t, rt.mustCreate(rt.runPod("r", poolReq(`{"x": {"exclusive_a": 4}}`)), "x", nil),
		want{cpus: "2-3,10-11", mems: "0", exclusive: "2,3,10,11"})
	rt.removePod(pod) // b is released with its pod
	check(t, rt.mustCreate(rt.runPod("s", poolReq(`{"y": {"exclusive_b": 8}}`)), "y", nil),
		want{cpus: "4-7,12-15", mems: "1", exclusive: "4,5,6,7,12,13,14,15"})
	if n := len(ar.Allocations()); n != 2 {
		t.Errorf("agent holds %d allocations, want 2: %v", n, ar.Allocations())
	}
}

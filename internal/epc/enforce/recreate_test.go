package enforce_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/epc"
	"github.com/podfence/podfence/internal/nodeagent/cgroups/cgroupstest"
	"github.com/podfence/podfence/internal/observe/status"
)

// recreated is a pod whose dead sandbox (old, container c1) the kubelet re-created under
// the same UID (newer, container c2 of the same name).
func recreated(ann map[string]string) (old, newer *api.PodSandbox) {
	old, newer = pod("p1", ann), pod("p1b", ann)
	newer.Uid, newer.Name = old.Uid, old.Name
	return old, newer
}

// TestSandboxRecreated, through the real NRI runtime side: the kubelet removes the dead
// sandbox only after the container runs again in the new one; the new instance keeps its
// limit, and on cgroup v1 the misc cgroup written ahead for it.
func TestSandboxRecreated(t *testing.T) {
	for _, layout := range []string{"v1", "v2"} {
		t.Run(layout, func(t *testing.T) {
			n := newNode(t, layout, epc.Strict, nil)
			rt := newRuntime(t)
			rt.runAgent(n.Extension)
			rt.waitPlugins(1)

			old, newer := recreated(map[string]string{limit1M: "1Mi"})
			if _, err := rt.create(old, ctr("c1", old, "app", newPod+"/c1")); err != nil {
				t.Fatal(err)
			}
			if err := rt.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: old}); err != nil {
				t.Fatal(err)
			}
			if _, err := rt.create(newer, ctr("c2", newer, "app", newPod+"/c2")); err != nil {
				t.Fatal(err)
			}
			if err := rt.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: old}); err != nil {
				t.Fatal(err)
			}
			s := n.State().(status.EPC)
			if len(s.Containers) != 1 || s.Containers[0].Container != "app" || s.Containers[0].LimitBytes != 1<<20 || !s.Containers[0].InForce {
				t.Errorf("after the old sandbox's removal: %+v, want app with its limit in force", s.Containers)
			}
			if layout == "v1" {
				if got := n.readFile(t, n.misc(newPod+"/c2"), "misc.max"); got != "sgx_epc 1048576" {
					t.Errorf("the new instance's misc.max %q", got)
				}
			}
		})
	}
}

// TestSynchronizeRecreatedSandbox: an agent restarted while both sandboxes are listed
// tracks the running instance only: the old sandbox's exited container (its cgroup gone)
// is neither an unenforced limit nor the container's series.
func TestSynchronizeRecreatedSandbox(t *testing.T) {
	n := newNode(t, "v2", epc.Strict, nil)
	old, newer := recreated(map[string]string{epc.AnnotationPod: "1Mi"})
	exited := ctr("c1", old, "app", newPod+"/c1")
	exited.State = api.ContainerState_CONTAINER_STOPPED
	running := ctr("c2", newer, "app", cgroupstest.ContainerSystemd) // misc.max 1 MiB, 1 MiB in use
	running.State = api.ContainerState_CONTAINER_RUNNING
	if err := n.Synchronize(ctx, []*api.PodSandbox{newer, old}, []*api.Container{running, exited}); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		if got := unenforced(t, n); got != 0 {
			t.Errorf("%s: %v unenforced, want 0", when, got)
		}
		if d := n.Degraded(); len(d) != 0 {
			t.Errorf("%s: degraded %+v", when, d)
		}
		if got := series(t, n, "podfence_epc_container_usage_bytes"); !slices.Equal(got, []string{"ns/p1/app"}) {
			t.Errorf("%s: usage series %q", when, got)
		}
		if got := value(t, n, "podfence_epc_container_usage_bytes", "ns/p1/app"); got != 1<<20 {
			t.Errorf("%s: usage %v, want the running instance's 1 MiB", when, got)
		}
	}
	check("after the restart")
	if strings.Contains(n.logs.String(), "not in force") {
		t.Errorf("log:\n%s", n.logs)
	}
	n.RemovePodSandbox(ctx, old)
	check("after the old sandbox's removal")
}

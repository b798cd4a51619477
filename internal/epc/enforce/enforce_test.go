package enforce_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/epc"
	"github.com/podfence/podfence/internal/nodeagent/cgroups/cgroupstest"
)

const (
	newPod  = "/kubepods/burstable/podnew"
	ctrPath = newPod + "/c1"
	limit1M = "epc-limit.nri.io/container.app"
)

var ctx = context.Background()

func TestCreateContainer(t *testing.T) {
	const unsupported = "epc: SGX EPC limit 1048576 bytes (annotation epc-limit.nri.io/container.app): the kernel lacks SGX EPC " +
		"cgroup support: "
	mainline := func(root string) {
		for _, f := range []string{root + "/misc.capacity", root + "/misc/misc.capacity"} {
			if _, err := os.Stat(f); err == nil {
				if err := os.WriteFile(f, []byte("sev 0\n"), 0o644); err != nil {
					panic(err)
				}
			}
		}
	}
	for _, tc := range []struct {
		name        string
		layout      string
		policy      epc.Policy
		edit        func(root string)
		annotations map[string]string
		unified     map[string]string
		kernelErr   error // fails misc.max writes
		wantUnified string
		wantMax     string // content of the new cgroup's misc.max (v1), "" for untouched
		wantErr     string
	}{
		{name: "v2 limit", layout: "v2", annotations: map[string]string{limit1M: "1Mi"}, wantUnified: "sgx_epc 1048576"},
		{name: "v2 pod limit", layout: "v2", annotations: map[string]string{epc.AnnotationPod: "4096"}, wantUnified: "sgx_epc 4096"},
		{name: "v2 no limit", layout: "v2"},
		{name: "v1 limit written ahead", layout: "v1", annotations: map[string]string{limit1M: "1Mi"}, wantMax: "sgx_epc 1048576"},
		{name: "v1 no limit", layout: "v1", annotations: map[string]string{limit1M: "0"}},
		{name: "v1 write refused by the kernel", layout: "v1", annotations: map[string]string{limit1M: "1Mi"}, kernelErr: syscall.EINVAL,
			wantErr: "epc: SGX EPC limit 1048576 bytes (annotation epc-limit.nri.io/container.app): set it in the container's " +
				"misc cgroup: write \"sgx_epc 1048576\" to <root>/misc" + ctrPath + "/misc.max: invalid argument"},
		{name: "strict on a mainline kernel", layout: "v2", edit: mainline, annotations: map[string]string{limit1M: "1Mi"},
			wantErr: unsupported + "<root>/misc.capacity lists no sgx_epc (it lists sev); it needs a kernel whose misc cgroup " +
				"controller lists sgx_epc in misc.capacity (or the agent's EPC policy best-effort, which runs the container without the cap)"},
		{name: "strict without misc", layout: "v1", edit: func(root string) { os.RemoveAll(root + "/misc") },
			annotations: map[string]string{limit1M: "1Mi"},
			wantErr:     unsupported + "no misc controller at <root> (cgroup v1; available: cpu cpuacct cpuset memory pids)"},
		{name: "best effort on a mainline kernel", layout: "v1", edit: mainline, policy: epc.BestEffort,
			annotations: map[string]string{limit1M: "1Mi"}},
		{name: "no limit on a mainline kernel", layout: "v2", edit: mainline},
		{name: "another owner of misc.max: stand aside", layout: "v2", annotations: map[string]string{limit1M: "1Mi"},
			unified: map[string]string{"misc.max": "sgx_epc 2048"}},
		{name: "another owner of misc.max, v1: stand aside", layout: "v1", annotations: map[string]string{limit1M: "1Mi"},
			unified: map[string]string{"misc.max": "sgx_epc 2048"}},
		{name: "bad annotation", layout: "v2", annotations: map[string]string{epc.Annotation: "1 MiB"},
			wantErr: `epc: annotation epc-limit.nri.io="1 MiB": not a number of bytes: want a whole number of bytes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, tc.layout, tc.policy, tc.edit)
			if tc.kernelErr != nil {
				n.k.WriteErr = map[string]error{"misc.max": tc.kernelErr}
			}
			p := pod("p1", tc.annotations)
			c := ctr("c1", p, "app", ctrPath)
			c.Linux.Resources.Unified = tc.unified
			adj, err := n.CreateContainer(ctx, p, c, plan.Decision{})
			if err != nil {
				err = wrapped{n.Name(), err} // as the agent reports it
			}
			if tc.wantErr != "" {
				want := strings.ReplaceAll(tc.wantErr, "<root>", n.root)
				if err == nil || !strings.HasPrefix(err.Error(), want) {
					t.Fatalf("error %v\nwant %s", err, want)
				}
				if _, statErr := os.Stat(n.misc(newPod)); !os.IsNotExist(statErr) {
					t.Errorf("the refused container's cgroups are left: %v", statErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := adj.GetLinux().GetResources().GetUnified()["misc.max"]; got != tc.wantUnified {
				t.Errorf("unified misc.max %q, want %q", got, tc.wantUnified)
			}
			if tc.wantMax == "" {
				if w := n.k.Writes(); len(w) > 0 {
					t.Errorf("wrote %q", w)
				}
				return
			}
			if got := n.readFile(t, n.misc(ctrPath), "misc.max"); got != tc.wantMax {
				t.Errorf("misc.max %q, want %q", got, tc.wantMax)
			}
			n.RemoveContainer(ctx, p, c) // a creation undone: the cgroups made for it go
			if _, err := os.Stat(n.misc("/kubepods")); err != nil {
				t.Errorf("removed a cgroup it did not make: %v", err)
			}
			if _, err := os.Stat(n.misc("/kubepods/burstable")); !os.IsNotExist(err) {
				t.Errorf("cgroups made for the container are left: %v", err)
			}
		})
	}
}

type wrapped struct {
	name string
	err  error
}

func (w wrapped) Error() string { return w.name + ": " + w.err.Error() }

func TestBestEffortLogsUnenforced(t *testing.T) {
	n := newNode(t, "v2", epc.BestEffort, func(root string) { writeFile(t, root+"/misc.capacity", "") })
	p := pod("p1", map[string]string{epc.AnnotationPod: "64Mi"})
	if adj, err := n.CreateContainer(ctx, p, ctr("c1", p, "app", ctrPath), plan.Decision{}); err != nil || adj != nil {
		t.Fatalf("CreateContainer = %v, %v; want to run it without an adjustment", adj, err)
	}
	if want := `level=WARN msg="SGX EPC limit not enforced" pod=ns/p1 container=app limit=67108864 ` +
		`annotation=epc-limit.nri.io/pod policy=best-effort`; !strings.Contains(n.logs.String(), want) {
		t.Errorf("log lacks %s:\n%s", want, n.logs)
	}
}

func TestStartContainerChecks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		layout  string
		path    string // cgroups path at start ("" = as created)
		pid     uint32
		runtime func(t *testing.T, dir string) // what the runtime did to the cgroup before start
		wantErr string
	}{
		{name: "v1 in force", layout: "v1", pid: 77, runtime: func(t *testing.T, dir string) { writeFile(t, dir+"/cgroup.procs", "77\n") }},
		{name: "v1 pid not in the cgroup", layout: "v1", pid: 77,
			wantErr: "the container's process 77 is not in <dir>: the runtime does not join the v1 misc hierarchy"},
		{name: "v1 cap reset", layout: "v1", runtime: func(t *testing.T, dir string) { writeFile(t, dir+"/misc.max", "sgx_epc max\n") },
			wantErr: "<dir>/misc.max holds sgx_epc max, not the limit"},
		{name: "v1 path changed by a later plugin", layout: "v1", path: "/kubepods/burstable/podnew/moved",
			runtime: func(t *testing.T, dir string) {
				if _, err := (&cgroupstest.Kernel{}).Mkdir(filepath.Dir(dir) + "/moved"); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "v2 in force", layout: "v2", pid: 77, runtime: func(t *testing.T, dir string) {
			if _, err := (&cgroupstest.Kernel{}).Mkdir(dir); err != nil {
				t.Fatal(err)
			}
			writeFile(t, dir+"/misc.max", "sgx_epc 1048576\n")
		}},
		{name: "v2 cap not applied", layout: "v2", runtime: func(t *testing.T, dir string) {
			if _, err := (&cgroupstest.Kernel{}).Mkdir(dir); err != nil {
				t.Fatal(err)
			}
		}, wantErr: "<dir>/misc.max holds sgx_epc max, not the limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, tc.layout, epc.Strict, nil)
			p := pod("p1", map[string]string{limit1M: "1Mi"})
			c := ctr("c1", p, "app", ctrPath)
			if _, err := n.CreateContainer(ctx, p, c, plan.Decision{}); err != nil {
				t.Fatal(err)
			}
			dir := n.misc(ctrPath)
			if tc.runtime != nil {
				tc.runtime(t, dir)
			}
			if tc.path != "" {
				c.Linux.CgroupsPath = tc.path
			}
			c.Pid = tc.pid
			err := n.StartContainer(ctx, p, c)
			if tc.wantErr != "" {
				want := "pod ns/p1 container \"app\": SGX EPC limit 1048576 bytes not in force: " + strings.ReplaceAll(tc.wantErr, "<dir>", dir)
				if err == nil || err.Error() != want {
					t.Errorf("error %v\nwant %s", err, want)
				}
				if got := unenforced(t, n); got != 1 {
					t.Errorf("unenforced containers %v, want 1", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.path != "" {
				if got := n.readFile(t, n.misc(tc.path), "misc.max"); got != "sgx_epc 1048576" {
					t.Errorf("moved cgroup's misc.max %q", got)
				}
				if _, err := os.Stat(dir); !os.IsNotExist(err) {
					t.Errorf("the cgroup made ahead is left: %v", err)
				}
			}
			if got := unenforced(t, n); got != 0 {
				t.Errorf("unenforced containers %v, want 0", got)
			}
		})
	}
}

func TestSynchronize(t *testing.T) {
	n := newNode(t, "v2", epc.Strict, nil)
	withLimit := pod("p1", map[string]string{epc.AnnotationPod: "1Mi"})
	notApplied := pod("p2", map[string]string{epc.AnnotationPod: "2Mi"})
	ctrs := []*api.Container{
		ctr("c1", withLimit, "app", cgroupstest.ContainerSystemd),     // misc.max is 1 MiB: in force
		ctr("c2", notApplied, "app", cgroupstest.ContainerCgroupfsV2), // misc.max is max: not in force
	}
	if err := n.Synchronize(ctx, []*api.PodSandbox{withLimit, notApplied}, ctrs); err != nil {
		t.Fatal(err)
	}
	if got := unenforced(t, n); got != 1 {
		t.Errorf("unenforced %v, want 1", got)
	}
	if !strings.Contains(n.logs.String(), `msg="SGX EPC limit not in force on a running container" pod=ns/p2 container=app limit=2097152`) {
		t.Errorf("log:\n%s", n.logs)
	}
	if w := n.k.Writes(); len(w) > 0 {
		t.Errorf("Synchronize wrote %q", w)
	}
	n.RemovePodSandbox(ctx, notApplied)
	if got := unenforced(t, n); got != 0 {
		t.Errorf("unenforced after the pod's removal: %v", got)
	}
	if got := series(t, n, "podfence_epc_container_usage_bytes"); !slices.Equal(got, []string{"ns/p1/app"}) {
		t.Errorf("usage series %q", got)
	}
}

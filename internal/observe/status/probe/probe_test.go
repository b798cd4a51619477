package probe_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/coresched/kernel"
	"github.com/podfence/podfence/internal/observe/status"
	"github.com/podfence/podfence/internal/observe/status/probe"
)

const testdata = "../../../nodeagent/cgroups/testdata/cgroup/"

func TestKernel(t *testing.T) {
	sysfs := t.TempDir()
	if err := os.MkdirAll(filepath.Join(sysfs, "devices/system/cpu/smt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sysfs, "devices/system/cpu/smt/control"), []byte("on\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  probe.Config
		want status.Kernel
	}{{
		name: "cgroup v2 with sgx_epc, SMT, core scheduling",
		cfg: probe.Config{Sysfs: sysfs, ThreadsPerCore: 2, CgroupRoot: testdata + "v2",
			CoreSched: kernel.Support{Readable: true, CapSysPtrace: true}},
		want: status.Kernel{
			SMT:            status.Feature{Available: true, Detail: "2 threads per core, smt/control on"},
			CoreScheduling: status.Feature{Available: true, Detail: "prctl(PR_SCHED_CORE) works"},
			Cgroup: status.Cgroup{Version: "v2", Driver: "systemd",
				Controllers: []string{"cpu", "cpuset", "hugetlb", "io", "memory", "misc", "pids", "rdma"}},
			SGXEPC: status.Feature{Available: true}, EPCCapacityBytes: 128 << 20,
		},
	}, {
		name: "cgroup v1, no SMT, no core scheduling",
		cfg: probe.Config{Sysfs: t.TempDir(), ThreadsPerCore: 1, CgroupRoot: testdata + "v1",
			CoreSched: kernel.Support{Err: kernel.ErrNoSchedCore}},
		want: status.Kernel{
			SMT:            status.Feature{Detail: "1 thread per core"},
			CoreScheduling: status.Feature{Detail: kernel.ErrNoSchedCore.Error()},
			Cgroup: status.Cgroup{Version: "v1",
				Controllers: []string{"cpu", "cpuacct", "cpuset", "memory", "misc", "pids"}},
			SGXEPC: status.Feature{Available: true}, EPCCapacityBytes: 128 << 20,
		},
	}, {
		name: "no cgroup root",
		cfg:  probe.Config{Sysfs: t.TempDir(), ThreadsPerCore: 2, CoreSched: kernel.Support{Readable: false}},
		want: status.Kernel{
			SMT: status.Feature{Available: true, Detail: "2 threads per core"},
			CoreScheduling: status.Feature{Available: true,
				Detail: "prctl(PR_SCHED_CORE) works; cookies read back as 0 (the kernel's cookie key is not set yet); no CAP_SYS_PTRACE"},
			Cgroup: status.Cgroup{Version: "unknown", Detail: "no cgroup root given"},
			SGXEPC: status.Feature{Detail: "no cgroup root given"},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := probe.Kernel(tc.cfg)
			if g, w := strings.Join(got.Cgroup.Controllers, " "), strings.Join(tc.want.Cgroup.Controllers, " "); g != w {
				t.Errorf("controllers %q, want %q", g, w)
			}
			got.Cgroup.Controllers, tc.want.Cgroup.Controllers = nil, nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestKernelUnreadableCgroupRoot(t *testing.T) {
	k := probe.Kernel(probe.Config{CgroupRoot: filepath.Join(t.TempDir(), "none")})
	if k.Cgroup.Version != "unknown" || !strings.Contains(k.Cgroup.Detail, "none") || k.SGXEPC.Available {
		t.Errorf("%+v", k)
	}
}

// TestDriver: the kubelet's pod cgroups name the driver.
func TestDriver(t *testing.T) {
	for _, tc := range []struct{ dirs, want string }{
		{dirs: "kubepods.slice", want: "systemd"},
		{dirs: "kubepods", want: "cgroupfs"},
		{dirs: "other", want: ""},
	} {
		v2, v1 := t.TempDir(), t.TempDir()
		mkdirs(t, v2, tc.dirs)
		if err := os.WriteFile(filepath.Join(v2, "cgroup.controllers"), []byte("cpu memory\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		mkdirs(t, v1, "cpuset", "memory/"+tc.dirs)
		for root, version := range map[string]string{v2: "v2", v1: "v1"} {
			if got := probe.Kernel(probe.Config{CgroupRoot: root}).Cgroup; got.Driver != tc.want || got.Version != version {
				t.Errorf("%s with %s: %+v, want driver %q", version, tc.dirs, got, tc.want)
			}
		}
	}
}

func mkdirs(t *testing.T, root string, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

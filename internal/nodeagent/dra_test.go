package nodeagent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/dra/grant"
	"github.com/podfence/podfence/internal/nodeagent"
	"github.com/podfence/podfence/internal/nodeagent/cgroups/cgroupstest"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
)

// TestRunGivesDRAClaims: with Config.DRAStateDir (--dra-state-dir), a container whose
// environment names a prepared claim gets the claim's exclusive CPUs and, through the EPC
// extension, its SGX EPC as misc.max; a claim with no grant is refused, naming the claim.
func TestRunGivesDRAClaims(t *testing.T) {
	cfg := config(t)
	poolYAML := strings.Replace(poolConfig, `hyperThreadingPolicy: multiThreaded}`,
		`hyperThreadingPolicy: multiThreaded, requestAPI: dra}`, 1)
	if err := os.WriteFile(filepath.Join(cfg.Pools, "poolconfig-a.yaml"), []byte(poolYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.CgroupRoot = cgroupstest.Tree(t, "v2")
	cfg.DRAStateDir = filepath.Join(t.TempDir(), "claims")
	store := grant.Store{Dir: cfg.DRAStateDir}
	err := store.Put(grant.Grant{ClaimUID: "c1", Namespace: "ns", Name: "cpus", PodUIDs: []string{"uid1"},
		Exclusive: map[string]cpuset.CPUSet{"exclusive_a": cpuset.New(3, 51)}, EPCBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	rt := nritest.StartRuntime(t, cfg.Socket)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- nodeagent.Run(ctx, cfg, quiet()) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	rt.WaitSynced(t, 1)

	pod := &api.PodSandbox{Id: "p1", Uid: "uid1", Name: "p", Namespace: "ns"}
	ctr := &api.Container{Id: "c1", PodSandboxId: "p1", Name: "app", Env: []string{grant.EnvName("c1") + "=c1"},
		Linux: &api.LinuxContainer{CgroupsPath: "/kubepods/p1/c1"}}
	rpl, err := rt.Create(ctx, pod, ctr)
	if err != nil {
		t.Fatal(err)
	}
	res := rpl.GetAdjust().GetLinux().GetResources()
	if got := res.GetCpu().GetCpus(); got != "3,51" {
		t.Errorf("cpuset %q, want the grant's 3,51", got)
	}
	if got := res.GetUnified()["misc.max"]; got != "sgx_epc 1048576" {
		t.Errorf("unified misc.max %q, want sgx_epc 1048576", got)
	}

	ctr2 := &api.Container{Id: "c2", PodSandboxId: "p1", Name: "other", Env: []string{grant.EnvName("c9") + "=c9"},
		Linux: &api.LinuxContainer{CgroupsPath: "/kubepods/p1/c2"}}
	if _, err := rt.Create(ctx, pod, ctr2); err == nil || !strings.Contains(err.Error(), "DRA claim c9: no grant in "+cfg.DRAStateDir) {
		t.Errorf("a claim with no grant: %v", err)
	}
}

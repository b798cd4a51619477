package nodeagent

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadNodeHostIsolation: the agent reads what the host isolated (sysfs, and the kernel
// command line under --proc) where it reads the topology, logs it, and its pools follow.
func TestLoadNodeHostIsolation(t *testing.T) {
	const fx = "isolcpus-smt-apart" // isolcpus=managed_irq,domain,2-7,18-23 nohz_full=2-7,18-23
	pools := filepath.Join(t.TempDir(), "poolconfig-a.yaml")
	if err := os.WriteFile(pools, []byte("unpooledCPUs: default\npools: {exclusive_e: {cpus: \"2-5\", isolatedCPUs: require}}\n"),
		0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Pools: pools, NodeName: "n1", Sysfs: "../cpu/topology/testdata/sysfs/" + fx}
	cfg.CoreSched.ProcRoot = "../cpu/topology/testdata/procfs/" + fx
	var logs bytes.Buffer
	node, err := LoadNode(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if got := node.Topology.Isolation.ManagedIRQ.String(); got != "2-7,18-23" {
		t.Errorf("managed_irq CPUs %q, want 2-7,18-23 (from the command line)", got)
	}
	if got := node.Pools.Default.CPUs.String(); got != "0-1,8-17,24-31" {
		t.Errorf("default pool %s, want the CPUs the kernel balances, 0-1,8-17,24-31", got)
	}
	for _, want := range []string{`msg="host isolation" cpus="isolcpus domain 2-7,18-23`,
		`CPUs 6-7,22-23 are isolated from the kernel's load balancing`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

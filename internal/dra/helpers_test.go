package dra_test

import (
	"path/filepath"
	"testing"

	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/dra"
)

// sysfs discovers one of the topology package's captured sysfs fixtures.
func sysfs(t testing.TB, name string) *topology.Topology {
	t.Helper()
	topo, err := topology.Discover(filepath.Join("..", "cpu", "topology", "testdata", "sysfs", name))
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// synthetic builds a topology.Synthetic spec.
func synthetic(t testing.TB, spec string) *topology.Topology {
	t.Helper()
	topo, err := topology.Synthetic(spec)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// inventory resolves the pool config text on topo and builds the inventory.
func inventory(t testing.TB, topo *topology.Topology, config string, epcBytes int64) *dra.Inventory {
	t.Helper()
	cfg, err := pools.Parse("test", []byte(config))
	if err != nil {
		t.Fatal(err)
	}
	layout, err := pools.Resolve(cfg, topo)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := dra.NewInventory(topo, layout, epcBytes)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// dualSocketConfig, on the dual-socket-smt-apart fixture (core c has threads c and c+48;
// cores 0-23 on socket/NUMA 0, L3 0; 24-47 on socket/NUMA 1, L3 24): three whole-core DRA
// units, a device plugin pool that must not be published, and a DRA shared pool.
const dualSocketConfig = `pools:
  exclusive_dra: {cpus: "4-5,28", hyperThreadingPolicy: multiThreaded, requestAPI: dra}
  exclusive_dp: {cpus: "6-7", hyperThreadingPolicy: multiThreaded}
  shared_dra: {cpus: "2-3", requestAPI: dra}
  default: {cpus: "0-1"}
`

const (
	node   = "node-a"
	claimA = "6f1c1b1e-0d0a-4c3b-9a55-1f6a3c9d2e01"
	claimB = "6f1c1b1e-0d0a-4c3b-9a55-1f6a3c9d2e02"
	podA   = "0b6f7d2c-5f6e-4e8e-8d4b-2a9c1b3d4e5f"
)

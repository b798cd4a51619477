package pools_test

import (
	"fmt"

	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
)

func ExampleResolve() {
	cfg, err := pools.Parse("poolconfig-caas.yaml", []byte(`
pools:
  exclusive_caas: {cpus: "2-3", hyperThreadingPolicy: singleThreaded}
  shared_caas:    {cpus: "1"}
nodeSelector: {nodeType: caas}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	// A node with 4 cores of 2 threads: CPUs c and c+4 share core c. The exclusive pool lists
	// physical cores 2 and 3 and owns their siblings 6 and 7 too.
	topo := &topology.Topology{CPUs: map[int]topology.CPU{}}
	for id := 0; id < 8; id++ {
		topo.CPUs[id] = topology.CPU{ID: id, Core: id % 4}
	}
	node, err := pools.Resolve(cfg, topo)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range node.Pools {
		fmt.Printf("%-14s %-9s CPUs %-7s %s", p.Name, p.Type, p.CPUs, p.HTPolicy)
		if !p.Devices.IsEmpty() {
			fmt.Printf(", devices %s", p.Devices)
		}
		fmt.Println()
	}
	for _, w := range node.Warnings {
		fmt.Println("warning:", w)
	}
	// Output:
	// default        default   CPUs 0,4-5   singleThreaded
	// exclusive_caas exclusive CPUs 2-3,6-7 singleThreaded, devices 2-3
	// shared_caas    shared    CPUs 1       singleThreaded
	// warning: CPUs 0,4-5 are in no pool: they join the default pool "default"
}

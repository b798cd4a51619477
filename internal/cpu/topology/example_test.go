package topology_test

import (
	"fmt"

	"github.com/podfence/podfence/internal/cpu/topology"
)

func ExampleSynthetic() {
	topo, err := topology.Synthetic("sockets=2,numa=4,cores=64,threads=2")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(topo.Summary())
	fmt.Println("siblings of CPU 0:", topo.Siblings(0))
	fmt.Println("NUMA node 1:", topo.CPUsInNUMA(1))
	fmt.Println("CPU 200:", topo.Placement(200))

	_, err = topology.Synthetic("sockets=2,numa=3,cores=64")
	fmt.Println(err)
	// Output:
	// 2 sockets, 4 NUMA nodes, 128 cores, 256 CPUs (SMT2), 4 L3 groups
	// siblings of CPU 0: 0,128
	// NUMA node 1: 32-63,160-191
	// CPU 200: s1/n2/c72
	// synthetic topology "sockets=2,numa=3,cores=64": numa "3": want a multiple of sockets (2)
}

func ExampleDiscover() {
	// On a node: topology.Discover("/sys").
	topo, err := topology.Discover("testdata/sysfs/epyc-4numa-multi-l3")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(topo.Summary())
	for _, l3 := range topo.L3Groups()[:2] {
		fmt.Printf("L3 group %d: %s\n", l3, topo.CPUsInL3(l3))
	}
	// Output:
	// 1 socket, 4 NUMA nodes, 32 cores, 64 CPUs (SMT2), 8 L3 groups
	// L3 group 0: 0-3,32-35
	// L3 group 4: 4-7,36-39
}

func ExampleDiscoverHost() {
	// On a node: topology.DiscoverHost("/sys", "/proc").
	topo, err := topology.DiscoverHost("testdata/sysfs/isolcpus-smt-apart", "testdata/procfs/isolcpus-smt-apart")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(topo.Summary())
	fmt.Println(topo.Isolation.Summary())
	fmt.Println("isolated:", topo.Isolation.Isolated())
	// Output:
	// 1 socket, 1 NUMA node, 16 cores, 32 CPUs (SMT2), 1 L3 group
	// isolcpus domain 2-7,18-23 (not load balanced), nohz_full 2-7,18-23, rcu_nocbs 2-7,18-23, managed_irq 2-7,18-23
	// isolated: 2-7,18-23
}

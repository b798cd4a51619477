package epc_test

import (
	"fmt"

	"github.com/podfence/podfence/internal/epc"
)

func ExampleResolve() {
	pod := map[string]string{
		"epc-limit.nri.io/container.enclave": "64Mi",
		"epc-limit.nri.io/pod":               "1048576",
	}
	l, key, err := epc.Resolve(pod, "enclave")
	fmt.Println(l.MiscMax(), key, err)
	l, key, err = epc.Resolve(pod, "sidecar")
	fmt.Println(l.MiscMax(), key, err)

	_, _, err = epc.Resolve(map[string]string{"epc-limit.nri.io": "64MB"}, "enclave")
	fmt.Println(err)
	// Output:
	// sgx_epc 67108864 epc-limit.nri.io/container.enclave <nil>
	// sgx_epc 1048576 epc-limit.nri.io/pod <nil>
	// annotation epc-limit.nri.io="64MB": not a number of bytes: want a whole number of bytes, decimal ("1048576") or a Kubernetes quantity ("1Mi", "64M"); 0 means no limit
}

func ExamplePlan() {
	v2 := epc.Node{Supported: true, Unified: true}
	mainline := epc.Node{Reason: "/sys/fs/cgroup/misc.capacity lists no sgx_epc"}
	sgxEPCPlugin := map[string]string{"misc.max": "sgx_epc 4096"} // set by nri-plugins sgx-epc, run earlier
	fmt.Println(epc.Plan(epc.Bytes(4096), v2, epc.Strict, epc.AtCreate, nil))
	fmt.Println(epc.Plan(epc.Bytes(4096), v2, epc.Strict, epc.AtStart, nil))
	fmt.Println(epc.Plan(epc.Bytes(4096), mainline, epc.BestEffort, epc.AtCreate, nil))
	fmt.Println(epc.Plan(epc.Bytes(4096), v2, epc.Strict, epc.AtCreate, sgxEPCPlugin))
	// Output:
	// unified <nil>
	// start <nil>
	// unenforced <nil>
	// yielded <nil>
}

package podapi_test

import (
	"fmt"

	"github.com/podfence/podfence/podapi"
)

func ExampleParseCPUPools() {
	reqs, err := podapi.ParseCPUPools(`{"app": {"exclusive_dp": 2, "shared_caas": "500"}, "sidecar": {}}`)
	fmt.Println(reqs["app"], reqs["sidecar"], err)

	_, err = podapi.ParseCPUPools(`{"app": {"exclusive_dp": 0}}`)
	fmt.Println(err)
	// Output:
	// exclusive_dp=2,shared_caas=500  <nil>
	// annotation podfence.io/cpu-pools="{\"app\": {\"exclusive_dp\": 0}}": container "app" pool "exclusive_dp": amount "0" must be above 0: want JSON {"<container>": {"<pool>": <amount>}} where <amount> counts whole CPUs for an exclusive pool and millicpu for the shared pool, e.g. {"app": {"exclusive_dp": 2, "shared_caas": 500}}
}

package deviceplugin_test

import (
	"fmt"
	"log/slog"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/nodeagent/deviceplugin"
)

// The agent builds the plugin from the node it plans for and runs it beside the NRI plugin:
//
//	go func() { errs <- dp.Run(ctx) }()
func ExampleNew() {
	topo, _ := topology.Synthetic("sockets=1,cores=4,threads=2")
	// A CPU-Pooler config: exclusive_dp lists physical cores 2 and 3 (with CPUs 6 and 7).
	cfg, _ := pools.Parse("poolconfig-a.yaml", []byte(`
resourceBaseName: nokia.k8s.io
pools:
  default:       {cpus: "0,4"}
  shared_caas:   {cpus: "1,5"}
  exclusive_dp:  {cpus: "2-3", hyperThreadingPolicy: multiThreaded}
`))
	layout, _ := pools.Resolve(cfg, topo)
	node := plan.NewNode(topo, layout, plan.Policy{})

	dp, err := deviceplugin.New(node, deviceplugin.Options{
		Dir:    "/var/lib/kubelet/device-plugins",
		Online: deviceplugin.SysfsOnline("/sys"),
	}, slog.Default())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(dp.Resources())
	// Output: [nokia.k8s.io/exclusive_dp nokia.k8s.io/shared_caas]
}

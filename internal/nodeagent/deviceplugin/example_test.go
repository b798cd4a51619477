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
	cfg, _ := pools.Parse("poolconfig-a.yaml", []byte(`
pools:
  default:       {cpus: "0,4"}
  shared_caas:   {cpus: "1,5"}
  exclusive_dp:  {cpus: "2-3,6-7", hyperThreadingPolicy: multiThreaded}
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
	// Output: [podfence.io/exclusive_dp podfence.io/shared_caas]
}

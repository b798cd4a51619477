package pools

import (
	"fmt"
	"strings"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

// InForceFile is the name of the agent's record of the layout in force (ConfigText), in its
// checkpoint directory: the layout its running containers were placed by. The DRA driver
// publishes that layout while a changed pool config waits for containers to end.
const InForceFile = "pools-in-force.yaml"

// ConfigText writes the resolved layout as a pool config that resolves to the same layout on
// the same node (the agent's record of the layout in force): its resourceBaseName and
// exclusiveCPUs; each pool with the CPUs it lists (an exclusive pool under Cores: its
// devices, which stand for their cores), its policy and isolation; the default pool with every CPU it
// holds, so that unpooled CPUs that joined it are listed and the others stay unused.
func (n *Node) ConfigText() string {
	var b strings.Builder
	meaning := Cores
	if n.Config != nil {
		if n.Config.ResourceBaseName != "" {
			fmt.Fprintf(&b, "resourceBaseName: %s\n", n.Config.ResourceBaseName)
		}
		meaning = orDefault(n.Config.ExclusiveCPUs, Cores)
	}
	fmt.Fprintf(&b, "exclusiveCPUs: %s\nunpooledCPUs: %s\npools:\n", meaning, Unused)
	for _, p := range n.Pools {
		cpus := p.CPUs
		if meaning == Cores && p.Type == allocation.TypeExclusive {
			cpus = p.Devices
		}
		api := ""
		if p.ViaDRA() {
			api = ", requestAPI: " + string(DRA)
		}
		fmt.Fprintf(&b, "  %s: {cpus: %q, hyperThreadingPolicy: %s%s%s}\n", p.Name, cpus.String(), p.HTPolicy, api, p.Isolation.fields())
	}
	return b.String()
}

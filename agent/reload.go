package agent

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/podfence/podfence/plan"
	"github.com/podfence/podfence/pools"
)

// reloader is what watchPools needs of the agent (nri.Agent.Reload).
type reloader interface {
	Reload(node *plan.Node) error
}

// watchPools re-reads the pool config every interval (a mounted ConfigMap changes in place)
// and hands a changed layout to the NRI agent, which takes it only if no running container
// would have to move, then to the others (the device plugin). Each outcome is logged once
// per distinct config.
func watchPools(ctx context.Context, cfg Config, cur *plan.Node, rs []reloader, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	seen := layoutKey(cur.Pools)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		layout, err := resolvePools(cfg, cur.Topology)
		key := ""
		if err == nil {
			key = layoutKey(layout)
		} else {
			key = "error: " + err.Error()
		}
		if key == seen {
			continue
		}
		seen = key
		if err != nil {
			log.Error("pool config changed but is unusable; keeping the current one", "err", err)
			continue
		}
		node := plan.NewNode(cur.Topology, layout, cur.Policy)
		if err := rs[0].Reload(node); err != nil {
			log.Error("pool config change refused", "err", err)
			continue
		}
		for _, r := range rs[1:] {
			if err := r.Reload(node); err != nil {
				log.Error("pool config reload", "err", err)
			}
		}
		cur = node
		log.Info("pool config reloaded", "poolConfig", layout.Source, "pools", describe(layout))
	}
}

// layoutKey identifies a layout: every pool's name, CPUs and policy.
func layoutKey(layout *pools.Node) string {
	key := ""
	for _, p := range layout.Pools {
		key += fmt.Sprintf("%s=%s/%s ", p.Name, p.CPUs, p.HTPolicy)
	}
	return key
}

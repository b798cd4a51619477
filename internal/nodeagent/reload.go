package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
)

// reloader is what watchPools needs of the agent (nriplugin.Plugin.Reload).
type reloader interface {
	Reload(node *plan.Node) error
}

// ReloadInterval is a flag value (pflag.Value) for Config.PoolsReloadInterval: a duration
// that is 0 (never re-read) or positive.
type ReloadInterval time.Duration

func (d *ReloadInterval) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if err := checkReloadInterval(v); err != nil {
		return err
	}
	*d = ReloadInterval(v)
	return nil
}

func (d *ReloadInterval) String() string { return time.Duration(*d).String() }
func (d *ReloadInterval) Type() string   { return "duration" }

func checkReloadInterval(d time.Duration) error {
	if d < 0 {
		return errors.New("negative interval: want 0 (never re-read the pool config) or a positive duration such as 10s")
	}
	return nil
}

// watchPools re-reads the pool config every interval (a mounted ConfigMap changes in place)
// and hands a changed layout to the NRI agent, which takes it only if no running container
// would have to move, then to the others (the device plugin). Each outcome is logged once
// per distinct config. A file whose bytes did not change is not parsed again, and one over
// pools.MaxConfigBytes is refused unread.
//
// With the Node's labels from the API server (cfg.live), a change of them is a tick too: the
// config they select is offered the same way. interval 0 then means: on label changes only.
func watchPools(ctx context.Context, cfg Config, cur *plan.Node, rs []reloader, interval time.Duration, log *slog.Logger) {
	var tick <-chan time.Time
	if interval > 0 {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	var relabelled <-chan struct{}
	if cfg.live != nil {
		relabelled = cfg.live.changed
	}
	seen := configKey(cur.Pools)
	loader := new(pools.Loader)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
		case <-relabelled:
		}
		if n, ok := rs[0].(interface{ Node() *plan.Node }); ok { // CPUs may have gone offline
			cur = n.Node()
		}
		if _, known := cfg.live.current(); cfg.live != nil && !known { // no config is selected without them
			retryPending(rs[0], log)
			continue
		}
		layout, err := resolvePools(loader, cfg, cur.Topology)
		key := ""
		if err == nil {
			key = configKey(layout)
		} else {
			key = "error: " + err.Error()
		}
		if key == seen {
			retryPending(rs[0], log)
			continue
		}
		seen = key
		if err != nil {
			log.Error("pool config changed but is unusable; keeping the current one", "err", err)
			continue
		}
		node := plan.NewNode(cur.Topology, layout, cur.Policy)
		if err := rs[0].Reload(node); errors.Is(err, nriplugin.ErrPending) {
			log.Warn("pool config change pending: taken once no running container would move", "err", err)
			continue
		} else if err != nil {
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

// retryPending tries a pending layout again (the NRI agent also does at every release of a
// container that blocks it); the agent tells the others through nriplugin.Options.LayoutChanged.
func retryPending(r reloader, log *slog.Logger) {
	if p, ok := r.(interface{ RetryReload() bool }); ok && p.RetryReload() {
		log.Info("pending pool config taken")
	}
}

// configKey identifies a pool config as the reload loop compares them: its layout
// (layoutKey), the pools requested through DRA and the pools' isolation. A change of
// requestAPI or isolation alone moves no container, but the device plugin must stop (or
// start) advertising the pool, and later containers must get what the pool now asks.
func configKey(layout *pools.Node) string {
	key := layoutKey(layout)
	for _, p := range layout.Pools {
		if p.ViaDRA() {
			key += "dra:" + p.Name + " "
		}
		if p.Isolation != (pools.Isolation{}) {
			key += fmt.Sprintf("isolation:%s=%+v ", p.Name, p.Isolation)
		}
	}
	return key
}

// layoutKey identifies a layout: every pool's name, CPUs and policy.
func layoutKey(layout *pools.Node) string {
	key := ""
	for _, p := range layout.Pools {
		key += fmt.Sprintf("%s=%s/%s ", p.Name, p.CPUs, p.HTPolicy)
	}
	return key
}

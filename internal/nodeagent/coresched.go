package nodeagent

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	csenforce "github.com/podfence/podfence/internal/coresched/enforce"
	"github.com/podfence/podfence/internal/coresched/kernel"
)

// coreSched builds the core-scheduling extension (the real prctl) and runs its process-event
// watcher and reconcile until ctx ends. A node that cannot make cookies still gets it: it
// refuses or reports pods that explicitly ask for a group.
func coreSched(ctx context.Context, cfg Config, reg prometheus.Registerer, log *slog.Logger) (*csenforce.Manager, error) {
	c := cfg.CoreSched
	if c.CgroupRoot == "" {
		c.CgroupRoot = cfg.CgroupRoot
	}
	m, err := csenforce.New(c, kernel.Prctl{}, reg, log)
	if err != nil {
		return nil, fmt.Errorf("core scheduling: %w", err)
	}
	go func() {
		if err := m.Run(ctx); err != nil {
			log.Error("core scheduling stopped", "err", err)
		}
	}()
	return m, nil
}

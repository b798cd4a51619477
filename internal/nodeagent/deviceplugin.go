package nodeagent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/nodeagent/deviceplugin"
)

// dirPoll is how often the agent looks for a kubelet device-plugin directory that is not
// there yet (the kubelet creates it when it starts).
const dirPoll = 2 * time.Second

// startDevicePlugin serves the pools to the kubelet from cfg.DevicePluginDir until ctx
// ends, waiting for the directory if the kubelet has not made it yet. It returns the
// plugin (to take pool reloads) and a channel that yields Run's error once it ends; a
// failed plugin calls stop. Without a directory configured it returns nil and a closed
// channel.
func startDevicePlugin(ctx context.Context, stop func(), cfg Config, node *plan.Node, log *slog.Logger) (*deviceplugin.Plugin,
	<-chan error, error) {
	done := make(chan error, 1)
	if cfg.DevicePluginDir == "" {
		close(done)
		return nil, done, nil
	}
	log = log.With("component", "deviceplugin")
	dp, err := deviceplugin.New(node, deviceplugin.Options{Dir: cfg.DevicePluginDir, Domain: cfg.ResourceDomain,
		Online: deviceplugin.SysfsOnline(cfg.Sysfs)}, log)
	if err != nil {
		return nil, nil, fmt.Errorf("device plugin: %w", err)
	}
	go func() {
		defer close(done)
		if !waitDir(ctx, cfg.DevicePluginDir, log) {
			return
		}
		if err := dp.Run(ctx); err != nil {
			done <- fmt.Errorf("device plugin: %w", err)
			stop()
		}
	}()
	return dp, done, nil
}

// waitDir returns true once dir exists, false if ctx ends first; it says once that it waits.
func waitDir(ctx context.Context, dir string, log *slog.Logger) bool {
	t := time.NewTicker(dirPoll)
	defer t.Stop()
	for said := false; ; said = true {
		_, err := os.Stat(dir)
		if err == nil {
			if said {
				log.Info("kubelet device-plugin directory appeared", "dir", dir)
			}
			return true
		}
		if !said {
			log.Warn("no kubelet device-plugin directory yet: pools are advertised once it appears", "dir", dir, "err", err)
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

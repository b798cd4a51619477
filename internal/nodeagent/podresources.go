package nodeagent

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/podfence/podfence/internal/kube/podresources"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
)

// podResources is the client of the kubelet's pod resources API on cfg.PodResourcesSocket,
// with its close; none when the socket is not configured. A socket that is not there (yet) is
// only logged: each pod's first container asks again (package nriplugin, kubelet.go).
func podResources(cfg Config, log *slog.Logger) (nriplugin.PodResources, func(), error) {
	if cfg.PodResourcesSocket == "" {
		return nil, func() {}, nil
	}
	c, err := podresources.Dial(cfg.PodResourcesSocket)
	if err != nil {
		return nil, nil, fmt.Errorf("kubelet pod resources: %w", err)
	}
	if _, err := os.Stat(cfg.PodResourcesSocket); err != nil {
		log.Warn("no kubelet pod resources socket (yet): pods without a podfence.io/cpu-pools annotation get no pools from "+
			"their devices while it is missing (mount the kubelet's pod-resources directory into the agent's pod)", "err", err)
	} else {
		log.Info("kubelet pod resources", "socket", cfg.PodResourcesSocket)
	}
	return c, func() { _ = c.Close() }, nil
}

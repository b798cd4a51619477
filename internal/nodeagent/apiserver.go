package nodeagent

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/podfence/podfence/internal/kube/kubeapi"
	"github.com/podfence/podfence/internal/observe/metrics"
)

// userAgent names the agent to the API server.
const userAgent = "podfence-agent"

// apiClient is the agent's one client of the API server, for its Events (reporter.go), its
// Node's info (package nodeinfo) and labels (nodelabels.go) and the review of metrics tokens
// (package authz): that of cfg.Kubeconfig or, without one, of the pod the agent runs in
// (kubeapi.Load). It is nil when none needs it, outside a pod without a kubeconfig, and when
// the credentials cannot be used but Events and metrics can do without (the pod's service
// account unreadable, or Events off): logged, the agent runs without. With Events on, a kubeconfig that cannot be read, or
// credentials the client refuses, is an error; with metrics tokens to review, any is.
func apiClient(cfg Config, log *slog.Logger) (*kubeapi.Client, error) {
	reviews := cfg.MetricsAddress != "" && cfg.MetricsAuth == metrics.AuthKubernetes
	if !cfg.Events && !cfg.PublishNode && !reviews && !labelsFromAPI(cfg) {
		return nil, nil
	}
	from := cfg.Kubeconfig
	if from == "" {
		from = "in-cluster service account"
	}
	kc, err := kubeapi.Load(cfg.Kubeconfig)
	if errors.Is(err, kubeapi.ErrNotInCluster) {
		log.Info("no API server: not in a pod and no kubeconfig given; Kubernetes Events and node info off")
		return nil, nil
	}
	fatal := reviews || cfg.Events && (err == nil || cfg.Kubeconfig != "")
	var c *kubeapi.Client
	if err == nil {
		c, err = kubeapi.New(kc, userAgent)
	}
	switch {
	case err != nil && fatal:
		return nil, fmt.Errorf("API server (%s): %w", from, err)
	case err != nil:
		log.Warn("no API server: Kubernetes Events and node info off", "credentials", from, "err", err)
		return nil, nil
	}
	log.Info("API server", "server", kc.Host, "credentials", from, "events", cfg.Events, "publishNodeInfo", cfg.PublishNode,
		"metricsTokenReviews", reviews, "nodeLabels", labelsFromAPI(cfg))
	return c, nil
}

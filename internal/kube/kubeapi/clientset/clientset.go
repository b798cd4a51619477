// Package clientset connects client-go to the API server, for commands that need its
// informers (podfence extender). The node agent must not import it: linked into the agent,
// client-go costs it megabytes of resident memory; the agent uses package kubeapi.
package clientset

import (
	"errors"
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ErrNoAPIServer: no kubeconfig was given and the process does not run in a pod.
var ErrNoAPIServer = errors.New("no kubeconfig and not in a pod")

// New connects to the API server of kubeconfig or, when it is empty, of the pod the
// process runs in (ErrNoAPIServer outside a pod).
func New(kubeconfig, userAgent string) (kubernetes.Interface, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else if cfg, err = rest.InClusterConfig(); errors.Is(err, rest.ErrNotInCluster) {
		return nil, ErrNoAPIServer
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	cfg.UserAgent = userAgent
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return c, nil
}

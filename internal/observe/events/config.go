package events

import "github.com/podfence/podfence/internal/kube/kubeapi"

// Config says how to reach the API server: a kubeapi.Config. It and the names below stand
// for package kubeapi's, for callers of this package that have not moved to it.
type Config = kubeapi.Config

// ServiceAccountDir is where the kubelet mounts a pod's service-account credentials.
const ServiceAccountDir = kubeapi.ServiceAccountDir

// ErrNotInCluster is kubeapi.ErrNotInCluster: the process does not run in a pod.
var ErrNotInCluster = kubeapi.ErrNotInCluster

// InCluster is kubeapi.InCluster: the config of a process in a pod.
func InCluster(dir string, getenv func(string) string) (Config, error) {
	return kubeapi.InCluster(dir, getenv)
}

// Kubeconfig is kubeapi.Kubeconfig: the config of the current context of a kubeconfig file.
func Kubeconfig(path string) (Config, error) { return kubeapi.Kubeconfig(path) }

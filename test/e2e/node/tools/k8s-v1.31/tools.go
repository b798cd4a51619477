//go:build tools

// Package tools pins the Kubernetes v1.31.0 components of the node e2e (test/e2e/node/run.sh,
// PODFENCE_E2E_K8S_VERSION=v1.31.0): `go install k8s.io/kubernetes/cmd/...@v1.31.0` is refused
// (k8s.io/kubernetes replaces its staging modules with local paths), so this wrapper module
// requires k8s.io/kubernetes v1.31.0 and replaces each k8s.io staging module with its
// published v0.31.0; test/e2e/node/k8s.sh builds from it with the version ldflags kubectl needs:
//
//	cd test/e2e/node/tools/k8s-v1.31 && go build -ldflags "-X k8s.io/component-base/version.gitVersion=v1.31.0 ..." \
//	    -o <bin>/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)

// Package example holds the embedded default that `podfence plan` runs with no arguments: a
// two-socket SMT node, a CPU-Pooler pool config and a handful of pods, one of which does not fit.
package example

import _ "embed"

// Topology is the synthetic node: 2 sockets, 1 NUMA node each, 8 cores per socket, SMT2.
const Topology = "sockets=2,numa=2,cores=8,threads=2"

// PoolConfigName is the name the pool config has in its ConfigMap.
const PoolConfigName = "poolconfig-example.yaml"

// PoolConfig is the pool config (CPU-Pooler schema).
//
//go:embed poolconfig-example.yaml
var PoolConfig []byte

// Pods are the pods to plan, in order.
//
//go:embed pods.yaml
var Pods []byte

// NodeLabels are the node's labels, matched against the config's nodeSelector.
func NodeLabels() map[string]string { return map[string]string{"podfence.io/example": "true"} }

// Package webhook is podfence's admission webhook for pod CREATE (admission.k8s.io/v1): it
// turns what a pod asks of the node in Kubernetes terms into what the node agent reads, and
// refuses requests the agent would refuse later, at container start, with less context.
//
// Mutate computes a JSON patch (RFC 6902) from the pod alone and the webhook's Config:
//
//   - podfence.io/cpu-pools: the agent's request annotation, JSON
//     {"<container>": {"<pool>": <amount>}} with sorted keys, from the containers' (and init
//     containers') pool resources <domain>/<pool> (domain podfence.io or nokia.k8s.io).
//     Amounts count devices: whole CPUs for an exclusive pool, millicpu for the shared pool.
//     The annotation is removed when no container asks for a pool.
//   - podfence.io/sidecars: the pod's native sidecars (init containers with restartPolicy
//     Always), comma-separated in spec order, when a container asks for a pool or uses a DRA
//     claim (sidecars.go): the agent keeps what a sidecar holds when it exits, for its restart.
//   - epc-limit.nri.io/container.<name>: the decimal byte count of the container's
//     sgx.intel.com/epc limit (package epc reads it on the node).
//   - the core-scheduling labels podfence.io/core-sched-group and -policy from the first
//     Profile that matches a pod carrying neither podfence's nor Koordinator's labels.
//
// Applying the patch and mutating again gives no patch, so reinvocation is harmless.
//
// Validate refuses a pod whose pool or EPC resources break the rules (see poolRequests and
// epcLimits), whose annotations do not match its resources and sidecars or cannot be read by
// the agent, whose process pinning annotation (podfence.io/cpus, nokia.k8s.io/cpus) fails the agent's
// own check (pinning.Spec.Check: unknown containers, pools the container does not request,
// more CPUs than it requests; refused in the agent's words), or whose core-scheduling
// labels are invalid.
// It wraps nothing: the agent does that at container creation.
//
// Both are pure functions of a corev1.Pod. NewHandler serves them over HTTP as /mutate and
// /validate, and Serve runs it over TLS with certificates and config reloaded on change.
package admission

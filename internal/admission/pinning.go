package admission

import (
	"github.com/podfence/podfence/internal/pinning"
	"github.com/podfence/podfence/podapi"
)

// checkPinning checks the process pinning annotation against the pool requests with the
// agent's own rules (pinning.Spec.Check), so that the webhook refuses a pod with the words
// the agent would use: every entry names a container of the pod, every exclusive or shared
// process names a pool its container asks for, and the processes' CPUs fit the request.
func checkPinning(annotations map[string]string, reqs map[string]poolRequest) []error {
	spec, ok, err := pinning.FromAnnotations(annotations)
	if !ok || err != nil {
		return []error{err}
	}
	key := pinning.Key
	if _, ok := annotations[key]; !ok {
		key = pinning.CPUPoolerKey
	}
	pools := make(map[string]pinning.Pools, len(reqs))
	for name, r := range reqs {
		pools[name] = r.pinningPools()
	}
	if err := spec.Check(pools); err != nil {
		return []error{&podapi.AnnotationError{Key: key, Value: annotations[key], Err: err}}
	}
	return nil
}

// pinningPools is the request as the pinning rules see it. The counts fit an int: poolRequests
// bounds them (8192 CPUs, 8192000 millicpu).
func (r poolRequest) pinningPools() pinning.Pools {
	return pinning.Pools{Exclusive: r.Exclusive, CPUs: int(r.CPUs), Shared: r.Shared, MilliCPU: int(r.MilliCPU)}
}

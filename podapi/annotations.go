package podapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/quantity"
)

// Annotations that carry pool requests to the agent (CRI carries no extended resources).
const (
	// AnnotationExclusiveCPUs is a container annotation set by podfence's device plugin in its
	// Allocate response: the exact exclusive CPUs chosen for the container, a Linux CPU list
	// ("4-5,12"). The agent uses them as given.
	AnnotationExclusiveCPUs = "podfence.io/exclusive-cpus"
	// AnnotationCPUPools is a pod annotation written by the admission webhook: JSON
	// {"<container>": {"<pool>": <amount>}}. Amounts count devices as the pool's extended
	// resource does: whole CPUs for an exclusive pool, millicpu for the shared pool. An amount
	// is a JSON number or a string holding a Kubernetes quantity ("2", "500").
	AnnotationCPUPools = "podfence.io/cpu-pools"
	// AnnotationSidecars is a pod annotation written by the admission webhook: the names of
	// the pod's native sidecars (init containers with restartPolicy Always), comma-separated
	// in spec order. A sidecar runs for the pod's whole life: the agent keeps what it holds
	// when it exits, for its restart, and gives it to no other container.
	AnnotationSidecars = "podfence.io/sidecars"
)

// Request is what one container asks of the pools: pool name → amount. Exclusive pools count
// whole CPUs; the shared pool counts millicpu as a whole number (500 = half a CPU), as
// CPU-Pooler's one-device-per-millicpu resource does. An empty Request means the default pool.
type Request map[string]resource.Quantity

// Pools returns the requested pool names, sorted.
func (r Request) Pools() []string {
	names := make([]string, 0, len(r))
	for n := range r {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// String is "exclusive_a=2,shared_b=500".
func (r Request) String() string {
	s := ""
	for i, n := range r.Pools() {
		if i > 0 {
			s += ","
		}
		q := r[n]
		s += n + "=" + q.String()
	}
	return s
}

// Sidecars reads a podfence.io/sidecars value: the sidecars' names.
func Sidecars(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// IsSidecar says whether a pod's annotations name container a native sidecar.
func IsSidecar(annotations map[string]string, container string) bool {
	return slices.Contains(Sidecars(annotations[AnnotationSidecars]), container)
}

// maxAmount bounds an amount: a million CPUs, a billion millicpu, beyond any node's pools.
// Larger values (which may overflow int64) are refused as written.
var maxAmount = resource.MustParse("1G")

// maxAnnotationLen bounds the work spent on one annotation value (Kubernetes allows 256 KiB
// for all annotations of an object together).
const maxAnnotationLen = 64 << 10

const (
	wantExclusiveCPUs = `want a non-empty Linux CPU list such as "4-5,12"`
	wantCPUPools      = `want JSON {"<container>": {"<pool>": <amount>}} where <amount> counts whole CPUs ` +
		`for an exclusive pool and millicpu for the shared pool, e.g. {"app": {"exclusive_dp": 2, "shared_caas": 500}}`
)

// AnnotationError is an annotation whose value the agent cannot use. The container that
// carries it is refused; Err says what is wrong and what is allowed.
type AnnotationError struct {
	Key   string
	Value string
	Err   error
}

func (e *AnnotationError) Error() string {
	v := e.Value
	if len(v) > 200 {
		v = strings.ToValidUTF8(v[:200], "") + "…"
	}
	return fmt.Sprintf("annotation %s=%q: %v", e.Key, v, e.Err)
}

func (e *AnnotationError) Unwrap() error { return e.Err }

// ParseExclusiveCPUs reads a podfence.io/exclusive-cpus value.
func ParseExclusiveCPUs(v string) (cpuset.CPUSet, error) {
	bad := func(err error) error {
		return &AnnotationError{Key: AnnotationExclusiveCPUs, Value: v, Err: err}
	}
	if len(v) > maxAnnotationLen {
		return cpuset.New(), bad(fmt.Errorf("value is %d bytes, over the limit of %d", len(v), maxAnnotationLen))
	}
	cpus, err := topology.ParseCPUList(v)
	if err != nil {
		return cpuset.New(), bad(fmt.Errorf("%w: %s", err, wantExclusiveCPUs))
	}
	if cpus.IsEmpty() {
		return cpus, bad(errors.New("no CPUs: " + wantExclusiveCPUs))
	}
	return cpus, nil
}

// ParseCPUPools reads a podfence.io/cpu-pools value into a request per container name. Pool
// keys are pool names ("exclusive_dp") or their resource names ("podfence.io/exclusive_dp",
// "nokia.k8s.io/exclusive_dp"). Amounts must be above 0; whether they fit the pool (whole CPUs,
// whole millicpu, pool exists) is the planner's call.
//
// Entries are checked in container name order, so the error names the same broken entry
// every time: the first one.
func ParseCPUPools(v string) (map[string]Request, error) { return ParseCPUPoolsFor(v, "") }

// ParseCPUPoolsFor is ParseCPUPools for the container named first: its own entry is checked
// before the others, so when it is broken the error names it.
func ParseCPUPoolsFor(v, first string) (map[string]Request, error) {
	out, err := parseCPUPools(v, first)
	if err != nil {
		return nil, &AnnotationError{Key: AnnotationCPUPools, Value: v, Err: fmt.Errorf("%w: %s", err, wantCPUPools)}
	}
	return out, nil
}

func parseCPUPools(v, first string) (map[string]Request, error) {
	if len(v) > maxAnnotationLen {
		return nil, fmt.Errorf("value is %d bytes, over the limit of %d", len(v), maxAnnotationLen)
	}
	var raw map[string]map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(v))
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("decode JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("decode JSON: data after the object")
	}
	if raw == nil {
		return nil, errors.New("not a JSON object")
	}
	names := slices.Sorted(maps.Keys(raw))
	if i := slices.Index(names, first); i > 0 {
		names = append(append([]string{first}, names[:i]...), names[i+1:]...)
	}
	out := make(map[string]Request, len(raw))
	for _, ctr := range names {
		byPool := raw[ctr]
		if ctr == "" {
			return nil, errors.New("empty container name")
		}
		req := Request{}
		for _, key := range slices.Sorted(maps.Keys(byPool)) {
			amount := byPool[key]
			pool, err := poolName(key)
			if err != nil {
				return nil, fmt.Errorf("container %q: %w", ctr, err)
			}
			if _, dup := req[pool]; dup {
				return nil, fmt.Errorf("container %q: pool %q is named twice", ctr, pool)
			}
			q, err := parseAmount(amount)
			if err != nil {
				return nil, fmt.Errorf("container %q pool %q: %w", ctr, pool, err)
			}
			req[pool] = q
		}
		out[ctr] = req
	}
	return out, nil
}

// poolName accepts "exclusive_dp" or "<domain>/exclusive_dp".
func poolName(key string) (string, error) {
	name := key
	if !strings.Contains(key, "/") {
		name = pools.ResourceName(key)
	}
	pool, ok := pools.ParseResourceName(name)
	if !ok {
		return "", fmt.Errorf("pool %q is not a pool name (letters, digits, '-', '_', '.'; at most 63) "+
			"or a resource name in domain %s", key, strings.Join(pools.Domains(), " or "))
	}
	return pool, nil
}

// parseAmount reads a JSON number or a JSON string holding a quantity; it must be above 0.
func parseAmount(raw json.RawMessage) (resource.Quantity, error) {
	text := string(bytes.TrimSpace(raw))
	if strings.HasPrefix(text, `"`) {
		if err := json.Unmarshal(raw, &text); err != nil {
			return resource.Quantity{}, fmt.Errorf("amount %s: %w", raw, err)
		}
	} else if text == "" || text[0] != '-' && (text[0] < '0' || text[0] > '9') {
		return resource.Quantity{}, fmt.Errorf("amount %s is neither a number nor a quantity string", raw)
	}
	q, err := quantity.Parse(text)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("amount %q is not a quantity: %w", text, err)
	}
	if q.Sign() <= 0 {
		return resource.Quantity{}, fmt.Errorf("amount %q must be above 0", text)
	}
	if q.Cmp(maxAmount) > 0 {
		return resource.Quantity{}, fmt.Errorf("amount %q is above 10^9, more than any pool has", text)
	}
	return q, nil
}

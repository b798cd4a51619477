// Package grant holds what the DRA driver prepared for one ResourceClaim on this node: the
// record the node agent reads when a container that uses the claim is created. It is plain
// data with a strict JSON form (Parse, Marshal), the environment marker the claim's CDI device
// puts in its containers (EnvName, ClaimsInEnv) and a directory store, one file per claim
// (Store).
//
// The marker only names a claim: what the container gets comes from the grant, and only a
// pod the claim is reserved for (PodUIDs) may use it.
package grant

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/utils/cpuset"
)

// Grant is one prepared ResourceClaim.
type Grant struct {
	ClaimUID  string
	Namespace string
	Name      string
	// PodUIDs are the pods the claim is reserved for (status.reservedFor).
	PodUIDs []string
	// Exclusive holds whole CPUs of exclusive pools, by pool name.
	Exclusive map[string]cpuset.CPUSet
	// Shared holds millicpu of shared pools, by pool name.
	Shared map[string]int64
	// EPCBytes is the SGX EPC limit the claim gives (0: none).
	EPCBytes int64
}

// UsedBy says whether the claim is reserved for the pod.
func (g Grant) UsedBy(podUID string) bool { return podUID != "" && slices.Contains(g.PodUIDs, podUID) }

// CPUs is the union of the grant's exclusive CPUs.
func (g Grant) CPUs() cpuset.CPUSet {
	all := cpuset.New()
	for _, s := range g.Exclusive {
		all = all.Union(s)
	}
	return all
}

// Pools returns the names of the grant's exclusive and shared pools, sorted.
func (g Grant) Pools() []string {
	var names []string
	for n := range g.Exclusive {
		names = append(names, n)
	}
	for n := range g.Shared {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Limits of a grant, so a damaged or hostile file cannot make the reader work hard.
const (
	maxUIDLen  = 128
	maxPods    = 256
	maxPools   = 64
	maxNameLen = 253
)

// CheckUID says what is wrong with a claim or pod UID, or returns nil: 1–128 characters of
// [0-9A-Za-z-] (a Kubernetes UID is a UUID). It keeps a UID safe as a file and env name part.
func CheckUID(field, uid string) error {
	const want = "want 1-128 characters of [0-9A-Za-z-], as a Kubernetes UID"
	if uid == "" || len(uid) > maxUIDLen {
		return fmt.Errorf("%s %q: %d characters (%s)", field, uid, len(uid), want)
	}
	for _, r := range uid {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || r == '-') {
			return fmt.Errorf("%s %q: has the character %q (%s)", field, uid, r, want)
		}
	}
	return nil
}

// Check says what is wrong with g, naming the field: UIDs, at least one pod, at least one of
// exclusive CPUs, a shared share or EPC, positive amounts, no CPU in two pools.
func (g Grant) Check() error {
	if err := CheckUID("claimUID", g.ClaimUID); err != nil {
		return err
	}
	if len(g.Namespace) > maxNameLen || len(g.Name) > maxNameLen {
		return fmt.Errorf("claim %s: namespace or name longer than %d characters", g.ClaimUID, maxNameLen)
	}
	if len(g.PodUIDs) == 0 || len(g.PodUIDs) > maxPods {
		return fmt.Errorf("claim %s: podUIDs has %d entries (want 1-%d: the pods the claim is reserved for)",
			g.ClaimUID, len(g.PodUIDs), maxPods)
	}
	for _, p := range g.PodUIDs {
		if err := CheckUID("podUIDs", p); err != nil {
			return fmt.Errorf("claim %s: %w", g.ClaimUID, err)
		}
	}
	if len(g.Exclusive)+len(g.Shared) > maxPools {
		return fmt.Errorf("claim %s: %d pools (at most %d)", g.ClaimUID, len(g.Exclusive)+len(g.Shared), maxPools)
	}
	seen := cpuset.New()
	for pool, cpus := range g.Exclusive {
		switch {
		case pool == "" || len(pool) > 63:
			return fmt.Errorf("claim %s: exclusive pool name %q (want 1-63 characters)", g.ClaimUID, pool)
		case cpus.IsEmpty():
			return fmt.Errorf("claim %s: exclusive pool %q: no CPUs (want a non-empty CPU list)", g.ClaimUID, pool)
		case !seen.Intersection(cpus).IsEmpty():
			return fmt.Errorf("claim %s: exclusive pool %q: CPUs %s also given in another pool", g.ClaimUID, pool,
				seen.Intersection(cpus))
		}
		seen = seen.Union(cpus)
	}
	for pool, m := range g.Shared {
		if pool == "" || len(pool) > 63 {
			return fmt.Errorf("claim %s: shared pool name %q (want 1-63 characters)", g.ClaimUID, pool)
		}
		if m <= 0 {
			return fmt.Errorf("claim %s: shared pool %q: millicpu %d (want > 0)", g.ClaimUID, pool, m)
		}
	}
	if g.EPCBytes < 0 {
		return fmt.Errorf("claim %s: epcBytes %d (want >= 0)", g.ClaimUID, g.EPCBytes)
	}
	if len(g.Exclusive) == 0 && len(g.Shared) == 0 && g.EPCBytes == 0 {
		return fmt.Errorf("claim %s: grants nothing (want exclusive CPUs, a shared share or EPC)", g.ClaimUID)
	}
	return nil
}

// EnvPrefix starts the environment variable a claim's CDI device sets in its containers:
// PODFENCE_CLAIM_<uid with '-' as '_'>=<uid>.
const EnvPrefix = "PODFENCE_CLAIM_"

// EnvName is the marker variable's name for a claim UID.
func EnvName(uid string) string { return EnvPrefix + strings.ReplaceAll(uid, "-", "_") }

// ClaimsInEnv returns the claim UIDs the markers in env ("NAME=value" entries) name, sorted and
// unique. A marker whose value is not a UID or does not match its name is an error naming it.
func ClaimsInEnv(env []string) ([]string, error) {
	var uids []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, EnvPrefix) {
			continue
		}
		name, uid, _ := strings.Cut(kv, "=")
		if err := CheckUID(name, uid); err != nil {
			return nil, fmt.Errorf("environment variable %s: %w", name, err)
		}
		if EnvName(uid) != name {
			return nil, fmt.Errorf("environment variable %s=%s: the value must be the claim UID the name spells (%s)",
				name, uid, EnvName(uid))
		}
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	return slices.Compact(uids), nil
}

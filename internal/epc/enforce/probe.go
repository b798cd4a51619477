package enforce

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/podfence/podfence/internal/epc"
	"github.com/podfence/podfence/internal/nodeagent/cgroups"
)

// Capability is what the probe found on the node at start.
type Capability struct {
	Layout cgroups.Layout
	// MiscRoot is the root cgroup of the misc hierarchy; "" without a misc controller.
	MiscRoot string
	// Capacity is the node's SGX EPC in bytes (misc.capacity), when Node.Supported.
	Capacity uint64
	// Node is the input to epc.Plan; its Reason says why the node lacks support.
	Node epc.Node
}

// Probe reads the cgroup layout at root and the misc controller's misc.capacity (v2:
// <root>/misc.capacity; v1: <root>/misc/misc.capacity). It never fails: a node it cannot
// read is a node without support, and Node.Reason says why.
func Probe(fs Cgroupfs, root string) Capability {
	l, err := cgroups.Detect(root)
	if err != nil {
		return Capability{Node: epc.Node{Reason: err.Error()}}
	}
	c := Capability{Layout: l, Node: epc.Node{Unified: l.Version == cgroups.V2}}
	if c.MiscRoot, err = l.Dir("misc", "/"); err != nil {
		c.MiscRoot = ""
		c.Node.Reason = err.Error()
		return c
	}
	file := filepath.Join(c.MiscRoot, "misc.capacity")
	b, err := fs.Read(c.MiscRoot, "misc.capacity")
	if err != nil {
		c.Node.Reason = err.Error()
		return c
	}
	caps, err := cgroups.ParseFlat(b)
	if err != nil {
		c.Node.Reason = fmt.Sprintf("%s: %v", file, err)
		return c
	}
	n, ok, err := caps.Uint(epc.Resource)
	switch {
	case err != nil:
		c.Node.Reason = fmt.Sprintf("%s: %v", file, err)
	case !ok:
		listed := "nothing"
		if len(caps) > 0 {
			listed = strings.Join(slices.Sorted(maps.Keys(caps)), ", ")
		}
		c.Node.Reason = fmt.Sprintf("%s lists no %s (it lists %s)", file, epc.Resource, listed)
	default:
		c.Capacity, c.Node.Supported = n, true
	}
	return c
}

package nri

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/podfence/podfence/checkpoint"
	"github.com/podfence/podfence/plan"
)

// Reload switches the agent to a new node layout, such as a changed pool config, without
// moving any container: every allocation held now must fit the new pools as it is (its CPUs
// still in a pool of the same name and type). If one does not, the new layout is refused
// with the reasons and the agent keeps the old one.
func (a *Agent) Reload(node *plan.Node) error {
	a.reconf.Lock()
	defer a.reconf.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	allocs := a.state.Allocations()
	var errs []error
	for _, c := range checkpoint.Validate(allocs, node.Topology.Online(), node.PoolCPUs()) {
		errs = append(errs, fmt.Errorf("container %s: %s", c.Key, c.Reason))
	}
	if len(errs) > 0 {
		return fmt.Errorf("new pool config %s keeps the old one: running containers would have to move: %w",
			filepath.Base(node.Pools.Source), errors.Join(errs...))
	}
	next := plan.NewState(node)
	if err := next.Restore(allocs); err != nil {
		return fmt.Errorf("new pool config %s keeps the old one: %w", filepath.Base(node.Pools.Source), err)
	}
	a.node.Store(node)
	a.state = next
	return nil
}

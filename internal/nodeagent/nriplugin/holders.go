package nriplugin

import "github.com/podfence/podfence/internal/cpu/allocation"

// holder is the container instance that holds an allocation, and its pod sandbox. kept marks
// a native sidecar's instance that stopped: it holds on for the sidecar's next instance.
type holder struct {
	id, sandbox string
	kept        bool
}

// holders indexes the container instances holding allocations by container ID, by
// allocation key and by pod sandbox ID, so that each lookup is O(1) in the number of live
// containers. A pod UID alone never names what to release: the kubelet re-creates a dead
// sandbox under the same UID, and the old sandbox's removal must not free the new one's CPUs.
type holders struct {
	byKey     map[allocation.Key]holder
	byID      map[string]allocation.Key
	bySandbox map[string]map[string]struct{}
}

func newHolders() *holders {
	return &holders{byKey: map[allocation.Key]holder{}, byID: map[string]allocation.Key{}, bySandbox: map[string]map[string]struct{}{}}
}

// add records that container id of sandbox holds k, replacing k's previous holder.
func (h *holders) add(k allocation.Key, id, sandbox string) {
	if old, ok := h.byKey[k]; ok {
		h.drop(old)
	}
	h.byKey[k], h.byID[id] = holder{id: id, sandbox: sandbox}, k
	ids := h.bySandbox[sandbox]
	if ids == nil {
		ids = map[string]struct{}{}
		h.bySandbox[sandbox] = ids
	}
	ids[id] = struct{}{}
}

// keep marks what container id holds as kept for the container's next instance (keep).
func (h *holders) keep(id string) bool {
	k, ok := h.byID[id]
	if ok {
		x := h.byKey[k]
		x.kept = true
		h.byKey[k] = x
	}
	return ok
}

// remove forgets k's holder.
func (h *holders) remove(k allocation.Key) {
	if old, ok := h.byKey[k]; ok {
		h.drop(old)
		delete(h.byKey, k)
	}
}

func (h *holders) drop(old holder) {
	delete(h.byID, old.id)
	if ids := h.bySandbox[old.sandbox]; ids != nil {
		delete(ids, old.id)
		if len(ids) == 0 {
			delete(h.bySandbox, old.sandbox)
		}
	}
}

// key returns what container id holds.
func (h *holders) key(id string) (allocation.Key, bool) {
	k, ok := h.byID[id]
	return k, ok
}

// holderOf returns k's holder.
func (h *holders) holderOf(k allocation.Key) (holder, bool) {
	x, ok := h.byKey[k]
	return x, ok
}

// inSandbox returns the keys held by containers of one pod sandbox.
func (h *holders) inSandbox(sandbox string) []allocation.Key {
	ids := h.bySandbox[sandbox]
	out := make([]allocation.Key, 0, len(ids))
	for id := range ids {
		out = append(out, h.byID[id])
	}
	return out
}

package enforce

import (
	"cmp"
	"slices"

	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/internal/coresched/kernel"
)

// State is what a member's tasks carry, as last seen.
type State string

const (
	// StateOK: the member's tasks carry its group's cookie.
	StateOK State = "ok"
	// StateNone: the member asked for no cookie (policy none, or default group none).
	StateNone State = "none"
	// StateUnsupported: the node cannot do core scheduling; the member runs without a cookie.
	StateUnsupported State = "unsupported"
	// StateGuard: the Group Identity guard failed, so no cookie was created.
	StateGuard State = "guard-failed"
	// StateFailed: a kernel call failed; the member runs without its cookie for now.
	StateFailed State = "failed"
)

// member is a container, or a pod sandbox, whose tasks should carry its group's cookie.
type member struct {
	ID      string // container ID, or the pod sandbox ID
	Pod     string // namespace/name
	Sandbox string // the pod sandbox ID: a re-created sandbox of the pod has another
	Name    string // container name; "" for the pod sandbox
	Group   coresched.Group
	Cgroup  string // cgroup path inside the hierarchy ("" when unknown)
	Pid     int    // a task that was given the cookie (it may have exited since)
	Start   uint64 // start time of its oldest process, for "oldest member"
	State   State
}

// groupRec is a group with a cookie: the cookie as GET reads it, and its members in the
// order they joined (oldest first), the sources to share it from.
type groupRec struct {
	cookie  kernel.Cookie
	members []string
}

// book is the agent's record of members and group cookies. It does no I/O; the manager
// holds its lock around every use. Invariants: every ID in a groupRec is in members with
// that group and State ok; byCgroup holds each member with a known cgroup.
type book struct {
	members   map[string]member
	groups    map[string]*groupRec           // by Group.ID()
	byCgroup  map[string]string              // cgroup path → member ID
	bySandbox map[string]map[string]struct{} // pod sandbox ID → member IDs
	byName    map[string]map[string]struct{} // namespace/pod/container → member IDs (instances)
}

func newBook() *book {
	return &book{members: map[string]member{}, groups: map[string]*groupRec{}, byCgroup: map[string]string{},
		bySandbox: map[string]map[string]struct{}{}, byName: map[string]map[string]struct{}{}}
}

// index adds or removes id under key of an index.
func index(ix map[string]map[string]struct{}, key, id string, add bool) {
	ids := ix[key]
	if add {
		if ids == nil {
			ids = map[string]struct{}{}
			ix[key] = ids
		}
		ids[id] = struct{}{}
		return
	}
	delete(ids, id)
	if len(ids) == 0 {
		delete(ix, key)
	}
}

func nameKey(m member) string { return m.Pod + "/" + m.Name }

// inSandbox returns the IDs of the members of one pod sandbox.
func (b *book) inSandbox(sandbox string) []string {
	out := make([]string, 0, len(b.bySandbox[sandbox]))
	for id := range b.bySandbox[sandbox] {
		out = append(out, id)
	}
	return out
}

// namesake returns another recorded instance of m's pod and container (the lowest ID), if any.
func (b *book) namesake(m member) (member, bool) {
	best := ""
	for id := range b.byName[nameKey(m)] {
		if id != m.ID && (best == "" || id < best) {
			best = id
		}
	}
	o, ok := b.members[best]
	return o, ok
}

// put records m, replacing an earlier record with its ID. A member with State ok joins its
// group, whose cookie becomes cookie (a group's first member sets it, later ones pass the
// same value; a new value means the group's old cookie had no live task left).
func (b *book) put(m member, cookie kernel.Cookie) {
	b.remove(m.ID)
	b.members[m.ID] = m
	index(b.bySandbox, m.Sandbox, m.ID, true)
	index(b.byName, nameKey(m), m.ID, true)
	if m.Cgroup != "" {
		b.byCgroup[m.Cgroup] = m.ID
	}
	if m.State != StateOK {
		return
	}
	g := b.groups[m.Group.ID()]
	if g == nil {
		g = &groupRec{}
		b.groups[m.Group.ID()] = g
	}
	g.cookie = cookie
	g.members = append(g.members, m.ID)
}

// remove forgets member id. It returns the group whose last member it was, whose cookie
// is then forgotten too, so that the group's next member creates a new one.
func (b *book) remove(id string) (forgotten string) {
	m, ok := b.members[id]
	if !ok {
		return ""
	}
	delete(b.members, id)
	index(b.bySandbox, m.Sandbox, id, false)
	index(b.byName, nameKey(m), id, false)
	if b.byCgroup[m.Cgroup] == id {
		delete(b.byCgroup, m.Cgroup)
	}
	g := b.groups[m.Group.ID()]
	if m.State != StateOK || g == nil {
		return ""
	}
	g.members = slices.DeleteFunc(g.members, func(s string) bool { return s == id })
	if len(g.members) > 0 {
		return ""
	}
	delete(b.groups, m.Group.ID())
	return m.Group.ID()
}

// inCgroup returns the member whose cgroup is path, and its group's cookie (0 when it has
// none).
func (b *book) inCgroup(path string) (member, kernel.Cookie, bool) {
	m, ok := b.members[b.byCgroup[path]]
	if !ok {
		return member{}, 0, false
	}
	return m, b.cookie(m.Group), true
}

// cookie returns group g's recorded cookie, 0 when it has none.
func (b *book) cookie(g coresched.Group) kernel.Cookie {
	if r := b.groups[g.ID()]; r != nil {
		return r.cookie
	}
	return 0
}

// sources returns g's members, oldest first: where to look for a task to share from.
func (b *book) sources(g coresched.Group) []member {
	r := b.groups[g.ID()]
	if r == nil {
		return nil
	}
	out := make([]member, 0, len(r.members))
	for _, id := range r.members {
		out = append(out, b.members[id])
	}
	return out
}

// list returns all members sorted by ID.
func (b *book) list() []member {
	out := make([]member, 0, len(b.members))
	for _, m := range b.members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(x, y member) int { return cmp.Compare(x.ID, y.ID) })
	return out
}

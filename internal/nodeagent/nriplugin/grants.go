package nriplugin

import (
	"fmt"
	"sync"
	"time"

	"github.com/podfence/podfence/internal/dra/grant"
)

// grantReadTimeout bounds CreateContainer's read of a grant it does not hold in memory.
const grantReadTimeout = 100 * time.Millisecond

// prepareTimeout bounds Prepare's read of the whole store.
const prepareTimeout = time.Second

// maxCachedGrants bounds the grants kept in memory; a node prepares a few hundred claims.
const maxCachedGrants = 4096

// grantReads is the DRA driver's grant store and the grants read from it so far: all of them
// before each connection (Prepare), for its Synchronize, which reads no file; a grant
// CreateContainer does not find for its pod (a claim prepared since) is read then, bounded.
type grantReads struct {
	store   grant.Store
	timeout time.Duration

	mu    sync.Mutex
	byUID map[string]grant.Grant
}

// newGrantReads reads the store in dir; nil for "".
func newGrantReads(dir string) *grantReads {
	if dir == "" {
		return nil
	}
	return &grantReads{store: grant.Store{Dir: dir}, timeout: grantReadTimeout, byUID: map[string]grant.Grant{}}
}

// load reads every grant into memory, in place of what was there, within prepareTimeout;
// it keeps what was there if the store does not answer in time. Safe on a nil g.
func (g *grantReads) load() {
	if g == nil {
		return
	}
	done := make(chan []grant.Grant, 1)
	go func() {
		grants, _ := g.store.List() // a grant that does not read is read again, with its error, when asked for
		done <- grants
	}()
	t := time.NewTimer(prepareTimeout)
	defer t.Stop()
	var grants []grant.Grant
	select {
	case grants = <-done:
	case <-t.C:
		return
	}
	byUID := make(map[string]grant.Grant, len(grants))
	for _, gr := range grants {
		byUID[gr.ClaimUID] = gr
	}
	g.mu.Lock()
	g.byUID = byUID
	g.mu.Unlock()
}

// get returns the grant of claim uid. One in memory that names podUID is returned as it is;
// otherwise, with read, the file is read (within g.timeout) and kept, and without read (at
// Synchronize) the one in memory is returned, or an error.
func (g *grantReads) get(uid, podUID string, read bool) (grant.Grant, error) {
	g.mu.Lock()
	gr, ok := g.byUID[uid]
	g.mu.Unlock()
	switch {
	case ok && (gr.UsedBy(podUID) || !read):
		return gr, nil
	case !read:
		return grant.Grant{}, fmt.Errorf("claim %s: %w (none in %s before this connection)", uid, grant.ErrNotFound, g.store.Dir)
	}
	type result struct {
		gr  grant.Grant
		err error
	}
	done := make(chan result, 1)
	go func() {
		gr, err := g.store.Get(uid)
		done <- result{gr, err}
	}()
	t := time.NewTimer(g.timeout)
	defer t.Stop()
	select {
	case r := <-done:
		if r.err == nil {
			g.keep(r.gr)
		}
		return r.gr, r.err
	case <-t.C:
		return grant.Grant{}, fmt.Errorf("grant not read from %s within %s (the disk is slow): refused, so that the kubelet "+
			"creates the container again", g.store.Dir, g.timeout)
	}
}

func (g *grantReads) keep(gr grant.Grant) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.byUID[gr.ClaimUID]; !ok && len(g.byUID) >= maxCachedGrants {
		clear(g.byUID)
	}
	g.byUID[gr.ClaimUID] = gr
}

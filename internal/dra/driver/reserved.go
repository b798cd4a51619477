package driver

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	resourceinformers "k8s.io/client-go/informers/resource/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/podfence/podfence/internal/dra"
	"github.com/podfence/podfence/internal/dra/grant"
)

// claimResync is how often a watched claim is handed to the handler again from the
// informer's cache (no API call): a grant write that failed is tried again.
const claimResync = time.Minute

// claimWatch runs one informer per prepared claim, each listing and watching only its claim
// (namespace and fieldSelector metadata.name, as the kubelet watches the Secrets its pods
// use), and hands every version it sees to handle. The claims watched are exactly those
// added and not removed: the driver adds a claim when it prepares it (or finds its grant at
// start) and removes it when it unprepares it, so the watches are as many as the node's
// prepared claims.
type claimWatch struct {
	ctx    context.Context
	client kubernetes.Interface
	// handle gets each version of a watched claim with the watched UID (a claim deleted and
	// created again under its name is another claim); deletions are not handed on.
	handle func(*resourceapi.ResourceClaim)

	mu      sync.Mutex
	running map[string]context.CancelFunc // by claim UID
	wg      sync.WaitGroup
}

func newClaimWatch(ctx context.Context, client kubernetes.Interface, handle func(*resourceapi.ResourceClaim)) *claimWatch {
	return &claimWatch{ctx: ctx, client: client, handle: handle, running: map[string]context.CancelFunc{}}
}

// add watches the claim unless it is watched already or the watch is closed.
func (w *claimWatch) add(uid, namespace, name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.running[uid]; ok || w.ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(w.ctx)
	w.running[uid] = cancel
	sel := fields.OneTermEqualSelector(metav1.ObjectNameField, name).String()
	inf := resourceinformers.NewTypedFilteredResourceClaimInformer(w.client, namespace, claimResync, nil,
		func(o *metav1.ListOptions) { o.FieldSelector = sel })
	mine := func(c *resourceapi.ResourceClaim) {
		if string(c.UID) == uid && c.Name == name { // the fieldSelector is the server's filter; this is ours
			w.handle(c)
		}
	}
	// AddEventHandler fails only on an informer that has stopped; this one has not started.
	_, _ = inf.AddTypedEventHandler(cache.TypedResourceEventHandlerFuncs[*resourceapi.ResourceClaim]{
		AddFunc:    mine,
		UpdateFunc: func(_, c *resourceapi.ResourceClaim) { mine(c) },
	})
	w.wg.Go(func() { inf.RunWithContext(ctx) })
}

// remove stops watching the claim. A version being handled may still finish.
func (w *claimWatch) remove(uid string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if cancel, ok := w.running[uid]; ok {
		cancel()
		delete(w.running, uid)
	}
}

// watched returns the UIDs of the claims watched, sorted.
func (w *claimWatch) watched() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	uids := make([]string, 0, len(w.running))
	for uid := range w.running {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	return uids
}

// wait returns when every informer has stopped; the context given to newClaimWatch must
// have ended (or end) first.
func (w *claimWatch) wait() { w.wg.Wait() }

// syncPods makes the claim's grant list the pods the claim is reserved for now, so that a
// pod which starts using an already prepared claim (the kubelet prepares a claim once, for
// its first pod) is let in by the node agent. The grant is never removed here: a claim
// reserved for no pod, or deleted, keeps its grant and last pods until the kubelet
// unprepares it; a claim unprepared meanwhile gets no grant back.
func (d *Driver) syncPods(c *resourceapi.ResourceClaim) {
	uid := string(c.UID)
	pods := dra.ClaimOf(c).PodUIDs
	log := d.log.With("claim", c.Namespace+"/"+c.Name, "uid", uid)
	d.claimMu.Lock()
	defer d.claimMu.Unlock()
	g, err := d.store.Get(uid)
	switch {
	case errors.Is(err, grant.ErrNotFound):
		return
	case err != nil:
		log.Warn("reserved pods not synced: the grant does not read", "err", err)
		return
	case len(pods) == 0 || samePods(g.PodUIDs, pods):
		return
	}
	was := g.PodUIDs
	g.PodUIDs = pods
	if err := d.store.Put(g); err != nil {
		log.Warn("reserved pods not synced (tried again at the next resync)", "pods", pods, "err", err)
		return
	}
	log.Info("claim's reserved pods synced", "pods", pods, "was", was)
}

// samePods says whether a and b hold the same pods, in any order.
func samePods(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// watchGrants watches the claims of the stored grants (at start).
func (d *Driver) watchGrants(grants []grant.Grant) {
	for _, g := range grants {
		d.claims.add(g.ClaimUID, g.Namespace, g.Name)
	}
}

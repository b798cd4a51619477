package driver

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/dra/grant"
	"github.com/podfence/podfence/internal/testwait"
)

const (
	uidA = "6f1c1b1e-0d0a-4c3b-9a55-1f6a3c9d2e0a"
	uidB = "6f1c1b1e-0d0a-4c3b-9a55-1f6a3c9d2e0b"
	pod1 = "0b6f7d2c-5f6e-4e8e-8d4b-2a9c1b3d4e01"
	pod2 = "0b6f7d2c-5f6e-4e8e-8d4b-2a9c1b3d4e02"
	pod3 = "0b6f7d2c-5f6e-4e8e-8d4b-2a9c1b3d4e03"
)

func reservedClaim(uid, name string, pods ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)}}
	for _, p := range pods {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: "p", UID: types.UID(p)})
	}
	return c
}

// handled is a claim version the watch handed on: its UID and reserved pods, after syncPods
// returned.
type handled struct {
	uid  string
	pods []string
}

// watchRig is a Driver whose claim watch reports every version it handled on a channel.
type watchRig struct {
	d       *Driver
	client  *fake.Clientset
	handled chan handled
}

func newWatchRig(t *testing.T, objs ...*resourceapi.ResourceClaim) *watchRig {
	t.Helper()
	var seed []runtime.Object
	for _, o := range objs {
		seed = append(seed, o)
	}
	client := fake.NewClientset(seed...)
	ctx, cancel := context.WithCancel(context.Background())
	r := &watchRig{client: client, handled: make(chan handled, 100)}
	r.d = &Driver{store: grant.Store{Dir: t.TempDir()}, cdi: cdiDir(t.TempDir()), log: slog.New(slog.DiscardHandler)}
	r.d.claims = newClaimWatch(ctx, client, func(c *resourceapi.ResourceClaim) {
		r.d.syncPods(c)
		r.handled <- handled{uid: string(c.UID), pods: reservedPods(c)}
	})
	t.Cleanup(func() { cancel(); r.d.claims.wait() })
	return r
}

func reservedPods(c *resourceapi.ResourceClaim) []string {
	var out []string
	for _, r := range c.Status.ReservedFor {
		out = append(out, string(r.UID))
	}
	return out
}

// next waits for the watch to hand on the version of claim uid reserved for pods, failing
// the test if another version of that claim, or another claim, comes first.
func (r *watchRig) next(t *testing.T, uid string, pods ...string) {
	t.Helper()
	h := testwait.Receive(t, r.handled, fmt.Sprintf("claim %s reserved for %v", uid, pods))
	if h.uid != uid || !slices.Equal(h.pods, pods) {
		t.Fatalf("watch handed claim %s reserved for %v; want claim %s reserved for %v", h.uid, h.pods, uid, pods)
	}
}

func (r *watchRig) setReserved(t *testing.T, uid, name string, pods ...string) {
	t.Helper()
	if _, err := r.client.ResourceV1().ResourceClaims("ns").UpdateStatus(context.Background(), reservedClaim(uid, name, pods...),
		metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (r *watchRig) pods(t *testing.T, uid string) []string {
	t.Helper()
	g, err := r.d.store.Get(uid)
	if err != nil {
		t.Fatal(err)
	}
	return g.PodUIDs
}

func putGrant(t *testing.T, s grant.Store, uid, name string, pods ...string) {
	t.Helper()
	g := grant.Grant{ClaimUID: uid, Namespace: "ns", Name: name, PodUIDs: pods,
		Exclusive: map[string]cpuset.CPUSet{"exclusive_dra": cpuset.New(4)}}
	if err := s.Put(g); err != nil {
		t.Fatal(err)
	}
}

// TestClaimWatchSyncsPods runs the claim watch on the fake API server: the grant file
// follows the claim's reservedFor as pods join and leave, keeps its last pods when none is
// left, and another claim of the namespace is not handed on.
func TestClaimWatchSyncsPods(t *testing.T) {
	r := newWatchRig(t, reservedClaim(uidA, "a", pod1), reservedClaim(uidB, "b", pod3))
	putGrant(t, r.d.store, uidA, "a", pod1)
	r.d.claims.add(uidA, "ns", "a")
	r.next(t, uidA, pod1) // the informer's first list

	r.setReserved(t, uidA, "a", pod1, pod2)
	r.next(t, uidA, pod1, pod2)
	if got := r.pods(t, uidA); !slices.Equal(got, []string{pod1, pod2}) {
		t.Errorf("grant after pod2 joined: pods %v; want [%s %s]", got, pod1, pod2)
	}

	r.setReserved(t, uidB, "b", pod3, pod1) // not watched: must not come before the next version of a
	r.setReserved(t, uidA, "a", pod2)
	r.next(t, uidA, pod2)
	if got := r.pods(t, uidA); !slices.Equal(got, []string{pod2}) {
		t.Errorf("grant after pod1 left: pods %v; want [%s]", got, pod2)
	}

	r.setReserved(t, uidA, "a")
	r.next(t, uidA)
	if got := r.pods(t, uidA); !slices.Equal(got, []string{pod2}) {
		t.Errorf("grant of a claim reserved for no pod: pods %v; want the last ones, [%s]", got, pod2)
	}
}

// TestSyncPodsKeepsUnpreparedGone: a version of a claim that is no longer prepared (its
// grant deleted by unprepare) does not bring its grant back.
func TestSyncPodsKeepsUnpreparedGone(t *testing.T) {
	r := newWatchRig(t)
	putGrant(t, r.d.store, uidA, "a", pod1)
	if err := r.d.unprepare(uidA); err != nil {
		t.Fatal(err)
	}
	r.d.syncPods(reservedClaim(uidA, "a", pod1, pod2))
	if g, err := r.d.store.Get(uidA); err == nil {
		t.Errorf("grant after unprepare and a new version of the claim: %+v", g)
	}
}

// TestClaimWatchBounded: the claims watched are the ones added and not removed, each once.
func TestClaimWatchBounded(t *testing.T) {
	r := newWatchRig(t)
	r.d.claims.add(uidA, "ns", "a")
	r.d.claims.add(uidA, "ns", "a")
	r.d.claims.add(uidB, "ns", "b")
	if got := r.d.claims.watched(); !slices.Equal(got, []string{uidA, uidB}) {
		t.Errorf("watched %v; want [%s %s]", got, uidA, uidB)
	}
	r.d.claims.remove(uidA)
	r.d.claims.remove(uidA)
	if got := r.d.claims.watched(); !slices.Equal(got, []string{uidB}) {
		t.Errorf("watched after removing a: %v; want [%s]", got, uidB)
	}
}

// TestDriverWatchesPreparedClaims: the driver watches a claim from its prepare to its
// unprepare, and not a claim it refused, so it watches as many claims as it has prepared.
func TestDriverWatchesPreparedClaims(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "poolconfig-a.yaml"), `pools:
  exclusive_dra: {cpus: "4-5", hyperThreadingPolicy: multiThreaded, requestAPI: dra}
  default: {cpus: "0-1"}`)
	src := &source{cfg: Config{NodeName: "n", PoolConfig: dir,
		Sysfs: filepath.Join("..", "..", "cpu", "topology", "testdata", "sysfs", "dual-socket-smt-apart")}}
	v, err := src.read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r := newWatchRig(t)
	r.d.node, r.d.inv = "n", v.inv
	claim := func(uid, name, device string) *resourceapi.ResourceClaim {
		c := reservedClaim(uid, name, pod1)
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
			{Request: "cpus", Driver: "dra.podfence.io", Pool: "n", Device: device}}}}
		return c
	}
	res, err := r.d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim(uidA, "a", "cpu-4"), claim(uidB, "b", "cpu-9")})
	if err != nil || res[uidA].Err != nil || res[uidB].Err == nil {
		t.Fatalf("prepare a (cpu-4) and b (no such device): %v, %+v", err, res)
	}
	if got := r.d.claims.watched(); !slices.Equal(got, []string{uidA}) {
		t.Errorf("watched after preparing a and refusing b: %v; want [%s]", got, uidA)
	}
	un, err := r.d.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{UID: uidA}})
	if err != nil || un[uidA] != nil {
		t.Fatalf("unprepare a: %v, %v", err, un)
	}
	if got := r.d.claims.watched(); len(got) != 0 {
		t.Errorf("watched after unpreparing a: %v; want none", got)
	}
}

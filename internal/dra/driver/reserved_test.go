package driver_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/podfence/podfence/internal/dra"
	"github.com/podfence/podfence/internal/dra/driver"
	"github.com/podfence/podfence/internal/dra/grant"
	"github.com/podfence/podfence/internal/testwait"
)

const podC = "0b6f7d2c-5f6e-4e8e-8d4b-2a9c1b3d4e61"

// setReserved sets the reservedFor pods of claim ns/name, as the scheduler (a pod joins) and
// the claim controller (a pod ended) do.
func (r *rig) setReserved(t *testing.T, name string, pods ...string) {
	t.Helper()
	claims := r.client.ResourceV1().ResourceClaims("ns")
	c, err := claims.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Status.ReservedFor = nil
	for i, p := range pods {
		c.Status.ReservedFor = append(c.Status.ReservedFor,
			resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: fmt.Sprint("p", i), UID: types.UID(p)})
	}
	if _, err := claims.UpdateStatus(context.Background(), c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestDriverFollowsReservedFor: a claim prepared once (the kubelet does not prepare a shared
// claim again for its next pod) has its grant's pods kept equal to its reservedFor, while
// the driver runs and across a restart, until it is unprepared.
func TestDriverFollowsReservedFor(t *testing.T) {
	r := newRig(t)
	c, stop := r.start(t)
	share := types.UID("share-1")
	r.addClaim(t, claimC, "s", podA, resourceapi.DeviceRequestAllocationResult{Request: "share", Driver: dra.DriverName,
		Pool: node, Device: "shared-shared-dra", ShareID: &share,
		ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{dra.CapMilliCPU: resource.MustParse("500")}})
	if got := prepare(t, c, claimC, "s"); got.Error != "" {
		t.Fatalf("prepare: %q", got.Error)
	}
	store := grant.Store{Dir: driver.ClaimsDir(r.cfg.StateDir)}
	podsAre := func(want ...string) func() error {
		return func() error {
			g, err := store.Get(claimC)
			if err == nil && !slices.Equal(g.PodUIDs, want) {
				err = fmt.Errorf("grant lists pods %v, want %v", g.PodUIDs, want)
			}
			return err
		}
	}

	r.setReserved(t, "s", podA, podB)
	testwait.EventuallyNil(t, "the second pod in the grant, with no prepare call", podsAre(podA, podB))
	r.setReserved(t, "s", podB)
	testwait.EventuallyNil(t, "the first pod, ended, out of the grant", podsAre(podB))

	stop()
	r.setReserved(t, "s", podB, podC)
	c, _ = r.start(t)
	testwait.EventuallyNil(t, "a pod that joined while the driver was down in the grant", podsAre(podB, podC))

	un, err := c.NodeUnprepareResources(context.Background(), &drapb.NodeUnprepareResourcesRequest{
		Claims: []*drapb.Claim{{Namespace: "ns", Uid: claimC, Name: "s"}}})
	if err != nil || un.Claims[claimC].GetError() != "" {
		t.Fatalf("unprepare: %v, %v", err, un)
	}
	if _, err := store.Get(claimC); err == nil {
		t.Error("grant after unprepare")
	}
}

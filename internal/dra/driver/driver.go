// Package driver is the shell of podfence's DRA driver (podfence-dra): the kubelet plugin
// (k8s.io/dynamic-resource-allocation/kubeletplugin) that publishes package dra's inventory
// as this node's ResourceSlices and prepares claims. Preparing a claim stores its grant
// (package grant, one file per claim: what the node agent enforces) and writes its CDI spec
// file (the environment marker that names the claim in its containers); unpreparing removes
// both. The grants on disk are the driver's only state, so a restarted driver, or kubelet,
// finds every prepared claim as it was.
//
// A grant lists the pods its claim is reserved for (status.reservedFor), and the node agent
// lets only those use it. The kubelet calls NodePrepareResources once per claim, for its
// first pod on the node; a later pod sharing the prepared claim is not announced. So the
// driver watches each prepared claim (one narrow watch per claim, none for others) and
// rewrites its grant when the reserved pods change. The agent may therefore refuse a second
// pod's container for a short window ("reserved for pods …, not for pod …"), between the
// pod's reservation and the grant's update; the kubelet retries the container with backoff
// and the retry is let in. Pods leave the grant when the claim controller drops them (they
// have ended); the grant itself goes only when the kubelet unprepares the claim.
package driver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/podfence/podfence/internal/dra"
	"github.com/podfence/podfence/internal/dra/grant"
)

// Driver implements kubeletplugin.DRAPlugin.
type Driver struct {
	node   string
	store  grant.Store
	cdi    cdiDir
	log    *slog.Logger
	cancel context.CancelCauseFunc // ends Run on a fatal background error

	mu  sync.Mutex
	inv *dra.Inventory // the devices published last

	// claimMu orders the changes of stored grants (prepare, unprepare, syncPods).
	claimMu sync.Mutex
	claims  *claimWatch // the prepared claims, watched for their reserved pods
}

var _ kubeletplugin.DRAPlugin = (*Driver)(nil)

func (d *Driver) inventory() *dra.Inventory {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inv
}

// PrepareResourceClaims grants each claim its devices. A claim with a stored grant keeps it
// (a kubelet or driver restart prepares again): only pods newly in its reservedFor are added.
// A new claim's grant is worked out by Inventory.Grant against the devices published now and
// the grants of the other prepared claims, then stored, then its CDI spec is written. A
// prepared claim is watched from then on (syncPods).
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		c := dra.ClaimOf(claim)
		log := d.log.With("claim", claim.Namespace+"/"+claim.Name, "uid", c.UID)
		g, err := d.prepare(c, log)
		if err != nil {
			log.Warn("claim refused", "err", err)
			out[claim.UID] = kubeletplugin.PrepareResult{Err: err}
			continue
		}
		d.claims.add(c.UID, c.Namespace, c.Name)
		out[claim.UID] = kubeletplugin.PrepareResult{Devices: devices(c)}
		log.Info("claim prepared", "pods", g.PodUIDs, "exclusive", fmt.Sprint(g.Exclusive), "shared", g.Shared, "epcBytes", g.EPCBytes)
	}
	return out, nil
}

func (d *Driver) prepare(c dra.Claim, log *slog.Logger) (grant.Grant, error) {
	d.claimMu.Lock()
	defer d.claimMu.Unlock()
	g, err := d.store.Get(c.UID)
	switch {
	case err == nil:
		if more := newPods(g, c.PodUIDs); len(more) > 0 {
			g.PodUIDs = append(g.PodUIDs, more...)
			if err := d.store.Put(g); err != nil {
				return grant.Grant{}, fmt.Errorf("%s: %w", c, err)
			}
		}
		log.Debug("claim already prepared", "pods", g.PodUIDs)
	case errors.Is(err, grant.ErrNotFound):
		others, errs := d.store.List()
		for _, e := range errs {
			log.Warn("unreadable grant: its CPUs are not counted (the node agent still refuses CPUs another container holds)", "err", e)
		}
		if g, err = d.inventory().Grant(d.node, c, others); err != nil {
			return grant.Grant{}, err
		}
		if err := d.store.Put(g); err != nil {
			return grant.Grant{}, fmt.Errorf("%s: %w", c, err)
		}
	default:
		return grant.Grant{}, fmt.Errorf("%s: %w", c, err)
	}
	if err := d.cdi.write(c.UID); err != nil {
		if derr := d.store.Delete(c.UID); derr != nil {
			log.Error("grant left after a failed CDI write", "err", derr)
		}
		return grant.Grant{}, fmt.Errorf("%s: %w", c, err)
	}
	return g, nil
}

// newPods are the pods of reserved that g does not list.
func newPods(g grant.Grant, reserved []string) []string {
	var out []string
	for _, p := range reserved {
		if !slices.Contains(g.PodUIDs, p) && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// devices are the kubelet's view of a prepared claim: each of this driver's results with
// the claim's one CDI device.
func devices(c dra.Claim) []kubeletplugin.Device {
	var out []kubeletplugin.Device
	for _, r := range c.Results {
		if r.Driver != dra.DriverName {
			continue
		}
		out = append(out, kubeletplugin.Device{Requests: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device,
			CDIDeviceIDs: []string{dra.CDIDeviceID(c.UID)}, ShareID: r.ShareID})
	}
	return out
}

// UnprepareResourceClaims removes each claim's CDI spec file and grant and stops watching
// it; a claim not prepared is not an error.
func (d *Driver) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := make(map[types.UID]error, len(claims))
	for _, c := range claims {
		uid := string(c.UID)
		if err := d.unprepare(uid); err != nil {
			out[c.UID] = fmt.Errorf("claim %s (%s): %w", c.NamespacedName, uid, err)
			continue
		}
		d.claims.remove(uid)
		d.log.Info("claim unprepared", "claim", c.NamespacedName.String(), "uid", uid)
		out[c.UID] = nil
	}
	return out, nil
}

func (d *Driver) unprepare(uid string) error {
	d.claimMu.Lock()
	defer d.claimMu.Unlock()
	if err := d.cdi.remove(uid); err != nil {
		return err
	}
	return d.store.Delete(uid)
}

// HandleError logs errors of the helper's background work; one that is not recoverable ends
// Run.
func (d *Driver) HandleError(_ context.Context, err error, msg string) {
	if errors.Is(err, kubeletplugin.ErrRecoverable) {
		d.log.Warn(msg, "err", err)
		return
	}
	d.log.Error(msg, "err", err)
	d.cancel(fmt.Errorf("%s: %w", msg, err))
}

// WatchHealthStatus: CPUs and EPC have no health to report (the service is turned off).
func (d *Driver) WatchHealthStatus(context.Context, chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}

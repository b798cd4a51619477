package driver_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/dra"
	"github.com/podfence/podfence/internal/dra/driver"
	"github.com/podfence/podfence/internal/dra/grant"
	"github.com/podfence/podfence/internal/testwait"
)

const (
	node   = "node-a"
	claimA = "6f1c1b1e-0d0a-4c3b-9a55-1f6a3c9d2e01"
	claimB = "6f1c1b1e-0d0a-4c3b-9a55-1f6a3c9d2e02"
	claimC = "6f1c1b1e-0d0a-4c3b-9a55-1f6a3c9d2e03"
	podA   = "0b6f7d2c-5f6e-4e8e-8d4b-2a9c1b3d4e5f"
	podB   = "0b6f7d2c-5f6e-4e8e-8d4b-2a9c1b3d4e60"
)

// poolConfig, on the dual-socket-smt-apart fixture (core c has threads c and c+48): whole
// cores 4, 5 and 28, and a shared pool of 2 CPUs, all through DRA.
const poolConfig = `pools:
  exclusive_dra: {cpus: "4-5,28", hyperThreadingPolicy: multiThreaded, requestAPI: dra}
  shared_dra: {cpus: "2-3", requestAPI: dra}
  default: {cpus: "0-1"}
`

// rig is a driver's directories, its fake API server and a way to run it.
type rig struct {
	cfg    driver.Config
	client *fake.Clientset
}

func newRig(t *testing.T) *rig {
	t.Helper()
	dir := t.TempDir()
	cfg := driver.Config{NodeName: node, PoolConfig: filepath.Join(dir, "pools"), StateDir: filepath.Join(dir, "state"),
		CDIDir: filepath.Join(dir, "cdi"), PluginsDir: filepath.Join(dir, "plugins"), RegistryDir: filepath.Join(dir, "reg"),
		Sysfs: filepath.Join("..", "..", "cpu", "topology", "testdata", "sysfs", "dual-socket-smt-apart"), EPCBytes: 64 << 20}
	writeConfig(t, cfg.PoolConfig, poolConfig)
	client := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "node-uid"}})
	cfg.Client = client
	return &rig{cfg: cfg, client: client}
}

func writeConfig(t *testing.T, dir, text string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "poolconfig-a.yaml"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// start runs the driver until the test ends or the returned stop is called, and returns a
// kubelet's DRA client connected to its socket.
func (r *rig) start(t *testing.T) (drapb.DRAPluginClient, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	log := slog.New(slog.DiscardHandler)
	go func() { done <- driver.Run(ctx, r.cfg, log) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(stop)
	// The kubelet's calls wait for the socket (a stale one of the previous run refuses).
	sock := filepath.Join(r.cfg.PluginsDir, dra.DriverName, "dra.sock")
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.WaitForReady(true)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return drapb.NewDRAPluginClient(conn), stop
}

// addClaim stores an allocated claim, reserved for pod, with results of this driver.
func (r *rig) addClaim(t *testing.T, uid, name, pod string, results ...resourceapi.DeviceRequestAllocationResult) {
	t.Helper()
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)},
		Status: resourceapi.ResourceClaimStatus{
			Allocation:  &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}},
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: types.UID(pod)}},
		}}
	if _, err := r.client.ResourceV1().ResourceClaims("ns").Create(context.Background(), c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func unit(device string) resourceapi.DeviceRequestAllocationResult {
	return resourceapi.DeviceRequestAllocationResult{Request: "cpus", Driver: dra.DriverName, Pool: node, Device: device}
}

func prepare(t *testing.T, c drapb.DRAPluginClient, uid, name string) *drapb.NodePrepareResourceResponse {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), testwait.Deadline(t))
	defer cancel()
	resp, err := c.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{
		Claims: []*drapb.Claim{{Namespace: "ns", Uid: uid, Name: name}}})
	if err != nil {
		t.Fatalf("NodePrepareResources(%s): %v", name, err)
	}
	return resp.Claims[uid]
}

// devices renders a prepared claim's devices: "cpu-4:cpus:dra.podfence.io/claim=<uid>".
func devices(r *drapb.NodePrepareResourceResponse) []string {
	var out []string
	for _, d := range r.GetDevices() {
		out = append(out, fmt.Sprintf("%s/%s:%s:%s", d.PoolName, d.DeviceName, strings.Join(d.RequestNames, ","),
			strings.Join(d.CdiDeviceIds, ",")))
	}
	return out
}

// TestDriver runs the driver on temporary sockets with a fake API server and speaks to it
// as the kubelet does: a claim is prepared (grant stored, CDI spec written), a second claim
// for one of its CPUs is refused, the driver restarts (the CDI file, lost meanwhile, comes
// back; preparing again gives the same result), and unpreparing frees the CPUs.
func TestDriver(t *testing.T) {
	r := newRig(t)
	c, stop := r.start(t)
	r.addClaim(t, claimA, "a", podA, unit("cpu-4"), unit("cpu-28"))
	r.addClaim(t, claimB, "b", podB, unit("cpu-5"), unit("cpu-28"))
	store := grant.Store{Dir: driver.ClaimsDir(r.cfg.StateDir)}
	cdiFile := filepath.Join(r.cfg.CDIDir, dra.CDISpecFile(claimA))

	first := prepare(t, c, claimA, "a")
	wantDevices := []string{node + "/cpu-4:cpus:dra.podfence.io/claim=" + claimA, node + "/cpu-28:cpus:dra.podfence.io/claim=" + claimA}
	if first.Error != "" || !slices.Equal(devices(first), wantDevices) {
		t.Fatalf("prepare a: error %q, devices %v; want %v", first.Error, devices(first), wantDevices)
	}
	want := grant.Grant{ClaimUID: claimA, Namespace: "ns", Name: "a", PodUIDs: []string{podA},
		Exclusive: map[string]cpuset.CPUSet{"exclusive_dra": cpuset.New(4, 52, 28, 76)}}
	if g, err := store.Get(claimA); err != nil || !reflect.DeepEqual(g, want) {
		t.Errorf("grant of a: %+v, %v; want %+v", g, err, want)
	}
	wantSpec, _ := dra.CDISpec(claimA)
	if b, err := os.ReadFile(cdiFile); err != nil || string(b) != string(wantSpec) {
		t.Errorf("CDI spec file: %s, %v; want %s", b, err, wantSpec)
	}

	refused := prepare(t, c, claimB, "b")
	if !strings.Contains(refused.Error, "CPUs 28,76 are already prepared for claim ns/a") || len(refused.Devices) != 0 {
		t.Errorf("prepare b (cpu-28 again): %+v", refused)
	}
	if _, err := store.Get(claimB); err == nil {
		t.Error("the refused claim has a grant")
	}

	stop()
	if err := os.Remove(cdiFile); err != nil {
		t.Fatal(err)
	}
	c, _ = r.start(t)
	testwait.Eventually(t, "the CDI spec restored at start", func() bool { _, err := os.Stat(cdiFile); return err == nil })
	again := prepare(t, c, claimA, "a")
	if again.Error != "" || !slices.Equal(devices(again), wantDevices) {
		t.Errorf("prepare a after a restart: %q, %v", again.Error, devices(again))
	}
	if g, err := store.Get(claimA); err != nil || !reflect.DeepEqual(g, want) {
		t.Errorf("grant of a after a restart: %+v, %v", g, err)
	}

	un, err := c.NodeUnprepareResources(context.Background(), &drapb.NodeUnprepareResourcesRequest{
		Claims: []*drapb.Claim{{Namespace: "ns", Uid: claimA, Name: "a"}}})
	if err != nil || un.Claims[claimA].GetError() != "" {
		t.Fatalf("unprepare a: %v, %v", err, un)
	}
	if _, err := os.Stat(cdiFile); !os.IsNotExist(err) {
		t.Errorf("CDI spec after unprepare: %v", err)
	}
	if _, err := store.Get(claimA); err == nil {
		t.Error("grant of a after unprepare")
	}
	if b := prepare(t, c, claimB, "b"); b.Error != "" {
		t.Errorf("prepare b once a is gone: %q", b.Error)
	}
	if _, err := os.Stat(filepath.Join(r.cfg.RegistryDir, dra.DriverName+"-reg.sock")); err != nil {
		t.Errorf("registration socket: %v", err)
	}
}

// TestDriverShared: a claim on the shared device gets its consumed millicpu, and a pod the
// kubelet prepares the claim for again (reservedFor grew) is added to the grant.
func TestDriverShared(t *testing.T) {
	r := newRig(t)
	c, _ := r.start(t)
	share := types.UID("share-1")
	res := resourceapi.DeviceRequestAllocationResult{Request: "share", Driver: dra.DriverName, Pool: node, Device: "shared-shared-dra",
		ShareID: &share, ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{dra.CapMilliCPU: resource.MustParse("1500")}}
	r.addClaim(t, claimC, "s", podA, res)
	got := prepare(t, c, claimC, "s")
	if got.Error != "" || len(got.Devices) != 1 || got.Devices[0].GetShareId() != "share-1" {
		t.Fatalf("prepare: %+v", got)
	}
	claims := r.client.ResourceV1().ResourceClaims("ns")
	cl, err := claims.Get(context.Background(), "s", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cl.Status.ReservedFor = append(cl.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: "q", UID: podB})
	if _, err := claims.Update(context.Background(), cl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	prepare(t, c, claimC, "s")
	g, err := grant.Store{Dir: driver.ClaimsDir(r.cfg.StateDir)}.Get(claimC)
	if err != nil || g.Shared["shared_dra"] != 1500 || !slices.Equal(g.PodUIDs, []string{podA, podB}) {
		t.Errorf("grant %+v, %v; want 1500 millicpu of shared_dra for both pods", g, err)
	}
}

// slices returns the devices of the driver's ResourceSlices in the fake API server.
func publishedDevices(t *testing.T, r *rig) []string {
	t.Helper()
	list, err := r.client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		if s.Spec.Driver != dra.DriverName || s.Spec.Pool.Name != node || s.Spec.NodeName == nil || *s.Spec.NodeName != node {
			t.Errorf("slice %s: driver %s, pool %s, node %v", s.Name, s.Spec.Driver, s.Spec.Pool.Name, s.Spec.NodeName)
		}
		for _, d := range s.Spec.Devices {
			out = append(out, d.Name)
		}
	}
	return out
}

// TestDriverPublishes: the slice holds the node's devices, and a changed pool config is
// published at the next reload.
func TestDriverPublishes(t *testing.T) {
	r := newRig(t)
	r.cfg.ReloadInterval = 10 * time.Millisecond
	r.start(t)
	want := "[cpu-4 cpu-5 cpu-28 shared-shared-dra sgx-epc]"
	testwait.Eventually(t, "the slice published at start", func() bool { return fmt.Sprint(publishedDevices(t, r)) == want })
	writeConfig(t, r.cfg.PoolConfig, strings.Replace(poolConfig, `cpus: "4-5,28"`, `cpus: "4"`, 1))
	want = "[cpu-4 shared-shared-dra sgx-epc]"
	testwait.Eventually(t, "the slice republished after the pool config changed", func() bool {
		return fmt.Sprint(publishedDevices(t, r)) == want
	})
}

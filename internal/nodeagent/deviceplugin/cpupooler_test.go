package deviceplugin

import (
	"maps"
	"os"
	"testing"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/podapi"
)

// corePools is testPools in CPU-Pooler's meaning: the exclusive pools list physical cores,
// and own the cores' siblings too.
const corePools = `
pools:
  default:      {cpus: "0,8"}
  shared_caas:  {cpus: "1,9"}
  exclusive_dp: {cpus: "2-6", hyperThreadingPolicy: multiThreaded}
  exclusive_rt: {cpus: "7"}
`

// peerSpec is CPU-Pooler's test node (see internal/cpu/pools TestPeerTopology).
const peerSpec = "sockets=2,cores=20,threads=2"

// TestPeerAllocate serves CPU-Pooler's HT test configs (../../cpu/pools/testdata/cpupooler) on
// its test node through the real gRPC API: the resource is nokia.k8s.io/exclusive_caas (the
// configs' resourceBaseName), one device per listed core, and the devices 22 and 35 its
// kubelet fixture allocated give EXCLUSIVE_CPUS=22,35 singleThreaded and 22,35,62,75
// multiThreaded, as CPU-Pooler's device plugin sets it. Device IDs that are not CPU IDs, as
// in its bad_deviceID_format case, are refused.
func TestPeerAllocate(t *testing.T) {
	for _, tc := range []struct {
		file, env string
	}{
		{file: "singleThreadExclusive.yaml", env: "22,35"},
		{file: "multiThreadExclusive.yaml", env: "22,35,62,75"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			yaml, err := os.ReadFile("../../cpu/pools/testdata/cpupooler/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			dir := shortDir(t)
			k := startKubelet(t, dir)
			runPlugin(t, testNode(t, peerSpec, string(yaml)), Options{Dir: dir}) // --resource-domain podfence.io
			regs := k.registrations(t, 2)
			sock, ok := regs["nokia.k8s.io/exclusive_caas"]
			if !ok {
				t.Fatalf("registered %v, want nokia.k8s.io/exclusive_caas", regs)
			}
			c := dial(t, dir, sock)
			stream, err := c.ListAndWatch(ctxT(t), &pluginapi.Empty{})
			if err != nil {
				t.Fatal(err)
			}
			if devs := devicesOf(t, stream); len(devs) != 19 || devs["21"] == nil || devs["39"] == nil || devs["61"] != nil {
				t.Errorf("%d devices, want one per listed core 21-39", len(devs))
			}
			resp, err := c.Allocate(ctxT(t), &pluginapi.AllocateRequest{
				ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"22", "35"}}}})
			if err != nil {
				t.Fatal(err)
			}
			r := resp.ContainerResponses[0]
			want := map[string]string{plan.EnvExclusiveCPUs: tc.env}
			if !maps.Equal(r.Envs, want) {
				t.Errorf("env %v, want %v", r.Envs, want)
			}
			if _, err := podapi.ParseExclusiveCPUs(r.Annotations["podfence.io/exclusive-cpus.exclusive_caas"]); err != nil {
				t.Errorf("per-pool annotation: %v", err)
			}
			_, err = c.Allocate(ctxT(t), &pluginapi.AllocateRequest{
				ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"a", "b", "c"}}}})
			if err == nil {
				t.Error("device IDs a, b, c allocated")
			}
		})
	}
}

// TestCoreDevices: under CPU-Pooler's meaning a multiThreaded device is a whole core, given
// with its sibling; a singleThreaded device is its CPU alone. GetPreferredAllocation counts
// devices, one per core.
func TestCoreDevices(t *testing.T) {
	node := testNode(t, testTopo, corePools)
	res := map[string]*resource{}
	for _, r := range newResources(node, "podfence.io", node.Topology.Online()) {
		res[r.pool.Name] = r
	}
	for _, tc := range []struct {
		pool, devices, want string
	}{
		{pool: "exclusive_dp", devices: "4", want: "4,12"},
		{pool: "exclusive_dp", devices: "2,6", want: "2,6,10,14"},
		{pool: "exclusive_rt", devices: "7", want: "7"},
	} {
		resp, err := res[tc.pool].allocate(ids(tc.devices))
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Envs[plan.EnvExclusiveCPUs]; got != tc.want {
			t.Errorf("%s devices %s: EXCLUSIVE_CPUS=%s, want %s", tc.pool, tc.devices, got, tc.want)
		}
	}
	if _, err := res["exclusive_dp"].allocate(ids("10")); err == nil {
		t.Error("a sibling thread was taken as a device")
	}
	got, err := res["exclusive_dp"].preferred(&pluginapi.ContainerPreferredAllocationRequest{
		AvailableDeviceIDs: ids("2,3,4,5,6"), AllocationSize: 2})
	if err != nil || len(got) != 2 {
		t.Errorf("preferred 2 devices: %v, %v", got, err)
	}
}

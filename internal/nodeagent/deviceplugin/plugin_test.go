package deviceplugin

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/pools"
)

func TestRegister(t *testing.T) {
	for _, tc := range []struct {
		name, domain string
	}{
		{name: "podfence", domain: ""},
		{name: "cpu-pooler", domain: pools.CPUPoolerDomain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := shortDir(t)
			k := startKubelet(t, dir)
			p, _ := runPlugin(t, testNode(t, testTopo, testPools), Options{Dir: dir, Domain: tc.domain})
			domain := tc.domain
			if domain == "" {
				domain = pools.DefaultDomain
			}
			want := []string{domain + "/exclusive_dp", domain + "/exclusive_rt", domain + "/shared_caas"}
			if got := p.Resources(); !slices.Equal(got, want) {
				t.Errorf("Resources() = %v, want %v", got, want)
			}
			regs := k.registrations(t, 3)
			for _, name := range want {
				r, ok := regs[name]
				if !ok {
					t.Fatalf("no registration of %s: %v", name, regs)
				}
				pool := strings.TrimPrefix(name, domain+"/")
				if r.Version != pluginapi.Version || r.Endpoint != "podfence-"+pool+".sock" ||
					r.Options == nil || !r.Options.GetPreferredAllocationAvailable || r.Options.PreStartRequired {
					t.Errorf("registration of %s = %v", name, r)
				}
				if _, err := os.Stat(filepath.Join(dir, r.Endpoint)); err != nil {
					t.Errorf("endpoint socket: %v", err)
				}
			}
		})
	}
}

// devicesOf reads one ListAndWatch message.
func devicesOf(t *testing.T, stream pluginapi.DevicePlugin_ListAndWatchClient) map[string]*pluginapi.Device {
	t.Helper()
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*pluginapi.Device{}
	for _, d := range resp.Devices {
		out[d.ID] = d
	}
	return out
}

func numaOf(d *pluginapi.Device) []int64 {
	if d.Topology == nil {
		return nil
	}
	var ids []int64
	for _, n := range d.Topology.Nodes {
		ids = append(ids, n.ID)
	}
	return ids
}

func TestListAndWatch(t *testing.T) {
	_, clients := started(t)
	type dev struct {
		health string
		numa   []int64
	}
	healthy := func(numa ...int64) dev { return dev{pluginapi.Healthy, numa} }
	for _, tc := range []struct {
		resource string
		count    int
		want     map[string]dev // some devices
		absent   []string
	}{
		{resource: "podfence.io/exclusive_dp", count: 10,
			want:   map[string]dev{"2": healthy(0), "11": healthy(0), "4": healthy(1), "14": healthy(1)},
			absent: []string{"0", "1", "7", "15"}},
		{resource: "podfence.io/exclusive_rt", count: 1, // singleThreaded: one device per core
			want: map[string]dev{"7": healthy(1)}, absent: []string{"15"}},
		{resource: "podfence.io/shared_caas", count: 2000,
			want:   map[string]dev{"shared_caas-0": healthy(0), "shared_caas-1999": healthy(0)},
			absent: []string{"shared_caas-2000"}},
	} {
		t.Run(tc.resource, func(t *testing.T) {
			c := clients[tc.resource]
			opts, err := c.GetDevicePluginOptions(ctxT(t), &pluginapi.Empty{})
			if err != nil || !opts.GetPreferredAllocationAvailable {
				t.Fatalf("GetDevicePluginOptions = %v, %v", opts, err)
			}
			stream, err := c.ListAndWatch(ctxT(t), &pluginapi.Empty{})
			if err != nil {
				t.Fatal(err)
			}
			got := devicesOf(t, stream)
			if len(got) != tc.count {
				t.Errorf("%d devices, want %d", len(got), tc.count)
			}
			for id, w := range tc.want {
				if d := got[id]; d == nil || d.Health != w.health || !slices.Equal(numaOf(d), w.numa) {
					t.Errorf("device %s = %v, want %v", id, d, w)
				}
			}
			for _, id := range tc.absent {
				if got[id] != nil {
					t.Errorf("device %s advertised", id)
				}
			}
		})
	}
}

func TestHealth(t *testing.T) {
	p, clients := started(t)
	dp, err := clients["podfence.io/exclusive_dp"].ListAndWatch(ctxT(t), &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	shared, err := clients["podfence.io/shared_caas"].ListAndWatch(ctxT(t), &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	devicesOf(t, dp)
	devicesOf(t, shared)

	p.SetOnline(cpuset.New(0, 1, 2, 3, 4, 6, 7, 8, 10, 11, 12, 13, 14, 15)) // 5 and 9 offline
	got := devicesOf(t, dp)
	for id, d := range got {
		if want := map[bool]string{true: pluginapi.Unhealthy, false: pluginapi.Healthy}[id == "5"]; d.Health != want {
			t.Errorf("exclusive device %s: health %s, want %s", id, d.Health, want)
		}
	}
	sh := devicesOf(t, shared)
	if sh["shared_caas-999"].Health != pluginapi.Healthy || sh["shared_caas-1000"].Health != pluginapi.Unhealthy {
		t.Errorf("shared devices 999, 1000 = %v, %v; want 1000 healthy devices for the one online CPU",
			sh["shared_caas-999"], sh["shared_caas-1000"])
	}

	p.SetOnline(cpuset.New(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))
	if d := devicesOf(t, dp)["5"]; d.Health != pluginapi.Healthy {
		t.Errorf("device 5 back online: %v", d)
	}
}

func TestOnlineHook(t *testing.T) {
	sys := shortDir(t)
	cpuDir := filepath.Join(sys, "devices", "system", "cpu")
	if err := os.MkdirAll(cpuDir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(list string) {
		if err := os.WriteFile(filepath.Join(cpuDir, "online"), []byte(list+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("0-15")
	dir := shortDir(t)
	k := startKubelet(t, dir)
	runPlugin(t, testNode(t, testTopo, testPools), Options{Dir: dir, Online: SysfsOnline(sys)})
	stream, err := dial(t, dir, k.registrations(t, 3)["podfence.io/exclusive_rt"]).ListAndWatch(ctxT(t), &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if d := devicesOf(t, stream)["7"]; d.Health != pluginapi.Healthy {
		t.Fatalf("device 7: %v", d)
	}
	write("0-6,8-15")
	if d := devicesOf(t, stream)["7"]; d.Health != pluginapi.Unhealthy {
		t.Errorf("device 7 after CPU 7 went offline: %v", d)
	}
}

func TestKubeletRestart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		clear bool // the kubelet removes every socket in the dir when it starts
	}{
		{name: "dir cleared", clear: true},
		{name: "socket re-created", clear: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := shortDir(t)
			k := startKubelet(t, dir)
			node := testNode(t, testTopo, testPools)
			loop := newPasses(node)
			runPlugin(t, node, Options{Dir: dir, Online: loop.Online})
			k.registrations(t, 3)

			k.srv.Stop()
			if tc.clear {
				entries, _ := os.ReadDir(dir)
				for _, e := range entries {
					os.Remove(filepath.Join(dir, e.Name()))
				}
			} else {
				os.Remove(filepath.Join(dir, KubeletSocket))
			}
			loop.wait(t, 1) // a pass without a kubelet
			k2 := startKubelet(t, dir)
			regs := k2.registrations(t, 3)
			stream, err := dial(t, dir, regs["podfence.io/exclusive_dp"]).ListAndWatch(ctxT(t), &pluginapi.Empty{})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(devicesOf(t, stream)); n != 10 {
				t.Errorf("%d devices after the restart, want 10", n)
			}
		})
	}
}

func TestKubeletLate(t *testing.T) {
	dir := shortDir(t)
	node := testNode(t, testTopo, testPools)
	loop := newPasses(node)
	runPlugin(t, node, Options{Dir: dir, Online: loop.Online})
	loop.wait(t, 1) // Run serves every pool before its first pass
	if _, err := os.Stat(filepath.Join(dir, "podfence-exclusive_dp.sock")); err != nil {
		t.Errorf("not serving before the kubelet starts: %v", err)
	}
	startKubelet(t, dir).registrations(t, 3)
}

func TestStop(t *testing.T) {
	dir := shortDir(t)
	k := startKubelet(t, dir)
	_, stop := runPlugin(t, testNode(t, testTopo, testPools), Options{Dir: dir})
	k.registrations(t, 3)
	stream, err := dial(t, dir, &pluginapi.RegisterRequest{Endpoint: "podfence-exclusive_dp.sock"}).
		ListAndWatch(ctxT(t), &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	devicesOf(t, stream)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := stream.Recv(); err == nil {
		t.Error("ListAndWatch stream still open after Run returned")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != KubeletSocket {
		t.Errorf("dir after Run: %v, want only %s", entries, KubeletSocket)
	}
}

func TestNewErrors(t *testing.T) {
	node := testNode(t, testTopo, testPools)
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{name: "domain", opts: Options{Domain: "Example.com/x"},
			want: `device plugin resource domain "Example.com/x": want a domain name such as podfence.io or nokia.k8s.io: a lowercase ` +
				`RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an ` +
				`alphanumeric character (e.g. 'example.com', regex used for validation is ` +
				`'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		{name: "long dir", opts: Options{Dir: "/" + strings.Repeat("d", 90)},
			want: "socket path /" + strings.Repeat("d", 90) + "/podfence-exclusive_dp.sock of podfence.io/exclusive_dp is 118 bytes, " +
				"over the unix socket limit of 107: use a shorter device plugin dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(node, tc.opts, testLog(t))
			if err == nil || err.Error() != tc.want {
				t.Errorf("New: %v\nwant %s", err, tc.want)
			}
		})
	}
}

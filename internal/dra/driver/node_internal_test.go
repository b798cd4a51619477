package driver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReadEPCCapacity(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int64
		from  string // a part of the source or reason
	}{
		{name: "v2", files: map[string]string{"cgroup.controllers": "cpu misc", "misc.capacity": "sev 0\nsgx_epc 67108864\n"},
			want: 64 << 20, from: "misc.capacity"},
		{name: "v1", files: map[string]string{"misc/misc.capacity": "sgx_epc 4096\n", "cpu,cpuacct/x": ""}, want: 4096,
			from: "misc/misc.capacity"},
		{name: "no sgx_epc", files: map[string]string{"cgroup.controllers": "misc", "misc.capacity": "sev 10\n"},
			from: "lists no sgx_epc"},
		{name: "no misc controller", files: map[string]string{"cgroup.controllers": "cpu memory"}, from: "no misc controller"},
		{name: "bad line", files: map[string]string{"cgroup.controllers": "misc", "misc.capacity": "sgx_epc\n"},
			from: `line 1 "sgx_epc"`},
		{name: "too large", files: map[string]string{"cgroup.controllers": "misc", "misc.capacity": "sgx_epc max\n"},
			from: "out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for name, text := range tc.files {
				write(t, filepath.Join(root, name), text)
			}
			got, from := readEPCCapacity(root)
			if got != tc.want || !strings.Contains(from, tc.from) {
				t.Errorf("readEPCCapacity = %d, %q; want %d, %q", got, from, tc.want, tc.from)
			}
		})
	}
}

// TestSourceSelectsByNodeLabels: the pool config is selected by the Node's labels as the
// agent selects it; when the API server fails after a first read, the last labels hold; with
// no read at all the driver does not guess.
func TestSourceSelectsByNodeLabels(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "poolconfig-a.yaml"), `nodeSelector: {nodeType: dra}
pools:
  exclusive_dra: {cpus: "2,4", hyperThreadingPolicy: multiThreaded, requestAPI: dra}
  default: {cpus: "0-1"}`)
	write(t, filepath.Join(dir, "poolconfig-b.yaml"), `pools:
  exclusive_dp: {cpus: "2-3"}
  default: {cpus: "0-1"}`)
	client := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"nodeType": "dra"}}})
	s := &source{cfg: Config{NodeName: "n", PoolConfig: dir, EPCBytes: 0,
		Sysfs: filepath.Join("..", "..", "cpu", "topology", "testdata", "sysfs", "single-socket-smt-adjacent")}, client: client}
	ctx := context.Background()
	v, err := s.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.inv.Units) != 2 || !strings.HasSuffix(v.layout.Source, "poolconfig-a.yaml") {
		t.Errorf("config %s, %d units; want poolconfig-a.yaml's 2", v.layout.Source, len(v.inv.Units))
	}
	if err := client.CoreV1().Nodes().Delete(ctx, "n", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if v, err := s.read(ctx); err != nil || len(v.inv.Units) != 2 {
		t.Errorf("after a failed label read: %v, %v; want the last labels' config", v.inv, err)
	}
	fresh := &source{cfg: s.cfg, client: client}
	if _, err := fresh.read(ctx); err == nil || !strings.Contains(err.Error(), `read the labels of node "n"`) {
		t.Errorf("no labels ever read: %v", err)
	}
}

// TestSourcePublishesLayoutInForce: while the agent's record of the layout in force differs
// from the selected pool config (the agent keeps the old layout until its containers end),
// the driver publishes the layout in force: here a device-plugin pool on the CPUs the new
// config would offer through DRA, so no DRA device at all. Once the agent records the new
// layout, its DRA devices are published. A record that does not parse is an error, not a
// silent fallback.
func TestSourcePublishesLayoutInForce(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	write(t, filepath.Join(dir, "poolconfig-a.yaml"), `pools:
  exclusive_dra: {cpus: "2,4", hyperThreadingPolicy: multiThreaded, requestAPI: dra}
  default: {cpus: "0-1"}`)
	inForce := filepath.Join(state, "checkpoint", "pools-in-force.yaml")
	s := &source{cfg: Config{NodeName: "n", PoolConfig: dir, InForce: inForce,
		Sysfs: filepath.Join("..", "..", "cpu", "topology", "testdata", "sysfs", "single-socket-smt-adjacent")}}
	ctx := context.Background()
	units := func(what string) int {
		t.Helper()
		v, err := s.read(ctx)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return len(v.inv.Units)
	}
	if n := units("no record"); n != 2 {
		t.Errorf("no record: %d units, want the pool config's 2", n)
	}
	write(t, inForce, "pools:\n  exclusive_dp: {cpus: \"2-4\"}\n  default: {cpus: \"0-1\"}\n")
	v, err := s.read(ctx)
	if err != nil || len(v.inv.Units) != 0 || !strings.Contains(v.layout.Source, "pending in the agent") {
		t.Errorf("old layout in force: %v units, source %q, err %v; want none, the record's layout", v.inv, v.layout.Source, err)
	}
	cur, err := s.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sel, err := (&source{cfg: Config{NodeName: "n", PoolConfig: dir, Sysfs: s.cfg.Sysfs}}).read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	write(t, inForce, sel.layout.ConfigText()) // what the agent writes once it takes the config
	if n := units("new layout recorded"); n != 2 {
		t.Errorf("new layout recorded: %d units, want 2 (was %d)", n, len(cur.inv.Units))
	}
	write(t, inForce, "pools: [\n")
	if _, err := s.read(ctx); err == nil || !strings.Contains(err.Error(), "the agent's pool layout in force") {
		t.Errorf("unreadable record: %v", err)
	}
}

package plan

import (
	"errors"
	"os"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
)

// CPU-Pooler's own test inputs and expected cpusets (see ../pools/testdata/cpupooler/README.md).

// peerSpec is CPU-Pooler's test node (fakelscpu): 80 CPUs, CPU c and c+40 one core, cores
// 0-19 on NUMA node 0. pools.TestPeerTopology proves the spec equals its lscpu files.
const peerSpec = "sockets=2,cores=20,threads=2"

// peerNode resolves CPU-Pooler's test config file on its test node; edit, if set, changes
// the file's text first.
func peerNode(t *testing.T, file string, edit func(string) string, pol Policy) *Node {
	t.Helper()
	b, err := os.ReadFile("../pools/testdata/cpupooler/" + file)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if edit != nil {
		text = edit(text)
	}
	topo, err := topology.Synthetic(peerSpec)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pools.Parse(file, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	layout, err := pools.Resolve(cfg, topo)
	if err != nil {
		t.Fatal(err)
	}
	return NewNode(topo, layout, pol)
}

// peerContainer is one container of a pod of CPU-Pooler's controller test: its requests, the
// device IDs its kubelet checkpoint fixture allocated (test/utils/tempfilesys.go), the cpuset
// CPU-Pooler expects (podAddedTcs; "E" = left as it was), and podfence's when it differs.
type peerContainer struct {
	name    string
	request []string // pool, amount, ...
	devices []int
	peer    string // CPU-Pooler's expected cpuset
	want    string // podfence's, when not peer; "refused: <code>: <reason>" for a refusal
}

// TestPeerSetterCpusets replays CPU-Pooler's cpusetter test (test/uts/controller_test,
// podAddedTcs): each pod on a fresh node, each container with the devices the kubelet gave
// it. The shared requests, written 100m there (an extended resource the API server would
// refuse as not whole), are 100 devices here.
func TestPeerSetterCpusets(t *testing.T) {
	// testpoolconfig1 lists CPU 12 in exclusive_caas and in shared_caas, which podfence
	// refuses (pools.TestPeerConfigs); here CPU 12 is the shared pool's only, as the
	// expected shared cpuset 9-12,15,17 has it.
	conf1 := func(s string) string { return strings.Replace(s, "3-8,12-14,16", "3-8,13-14,16", 1) }
	for _, tc := range []struct {
		pod        string
		file       string
		edit       func(string) string
		containers []peerContainer
	}{
		{pod: "pod_shared", file: "testpoolconfig1.yaml", edit: conf1, containers: []peerContainer{
			{name: "cont_shared", request: []string{"shared_caas", "100"}, peer: "9-12,15,17"}}},
		{pod: "pod_exc", file: "testpoolconfig1.yaml", edit: conf1, containers: []peerContainer{
			{name: "cont_exc", request: []string{"exclusive_caas", "2"}, devices: []int{3, 4}, peer: "3-4"}}},
		{pod: "pod_excl_two_container", file: "testpoolconfig1.yaml", edit: conf1, containers: []peerContainer{
			{name: "cont_excl1", request: []string{"exclusive_caas", "2"}, devices: []int{3, 4}, peer: "3-4"},
			{name: "cont_excl2", request: []string{"exclusive_caas", "3"}, devices: []int{5, 6, 7}, peer: "5-7"}}},
		{pod: "pod_two_container_sh_exc", file: "testpoolconfig1.yaml", edit: conf1, containers: []peerContainer{
			{name: "cont_exclusive", request: []string{"exclusive_caas", "1"}, devices: []int{8}, peer: "8"},
			{name: "cont_shared", request: []string{"shared_caas", "100"}, peer: "9-12,15,17"}}},
		{pod: "pod_three_cont_sh_exc_def", file: "testpoolconfig1.yaml", edit: conf1, containers: []peerContainer{
			{name: "cont_exclusive", request: []string{"exclusive_caas", "1"}, devices: []int{3}, peer: "3"},
			{name: "cont_shared", request: []string{"shared_caas", "100"}, peer: "9-12,15,17"},
			{name: "cont_default", request: []string{"default_caas", "1"}, peer: "0-2"}}},
		{pod: "pod_default_explicit", file: "testpoolconfig1.yaml", edit: conf1, containers: []peerContainer{
			{name: "cont_default_explicit", request: []string{"default", "1"}, peer: "0-2"}}},
		{pod: "pod_default_implicit", file: "testpoolconfig1.yaml", edit: conf1, containers: []peerContainer{
			{name: "cont_default_implicit", peer: "0-2"}}},
		{pod: "pod_exc_pin_2_proc_2_cont", file: "testpoolconfig1.yaml", edit: conf1, containers: []peerContainer{
			{name: "cont_exc_pin1", request: []string{"exclusive_caas", "2"}, devices: []int{12, 13}, peer: "12-13",
				want: `refused: CPUsUnavailable: given CPUs 12-13 are not all in exclusive pool "exclusive_caas" ` +
					`(3-8,13-14,16,43-48,53-54,56)`}, // CPU 12: see conf1
			{name: "cont_exc_pin2", request: []string{"exclusive_caas", "2"}, devices: []int{14, 16}, peer: "14,16"}}},
		{pod: "pod_exc_pin_2_proc_1_cont", file: "testpoolconfig1.yaml", edit: conf1, containers: []peerContainer{
			// The fixture's kubelet gave one device for a request of two, which a kubelet never
			// does; CPU-Pooler sets what it finds, podfence refuses the mismatch.
			{name: "cont_exc_pin", request: []string{"exclusive_caas", "2"}, devices: []int{6}, peer: "6",
				want: `refused: InvalidRequest: given CPUs 6 are 1 physical core, but the container asks 2 of pool "exclusive_caas"`}}},
		{pod: "pod_pin_2_proc_exc_shared", file: "testpoolconfig1.yaml", edit: conf1, containers: []peerContainer{
			{name: "cont_pin_exc_shared", request: []string{"exclusive_caas", "1", "shared_caas", "100"}, devices: []int{16},
				peer: "9-12,15-17"}}},
		{pod: "chckpnt_no_device", file: "testpoolconfig1.yaml", edit: conf1, containers: []peerContainer{
			// No device in the kubelet's checkpoint: CPU-Pooler falls back to the default pool;
			// podfence's agent then allocates itself (as without a device plugin).
			{name: "chckpnt_no_device", request: []string{"exclusive_caas", "1"}, peer: "0-2", want: "3"}}},
		{pod: "pod_default_explicit_no_default_pool", file: "testpoolconfig2.yaml", containers: []peerContainer{
			// No default pool: CPU-Pooler leaves the container on the kubelet's cpuset (every
			// CPU, "E"); podfence makes the CPUs no pool owns the default pool.
			{name: "cont_default_explicit_no_default_pool", request: []string{"default", "1"}, peer: "E", want: "8-43,48-79"}}},
		{pod: "pod_ht_test", file: "singleThreadExclusive.yaml", containers: []peerContainer{
			{name: "cont_exc_ht", request: []string{"exclusive_caas", "2"}, devices: []int{22, 35}, peer: "22,35"}}},
		{pod: "pod_ht_test", file: "multiThreadExclusive.yaml", containers: []peerContainer{
			{name: "cont_exc_ht", request: []string{"exclusive_caas", "2"}, devices: []int{22, 35}, peer: "22,35,62,75"}}},
	} {
		t.Run(tc.pod+"/"+tc.file, func(t *testing.T) {
			n := peerNode(t, tc.file, tc.edit, Policy{})
			s := NewLedger(n)
			for _, pc := range tc.containers {
				c := Container{PodUID: tc.pod, Namespace: "default", Pod: tc.pod, Name: pc.name, Request: req(pc.request...)}
				if len(pc.devices) > 0 {
					c.ExclusiveCPUs = cpuset.New(pc.devices...)
				}
				want := pc.want
				if want == "" {
					want = pc.peer
				}
				d, err := n.Allocate(s, c)
				got := d.CPUs.String()
				var r *Refusal
				if errors.As(err, &r) {
					got = "refused: " + r.Code + ": " + r.Reason
				} else if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("container %s: cpuset %q, want %q (CPU-Pooler: %q)", pc.name, got, want, pc.peer)
				}
			}
		})
	}
}

// TestPeerHyperThreading is CPU-Pooler's HT test in full: exclusive_caas: 2 with the devices
// 22 and 35 gets 22,35 under singleThreaded, keeping their siblings 62 and 75 from everyone
// else, and 22,35,62,75 under multiThreaded; EXCLUSIVE_CPUS says the same.
func TestPeerHyperThreading(t *testing.T) {
	for _, tc := range []struct {
		file, cpus, idled, env string
	}{
		{file: "singleThreadExclusive.yaml", cpus: "22,35", idled: "62,75", env: "22,35"},
		{file: "multiThreadExclusive.yaml", cpus: "22,35,62,75", idled: "", env: "22,35,62,75"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			n := peerNode(t, tc.file, nil, Policy{})
			s := NewLedger(n)
			c := Container{PodUID: "pod0023", Pod: "pod_ht_test", Name: "cont_exc_ht", Request: req("exclusive_caas", "2"),
				ExclusiveCPUs: cpuset.New(22, 35)}
			d, err := n.Allocate(s, c)
			if err != nil {
				t.Fatal(err)
			}
			if commaList(d.CPUs) != tc.cpus || commaList(d.Allocation.Idled) != tc.idled || d.EnvValue(EnvExclusiveCPUs) != tc.env {
				t.Errorf("cpus %s idled %s EXCLUSIVE_CPUS=%s, want %s, %s, %s", commaList(d.CPUs), commaList(d.Allocation.Idled),
					d.EnvValue(EnvExclusiveCPUs), tc.cpus, tc.idled, tc.env)
			}
			// The siblings are no one else's: the pool's 19 cores less the two taken remain.
			other, err := n.Allocate(s, Container{PodUID: "p2", Pod: "other", Name: "c", Request: req("exclusive_caas", "17")})
			if err != nil {
				t.Fatal(err)
			}
			if held := other.Allocation.Held().Intersection(d.Allocation.Held()); !held.IsEmpty() {
				t.Errorf("another container got %s of the first one's CPUs", held)
			}
			if _, err := n.Allocate(s, Container{PodUID: "p3", Pod: "third", Name: "c", Request: req("exclusive_caas", "1")}); err == nil {
				t.Error("a 20th core was given out of a pool of 19")
			}
		})
	}
}

package dra_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/dra"
)

var update = flag.Bool("update", false, "rewrite testdata/*.yaml from the code")

// line renders a device in one line: its name, then its attributes (without the driver's
// domain) and capacities, sorted: "cpu-4 coreID=4 cpus=4,52 ... | millicpu=2k".
func line(d resourceapi.Device) string {
	var attrs []string
	for k, v := range d.Attributes {
		name := strings.TrimPrefix(string(k), dra.DriverName+"/")
		switch {
		case v.StringValue != nil:
			attrs = append(attrs, name+"="+*v.StringValue)
		case v.IntValue != nil:
			attrs = append(attrs, fmt.Sprintf("%s=%d", name, *v.IntValue))
		case v.BoolValue != nil:
			attrs = append(attrs, fmt.Sprintf("%s=%t", name, *v.BoolValue))
		}
	}
	slices.Sort(attrs)
	out := strings.Join(append([]string{d.Name}, attrs...), " ")
	var caps []string
	for k, v := range d.Capacity {
		caps = append(caps, strings.TrimPrefix(string(k), dra.DriverName+"/")+"="+v.Value.String())
	}
	slices.Sort(caps)
	if len(caps) > 0 {
		out += " | " + strings.Join(caps, " ")
	}
	if ptr.Deref(d.AllowMultipleAllocations, false) {
		out += " (shared)"
	}
	return out
}

func lines(devs []resourceapi.Device) []string {
	var out []string
	for _, d := range devs {
		out = append(out, line(d))
	}
	return out
}

// dies is one socket of two dies, two cores each, SMT2: CPUs 0-3 on die 0, 4-7 on die 1
// (core c has threads 2c and 2c+1); one NUMA node; an L3 per die.
func dies() *topology.Topology {
	t := &topology.Topology{Source: "test: 2 dies", CPUs: map[int]topology.CPU{}}
	for id := range 8 {
		die := id / 4
		t.CPUs[id] = topology.CPU{ID: id, Die: die, Core: id &^ 1, L3: die * 4}
	}
	return t
}

func TestDevices(t *testing.T) {
	const st = "threads=1 wholeCore=false"
	for _, tc := range []struct {
		name   string
		topo   *topology.Topology
		config string
		epc    int64
		want   []string
	}{{
		name: "2 sockets SMT2 apart: whole cores, device plugin pool left out, shared pool",
		topo: sysfs(t, "dual-socket-smt-apart"), config: dualSocketConfig,
		want: []string{
			"cpu-4 coreID=4 cpus=4,52 l3CacheID=0 numaNode=0 pool=exclusive_dra resource.kubernetes.io/numaNode=0 smt=true socket=0 threads=2 wholeCore=true",
			"cpu-5 coreID=5 cpus=5,53 l3CacheID=0 numaNode=0 pool=exclusive_dra resource.kubernetes.io/numaNode=0 smt=true socket=0 threads=2 wholeCore=true",
			"cpu-28 coreID=28 cpus=28,76 l3CacheID=24 numaNode=1 pool=exclusive_dra resource.kubernetes.io/numaNode=1 smt=true socket=1 threads=2 wholeCore=true",
			"shared-shared-dra numaNode=0 pool=shared_dra resource.kubernetes.io/numaNode=0 smt=true socket=0 | millicpu=2k (shared)",
		},
	}, {
		name: "4 NUMA nodes, 8 L3 groups: each unit names its own",
		topo: sysfs(t, "epyc-4numa-multi-l3"),
		config: `pools:
  exclusive_dra: {cpus: "7-8,31", hyperThreadingPolicy: multiThreaded, requestAPI: dra}
  shared_x: {cpus: "0-1,32-33,12-13", requestAPI: dra}
  default: {cpus: "2"}`,
		want: []string{
			"cpu-7 coreID=7 cpus=7,39 l3CacheID=4 numaNode=0 pool=exclusive_dra resource.kubernetes.io/numaNode=0 smt=true socket=0 threads=2 wholeCore=true",
			"cpu-8 coreID=8 cpus=8,40 l3CacheID=8 numaNode=1 pool=exclusive_dra resource.kubernetes.io/numaNode=1 smt=true socket=0 threads=2 wholeCore=true",
			"cpu-31 coreID=31 cpus=31,63 l3CacheID=28 numaNode=3 pool=exclusive_dra resource.kubernetes.io/numaNode=3 smt=true socket=0 threads=2 wholeCore=true",
			// A shared pool on two NUMA nodes has no NUMA attribute.
			"shared-shared-x pool=shared_x smt=true socket=0 | millicpu=6k (shared)",
		},
	}, {
		name: "singleThreaded: one thread per unit, the sibling idle",
		topo: synthetic(t, "cores=4,threads=2"),
		config: `pools:
  exclusive_rt: {cpus: "1,6", requestAPI: dra}
  default: {cpus: "0"}`,
		want: []string{
			"cpu-1 coreID=1 cpus=1 l3CacheID=0 numaNode=0 pool=exclusive_rt resource.kubernetes.io/numaNode=0 smt=true socket=0 " + st,
			// The listed CPU names the unit, even where it is not the core's lowest thread.
			"cpu-6 coreID=2 cpus=6 l3CacheID=0 numaNode=0 pool=exclusive_rt resource.kubernetes.io/numaNode=0 smt=true socket=0 " + st,
		},
	}, {
		name: "exclusiveCPUs threads, multiThreaded: every thread a unit",
		topo: synthetic(t, "cores=4,threads=2"),
		config: `exclusiveCPUs: threads
pools:
  exclusive_t: {cpus: "1,5", hyperThreadingPolicy: multiThreaded, requestAPI: dra}
  default: {cpus: "0,4"}`,
		want: []string{
			"cpu-1 coreID=1 cpus=1 l3CacheID=0 numaNode=0 pool=exclusive_t resource.kubernetes.io/numaNode=0 smt=true socket=0 " + st,
			"cpu-5 coreID=1 cpus=5 l3CacheID=0 numaNode=0 pool=exclusive_t resource.kubernetes.io/numaNode=0 smt=true socket=0 " + st,
		},
	}, {
		name: "no SMT: a one-thread unit is the whole core",
		topo: sysfs(t, "vm-2cpu-nosmt"),
		config: `pools:
  exclusive_a: {cpus: "1", requestAPI: dra}
  default: {cpus: "0"}`,
		want: []string{
			"cpu-1 coreID=1 cpus=1 l3CacheID=0 numaNode=0 pool=exclusive_a resource.kubernetes.io/numaNode=0 smt=false socket=0 threads=1 wholeCore=true",
		},
	}, {
		name: "2 dies in a socket: die published",
		topo: dies(),
		config: `pools:
  exclusive_a: {cpus: "2,4", hyperThreadingPolicy: multiThreaded, requestAPI: dra}
  default: {cpus: "0-1"}`,
		want: []string{
			"cpu-2 coreID=2 cpus=2-3 die=0 l3CacheID=0 numaNode=0 pool=exclusive_a resource.kubernetes.io/numaNode=0 smt=true socket=0 threads=2 wholeCore=true",
			"cpu-4 coreID=4 cpus=4-5 die=1 l3CacheID=4 numaNode=0 pool=exclusive_a resource.kubernetes.io/numaNode=0 smt=true socket=0 threads=2 wholeCore=true",
		},
	}, {
		name: "SGX EPC: a device by capacity; no DRA pool",
		topo: synthetic(t, "cores=2"), config: "pools: {exclusive_a: {cpus: \"1\"}, default: {cpus: \"0\"}}", epc: 64 << 20,
		want: []string{"sgx-epc | epc=64Mi (shared)"},
	}, {
		name: "less than two EPC pages (the request policy's min + step): no device",
		topo: synthetic(t, "cores=2"), config: "pools: {default: {cpus: \"0-1\"}}", epc: 8191,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := lines(inventory(t, tc.topo, tc.config, tc.epc).Devices())
			if !slices.Equal(got, tc.want) {
				t.Errorf("devices:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestRequestPolicies: the shared device takes 1 CPU (1000 millicpu) when a request names no
// amount and at least 1 millicpu; EPC whole 4 KiB pages, one page by default.
func TestRequestPolicies(t *testing.T) {
	devs := inventory(t, sysfs(t, "dual-socket-smt-apart"), dualSocketConfig, 1<<30).Devices()
	policy := map[string]string{}
	for _, d := range devs {
		for name, c := range d.Capacity {
			p := c.RequestPolicy
			policy[string(name)] = fmt.Sprintf("default=%s min=%s step=%v", p.Default, p.ValidRange.Min, p.ValidRange.Step)
		}
	}
	want := map[string]string{
		string(dra.CapMilliCPU): "default=1k min=1 step=<nil>",
		string(dra.CapEPC):      "default=4Ki min=4Ki step=4Ki",
	}
	if fmt.Sprint(policy) != fmt.Sprint(want) {
		t.Errorf("request policies %v, want %v", policy, want)
	}
}

func TestChunks(t *testing.T) {
	devs := make([]resourceapi.Device, 300)
	for i := range devs {
		devs[i].Name = fmt.Sprintf("cpu-%d", i)
	}
	var sizes []int
	var names []string
	for _, c := range dra.Chunks(devs) {
		sizes = append(sizes, len(c))
		names = append(names, c[0].Name)
	}
	if fmt.Sprint(sizes) != "[128 128 44]" || fmt.Sprint(names) != "[cpu-0 cpu-128 cpu-256]" {
		t.Errorf("Chunks(300 devices): sizes %v, first devices %v", sizes, names)
	}
	if got := dra.Chunks(nil); len(got) != 0 {
		t.Errorf("Chunks(nil) = %v", got)
	}
}

// TestSampleSlice renders the dual-socket node's slice (with 64 MiB EPC) as the API server
// stores it, and compares it with testdata/sample-slice.yaml (go test -update rewrites it).
func TestSampleSlice(t *testing.T) {
	inv := inventory(t, sysfs(t, "dual-socket-smt-apart"), dualSocketConfig, 64<<20)
	slice := resourceapi.ResourceSlice{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSlice"},
		ObjectMeta: metav1.ObjectMeta{Name: "node-a-dra.podfence.io-"},
		Spec: resourceapi.ResourceSliceSpec{Driver: dra.DriverName, NodeName: ptr.To("node-a"),
			Pool:    resourceapi.ResourcePool{Name: "node-a", Generation: 1, ResourceSliceCount: 1},
			Devices: inv.Devices()},
	}
	got, err := yaml.Marshal(slice)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join("testdata", "sample-slice.yaml")
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("slice differs from %s (go test -run TestSampleSlice -update to rewrite):\n%s", file, got)
	}
}

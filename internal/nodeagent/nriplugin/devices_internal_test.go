package nriplugin

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/kube/podresources"
)

// exactString is exact as "pool=cpus ...", sorted.
func exactString(exact map[string]cpuset.CPUSet) string {
	var out []string
	for pool, cpus := range exact {
		out = append(out, pool+"="+cpus.String())
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

func TestPoolDevices(t *testing.T) {
	for _, tc := range []struct {
		name  string
		devs  podresources.Devices
		req   string // plan.Request.String()
		exact string // exactString
		err   string
	}{
		{name: "none"},
		{name: "not pools", devs: podresources.Devices{"gpu.example/g": {"0"}, "podfence.io/": {"1"}, "example.com/exclusive_a": {"2"}}},
		{name: "exclusive", devs: podresources.Devices{"podfence.io/exclusive_a": {"12", "4"}}, req: "exclusive_a=2", exact: "exclusive_a=4,12"},
		{name: "shared of CPU-Pooler", devs: podresources.Devices{"nokia.k8s.io/shared_s": {"0", "1", "2"}}, req: "shared_s=3"},
		{name: "both, and an empty entry", devs: podresources.Devices{"podfence.io/exclusive_a": {"3"},
			"podfence.io/shared_s": {"shared_s-0"}, "podfence.io/exclusive_b": {}}, req: "exclusive_a=1,shared_s=1", exact: "exclusive_a=3"},
		{name: "two exclusive pools", devs: podresources.Devices{"podfence.io/exclusive_a": {"3"}, "podfence.io/exclusive_b": {"4"}},
			req: "exclusive_a=1,exclusive_b=1", exact: "exclusive_a=3 exclusive_b=4"},
		{name: "a config's resourceBaseName", devs: podresources.Devices{"intel.com/exclusive_a": {"5"}, "other.example/exclusive_a": {"6"}},
			req: "exclusive_a=1", exact: "exclusive_a=5"},
		{name: "one pool in both domains", devs: podresources.Devices{"podfence.io/exclusive_a": {"3"}, "nokia.k8s.io/exclusive_a": {"4"}},
			req: "exclusive_a=2", exact: "exclusive_a=3-4"},
		{name: "not a CPU ID", devs: podresources.Devices{"podfence.io/exclusive_a": {"+3"}},
			err: `kubelet allocated device "+3" of podfence.io/exclusive_a: want a CPU ID (a whole number 0-8191), as podfence's device plugin advertises`},
		{name: "negative", devs: podresources.Devices{"podfence.io/exclusive_a": {"-1"}},
			err: `kubelet allocated device "-1" of podfence.io/exclusive_a: want a CPU ID (a whole number 0-8191), as podfence's device plugin advertises`},
		{name: "the largest CPU ID", devs: podresources.Devices{"podfence.io/exclusive_a": {"8191", "0"}}, req: "exclusive_a=2",
			exact: "exclusive_a=0,8191"},
		{name: "too large", devs: podresources.Devices{"podfence.io/exclusive_a": {"8192"}},
			err: `kubelet allocated device "8192" of podfence.io/exclusive_a: want a CPU ID (a whole number 0-8191), as podfence's device plugin advertises`},
		{name: "twice", devs: podresources.Devices{"podfence.io/exclusive_a": {"3", "3"}},
			err: `kubelet allocated devices ["3" "3"] of podfence.io/exclusive_a: a CPU ID twice`},
		{name: "twice across domains", devs: podresources.Devices{"podfence.io/exclusive_a": {"3"}, "nokia.k8s.io/exclusive_a": {"3"}},
			err: `kubelet allocated devices ["3"] of podfence.io/exclusive_a: a CPU ID twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, exact, err := poolDevices(tc.devs, pools.Domains(&pools.Config{ResourceBaseName: "intel.com"}))
			if (err == nil) != (tc.err == "") || err != nil && err.Error() != tc.err {
				t.Fatalf("poolDevices error %v, want %q", err, tc.err)
			}
			if err == nil && (req.String() != tc.req || exactString(exact) != tc.exact) {
				t.Errorf("poolDevices = %s, %s; want %s, %s", req, exactString(exact), tc.req, tc.exact)
			}
		})
	}
}

func qty(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.DecimalSI) }

func TestWithDevices(t *testing.T) {
	annotated := plan.Container{Name: "app", Request: plan.Request{"exclusive_a": qty(2)}, ExclusiveCPUs: cpuset.New(3, 11)}
	for _, tc := range []struct {
		name string
		c    plan.Container
		devs podresources.Devices
		req  string
		cpus string
	}{
		{name: "no devices", c: annotated, req: "exclusive_a=2", cpus: "3,11"},
		{name: "the annotation's pool keeps its CPUs; a share is added", c: annotated,
			devs: podresources.Devices{"podfence.io/exclusive_a": {"2"}, "podfence.io/shared_s": {"s-0"}},
			req:  "exclusive_a=2,shared_s=1", cpus: "3,11"},
		{name: "another exclusive pool is added", c: annotated, devs: podresources.Devices{"podfence.io/exclusive_b": {"4"}},
			req: "exclusive_a=2,exclusive_b=1", cpus: "3-4,11"},
		{name: "unannotated", c: plan.Container{Name: "app"}, devs: podresources.Devices{"podfence.io/exclusive_b": {"4", "5"}},
			req: "exclusive_b=2", cpus: "4-5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, exact, err := poolDevices(tc.devs, pools.Domains())
			if err != nil {
				t.Fatal(err)
			}
			c := withDevices(tc.c, req, exact)
			if c.Request.String() != tc.req || c.ExclusiveCPUs.String() != tc.cpus {
				t.Errorf("withDevices = %s, %s; want %s, %s", c.Request, c.ExclusiveCPUs, tc.req, tc.cpus)
			}
			if annotated.Request.String() != "exclusive_a=2" || annotated.ExclusiveCPUs.String() != "3,11" {
				t.Errorf("withDevices changed its input: %s, %s", annotated.Request, annotated.ExclusiveCPUs)
			}
		})
	}
}

// FuzzPoolDevices: whatever device IDs the kubelet lists, a request without error counts
// each pool's devices, and each exclusive pool's exact CPUs are as many as its devices.
func FuzzPoolDevices(f *testing.F) {
	f.Add("podfence.io/exclusive_a", "3,11", "nokia.k8s.io/shared_s", "0,1,2")
	f.Add("podfence.io/exclusive_a", "3,3", "podfence.io/exclusive_b", "4")
	f.Add("nokia.k8s.io/exclusive_x", "-1,08", "podfence.io/exclusive_x", "7")
	f.Fuzz(func(t *testing.T, res1, ids1, res2, ids2 string) {
		devs := podresources.Devices{res1: strings.Split(ids1, ",")}
		devs[res2] = append(devs[res2], strings.Split(ids2, ",")...)
		req, exact, err := poolDevices(devs, pools.Domains())
		if err != nil {
			return
		}
		count := map[string]int64{}
		for name, ids := range devs {
			if pool, ok := pools.ParseResourceName(name); ok {
				count[pool] += int64(len(ids))
			}
		}
		if len(req) != len(count) {
			t.Fatalf("request %s for devices %v", req, devs)
		}
		for pool, n := range count {
			q := req[pool]
			e, isExact := exact[pool]
			exclusive := strings.HasPrefix(pool, "exclusive")
			if q.Value() != n || isExact != exclusive || exclusive && int64(e.Size()) != n {
				t.Fatalf("pool %s: request %s, exact CPUs %s, for %d devices", pool, q.String(), e, n)
			}
		}
		if len(exact) > len(req) {
			t.Fatal(fmt.Sprint("exact CPUs of pools not requested: ", exactString(exact)))
		}
	})
}

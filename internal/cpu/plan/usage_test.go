package plan

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

const usagePods = `
apiVersion: v1
kind: Pod
metadata: {name: st, namespace: a}
spec:
  initContainers:
  - {name: setup, resources: {limits: {podfence.io/shared_s: "1000"}}}
  containers:
  - {name: solo, resources: {limits: {podfence.io/exclusive_st: "2"}}}
---
apiVersion: v1
kind: Pod
metadata: {name: mix, namespace: a}
spec:
  containers:
  - {name: both, resources: {limits: {podfence.io/exclusive_m: "2", podfence.io/shared_s: "200"}}}
  - {name: share, resources: {limits: {podfence.io/shared_s: "500"}}}
  - {name: share2, resources: {limits: {podfence.io/shared_s: "100"}}}
  - {name: plain}
`

// TestUsage pins the pool table of `podfence plan`: exclusive pools first (held CPUs count
// the idled siblings of a singleThreaded pool, which are also reported apart), then the shared
// pool (millicpu granted of its capacity, with every container that has a share of it, including
// one that is also exclusive), then the default pool; init containers, released before the app
// containers start, count nowhere.
func TestUsage(t *testing.T) {
	n := testNode(t)
	s := NewLedger(n)
	rep := n.PlanPods(s, pods(t, usagePods))
	if len(rep.Refusals) != 0 {
		t.Fatalf("refusals: %+v", rep.Refusals)
	}
	var got []string
	for _, u := range rep.Usage {
		got = append(got, fmt.Sprintf("%s %s %s size=%d held=%d idled=%d milli=%d/%d containers=%d",
			u.Pool, u.Type, u.CPUs, u.Size, u.Held, u.Idled, u.MilliCPU, u.Capacity, u.Containers))
	}
	want := []string{
		"exclusive_m exclusive 2-5,10-13 size=8 held=2 idled=0 milli=0/0 containers=1",
		"exclusive_st exclusive 6-7,14-15 size=4 held=4 idled=2 milli=0/0 containers=1",
		"shared_s shared 1,9 size=2 held=0 idled=0 milli=800/2000 containers=3",
		"default default 0,8 size=2 held=0 idled=0 milli=0/0 containers=1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("usage:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var buf bytes.Buffer
	if err := n.WriteText(&buf, rep); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"exclusive_m   exclusive  2-5,10-13  2/8 CPUs held (25%), 1 container\n",
		"exclusive_st  exclusive  6-7,14-15  4/4 CPUs held (100%), 1 container, 2 idled siblings\n",
		"shared_s      shared     1,9        800/2000 millicpu granted (40%), 3 containers\n",
		"default       default    0,8        1 container on 2 CPUs, with every pod sandbox\n",
	} {
		if !strings.Contains(buf.String(), line) {
			t.Errorf("text report lacks %q:\n%s", line, buf.String())
		}
	}
	if strings.Contains(buf.String(), "Refused:") || strings.Contains(buf.String(), "Warnings:") {
		t.Errorf("text report has a section for refusals or warnings, with none:\n%s", buf.String())
	}
}

// TestPlanPodsDefaultNamespace: a pod without a namespace is planned, and refused, as
// default/<name>.
func TestPlanPodsDefaultNamespace(t *testing.T) {
	n := testNode(t)
	rep := n.PlanPods(NewLedger(n), pods(t, `
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - {name: c, resources: {limits: {podfence.io/exclusive_m: "8"}}}
---
apiVersion: v1
kind: Pod
metadata: {name: q}
spec:
  containers:
  - {name: c, resources: {limits: {podfence.io/exclusive_m: "1"}}}
`))
	if len(rep.Placed) != 1 || rep.Placed[0].Pod != "default/p" || len(rep.Refusals) != 1 || rep.Refusals[0].Pod != "default/q" {
		t.Errorf("placed %+v, refused %+v; want default/p placed and default/q refused", rep.Placed, rep.Refusals)
	}
}

// TestUsageCountsTheLedger: the held CPUs and granted millicpu are the ledger's, so
// allocations restored from a checkpoint count although this plan did not place them; the
// container counts are of the plan's containers.
func TestUsageCountsTheLedger(t *testing.T) {
	n := testNode(t)
	s := NewLedger(n)
	for _, c := range []Container{ctr("old", req("exclusive_st", "1")), ctr("oldshare", req("shared_s", "1500"))} {
		if _, err := n.Allocate(s, c); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, u := range n.Usage(s, nil) {
		got = append(got, fmt.Sprintf("%s held=%d idled=%d milli=%d/%d containers=%d", u.Pool, u.Held, u.Idled, u.MilliCPU, u.Capacity,
			u.Containers))
	}
	want := "exclusive_m held=0 idled=0 milli=0/0 containers=0 exclusive_st held=2 idled=1 milli=0/0 containers=0 " +
		"shared_s held=0 idled=0 milli=1500/2000 containers=0 default held=0 idled=0 milli=0/0 containers=0"
	if strings.Join(got, " ") != want {
		t.Errorf("usage = %s\nwant    %s", strings.Join(got, " "), want)
	}
}

// TestWriteTextRows pins the container rows of `podfence plan`: the pool (with the share of an
// exclusive container, or of a shared one), the CPUs, the placement (by NUMA node and core, ½
// marking a core shared with others, and the siblings a singleThreaded pool idles; "whole
// pool" elsewhere), the memory nodes, the CFS quota and the environment ("-" for none).
func TestWriteTextRows(t *testing.T) {
	n := testNode(t)
	rep := n.PlanPods(NewLedger(n), pods(t, usagePods+`---
apiVersion: v1
kind: Pod
metadata: {name: half, namespace: a}
spec:
  containers:
  - {name: one, resources: {limits: {podfence.io/exclusive_m: "1"}}}
`))
	var buf bytes.Buffer
	if err := n.WriteText(&buf, rep); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.HasPrefix(line, "a/") {
			got = append(got, strings.Join(strings.Fields(line), " "))
		}
	}
	want := []string{
		"a/st setup (init) shared_s (1000m) 1,9 whole pool 0 100000/100000µs SHARED_CPUS=1,9 CPU_POOLS=shared",
		"a/st solo exclusive_st 6-7 n1: c6{6} c7{7}; idles 14-15 1 - EXCLUSIVE_CPUS=6,7 CPU_POOLS=exclusive CONTAINER_NAME=solo",
		"a/mix both exclusive_m + shared_s (200m) 1-2,9-10 n0: c2{2,10} 0 220000/100000µs EXCLUSIVE_CPUS=2,10 SHARED_CPUS=1,9 " +
			"CPU_POOLS=exclusive&shared CONTAINER_NAME=both",
		"a/mix share shared_s (500m) 1,9 whole pool 0 50000/100000µs SHARED_CPUS=1,9 CPU_POOLS=shared",
		"a/mix share2 shared_s (100m) 1,9 whole pool 0 10000/100000µs SHARED_CPUS=1,9 CPU_POOLS=shared",
		"a/mix plain default 0,8 whole pool 0 - -",
		"a/half one exclusive_m 3 n0: c3{3}½ 0 - EXCLUSIVE_CPUS=3 CPU_POOLS=exclusive CONTAINER_NAME=one",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestWriteTextWarnings: the pool layout's warnings follow the tables, one a line.
func TestWriteTextWarnings(t *testing.T) {
	n := nodeOf(t, "sockets=2,numa=2,cores=4,threads=2", strings.Replace(testPools, `default: {cpus: "0,8"}`, `default: {cpus: "0"}`, 1)+
		"unpooledCPUs: default\n")
	if len(n.Pools.Warnings) == 0 {
		t.Fatal("the layout has no warning")
	}
	var buf bytes.Buffer
	if err := n.WriteText(&buf, n.PlanPods(NewLedger(n), nil)); err != nil {
		t.Fatal(err)
	}
	want := "\nWarnings:\n  " + strings.Join(n.Pools.Warnings, "\n  ") + "\n"
	if !strings.HasSuffix(buf.String(), want) || strings.Contains(buf.String(), "Refused:") {
		t.Errorf("text report:\n%s\nwant it to end with %q and have no refusals", buf.String(), want)
	}
}

// TestUsageTextOne: a default pool of one CPU and one idled sibling read in the singular (a
// one-core node's derived layout).
func TestUsageTextOne(t *testing.T) {
	for _, tc := range []struct {
		u    PoolUsage
		want string
	}{
		{PoolUsage{Type: "default", Size: 1, Containers: 1}, "1 container on 1 CPU, with every pod sandbox"},
		{PoolUsage{Type: "exclusive", Size: 4, Held: 2, Idled: 1, Containers: 1}, "2/4 CPUs held (50%), 1 container, 1 idled sibling"},
	} {
		if got := usageText(tc.u); got != tc.want {
			t.Errorf("usageText(%+v) = %q, want %q", tc.u, got, tc.want)
		}
	}
}

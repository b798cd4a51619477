package plan

import (
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

// TestQuotaSharedPoolOffline: under CPU-Pooler's quotas (all), a container with exclusive
// CPUs and a share gets its exclusive units plus the whole shared pool as configured, CPUs
// gone offline since included, as its share was granted against that size. The node: 2
// sockets x 4 cores x 2 threads (core c = CPUs c, c+8), shared_s = core 1 with CPU 9 offline.
func TestQuotaSharedPoolOffline(t *testing.T) {
	n := nodeWith(t, "sockets=2,numa=2,cores=4,threads=2,offline=9", coresPools, Policy{CFSQuotas: QuotasAll})
	s := NewLedger(n)
	a := allocation.Allocation{PodUID: "u1", Container: "c", Pool: "exclusive_m", Type: allocation.TypeExclusive,
		CPUs: cpuset.New(2, 10), SharedPool: "shared_s", MilliCPU: 300}
	if err := s.Restore([]allocation.Allocation{a}); err != nil {
		t.Fatal(err)
	}
	d := n.Decide(a)
	if d.Quota != 300000 || d.CPUs.String() != "1-2,10" || d.EnvValue(EnvSharedCPUs) != "1" {
		t.Errorf("quota %d, cpus %s, %s=%s; want 300000 (1 core + 2 CPUs of shared_s), 1-2,10 and 1",
			d.Quota, d.CPUs, EnvSharedCPUs, d.EnvValue(EnvSharedCPUs))
	}
}

// TestUnitsOffline: in a pool whose unit is a core, a held CPU that went offline counts as a
// core of its own, never as a core of an online CPU: the container keeps the quota of the
// cores it was given. The node: 1 socket x 4 cores x 2 threads (core c = CPUs c, c+4), CPU 1
// offline; exclusive_st = cores 0-1, singleThreaded.
func TestUnitsOffline(t *testing.T) {
	n := nodeWith(t, "sockets=1,numa=1,cores=4,threads=2,offline=1", `
exclusiveCPUs: threads
pools:
  default: {cpus: "2-3,6-7"}
  exclusive_st: {cpus: "0-1,4-5", hyperThreadingPolicy: singleThreaded}
`, Policy{CFSQuotas: QuotasAll})
	if got := n.Units("exclusive_st", cpuset.New(0, 1)); got != 2 {
		t.Errorf("Units(0, offline 1) = %d, want 2", got)
	}
	if got := n.Units("exclusive_st", cpuset.New(0, 4)); got != 1 {
		t.Errorf("Units(0, 4) = %d, want the one core", got)
	}
	a := allocation.Allocation{PodUID: "u1", Container: "c", Pool: "exclusive_st", Type: allocation.TypeExclusive,
		CPUs: cpuset.New(0, 1), Idled: cpuset.New(4, 5)} // as given while CPU 1 was online
	if d := n.Decide(a); d.Quota != 210000 || d.EnvValue(EnvExclusiveCPUs) != "0" {
		t.Errorf("quota %d, %s=%s; want 210000 (2 cores + 100 millicpu) and 0", d.Quota, EnvExclusiveCPUs, d.EnvValue(EnvExclusiveCPUs))
	}
}

// TestPlanPodsResourceBaseName: a pool config's resourceBaseName is a domain pods may name
// their pools under in `podfence plan`, beside podfence.io and nokia.k8s.io.
func TestPlanPodsResourceBaseName(t *testing.T) {
	n := nodeOf(t, "sockets=2,numa=2,cores=4,threads=2", "resourceBaseName: pools.example.com\n"+testPools)
	rep := n.PlanPods(NewLedger(n), pods(t, `
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: a}
spec:
  containers:
  - {name: c, resources: {limits: {pools.example.com/exclusive_m: "2"}}}
`))
	if len(rep.Placed) != 1 || rep.Placed[0].Decision.Allocation.Pool != "exclusive_m" || rep.Placed[0].Decision.CPUs.Size() != 2 {
		t.Errorf("placed %+v, refused %+v; want c on 2 CPUs of exclusive_m", rep.Placed, rep.Refusals)
	}
}

package status

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/topology"
)

// Source is what the pool metrics are read from at each scrape; *nri.Agent is one.
type Source interface {
	// Snapshot returns the node layout and the allocations, consistent with each other.
	Snapshot() (*plan.Node, []allocation.Allocation)
	// Ready reports whether the runtime has synchronised the agent.
	Ready() bool
}

// The metrics, all produced on scrape by Collector.
var (
	descReady = prometheus.NewDesc("podfence_agent_ready",
		"1 once the container runtime has synchronised the agent (its /readyz answers 200); else 0.", nil, nil)
	descPoolCPUs = prometheus.NewDesc("podfence_pool_cpus",
		"CPUs in the pool (the default pool with the CPUs no pool names).", []string{"pool", "type"}, nil)
	descAllocated = prometheus.NewDesc("podfence_pool_allocated_cpus",
		"Exclusive pool: CPUs given to containers.", []string{"pool"}, nil)
	descIdled = prometheus.NewDesc("podfence_pool_idled_cpus",
		"Exclusive pool under singleThreaded: sibling threads kept idle beside given CPUs.", []string{"pool"}, nil)
	descGranted = prometheus.NewDesc("podfence_pool_shared_millicpu_granted",
		"Shared pool: millicpu granted to containers (the pool holds 1000 per CPU).", []string{"pool"}, nil)
	descOffline = prometheus.NewDesc("podfence_pool_offline_cpus",
		"CPUs of the pool that are offline: the pool runs degraded without them (0 when all are online).", []string{"pool"}, nil)
	descContainers = prometheus.NewDesc("podfence_containers",
		"Containers running on the pool (one with exclusive CPUs and a shared share counts in both).", []string{"pool"}, nil)
)

// Collector reports readiness and each pool's use from src at each scrape.
func Collector(src Source) prometheus.Collector { return collector{src} }

type collector struct{ src Source }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descReady, descPoolCPUs, descAllocated, descIdled, descGranted, descOffline, descContainers} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	ready := 0.0
	if c.src.Ready() {
		ready = 1
	}
	gauge(descReady, ready)
	node, allocs := c.src.Snapshot()
	for _, p := range pools(node, allocs) {
		cpus, _ := topology.ParseCPUList(p.CPUs)
		gauge(descPoolCPUs, float64(cpus.Size()), p.Name, string(p.Type))
		gauge(descContainers, float64(p.Containers), p.Name)
		offline, _ := topology.ParseCPUList(p.Offline)
		gauge(descOffline, float64(offline.Size()), p.Name)
		switch p.Type {
		case allocation.TypeExclusive:
			given, _ := topology.ParseCPUList(p.Allocated)
			idled, _ := topology.ParseCPUList(p.Idled)
			gauge(descAllocated, float64(given.Size()), p.Name)
			gauge(descIdled, float64(idled.Size()), p.Name)
		case allocation.TypeShared:
			gauge(descGranted, float64(p.MilliCPUGranted), p.Name)
		}
	}
}

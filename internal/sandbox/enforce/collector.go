package enforce

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/podfence/podfence/internal/sandbox"
)

var podLabels = []string{"namespace", "pod"}

// The metrics, all produced on scrape by Collector.
var (
	descSandboxes = prometheus.NewDesc("podfence_vm_sandboxes",
		"VM sandboxes (pods on a VM runtime handler) whose host cgroup podfence holds.", nil, nil)
	descInForce = prometheus.NewDesc("podfence_vm_sandbox_in_force",
		"1 if the VM sandbox's last update set its cgroup, limits and processes in full; else 0 (see the agent's log).", podLabels, nil)
	descQuota = prometheus.NewDesc("podfence_vm_sandbox_cpu_quota_cores",
		"The VM sandbox cgroup's CFS quota in CPUs (quota/period); absent when it has none.", podLabels, nil)
	descMemory = prometheus.NewDesc("podfence_vm_sandbox_memory_limit_bytes",
		"The VM sandbox cgroup's memory limit; absent when it has none.", podLabels, nil)
	descCPUs = prometheus.NewDesc("podfence_vm_sandbox_cpus",
		"CPUs in the VM sandbox cgroup's cpuset.", podLabels, nil)
	descThreads = prometheus.NewDesc("podfence_vm_sandbox_threads",
		"Threads of the VM sandbox's shim and hypervisor processes found in its cgroup at the last check.", podLabels, nil)
	descFailures = prometheus.NewDesc("podfence_vm_sandbox_failures_total",
		"Updates of the VM sandbox cgroup that failed, by step: cgroup (create), limits, processes (placement).",
		append(podLabels, "step"), nil)
	descKept = prometheus.NewDesc("podfence_vm_sandbox_memory_kept_total",
		"Updates that kept the VM sandbox's memory limit because it used more than the new limit.", podLabels, nil)
	descRemoveFailures = prometheus.NewDesc("podfence_vm_sandbox_remove_failures_total",
		"VM sandbox cgroups that could not be removed with their pod.", nil, nil)
)

// Collector reports the VM sandboxes from the extension's state (no cgroupfs reads).
func (x *Extension) Collector() prometheus.Collector { return collector{x} }

type collector struct{ x *Extension }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSandboxes, descInForce, descQuota, descMemory, descCPUs, descThreads,
		descFailures, descKept, descRemoveFailures} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	x := c.x
	x.mu.Lock()
	defer x.mu.Unlock()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(descSandboxes, float64(len(x.pods)))
	counter(descRemoveFailures, x.removeFailures)
	for _, v := range x.shown() {
		l := []string{v.namespace, v.name}
		gauge(descInForce, map[bool]float64{true: 1}[v.ok], l...)
		a := v.applied
		if a.Quota > 0 {
			gauge(descQuota, float64(a.Quota)/sandbox.Period, l...)
		}
		if a.Memory > 0 {
			gauge(descMemory, float64(a.Memory), l...)
		}
		gauge(descCPUs, float64(a.CPUs.Size()), l...)
		gauge(descThreads, float64(v.placed.Threads), l...)
		for step, n := range v.failures {
			counter(descFailures, n, append(l, step)...)
		}
		counter(descKept, v.kept, l...)
	}
}

// shown returns the sandboxes to report, one per pod: the kubelet re-creates a dead
// sandbox under the pod's name and removes the old one later, and two series with the same
// labels would fail the whole scrape. The caller holds x.mu.
func (x *Extension) shown() []*vm {
	byPod := map[[2]string]*vm{}
	for _, v := range x.pods {
		k := [2]string{v.namespace, v.name}
		if o, ok := byPod[k]; !ok || v.outranks(o) {
			byPod[k] = v
		}
	}
	out := make([]*vm, 0, len(byPod))
	for _, v := range byPod {
		out = append(out, v)
	}
	return out
}

// outranks reports whether v rather than o, a sandbox of the same pod, is shown: the one
// whose process was found at its last update, else the newer.
func (v *vm) outranks(o *vm) bool {
	if v.lost != o.lost {
		return !v.lost
	}
	return v.seq > o.seq
}

package enforce

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/podfence/podfence/internal/epc"
	"github.com/podfence/podfence/internal/nodeagent/cgroups"
)

var ctrLabels = []string{"namespace", "pod", "container"}

// The metrics, all produced on scrape by Collector.
var (
	descSupported = prometheus.NewDesc("podfence_epc_supported",
		"1 if the node's misc cgroup controller lists sgx_epc in misc.capacity, so SGX EPC limits can be enforced; else 0.",
		[]string{"cgroup"}, nil)
	descCapacity = prometheus.NewDesc("podfence_epc_capacity_bytes",
		"SGX EPC on the node (sgx_epc in the root cgroup's misc.capacity).", nil, nil)
	descUsage = prometheus.NewDesc("podfence_epc_usage_bytes",
		"SGX EPC in use on the node: the root cgroup's misc.current, or on kernels without it the sum over the agent's containers.", nil, nil)
	descCtrUsage = prometheus.NewDesc("podfence_epc_container_usage_bytes",
		"SGX EPC the container uses (sgx_epc in its misc.current).", ctrLabels, nil)
	descCtrLimit = prometheus.NewDesc("podfence_epc_container_limit_bytes",
		"The container's SGX EPC cap (sgx_epc in its misc.max); absent when it has none.", ctrLabels, nil)
	descCtrPeak = prometheus.NewDesc("podfence_epc_container_peak_bytes",
		"Most SGX EPC the container has used (sgx_epc in its misc.peak), on kernels that have misc.peak.", ctrLabels, nil)
	descCtrEvents = prometheus.NewDesc("podfence_epc_container_max_events_total",
		"Times the container's SGX EPC use was about to go over its cap (sgx_epc.max in its misc.events).", ctrLabels, nil)
	descUnenforced = prometheus.NewDesc("podfence_epc_unenforced_containers",
		"Containers whose SGX EPC limit annotation is not in force (best-effort policy on a node without support, or a cap found "+
			"missing).", nil, nil)
	descYielded = prometheus.NewDesc("podfence_epc_yielded_containers",
		"Containers with an SGX EPC limit annotation whose misc.max another owner set (an NRI plugin such as nri-plugins sgx-epc, "+
			"or the runtime): podfence stands aside for them.", nil, nil)
	descRefused = prometheus.NewDesc("podfence_epc_refused_containers_total",
		"Containers refused at creation for their SGX EPC limit, by reason: annotation, unsupported, cgroup.", []string{"reason"}, nil)
	descReadErrors = prometheus.NewDesc("podfence_epc_read_errors_total",
		"Failed reads of a container's misc cgroup files during scrapes (containers removed meanwhile are not counted).", nil, nil)
)

// Collector reports EPC capacity and use, reading the misc files of the containers the
// extension tracks at each scrape (no walk of the cgroup tree). A container removed
// during a scrape is left out without error.
func (x *Extension) Collector() prometheus.Collector { return collector{x} }

type collector struct{ x *Extension }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSupported, descCapacity, descUsage, descCtrUsage, descCtrLimit,
		descCtrPeak, descCtrEvents, descUnenforced, descYielded, descRefused, descReadErrors} {
		ch <- d
	}
}

// sample is one scrape's view of a tracked container.
type sample struct {
	labels []string
	dir    string
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	x := c.x
	samples, counts, refused := x.snapshot()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	supported := 0.0
	if x.cap.Node.Supported {
		supported = 1
	}
	gauge(descSupported, supported, x.cap.Layout.Version.String())
	gauge(descUnenforced, float64(counts.unenforced))
	gauge(descYielded, float64(counts.yielded))
	for reason, n := range refused {
		ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(n), reason)
	}
	if x.cap.Node.Supported {
		gauge(descCapacity, float64(x.cap.Capacity))
		var sum uint64
		for _, s := range samples {
			if u, ok := x.read(s.dir); ok {
				sum += u.current
				gauge(descCtrUsage, float64(u.current), s.labels...)
				if u.limit != cgroups.Max {
					gauge(descCtrLimit, float64(u.limit), s.labels...)
				}
				if u.hasPeak {
					gauge(descCtrPeak, float64(u.peak), s.labels...)
				}
				ch <- prometheus.MustNewConstMetric(descCtrEvents, prometheus.CounterValue, float64(u.events), s.labels...)
			}
		}
		if total, ok := x.value(x.cap.MiscRoot, "misc.current", epc.Resource); ok {
			sum = total
		}
		gauge(descUsage, float64(sum))
	}
	x.mu.Lock()
	readErr := x.readErr
	x.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descReadErrors, prometheus.CounterValue, float64(readErr))
}

// counts are the tracked containers whose limit is not in force, and those left to
// another owner of misc.max.
type counts struct{ unenforced, yielded int }

// snapshot returns the containers to read, one per label set (the newest instance of a
// restarted container), the counts, and the refusals.
func (x *Extension) snapshot() ([]sample, counts, map[string]uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	newest := map[[3]string]*entry{}
	var n counts
	for _, e := range x.ctrs {
		if e.unenforced() {
			n.unenforced++
		}
		if e.mode == epc.Yielded {
			n.yielded++
		}
		k := [3]string{e.namespace, e.pod, e.container}
		if e.dir != "" && (newest[k] == nil || e.seq > newest[k].seq) {
			newest[k] = e
		}
	}
	var out []sample
	for k, e := range newest {
		out = append(out, sample{labels: []string{k[0], k[1], k[2]}, dir: e.dir})
	}
	refused := make(map[string]uint64, len(x.refused))
	for r, n := range x.refused {
		refused[r] = n
	}
	return out, n, refused
}

// usage is a container's misc files at one scrape.
type usage struct {
	current, limit, events, peak uint64
	hasPeak                      bool
}

// read reads the misc files of the cgroup at dir; ok is false if one is unreadable, as
// when the container went away during the scrape. misc.peak is read first: if it is
// missing but the others are there, the kernel lacks it.
func (x *Extension) read(dir string) (u usage, ok bool) {
	u.peak, u.hasPeak = x.value(dir, "misc.peak", epc.Resource)
	if u.current, ok = x.value(dir, "misc.current", epc.Resource); !ok {
		return u, false
	}
	if u.limit, ok = x.value(dir, epc.UnifiedKey, epc.Resource); !ok {
		return u, false
	}
	u.events, ok = x.value(dir, "misc.events", epc.Resource+".max")
	return u, ok
}

// value reads key of the flat-keyed file name at dir. Errors other than a gone file
// count as read errors; a missing key is 0.
func (x *Extension) value(dir, name, key string) (uint64, bool) {
	b, err := x.fs.Read(dir, name)
	var v uint64
	if err == nil {
		var f cgroups.Flat
		if f, err = cgroups.ParseFlat(b); err == nil {
			v, _, err = f.Uint(key)
		}
	}
	if err != nil {
		if !cgroups.Gone(err) {
			x.mu.Lock()
			x.readErr++
			x.mu.Unlock()
			x.log.Debug("read cgroup file", "dir", dir, "file", name, "err", err)
		}
		return 0, false
	}
	return v, true
}

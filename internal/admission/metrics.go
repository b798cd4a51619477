package admission

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// PathMetrics serves the webhook's own metrics: its serving certificate's expiry and failed
// reloads, for an alert before the certificate runs out. They hold no pod or node data.
const PathMetrics = "/metrics"

var (
	descNotAfter = prometheus.NewDesc("podfence_webhook_certificate_not_after_seconds",
		"Unix time at which the serving certificate in use expires.", nil, nil)
	descReloadFailures = prometheus.NewDesc("podfence_webhook_certificate_reload_failures_total",
		"Certificate reloads that failed (the certificate in use was kept).", nil, nil)
)

// certCollector reads the certificate in use at each scrape.
type certCollector struct {
	certs    *CertReloader
	failures func() float64
}

func (c certCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descNotAfter
	ch <- descReloadFailures
}

func (c certCollector) Collect(ch chan<- prometheus.Metric) {
	if crt, _ := c.certs.GetCertificate(nil); crt != nil && crt.Leaf != nil {
		ch <- prometheus.MustNewConstMetric(descNotAfter, prometheus.GaugeValue, float64(crt.Leaf.NotAfter.Unix()))
	}
	ch <- prometheus.MustNewConstMetric(descReloadFailures, prometheus.CounterValue, c.failures())
}

// withMetrics serves PathMetrics from c beside h.
func withMetrics(h http.Handler, c prometheus.Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mux := http.NewServeMux()
	mux.Handle("GET "+PathMetrics, promhttp.HandlerFor(reg, promhttp.HandlerOpts{MaxRequestsInFlight: 2}))
	mux.Handle("/", h)
	return mux
}

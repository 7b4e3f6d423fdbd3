package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ndigo/ndigo/ping"
)

// Metric names of the ping collector ([NewPingCollector]).
const (
	// Pings is a counter: the pings this node sent to the outside monitor
	// (package ping), whatever their outcome.
	Pings = "ndigo_pings_total"
	// PingFailures is a counter: the pings that failed (no answer within
	// the timeout, or not a 2xx one).
	PingFailures = "ndigo_ping_failures_total"
	// PingLastSuccess is a gauge: when the last successful ping was
	// answered, in Unix seconds; absent until one was.
	PingLastSuccess = "ndigo_ping_last_success_timestamp_seconds"
)

// A PingCollector exposes what a [ping.Pinger] has done, read at each
// scrape.
type PingCollector struct {
	p                       *ping.Pinger
	pings, failures, lastOK *prometheus.Desc
}

// NewPingCollector returns a collector of p's figures. Register it with a
// prometheus.Registerer; app.Module does when the configuration has a
// ping URL and admin.metrics.
func NewPingCollector(p *ping.Pinger) *PingCollector {
	return &PingCollector{p: p,
		pings:    prometheus.NewDesc(Pings, "Pings sent to the outside monitor (ping.url), whatever their outcome.", nil, nil),
		failures: prometheus.NewDesc(PingFailures, "Pings to the outside monitor that failed: no answer within the timeout, or not a 2xx one.", nil, nil),
		lastOK: prometheus.NewDesc(PingLastSuccess,
			"When the last successful ping to the outside monitor was answered, in Unix seconds; absent until one was.", nil, nil),
	}
}

// Describe sends the collector's descriptions.
func (c *PingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pings
	ch <- c.failures
	ch <- c.lastOK
}

// Collect sends the Pinger's figures.
func (c *PingCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.p.Stats()
	ch <- prometheus.MustNewConstMetric(c.pings, prometheus.CounterValue, float64(s.Pings))
	ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(s.Failures))
	if !s.LastSuccess.IsZero() {
		ch <- prometheus.MustNewConstMetric(c.lastOK, prometheus.GaugeValue, float64(s.LastSuccess.UnixNano())/1e9)
	}
}

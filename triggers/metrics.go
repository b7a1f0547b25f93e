package triggers

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Delivery results (the result label of edgebase_trigger_deliveries_total).
const (
	resultOK    = "ok"
	resultRetry = "retry"
	resultDead  = "dead"
)

// metrics are kept by the leader's runner; other nodes report nothing (a
// runner that stops leading removes its series).
type metrics struct {
	deliveries *prometheus.CounterVec
	cursor     *prometheus.GaugeVec
	lag        *prometheus.GaugeVec
	pending    *prometheus.GaugeVec
	loopStops  *prometheus.CounterVec
	latency    prometheus.Histogram
	inFlight   prometheus.Gauge
}

// newMetrics registers the collectors on reg (nil: they count unregistered).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	pt := []string{"project", "trigger"}
	m := &metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgebase_trigger_deliveries_total",
			Help: "Trigger deliveries by result: ok (the action succeeded), retry (an attempt failed and will be retried), dead (given up: dead-lettered), counted by the leader's runner."},
			[]string{"project", "trigger", "result"}),
		cursor: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "edgebase_trigger_cursor_revision",
			Help: "The trigger's cursor: every matching change at or below it was delivered, parked for a retry or dead-lettered (leader only)."}, pt),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "edgebase_trigger_lag_revisions",
			Help: "The applied revision minus the trigger's cursor (leader only)."}, pt),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "edgebase_trigger_pending",
			Help: "The trigger's parked events: waiting for a retry, or queued behind one on their document path (leader only)."}, pt),
		loopStops: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgebase_trigger_loop_stops_total",
			Help: "Changes that would have fired the trigger but were made by derived writes at the loop limit (--trigger-max-depth)."}, pt),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "edgebase_trigger_delivery_seconds",
			Help:    "Time from a change's commit to the 2xx answer of its webhook's first attempt.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "edgebase_trigger_in_flight",
			Help: "Trigger actions being attempted now by the leader's runner."}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.deliveries, m.cursor, m.lag, m.pending, m.loopStops, m.latency, m.inFlight} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("triggers: register metrics: %w", err)
		}
	}
	return m, nil
}

// forget removes the series of one trigger (deleted, or no longer run here).
func (m *metrics) forget(pid, name string) {
	for _, r := range []string{resultOK, resultRetry, resultDead} {
		m.deliveries.DeleteLabelValues(pid, name, r)
	}
	m.cursor.DeleteLabelValues(pid, name)
	m.lag.DeleteLabelValues(pid, name)
	m.pending.DeleteLabelValues(pid, name)
	m.loopStops.DeleteLabelValues(pid, name)
}

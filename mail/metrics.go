package mail

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are counted by the sender of the leader that made the attempt;
// an email resent by the next leader after a crash counts again.
type metrics struct {
	sent   prometheus.Counter
	failed *prometheus.CounterVec
	// The outbox as the leader's last pass found it (0 on other nodes).
	outbox    *prometheus.GaugeVec
	oldestAge prometheus.Gauge
}

// newMetrics registers the collectors on reg (nil: they count unregistered).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		sent: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgebase_mail_sent_total",
			Help: "Emails an SMTP server accepted, sent by this node's mail sender (leader)."}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgebase_mail_failed_total",
			Help: "Failed email attempts by reason (smtp_4xx, smtp_5xx, tls, connect, no_server, sealed, address, send, other), and emails given up after the maximum age (expired), by this node's mail sender (leader)."},
			[]string{"reason"}),
		outbox: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "edgebase_mail_outbox",
			Help: "Emails in the outbox by state (pending: to be sent or retried; failed: given up, kept), as this node's mail sender last read it while leading (0 on other nodes)."},
			[]string{"state"}),
		oldestAge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "edgebase_mail_oldest_pending_age_seconds",
			Help: "Time since the oldest pending email was queued, as this node's mail sender last read the outbox while leading (0 when none, and on other nodes)."}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.sent, m.failed, m.outbox, m.oldestAge} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("mail: register metrics: %w", err)
		}
	}
	return m, nil
}

// backlog records what a pass found: pending and failed records and the
// oldest pending one's queue time (Unix ns; 0: none).
func (m *metrics) backlog(pending, failed int, oldest int64, now time.Time) {
	m.outbox.WithLabelValues("pending").Set(float64(pending))
	m.outbox.WithLabelValues("failed").Set(float64(failed))
	age := 0.0
	if oldest != 0 {
		age = max(now.Sub(time.Unix(0, oldest)).Seconds(), 0)
	}
	m.oldestAge.Set(age)
}

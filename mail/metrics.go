package mail

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are counted by the sender of the leader that made the attempt;
// an email resent by the next leader after a crash counts again.
type metrics struct {
	sent   prometheus.Counter
	failed *prometheus.CounterVec
}

// newMetrics registers the collectors on reg (nil: they count unregistered).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		sent: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgebase_mail_sent_total",
			Help: "Emails an SMTP server accepted, sent by this node's mail sender (leader)."}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgebase_mail_failed_total",
			Help: "Failed email attempts by reason (smtp_4xx, smtp_5xx, connect, no_server, sealed, address, other), and emails given up after the maximum age (expired), by this node's mail sender (leader)."},
			[]string{"reason"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.sent, m.failed} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("mail: register metrics: %w", err)
		}
	}
	return m, nil
}

package realtime

import (
	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
)

// Drop reasons: why the server closed a connection other than normally.
// The set is fixed so that the label stays bounded.
const (
	dropSlowConsumer = "slow_consumer"      // its queue filled, or a write timed out
	dropFeedLagged   = "feed_lagged"        // the node's change stream restarted (hub lagged, snapshot restore)
	dropAuthExpired  = "auth_expired"       // its session ended (logout, password change, expiry)
	dropProtocol     = "protocol_violation" // a message broke the protocol
	dropPingTimeout  = "ping_timeout"       // the peer stopped answering pings
	dropShutdown     = "shutdown"           // the node is shutting down
)

// rtMetrics are realtime's collectors. Connections and subscriptions are
// read at scrape time from what the server tracks anyway. A nil *rtMetrics
// records nothing.
type rtMetrics struct {
	eventsSent prometheus.Counter
	drops      map[string]prometheus.Counter // by reason, created up front
}

func newRTMetrics(reg prometheus.Registerer, s *Server) (*rtMetrics, error) {
	if reg == nil {
		return nil, nil
	}
	dropVec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edgebase_realtime_drops_total",
		Help: "Realtime connections the server closed for a reason other than a normal close, by reason.",
	}, []string{"reason"})
	m := &rtMetrics{
		eventsSent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgebase_realtime_events_sent_total",
			Help: "Document changes queued to realtime subscribers (live changes and replays after since).",
		}),
		drops: map[string]prometheus.Counter{},
	}
	for _, r := range []string{dropSlowConsumer, dropFeedLagged, dropAuthExpired, dropProtocol, dropPingTimeout, dropShutdown} {
		m.drops[r] = dropVec.WithLabelValues(r)
	}
	collectors := []prometheus.Collector{m.eventsSent, dropVec,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "edgebase_realtime_connections",
			Help: "Open realtime (WebSocket) connections on this node, once authenticated.",
		}, func() float64 { return float64(s.Connections()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "edgebase_realtime_subscriptions",
			Help: "Open realtime subscriptions on this node.",
		}, func() float64 { return float64(s.subscriptions.Load()) }),
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *rtMetrics) eventSent() {
	if m != nil {
		m.eventsSent.Inc()
	}
}

// dropped counts a connection closed with code, unless that is a normal
// close; shutdown tells a node going away from a peer that stopped
// answering (both close with 1001).
func (m *rtMetrics) dropped(code int, shutdown bool) {
	if m == nil {
		return
	}
	var reason string
	switch code {
	case closeSlowConsumer:
		reason = dropSlowConsumer
	case closeLagged:
		reason = dropFeedLagged
	case closeUnauthenticated:
		reason = dropAuthExpired
	case int(websocket.StatusPolicyViolation):
		reason = dropProtocol
	case int(websocket.StatusGoingAway):
		reason = dropPingTimeout
		if shutdown {
			reason = dropShutdown
		}
	default:
		return
	}
	m.drops[reason].Inc()
}

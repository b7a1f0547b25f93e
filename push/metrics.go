package push

import (
	"time"

	"github.com/edgebase/edgebase/keys"
	"github.com/prometheus/client_golang/prometheus"
)

// pushMetrics are push's collectors. Outcomes are counted where the
// dispatcher commits them (a batch's mark), so a batch resent by the next
// leader after a crash is counted as the outcome that was recorded. The
// backlog is read at scrape time from this node's replicated state. A nil
// *pushMetrics records nothing.
type pushMetrics struct {
	queued, sent, failed, pruned, skipped, deferred prometheus.Counter
	lateness                                        prometheus.Histogram
}

func newPushMetrics(reg prometheus.Registerer, s *Service) (*pushMetrics, error) {
	if reg == nil {
		return nil, nil
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m := &pushMetrics{
		queued: counter("edgebase_push_notifications_queued_total",
			"Notifications queued for the dispatcher: sends accepted by this node and schedules this node fired as leader."),
		sent: counter("edgebase_push_messages_sent_total",
			"Device messages FCM accepted, as recorded by this node's dispatcher (leader)."),
		failed: counter("edgebase_push_messages_failed_total",
			"Device messages that failed (FCM errors, missing credentials), as recorded by this node's dispatcher (leader)."),
		pruned: counter("edgebase_push_tokens_pruned_total",
			"Device tokens removed because FCM reported them unregistered (leader)."),
		skipped: counter("edgebase_push_messages_skipped_total",
			"Recipients skipped because their preferences turn the category off (leader)."),
		deferred: counter("edgebase_push_messages_deferred_total",
			"Recipients deferred to the end of their quiet hours (leader)."),
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "edgebase_push_scheduler_lateness_seconds",
			Help:    "How late the scheduler fired a scheduled notification: fire time minus sendAt (leader).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}),
	}
	backlog := &backlogCollector{s: s,
		jobs: prometheus.NewDesc("edgebase_push_backlog_jobs",
			"Dispatcher jobs not finished (queued, sending or deferred), read from this node's replicated state.", nil, nil),
		oldest: prometheus.NewDesc("edgebase_push_oldest_job_age_seconds",
			"Time since the oldest unfinished dispatcher job became due (0 when none is due), from this node's replicated state.", nil, nil),
	}
	for _, c := range []prometheus.Collector{m.queued, m.sent, m.failed, m.pruned, m.skipped, m.deferred, m.lateness, backlog} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *pushMetrics) queuedOne() {
	if m != nil {
		m.queued.Inc()
	}
}

func (m *pushMetrics) fired(late time.Duration) {
	if m != nil {
		m.queued.Inc()
		m.lateness.Observe(max(late, 0).Seconds())
	}
}

// marked counts the outcomes of a batch whose mark committed.
func (m *pushMetrics) marked(c counts) {
	if m == nil {
		return
	}
	m.sent.Add(float64(c.delivered))
	m.failed.Add(float64(c.failed))
	m.pruned.Add(float64(c.pruned))
	m.skipped.Add(float64(c.skipped))
	m.deferred.Add(float64(c.deferred))
}

// backlogCollector reads the job queue at scrape time: a key-only count of
// the jobs and the first job's id, which starts with its due time (jobs are
// kept in due order).
type backlogCollector struct {
	s            *Service
	jobs, oldest *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c *backlogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.jobs
	ch <- c.oldest
}

// Collect implements prometheus.Collector.
func (c *backlogCollector) Collect(ch chan<- prometheus.Metric) {
	n, err := c.s.store.CountPrefix(keys.Under(keys.PushJobsDir()))
	if err != nil {
		return // the store is closed or failing: no sample rather than a wrong one
	}
	age := 0.0
	if n > 0 {
		docs, _, err := c.s.store.List(keys.PushJobsDir(), "", 1)
		if err != nil {
			return
		}
		if len(docs) > 0 {
			if due, ok := idTime(keys.Base(docs[0].Path)); ok {
				age = max(c.s.now().Sub(time.Unix(0, due)).Seconds(), 0)
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age)
}

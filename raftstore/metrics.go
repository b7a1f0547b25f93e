package raftstore

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// storeMetrics are the store's event-driven collectors. Everything that is a
// state (Raft's term and indexes, Badger's sizes, the change feed's queues)
// is read at scrape time by storeCollector instead, so that Apply does no
// metrics work at all. A nil *storeMetrics (no Registerer) records nothing.
type storeMetrics struct {
	reg           prometheus.Registerer
	applyDuration prometheus.Histogram
	leaderChanges prometheus.Counter
}

// newStoreMetrics builds the store's collectors (nil without a Registerer);
// register adds them to the registry once the store is open.
func newStoreMetrics(reg prometheus.Registerer) *storeMetrics {
	if reg == nil {
		return nil
	}
	return &storeMetrics{
		reg: reg,
		applyDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "edgebase_raft_apply_duration_seconds",
			Help: "Time from submitting a proposal to Raft on the leader until the FSM applied it (proposals made or forwarded to this node while it leads).",
			// Commits take a few milliseconds on a LAN with fsync.
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgebase_raft_leader_changes_total",
			Help: "Times this node learned of a new Raft leader (its first leader after start included).",
		}),
	}
}

// startMetrics registers the store's collectors and starts counting leader
// changes; Open calls it last, when every part the collectors read is set.
func (s *Store) startMetrics() error {
	m := s.metrics
	if m == nil {
		return nil
	}
	forwardConns := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "edgebase_forward_connections_total",
		Help: "Connections this node dialed for its internal calls to other members (forwarded writes, read index, join, status); they are kept alive and reused, so this grows with new leaders and broken connections, not with calls.",
	}, func() float64 { return float64(s.forwardConns.Load()) })
	readIndexRounds := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "edgebase_read_index_rounds_total",
		Help: "Read-index rounds this node ran for strong reads (on a follower or an edge, each is one round trip to the leader; concurrent reads share a round).",
	}, func() float64 { return float64(s.readIndexRounds.Load()) })
	for _, c := range []prometheus.Collector{m.applyDuration, m.leaderChanges, forwardConns, readIndexRounds, newStoreCollector(s)} {
		if err := m.reg.Register(c); err != nil {
			return fmt.Errorf("raftstore: register metrics: %w", err)
		}
	}
	s.wg.Add(1)
	go s.watchLeaders()
	return nil
}

func (m *storeMetrics) observeApply(since time.Time) {
	if m != nil {
		m.applyDuration.Observe(time.Since(since).Seconds())
	}
}

// watchLeaders counts leader changes as Raft reports them to an observer
// (NotifyCh only tells this node's own gains and losses). It returns when
// the store stops.
func (s *Store) watchLeaders() {
	defer s.wg.Done()
	ch := make(chan raft.Observation, 16)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	s.raft.RegisterObserver(obs)
	defer s.raft.DeregisterObserver(obs)
	var last raft.ServerID
	// The observer may have missed a leader known before it was registered.
	if _, id := s.raft.LeaderWithID(); id != "" {
		last = id
		s.metrics.leaderChanges.Inc()
	}
	for {
		select {
		case <-s.stop:
			return
		case o := <-ch:
			lo, _ := o.Data.(raft.LeaderObservation)
			if lo.LeaderID != "" && lo.LeaderID != last {
				s.metrics.leaderChanges.Inc()
			}
			last = lo.LeaderID
		}
	}
}

// storeCollector reads Raft's and Badger's state at scrape time. It takes
// no lock that Apply holds for long: Raft's getters are atomics or short
// read locks, the tree's directory name is read under the FSM's read lock,
// and the sizes come from the file system.
type storeCollector struct {
	s *Store

	state, isLeader, hasLeader, term, commitIndex, appliedIndex, lastLogIndex *prometheus.Desc
	lastContact, voters, nonvoters, lsmSize, vlogSize, walSize                *prometheus.Desc
	feedSubscribers, feedLag, feedDropped                                     *prometheus.Desc
}

func newStoreCollector(s *Store) *storeCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &storeCollector{
		s:            s,
		state:        d("edgebase_raft_state", "Raft state of this node: 1 for the current state, 0 for the others.", "state"),
		isLeader:     d("edgebase_raft_is_leader", "1 when this node is the Raft leader, else 0."),
		hasLeader:    d("edgebase_raft_has_leader", "1 when this node knows a Raft leader, else 0."),
		term:         d("edgebase_raft_term", "Current Raft term as this node sees it."),
		commitIndex:  d("edgebase_raft_commit_index", "Highest Raft log index this node knows to be committed."),
		appliedIndex: d("edgebase_raft_applied_index", "Last Raft index applied to this node's document tree (its revision)."),
		lastLogIndex: d("edgebase_raft_last_log_index", "Last index in this node's Raft log."),
		lastContact: d("edgebase_raft_last_contact_seconds",
			"Seconds since this follower last heard from the leader (since start when never); 0 on the leader."),
		voters:          d("edgebase_raft_voters", "Voting members in the Raft configuration as this node sees it."),
		nonvoters:       d("edgebase_raft_nonvoters", "Non-voting members in the Raft configuration as this node sees it."),
		lsmSize:         d("edgebase_badger_lsm_size_bytes", "Size of a Badger database's LSM tables on disk.", "db"),
		vlogSize:        d("edgebase_badger_vlog_size_bytes", "Size of a Badger database's value log files on disk.", "db"),
		walSize:         d("edgebase_raft_log_size_bytes", "Disk space of the Raft log (raft-wal segment files, preallocated, and its metadata)."),
		feedSubscribers: d("edgebase_changefeed_subscribers", "Subscribers of this node's change feed (realtime hub, push dispatcher)."),
		feedLag: d("edgebase_changefeed_lag_revisions",
			"Revisions published to the change feed that its slowest subscriber has not taken from its queue yet (0 when all are caught up)."),
		feedDropped: d("edgebase_changefeed_dropped_subscribers_total", "Change feed subscribers cut off for falling behind."),
	}
}

// Describe implements prometheus.Collector.
func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.state, c.isLeader, c.hasLeader, c.term, c.commitIndex, c.appliedIndex,
		c.lastLogIndex, c.lastContact, c.voters, c.nonvoters, c.lsmSize, c.vlogSize, c.walSize, c.feedSubscribers, c.feedLag, c.feedDropped} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if r := s.raft; r != nil {
		st := r.State()
		for _, x := range []raft.RaftState{raft.Leader, raft.Follower, raft.Candidate, raft.Shutdown} {
			gauge(c.state, boolFloat(st == x), strings.ToLower(x.String()))
		}
		gauge(c.isLeader, boolFloat(st == raft.Leader))
		_, leader := r.LeaderWithID()
		gauge(c.hasLeader, boolFloat(leader != ""))
		gauge(c.term, float64(r.CurrentTerm()))
		gauge(c.commitIndex, float64(r.CommitIndex()))
		gauge(c.lastLogIndex, float64(r.LastIndex()))
		contact := 0.0
		if st != raft.Leader {
			last := r.LastContact()
			if last.IsZero() {
				last = s.opened
			}
			contact = time.Since(last).Seconds()
		}
		gauge(c.lastContact, contact)
		voters, nonvoters := 0, 0
		if f := r.GetConfiguration(); f.Error() == nil {
			for _, srv := range f.Configuration().Servers {
				if srv.Suffrage == raft.Voter {
					voters++
				} else {
					nonvoters++
				}
			}
		}
		gauge(c.voters, float64(voters))
		gauge(c.nonvoters, float64(nonvoters))
	}
	gauge(c.appliedIndex, float64(s.fsm.applied.get()))
	if dir := s.fsm.dir(); dir != "" {
		if lsm, vlog, err := badgerFileSizes(dir); err == nil { // else closed or being replaced by a restore: skip
			gauge(c.lsmSize, float64(lsm), "tree")
			gauge(c.vlogSize, float64(vlog), "tree")
		}
	}
	if n, err := walFileSizes(filepath.Join(s.cfg.Dir, walDirName)); err == nil {
		gauge(c.walSize, float64(n))
	}
	subs, lag, dropped := s.feed.stats()
	gauge(c.feedSubscribers, float64(subs))
	gauge(c.feedLag, float64(lag))
	ch <- prometheus.MustNewConstMetric(c.feedDropped, prometheus.CounterValue, float64(dropped))
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// badgerFileSizes sums the disk space of a Badger directory's table (.sst)
// and value log (.vlog) files. Badger's own DB.Size sums the same files,
// but by length (a fresh value log is a sparse file of 2 GiB), only once a
// minute, and not at all for the raft log, which runs with Badger's
// metrics off.
func badgerFileSizes(dir string) (lsm, vlog int64, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, err
	}
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if ext != ".sst" && ext != ".vlog" {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed by a compaction meanwhile
		}
		if ext == ".sst" {
			lsm += allocatedBytes(info)
		} else {
			vlog += allocatedBytes(info)
		}
	}
	return lsm, vlog, nil
}

// dir is the directory of the tree database in use ("" once closed).
func (f *fsm) dir() string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.db == nil {
		return ""
	}
	return filepath.Join(f.base, treeDirName(f.gen))
}

// stats reads the feed's subscribers, the lag of the slowest one and how
// many were dropped. A subscriber's queue holds the last len(queue) batches
// published (every live subscriber gets every batch), so the ring of recent
// revisions tells what it has taken.
func (f *Feed) stats() (subs int, lag uint64, dropped uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	queued := 0
	for s := range f.subs {
		queued = max(queued, len(s.ch))
	}
	n := uint64(len(f.recent))
	if queued > 0 && n > 0 && f.published > 0 {
		last := f.recent[f.published%n]
		taken := f.published - min(uint64(queued), f.published)
		var base uint64
		if taken > 0 {
			base = f.recent[taken%n]
		} else if first := f.recent[1%n]; first > 0 {
			base = first - 1 // everything published is still queued
		}
		if last > base {
			lag = last - base
		}
	}
	return len(f.subs), lag, f.dropped.Load()
}

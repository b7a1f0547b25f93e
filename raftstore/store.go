// Package raftstore replicates a path-addressed JSON document tree with
// hashicorp/raft over Badger. It owns the Raft log and stable store, the FSM,
// typed commands, snapshots, the change feed, reads at a chosen consistency
// and forwarding of writes to the leader. It imports nothing of ours.
package raftstore

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// maxEntrySize bounds one proposed command; it fits one Badger transaction of
// the tree database several times over (see openTreeDB).
const maxEntrySize = 4 << 20

// logCacheEntries is how many recent log entries the leader keeps in memory
// for replication (raft.LogCache). 64 covers the entries in flight when 64
// clients write at once; it holds at most 64 × maxEntrySize in the worst case
// (entries of the largest size), and a few hundred KiB for ordinary documents.
const logCacheEntries = 64

// Tuning holds the Raft knobs we expose. Zero values take the defaults of
// DefaultTuning; docs/design.md explains the choices.
type Tuning struct {
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	MaxAppendEntries   int
	// MaxRPCsInFlight is how many appends the leader keeps in flight to
	// one follower (raft.NetworkTransportConfig.MaxRPCsInFlight): 2 on a
	// LAN (raft's default), more across a WAN (WANTuning).
	MaxRPCsInFlight   int
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
	// LogSegmentSize is the size of one Raft log segment file (raft-wal):
	// DefaultLogSegmentSize unless set.
	LogSegmentSize int
}

// DefaultTuning favours throughput (batched applies, large appends) and
// follower freshness (a short commit timeout) on a LAN.
func DefaultTuning() Tuning {
	return Tuning{
		HeartbeatTimeout:   1000 * time.Millisecond,
		ElectionTimeout:    1000 * time.Millisecond,
		LeaderLeaseTimeout: 500 * time.Millisecond,
		CommitTimeout:      5 * time.Millisecond,
		MaxAppendEntries:   512,
		MaxRPCsInFlight:    2,
		SnapshotThreshold:  16384,
		SnapshotInterval:   60 * time.Second,
		TrailingLogs:       10240,
	}
}

func (t Tuning) withDefaults() Tuning {
	d := DefaultTuning()
	if t.ElectionTimeout == 0 {
		t.ElectionTimeout = d.ElectionTimeout
	}
	if t.HeartbeatTimeout == 0 {
		// Raft requires heartbeat <= election timeout; one knob sets both.
		t.HeartbeatTimeout = t.ElectionTimeout
	}
	if t.LeaderLeaseTimeout == 0 {
		t.LeaderLeaseTimeout = t.HeartbeatTimeout / 2
	}
	t = t.Under(d)
	if t.LogSegmentSize == 0 {
		t.LogSegmentSize = DefaultLogSegmentSize
	}
	return t
}

// Under fills t's zero settings other than the three election timings
// (heartbeat, election, leader lease: they derive from one another, see
// withDefaults) from p: how the defaults and a preset (WANTuning) apply
// under explicit settings.
func (t Tuning) Under(p Tuning) Tuning {
	if t.CommitTimeout == 0 {
		t.CommitTimeout = p.CommitTimeout
	}
	if t.MaxAppendEntries == 0 {
		t.MaxAppendEntries = p.MaxAppendEntries
	}
	if t.MaxRPCsInFlight == 0 {
		t.MaxRPCsInFlight = p.MaxRPCsInFlight
	}
	if t.SnapshotThreshold == 0 {
		t.SnapshotThreshold = p.SnapshotThreshold
	}
	if t.SnapshotInterval == 0 {
		t.SnapshotInterval = p.SnapshotInterval
	}
	if t.TrailingLogs == 0 {
		t.TrailingLogs = p.TrailingLogs
	}
	if t.LogSegmentSize == 0 {
		t.LogSegmentSize = p.LogSegmentSize
	}
	return t
}

// Config configures one node's store.
type Config struct {
	// NodeID is this node's stable Raft server id. Required.
	NodeID string
	// Dir holds raft/ (log and stable store), snapshots/ and tree/. Required.
	Dir string
	// RaftBind is the TCP address the Raft transport listens on. Required
	// unless Transport is given.
	RaftBind string
	// RaftAdvertise is the address other nodes dial; defaults to RaftBind.
	RaftAdvertise string
	// HTTPAdvertise is this node's base URL for node-to-node calls. Required.
	HTTPAdvertise string
	// Bootstrap makes a node without state start a cluster of one.
	Bootstrap bool
	// Secret authenticates node-to-node HTTP calls. Empty refuses them all.
	Secret string
	// Voter is false for edge nodes (non-voters); informational here.
	Voter bool
	// OnLeader runs in its own goroutine whenever this node becomes leader,
	// after a Barrier; its ctx is cancelled when leadership is lost.
	OnLeader func(ctx context.Context)
	Tuning   Tuning
	Logger   *slog.Logger
	// RaftListener, when set, is used for the Raft transport instead of
	// binding RaftBind; RaftAdvertise still names what others dial.
	RaftListener net.Listener
	// Transport overrides the TCP transport entirely (tests).
	Transport raft.Transport
	// HTTPClient is used for forwarding; defaults to a pooled client. Its
	// *http.Transport (if it is one) is cloned with ConnectTo applied and
	// its dials counted.
	HTTPClient *http.Client
	// ConnectTo maps a member's address (host:port, as advertised) to the
	// address this node dials instead, on every node-to-node connection it
	// makes: Raft transport dials and internal HTTP calls (dial.go). TLS
	// still verifies the advertised host. Nil: dial what is advertised.
	ConnectTo map[string]string
	// HTTPTLS configures the default client's TLS for https:// members (the
	// CA to trust; nil: the system roots). Ignored when HTTPClient is set.
	HTTPTLS *tls.Config
	// RaftTLS, when set, wraps the Raft transport in mutual TLS: it must hold
	// this node's certificate and the cluster CA as RootCAs and ClientCAs.
	// Peers are verified against the host part of their Raft address.
	RaftTLS *tls.Config
	// Peers are members' HTTP base URLs (the --join list) asked whether this
	// node is still a member: at start when it has state, and while it is
	// cut off or no longer in its own configuration (membership.go).
	Peers []string
	// Decider judges, inside Apply, the txns written for a caller
	// (Txn.Caller): the domain's access control. Every node of a cluster
	// must run the same one. Nil refuses such txns.
	Decider Decider
	// ChangeLogRetention is how long the change log keeps a change (realtime
	// resumes with `since` within it). Default DefaultChangeLogRetention.
	ChangeLogRetention time.Duration
	// Registerer receives the store's metrics (Raft, Badger, change feed);
	// nil leaves them off.
	Registerer prometheus.Registerer
}

// DefaultChangeLogRetention is the change log window unless configured.
const DefaultChangeLogRetention = time.Hour

// Store is one node's replica of the tree.
type Store struct {
	cfg       Config
	logger    *slog.Logger
	raft      *raft.Raft
	logs      raftLog
	fsm       *fsm
	feed      *Feed
	transport raft.Transport
	client    *http.Client
	// forwardConns counts the connections internal calls dialed
	// (edgebase_forward_connections_total).
	forwardConns atomic.Uint64
	// readIndexRounds counts fetchReadIndex calls
	// (edgebase_read_index_rounds_total).
	readIndexRounds atomic.Uint64

	metrics *storeMetrics // nil: metrics off
	opened  time.Time

	leader  atomic.Pointer[leadership]
	readIdx *coalescer // leader: VerifyLeader; follower: ask the leader
	stop    chan struct{}
	// txnLevel is the newest Txn encoding every member reads, so the one
	// Txn writes (watchTxnEncoding): txnVersion (JSON) until every member
	// said it reads more.
	txnLevel    atomic.Uint32
	wg          sync.WaitGroup
	hadState    bool
	removed     atomic.Pointer[Removal] // set once this node learns it was removed
	removing    atomic.Bool             // markRemoved ran (the marker is written before removed is set)
	wasMember   atomic.Bool             // had state, bootstrapped, joined or saw itself in its configuration
	closeOnce   sync.Once
	shutdownErr error

	// membershipMu serialises, on the leader, the check of the configuration
	// and the change of a readdress or a removal (readdress.go). It is held
	// across raft's configuration futures only, never with another lock.
	membershipMu sync.Mutex
}

// leadership is one term of this node as leader.
type leadership struct {
	ctx    context.Context
	cancel context.CancelFunc
	ready  chan struct{} // closed after the Barrier: reads may be served
}

// Open starts the node's Raft instance over its on-disk state.
func Open(cfg Config) (*Store, error) {
	if cfg.NodeID == "" || cfg.Dir == "" || cfg.HTTPAdvertise == "" {
		return nil, errors.New("raftstore: NodeID, Dir and HTTPAdvertise are required")
	}
	if cfg.Transport == nil && cfg.RaftListener == nil && cfg.RaftBind == "" {
		return nil, errors.New("raftstore: RaftBind, RaftListener or Transport is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.RaftAdvertise == "" {
		cfg.RaftAdvertise = cfg.RaftBind
	}
	if err := cfg.Tuning.Validate(); err != nil {
		return nil, fmt.Errorf("raftstore: %w", err)
	}
	cfg.Tuning = cfg.Tuning.withDefaults()
	logger := cfg.Logger
	for from, to := range cfg.ConnectTo {
		if err := checkHostPort(from); err != nil {
			return nil, fmt.Errorf("raftstore: ConnectTo: %w", err)
		}
		if err := checkHostPort(to); err != nil {
			return nil, fmt.Errorf("raftstore: ConnectTo: %w", err)
		}
	}
	s := &Store{cfg: cfg, logger: logger, feed: newFeed(), stop: make(chan struct{}),
		metrics: newStoreMetrics(cfg.Registerer), opened: time.Now()}
	s.client = s.internalClient()
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	// A node told it was removed never serves its old state again.
	if err := refuseIfRemoved(cfg.Dir, cfg.NodeID); err != nil {
		return nil, err
	}
	raftTLS, err := raftTLSConfig(cfg.RaftTLS)
	if err != nil {
		return nil, err
	}
	if s.logs, err = openRaftLog(cfg.Dir, cfg.Tuning.LogSegmentSize, logger); err != nil {
		return nil, err
	}
	if s.fsm, err = openFSM(filepath.Join(cfg.Dir, "tree"), logger, s.feed); err != nil {
		_ = s.logs.Close()
		return nil, err
	}
	s.fsm.decider = cfg.Decider
	s.txnLevel.Store(uint32(txnVersion))
	hlog := hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn, Output: slogWriter{logger.With("component", "raft")}})
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(cfg.Dir, "snapshots"), 2, hlog)
	if err != nil {
		s.closeStores()
		return nil, fmt.Errorf("open snapshot store: %w", err)
	}
	s.transport = cfg.Transport
	if s.transport == nil {
		ln := cfg.RaftListener
		if ln == nil {
			if ln, err = net.Listen("tcp", cfg.RaftBind); err != nil {
				s.closeStores()
				return nil, fmt.Errorf("raft listen on %s: %w", cfg.RaftBind, err)
			}
		}
		// The advertised address stays a host name ("n3:7000"), never resolved
		// here: a container that comes back on another IP keeps its identity.
		var adv net.Addr
		if cfg.RaftAdvertise != "" {
			adv = hostAddr(cfg.RaftAdvertise)
		}
		s.transport = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream: &listenerLayer{Listener: ln, advertise: adv, secret: []byte(cfg.Secret), tls: raftTLS,
				dial: connectTo(cfg.ConnectTo, (&net.Dialer{}).DialContext)}, MaxPool: 8, Timeout: 10 * time.Second, Logger: hlog,
			MaxRPCsInFlight: cfg.Tuning.Effective().MaxRPCsInFlight,
		})
	}

	t := cfg.Tuning
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.Logger = hlog
	rc.HeartbeatTimeout, rc.ElectionTimeout = t.HeartbeatTimeout, t.ElectionTimeout
	rc.LeaderLeaseTimeout, rc.CommitTimeout = t.LeaderLeaseTimeout, t.CommitTimeout
	rc.MaxAppendEntries, rc.BatchApplyCh = t.MaxAppendEntries, true
	rc.SnapshotThreshold, rc.SnapshotInterval, rc.TrailingLogs = t.SnapshotThreshold, t.SnapshotInterval, t.TrailingLogs
	// Our tree is persistent and knows its applied index, so a restart replays
	// only the log tail over it instead of reloading the last snapshot.
	rc.NoSnapshotRestoreOnStart = true
	notify := make(chan bool, 16)
	rc.NotifyCh = notify

	hasState, err := raft.HasExistingState(s.logs, s.logs, snaps)
	if err != nil {
		s.closeStores()
		return nil, fmt.Errorf("inspect raft state: %w", err)
	}
	s.hadState = hasState
	s.wasMember.Store(hasState || cfg.Bootstrap)
	if err := s.fsm.catchUpToSnapshot(snaps); err != nil {
		s.closeStores()
		return nil, err
	}
	if hasState {
		// Before Raft runs (and may campaign with a stale configuration):
		// were we removed while we were away?
		if err := s.checkMembershipAtStart(); err != nil {
			s.closeStores()
			return nil, err
		}
	}
	// Raft reads every entry back to send it to each follower; the cache
	// serves the recent ones from memory instead of a Badger read
	// transaction per entry per follower.
	logs, err := raft.NewLogCache(logCacheEntries, s.logs)
	if err != nil {
		s.closeStores()
		return nil, fmt.Errorf("log cache: %w", err)
	}
	// Raft's heartbeat fast path must not change the term or role off its
	// main loop (heartbeat.go: a resumed leader diverged without this).
	trans, heartbeats := guardHeartbeats(s.transport)
	s.raft, err = raft.NewRaft(rc, s.fsm, logs, s.logs, snaps, trans)
	if err != nil {
		s.closeStores()
		return nil, fmt.Errorf("start raft: %w", err)
	}
	heartbeats.attach(s.raft)
	if !hasState && cfg.Bootstrap {
		boot := raft.Configuration{Servers: []raft.Server{{ID: rc.LocalID, Address: s.transport.LocalAddr(), Suffrage: raft.Voter}}}
		if err := s.raft.BootstrapCluster(boot).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			_ = s.Close()
			return nil, fmt.Errorf("bootstrap: %w", err)
		}
	}
	s.readIdx = newCoalescer(s.fetchReadIndex)
	s.wg.Add(1)
	go s.watchLeadership(notify)
	if hasState {
		// It may have come back on another Raft address (readdress.go).
		s.wg.Add(1)
		go s.healAddress()
	}
	s.wg.Add(1)
	go s.compactLoop()
	if err := s.startMetrics(); err != nil {
		_ = s.Close()
		return nil, err
	}
	s.wg.Add(1)
	go s.warmLeaders()
	s.wg.Add(1)
	go s.watchMembership()
	s.wg.Add(1)
	go s.watchTxnEncoding()
	return s, nil
}

// txnEncodingEvery is how often a node checks whether every member reads the
// binary Txn encoding.
const txnEncodingEvery = time.Second

// watchTxnEncoding keeps txnLevel up to date. An encoding is written only
// once every member of the Raft configuration has recorded
// (NodeRecord.TxnVersion, written at its start) that it reads it, so that a
// rolling upgrade never hands an entry to a member that would have to stop on
// it. It does not turn back: a member joins only if it reads the newest one
// too (Join), and going back to an older binary after every node ran this one
// is not supported.
func (s *Store) watchTxnEncoding() {
	defer s.wg.Done()
	t := time.NewTicker(txnEncodingEvery)
	defer t.Stop()
	for s.txnLevel.Load() < uint32(txnVersionLatest) {
		if v := s.everyMemberReads(); uint32(v) > s.txnLevel.Load() {
			s.txnLevel.Store(uint32(v))
			s.logger.Info(fmt.Sprintf("writing txn entries of version %d: every member reads them", v))
			continue
		}
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

// everyMemberReads returns the newest Txn encoding that, by this node's
// applied state, every server of the latest configuration reads (txnVersion
// when one has no record or an older one).
func (s *Store) everyMemberReads() byte {
	f := s.raft.GetConfiguration()
	if f.Error() != nil {
		return txnVersion
	}
	servers := f.Configuration().Servers
	if len(servers) == 0 {
		return txnVersion
	}
	level := txnVersionLatest
	for _, srv := range servers {
		doc, err := s.Get(NodeRecordPath(string(srv.ID)))
		if err != nil || doc == nil {
			return txnVersion
		}
		var rec NodeRecord
		if json.Unmarshal(doc.Data, &rec) != nil || rec.TxnVersion < txnVersionBinary {
			return txnVersion
		}
		level = min(level, rec.TxnVersion)
	}
	return level
}

// compactLoop trims the change log to its retention window, several times
// per window, on this node only.
func (s *Store) compactLoop() {
	defer s.wg.Done()
	keep := s.cfg.ChangeLogRetention
	if keep <= 0 {
		keep = DefaultChangeLogRetention
	}
	every := min(keep/4, time.Minute)
	t := time.NewTicker(max(every, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			n, err := s.fsm.compactChangeLog(time.Now().Add(-keep))
			if err != nil && !errors.Is(err, ErrClosed) {
				s.logger.Warn("change log compaction failed", "err", err)
			} else if n > 0 {
				s.logger.Debug("change log compacted", "removed", n)
			}
		}
	}
}

// HasState reports whether this node already belongs to a cluster (it has a
// Raft configuration), so that a restart does not try to join again.
func (s *Store) HasState() bool { return s.hadState }

func (s *Store) closeStores() {
	if s.fsm != nil {
		_ = s.fsm.close()
	}
	if s.logs != nil {
		_ = s.logs.Close()
	}
}

// Close stops Raft and closes the databases.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		if s.raft != nil {
			s.shutdownErr = s.raft.Shutdown().Error()
		}
		if l := s.leader.Swap(nil); l != nil {
			l.cancel()
		}
		s.wg.Wait()
		if c, ok := s.transport.(io.Closer); ok {
			_ = c.Close()
		}
		s.closeStores()
	})
	if s.shutdownErr != nil {
		return fmt.Errorf("raft shutdown: %w", s.shutdownErr)
	}
	return nil
}

// NodeID returns this node's id.
func (s *Store) NodeID() string { return s.cfg.NodeID }

// Feed returns the change feed of committed batches.
func (s *Store) Feed() *Feed { return s.feed }

// AppliedIndex is the revision of the last entry applied on this node.
func (s *Store) AppliedIndex() uint64 { return s.fsm.applied.get() }

// WaitApplied blocks until this node has applied idx.
func (s *Store) WaitApplied(ctx context.Context, idx uint64) error {
	return s.fsm.applied.wait(ctx, idx)
}

// IsLeader reports whether this node is the Raft leader now.
func (s *Store) IsLeader() bool { return s.raft.State() == raft.Leader }

// LeaderID returns the current leader's id, or "" when none is known.
func (s *Store) LeaderID() string {
	_, id := s.raft.LeaderWithID()
	return string(id)
}

// watchLeadership turns NotifyCh into establish/revoke of leader duties.
func (s *Store) watchLeadership(notify <-chan bool) {
	defer s.wg.Done()
	for {
		select {
		case <-s.stop:
			return
		case isLeader := <-notify:
			if old := s.leader.Swap(nil); old != nil {
				old.cancel()
			}
			if !isLeader {
				s.logger.Info("lost leadership")
				continue
			}
			ctx, cancel := context.WithCancel(context.Background())
			l := &leadership{ctx: ctx, cancel: cancel, ready: make(chan struct{})}
			s.leader.Store(l)
			s.wg.Add(1)
			go s.establish(l)
		}
	}
}

// establish commits a barrier so that everything from earlier terms is applied
// before this leader serves strong reads or starts leader-only work.
func (s *Store) establish(l *leadership) {
	defer s.wg.Done()
	for {
		err := s.raft.Barrier(10 * time.Second).Error()
		if err == nil {
			break
		}
		s.logger.Warn("leader barrier failed", "err", err)
		select {
		case <-l.ctx.Done():
			return
		case <-s.stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	close(l.ready)
	s.logger.Info("gained leadership", "applied", s.AppliedIndex())
	if s.cfg.OnLeader != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.cfg.OnLeader(l.ctx)
		}()
	}
	// A leader that came back on another Raft address puts it in the
	// configuration before leadership moves and others dial the old one.
	s.readdressSelfAsLeader()
}

// Txn proposes a transaction (forwarding it to the leader when this node is
// not the leader) and returns its deterministic result.
//
// A txn with a Caller, a per-op Match or an op computed at commit
// (increment, server timestamp, array ops) is decided inside Apply
// (Decider). Until every member reads such entries (a rolling upgrade from a
// binary before them), it is decided here instead, on this node's state, and
// written as the documents it leaves, conditioned on the revisions of
// everything the decision read (decideAhead).
func (s *Store) Txn(ctx context.Context, t *Txn) (*TxnResult, error) {
	if len(t.Ops) > MaxTxnOps || len(t.Conds) > MaxTxnOps {
		return nil, ErrEntryTooLarge
	}
	var encode func(*Txn) ([]byte, error)
	switch level := byte(s.txnLevel.Load()); {
	case level >= txnVersionDecided:
		encode = encodeTxnDecided
	case t.needsDecided():
		return s.decideAhead(ctx, t, byte(level))
	case level >= txnVersionBinary:
		encode = encodeTxnBinary
	default:
		encode = encodeTxnJSON
	}
	b, err := encode(t)
	if err != nil {
		return nil, err
	}
	return s.Propose(ctx, b)
}

// decideAhead commits t in a cluster whose members do not all read entries
// decided in Apply: it runs Apply's decision on this node's applied state,
// then proposes the documents that decision leaves as plain puts and
// deletes, conditioned on the revision of every document the decision read
// (t's Conds included). A condition that fails means the state moved: this
// node catches up to that commit and decides again. A refusal decided on
// this node's state, which may lag, is decided again after a strong read.
func (s *Store) decideAhead(ctx context.Context, t *Txn, level byte) (*TxnResult, error) {
	encode := encodeTxnJSON
	if level >= txnVersionBinary {
		encode = encodeTxnBinary
	}
	fresh := false
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrTimeout, err)
		}
		guess := s.AppliedIndex() + 1
		var res *TxnResult
		var plain *Txn
		err := s.fsm.view(func(txn *badger.Txn) error {
			ov := &overlay{txn: txn, w: &entryWrites{index: guess}, reads: map[string]uint64{}}
			res = applyTxn(ov, guess, t, s.fsm.decider)
			if !res.OK() {
				return nil
			}
			plain = &Txn{Time: t.Time}
			for path, rev := range ov.reads {
				plain.Conds = append(plain.Conds, Cond{Path: path, Kind: CondRevision, Revision: rev})
			}
			sort.Slice(plain.Conds, func(i, j int) bool { return plain.Conds[i].Path < plain.Conds[j].Path })
			for _, k := range ov.w.written() {
				// The overlay answers a path the entry wrote from the
				// entry's own writes (its last one), without a read.
				if d, _ := ov.get(k); d != nil {
					plain.Ops = append(plain.Ops, Op{Kind: OpPut, Path: k, Data: d.Data})
				} else {
					plain.Ops = append(plain.Ops, Op{Kind: OpDelete, Path: k, IfExists: true})
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if !res.OK() {
			if fresh {
				res.Revision = s.AppliedIndex()
				return res, nil
			}
			if err := s.WaitRead(ctx, Strong, 0); err != nil {
				return nil, err
			}
			fresh = true
			continue
		}
		if len(plain.Conds) > MaxTxnOps {
			return nil, ErrEntryTooLarge
		}
		b, err := encode(plain)
		if err != nil {
			return nil, err
		}
		out, err := s.Propose(ctx, b)
		if err != nil {
			return nil, err
		}
		if out.OK() {
			for i, d := range res.Docs {
				if d == nil {
					continue
				}
				c := *d
				c.Revision = out.Revision
				if c.CreateRevision == guess {
					c.CreateRevision = out.Revision
				}
				res.Docs[i] = &c
			}
			res.Revision = out.Revision
			return res, nil
		}
		if out.Err != ErrCodeCondFailed {
			return out, nil
		}
		if err := s.WaitApplied(ctx, out.Revision); err != nil {
			return nil, err
		}
		fresh = false
	}
}

// Propose commits an encoded command and returns the FSM's result. It retries
// only where the command certainly was not appended (no leader yet, a leader
// that refused it); after that an error is ErrUnknownOutcome.
func (s *Store) Propose(ctx context.Context, cmd []byte) (*TxnResult, error) {
	if len(cmd) > maxEntrySize {
		return nil, ErrEntryTooLarge
	}
	if err := s.removedErr(); err != nil {
		return nil, err
	}
	backoff := 10 * time.Millisecond
	for {
		var res *TxnResult
		var err error
		if s.IsLeader() {
			res, err = s.applyLocal(ctx, cmd)
		} else {
			res, err = s.forwardPropose(ctx, cmd)
		}
		if !errors.Is(err, errRetry) {
			return res, err
		}
		select {
		case <-ctx.Done():
			return nil, ErrNoLeader
		case <-s.stop:
			return nil, ErrClosed
		case <-time.After(backoff):
		}
		if backoff < 200*time.Millisecond {
			backoff *= 2
		}
	}
}

// errRetry marks a proposal that was certainly not appended.
var errRetry = errors.New("retry proposal")

func (s *Store) applyLocal(ctx context.Context, cmd []byte) (*TxnResult, error) {
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
		if timeout <= 0 {
			// The caller ran out of time before proposing: nothing was
			// appended, and the cluster is fine.
			return nil, ErrTimeout
		}
	}
	start := time.Now()
	f := s.raft.Apply(cmd, timeout)
	// Raft does not answer futures still queued at shutdown, so wait for the
	// future alongside the caller's context and the store's stop.
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %v", ErrUnknownOutcome, ctx.Err())
	case <-s.stop:
		// The entry may already be in the log: a client told "closed,
		// retry" could write twice, so the outcome is unknown.
		return nil, fmt.Errorf("%w: %v", ErrUnknownOutcome, ErrClosed)
	}
	if err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrEnqueueTimeout),
			errors.Is(err, raft.ErrLeadershipTransferInProgress):
			// Certainly not appended: safe to send again.
			return nil, errRetry
		case errors.Is(err, raft.ErrRaftShutdown):
			return nil, ErrClosed
		default:
			return nil, fmt.Errorf("%w: %v", ErrUnknownOutcome, err)
		}
	}
	res, ok := f.Response().(*TxnResult)
	if !ok {
		return nil, fmt.Errorf("%w: unexpected fsm response %T", ErrUnknownOutcome, f.Response())
	}
	s.metrics.observeApply(start)
	return res, nil
}

// Consistency selects how fresh a read must be.
type Consistency int

const (
	// Strong reads are linearizable: they see every write acknowledged before
	// the read began, on any node.
	Strong Consistency = iota
	// Local reads serve this node's applied state as it is (maybe stale),
	// as long as the node is in touch with a leader: a follower that has not
	// heard from one for MaxLocalStaleness serves them as Strong reads
	// instead (which fail while it is cut off), so a partitioned node does
	// not go on serving old data, or honouring revoked tokens, for ever.
	Local
)

// MaxLocalStaleness bounds how long a follower cut off from the leader keeps
// serving local reads.
const MaxLocalStaleness = 2 * time.Second

// WaitRead blocks until this node's state is fresh enough for a read of the
// given consistency that must also include revision minRev (0: none).
func (s *Store) WaitRead(ctx context.Context, c Consistency, minRev uint64) error {
	if err := s.removedErr(); err != nil {
		return err
	}
	if minRev > 0 {
		if err := s.fsm.applied.wait(ctx, minRev); err != nil {
			return ErrTimeout
		}
	}
	if c == Local && (s.IsLeader() || time.Since(s.raft.LastContact()) <= MaxLocalStaleness) {
		return nil
	}
	if brokenStrongReads && !s.IsLeader() {
		return nil
	}
	idx, err := s.ReadIndex(ctx)
	if err != nil {
		return err
	}
	if err := s.fsm.applied.wait(ctx, idx); err != nil {
		return ErrTimeout
	}
	return nil
}

// ReadIndex returns an index such that state applied up to it reflects every
// write acknowledged before the call. Concurrent calls share one round trip.
func (s *Store) ReadIndex(ctx context.Context) (uint64, error) {
	if err := s.removedErr(); err != nil {
		return 0, err
	}
	return s.readIdx.do(ctx)
}

// fetchReadIndex is one coalesced round: on the leader, capture the applied
// index and then confirm leadership with a quorum; on a follower, ask the
// leader. Leadership is re-checked on every try, so a follower that wins the
// election during the round answers as leader instead of asking itself.
func (s *Store) fetchReadIndex(ctx context.Context) (uint64, error) {
	s.readIndexRounds.Add(1)
	for {
		var idx uint64
		var err error
		if s.IsLeader() {
			idx, err = s.leaderReadIndex(ctx)
		} else {
			idx, err = s.forwardReadIndex(ctx)
		}
		if !errors.Is(err, errRetry) {
			return idx, err
		}
		select {
		case <-ctx.Done():
			return 0, ErrNoLeader
		case <-s.stop:
			return 0, ErrClosed
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// leaderReadIndex answers errRetry while this node's leadership is not (or no
// longer) established, so callers try again as leader or as follower.
func (s *Store) leaderReadIndex(ctx context.Context) (uint64, error) {
	l := s.leader.Load()
	if l == nil {
		return 0, errRetry
	}
	select {
	case <-l.ready:
	case <-ctx.Done():
		return 0, ErrTimeout
	}
	// Every acknowledged write was applied here before it was acknowledged,
	// so the applied index, taken before leadership is confirmed, covers them.
	idx := s.fsm.applied.get()
	if err := s.raft.VerifyLeader().Error(); err != nil {
		return 0, errRetry
	}
	return idx, nil
}

// Get reads one document (full path) from this node's applied state.
func (s *Store) Get(path string) (*Document, error) {
	var doc *Document
	err := s.fsm.view(func(txn *badger.Txn) error {
		var err error
		doc, err = getDoc(txn, path)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", path, err)
	}
	return doc, nil
}

// List returns up to limit direct children of parent (a full path) whose last
// segment sorts after `after`, and the name to continue after ("" when done).
func (s *Store) List(parent, after string, limit int) ([]*Document, string, error) {
	var docs []*Document
	var next string
	err := s.fsm.view(func(txn *badger.Txn) error {
		var err error
		docs, next, err = listChildren(txn, parent, after, limit)
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("list %q: %w", parent, err)
	}
	return docs, next, nil
}

// Backup writes a backup of the whole tree (see backup.go for the format)
// to w and returns the revision it holds. A strong read first makes it hold
// every write acknowledged before the call, on any node. It is read in one
// Badger read transaction, not under the FSM lock, so writes go on while a
// large backup streams; the database guard only keeps a snapshot install
// from closing the database under it (that install waits for the backup).
func (s *Store) Backup(ctx context.Context, w io.Writer) (uint64, error) {
	if err := s.WaitRead(ctx, Strong, 0); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	db, release, err := s.fsm.pin()
	if err != nil {
		return 0, err
	}
	defer release()
	info, err := writeBackup(ctx, db, s.cfg.NodeID, time.Now(), w)
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	s.logger.Info("backup written", "revision", info.Revision, "records", info.Records, "bytes", info.Bytes)
	return info.Revision, nil
}

// TransferLeadership hands leadership to another voter (graceful shutdown).
func (s *Store) TransferLeadership() error {
	if !s.IsLeader() {
		return nil
	}
	if err := s.raft.LeadershipTransfer().Error(); err != nil {
		return fmt.Errorf("transfer leadership: %w", err)
	}
	return nil
}

// Snapshot forces a Raft snapshot now (operators and tests).
func (s *Store) Snapshot() error {
	if err := s.raft.Snapshot().Error(); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	return nil
}

// NodeRecord is what the cluster knows about a member, kept in the tree at
// NodeRecordPath(id) so that every node can find every other's HTTP address.
type NodeRecord struct {
	ID       string `json:"id"`
	HTTPAddr string `json:"httpAddr"`
	RaftAddr string `json:"raftAddr"`
	Voter    bool   `json:"voter"`
	// TxnVersion is the newest Txn encoding the member's binary reads
	// (absent in the records of binaries older than the binary encoding).
	TxnVersion byte `json:"txnVersion,omitempty"`
}

// SystemPrefix is the reserved root of cluster-wide system state.
const SystemPrefix = "_sys"

// NodeRecordPath is where a member's NodeRecord lives.
func NodeRecordPath(id string) string { return SystemPrefix + "/nodes/" + id }

// EnsureNodeRecord makes sure the tree holds this node's current addresses;
// it retries until ctx ends, since forwarding depends on it.
func (s *Store) EnsureNodeRecord(ctx context.Context) error {
	rec := NodeRecord{ID: s.cfg.NodeID, HTTPAddr: s.cfg.HTTPAdvertise, RaftAddr: string(s.transport.LocalAddr()), Voter: s.cfg.Voter,
		TxnVersion: txnVersionLatest}
	want, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode node record: %w", err)
	}
	for {
		err := s.ensureRecord(ctx, want)
		if err == nil {
			return nil
		}
		s.logger.Debug("node record not registered yet", "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("register node record: %w", err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (s *Store) ensureRecord(ctx context.Context, want []byte) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.WaitRead(cctx, Strong, 0); err != nil {
		return err
	}
	cur, err := s.Get(NodeRecordPath(s.cfg.NodeID))
	if err != nil {
		return err
	}
	if cur != nil && string(cur.Data) == string(want) {
		return nil
	}
	res, err := s.Txn(cctx, &Txn{Time: time.Now().UnixNano(), Ops: []Op{{Kind: OpPut, Path: NodeRecordPath(s.cfg.NodeID), Data: want}}})
	if err != nil {
		return err
	}
	if !res.OK() {
		return fmt.Errorf("node record refused: %s", res.Err)
	}
	return nil
}

// nodeHTTPAddr finds a member's HTTP base URL from its record.
func (s *Store) nodeHTTPAddr(id string) (string, error) {
	if id == "" {
		return "", ErrNoLeader
	}
	doc, err := s.Get(NodeRecordPath(id))
	if err != nil {
		return "", err
	}
	if doc == nil {
		return "", fmt.Errorf("%w: no address known for %s", ErrNoLeader, id)
	}
	var rec NodeRecord
	if err := json.Unmarshal(doc.Data, &rec); err != nil {
		return "", fmt.Errorf("decode node record %s: %w", id, err)
	}
	return strings.TrimRight(rec.HTTPAddr, "/"), nil
}

// slogWriter turns hclog's text lines into slog records. A heartbeat the
// guard deferred (heartbeat.go) is expected around every change of term, not
// an error: raft's "failed to heartbeat" line for it is logged at Info.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	switch {
	case strings.Contains(line, errHeartbeatDeferred.Error()):
		w.l.Info(line)
	case strings.Contains(line, "[ERROR]"):
		w.l.Error(line)
	case strings.Contains(line, "[WARN]"):
		w.l.Warn(line)
	default:
		w.l.Info(line)
	}
	return len(p), nil
}

// CountPrefix counts the documents whose path starts with prefix, reading
// keys only. It reads this node's applied state.
func (s *Store) CountPrefix(prefix string) (int, error) {
	n := 0
	err := s.fsm.view(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = docKey(prefix)
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("count %q: %w", prefix, err)
	}
	return n, nil
}

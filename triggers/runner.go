package triggers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/push"
	"github.com/edgebase/edgebase/raftstore"
)

// Clock tells the time; tests move it instead of sleeping.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// RunnerStore is the part of raftstore.Store the runner uses.
type RunnerStore interface {
	Txn(ctx context.Context, t *raftstore.Txn) (*raftstore.TxnResult, error)
	Get(path string) (*raftstore.Document, error)
	List(parent, after string, limit int) ([]*raftstore.Document, string, error)
	ChangesSince(since uint64, max int) ([]raftstore.Event, uint64, error)
	AppliedIndex() uint64
}

// PushQueuer queues a trigger's notification through the push pipeline
// (push.Service). nid is deterministic per event, so a redelivery queues
// nothing (queued false); so does a project whose push is off.
type PushQueuer interface {
	QueueForTrigger(ctx context.Context, pid, nid, createdBy string, t push.Target, c push.Content) (queued bool, err error)
}

// Defaults of Tuning.
const (
	DefaultInFlight   = 64
	DefaultTimeout    = 10 * time.Second
	DefaultMinBackoff = time.Second
	DefaultMaxBackoff = 10 * time.Minute
	DefaultRetryFor   = 24 * time.Hour
	DefaultCheckpoint = 100 * time.Millisecond
	DefaultPoll       = 5 * time.Second
)

// Tuning sets the runner's bounds and timings; zero fields take defaults.
type Tuning struct {
	// InFlight bounds the actions attempted at once (over all triggers).
	InFlight int
	// Timeout bounds one webhook attempt.
	Timeout time.Duration
	// MinBackoff is the wait after a first failed attempt; each further
	// failure doubles it, up to MaxBackoff, with jitter. A receiver's
	// Retry-After replaces it (capped at MaxBackoff).
	MinBackoff, MaxBackoff time.Duration
	// RetryFor bounds the retries of an event after its first attempt:
	// then it is dead-lettered.
	RetryFor time.Duration
	// Checkpoint is how often the cursors are committed.
	Checkpoint time.Duration
	// MaxDepth is the loop limit (DefaultMaxDepth).
	MaxDepth int
	// Poll is how often parked events are looked for besides the feed's
	// news of them (replays), and the longest a retry wait sleeps at once.
	Poll time.Duration
}

func (t Tuning) withDefaults() Tuning {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if t.InFlight <= 0 {
		t.InFlight = DefaultInFlight
	}
	def(&t.Timeout, DefaultTimeout)
	def(&t.MinBackoff, DefaultMinBackoff)
	def(&t.MaxBackoff, DefaultMaxBackoff)
	def(&t.RetryFor, DefaultRetryFor)
	def(&t.Checkpoint, DefaultCheckpoint)
	def(&t.Poll, DefaultPoll)
	if t.MaxBackoff < t.MinBackoff {
		t.MaxBackoff = t.MinBackoff
	}
	if t.MaxDepth <= 0 {
		t.MaxDepth = DefaultMaxDepth
	}
	return t
}

// RunnerConfig wires a Runner. Store and Feed are required.
type RunnerConfig struct {
	Store RunnerStore
	Feed  *raftstore.Feed
	// Push delivers push actions (nil: they are dead-lettered).
	Push PushQueuer
	// Sealer opens sealed webhook secrets (nil: only plain ones open).
	Sealer Sealer
	// Dial connects to webhook receivers; node passes the webhook host
	// policy's DialContext (nil: a plain dialer, judging nothing).
	Dial       func(ctx context.Context, network, addr string) (net.Conn, error)
	Clock      Clock
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Tuning     Tuning
}

// Runner is the leader's delivery of triggers (Run).
type Runner struct {
	cfg     RunnerConfig
	tu      Tuning
	clock   Clock
	logger  *slog.Logger
	metrics *metrics
	hooks   *webhookClient
	// subBuffer sizes the feed subscription's queue (batches); tests make
	// it small to make the reader lag.
	subBuffer int
}

// NewRunner checks cfg and defaults its optional parts.
func NewRunner(cfg RunnerConfig) (*Runner, error) {
	if cfg.Store == nil || cfg.Feed == nil {
		return nil, errors.New("triggers: the runner needs a Store and a Feed")
	}
	tu := cfg.Tuning.withDefaults()
	if cfg.Clock == nil {
		cfg.Clock = systemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Dial == nil {
		cfg.Dial = (&net.Dialer{Timeout: tu.Timeout}).DialContext
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Runner{cfg: cfg, tu: tu, clock: cfg.Clock, logger: cfg.Logger.With("component", "triggers"), metrics: m,
		hooks: newWebhookClient(cfg.Dial, tu, cfg.Clock), subBuffer: 1024}, nil
}

// Tuning is the runner's effective tuning (defaults filled).
func (r *Runner) Tuning() Tuning { return r.tu }

// Run delivers triggers while ctx lasts (while this node leads). It
// resumes from the committed cursors and parked events an earlier leader
// left, and returns after its attempts in flight have returned.
func (r *Runner) Run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	ru := &run{r: r, ctx: ctx, trigs: map[trigKey]*trig{}, byProject: map[string]map[string]*trig{},
		sem: make(chan struct{}, r.tu.InFlight), room: make(chan struct{}, maxOutstanding(r.tu))}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ru.checkpointLoop(ctx)
	}()
	r.logger.Info("trigger runner started")
	ru.read(ctx)
	cancel()
	wg.Wait()
	ru.stopAll()
	r.hooks.close()
	r.logger.Info("trigger runner stopped")
}

// maxOutstanding bounds the events handed to lanes and not yet settled
// (delivered, parked or dead): the reader waits beyond it, so a slow
// receiver holds the reader back instead of filling memory.
func maxOutstanding(tu Tuning) int { return max(16*tu.InFlight, 1024) }

// run is the state of one Run (one term of leadership).
type run struct {
	r   *Runner
	ctx context.Context
	// mu guards trigs and byProject: the reader changes them, the
	// checkpointer reads them. Lock order: run.mu, then trig.mu.
	mu        sync.Mutex
	trigs     map[trigKey]*trig
	byProject map[string]map[string]*trig
	sem       chan struct{} // actions in flight
	room      chan struct{} // unsettled events handed to lanes
	// rewind (reader only) asks for a catch-up from the change log: a
	// trigger came (back) with a cursor behind the reader.
	rewind bool
	// loud is the last revision read that holds more than triggers'
	// checkpoints: a cursor that moved only over checkpoints (its own
	// included) is not committed again, or every checkpoint would make
	// the next.
	loud atomic.Uint64
}

type trigKey struct{ pid, name string }

// ---- the reader ------------------------------------------------------------

// pageSize is how many changes one read of the change log returns.
const pageSize = 512

// errReset ends a subscription whose feed restored a snapshot.
var errReset = errors.New("triggers: the feed was reset by a snapshot restore")

// read follows the change feed until ctx ends: subscribe first, then read
// the change log from the lowest cursor, then the subscription's batches
// (skipping what the log gave); a lagging subscription is made again.
func (ru *run) read(ctx context.Context) {
	for ctx.Err() == nil {
		sub := ru.r.cfg.Feed.Subscribe(ru.r.subBuffer)
		err := ru.follow(ctx, sub)
		sub.Close()
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, raftstore.ErrLagged) || errors.Is(err, errReset) {
			ru.r.logger.Info("triggers: reading the change log again", "reason", err)
			continue
		}
		ru.r.logger.Warn("triggers: reader failed; retrying", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(ru.r.tu.MinBackoff):
		}
	}
}

func (ru *run) follow(ctx context.Context, sub *raftstore.Subscription) error {
	if err := ru.loadAll(ctx); err != nil {
		return err
	}
	if err := ru.catchUp(ctx); err != nil {
		return err
	}
	poll := time.NewTicker(ru.r.tu.Poll)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case b, ok := <-sub.C():
			if !ok {
				return sub.Err()
			}
			if b.Reset {
				return errReset
			}
			ru.apply(ctx, b.Events, b.Revision)
			if ru.rewind {
				if err := ru.catchUp(ctx); err != nil {
					return err
				}
			}
		case <-poll.C:
			ru.scanQueues(ctx)
		}
	}
}

// catchUp reads the change log from the lowest cursor of the enabled
// triggers up to what was applied when it began.
func (ru *run) catchUp(ctx context.Context) error {
	target := ru.r.cfg.Store.AppliedIndex()
	for ctx.Err() == nil {
		ru.rewind = false
		pos, ok := ru.pos()
		if !ok || pos >= target {
			ru.clearLagging()
			return nil
		}
		evs, upTo, err := ru.r.cfg.Store.ChangesSince(pos, pageSize)
		if errors.Is(err, raftstore.ErrCompacted) {
			ru.compacted(upTo)
			continue
		}
		if err != nil {
			return fmt.Errorf("read the change log after %d: %w", pos, err)
		}
		if upTo <= pos {
			ru.clearLagging()
			return nil
		}
		ru.clearLagging()
		ru.apply(ctx, evs, upTo)
	}
	return ctx.Err()
}

// pos is the lowest revision an enabled trigger has been handed (false:
// no trigger is enabled).
func (ru *run) pos() (uint64, bool) {
	var pos uint64
	found := false
	for _, t := range ru.trigs {
		t.mu.Lock()
		if !t.disabled && (!found || t.seen < pos) {
			pos, found = t.seen, true
		}
		t.mu.Unlock()
	}
	return pos, found
}

func (ru *run) clearLagging() {
	for _, t := range ru.trigs {
		t.mu.Lock()
		t.lagging = false
		t.mu.Unlock()
	}
}

// compacted moves every cursor below the change log's floor to it, noting
// the changes lost.
func (ru *run) compacted(floor uint64) {
	for _, t := range ru.trigs {
		t.mu.Lock()
		if !t.disabled && t.seen < floor {
			msg := fmt.Sprintf("changes after revision %d up to %d were compacted from the change log before they were delivered", t.seen, floor)
			t.noteErrorLocked(msg, ru.r.clock.Now())
			ru.r.logger.Error("triggers: changes lost to compaction", "project", t.pid, "trigger", t.name, "from", t.seen+1, "to", floor)
			t.seen = floor
		}
		t.mu.Unlock()
	}
}

// apply hands the changes evs (whole revisions, in order) to the triggers
// that have not seen them, then marks every trigger in step as having seen
// upTo.
func (ru *run) apply(ctx context.Context, evs []raftstore.Event, upTo uint64) {
	for i := 0; i < len(evs) && ctx.Err() == nil; {
		j := i + 1
		for j < len(evs) && evs[j].Revision == evs[i].Revision {
			j++
		}
		ru.applyRevision(ctx, evs[i:j])
		i = j
	}
	if ctx.Err() != nil {
		return
	}
	for _, t := range ru.trigs {
		t.mu.Lock()
		if !t.disabled && !t.lagging && t.seen < upTo {
			t.seen = upTo
		}
		t.mu.Unlock()
	}
}

// applyRevision handles one revision's events: definitions first (in
// order), then parked events others wrote (replays), then the changes of
// user documents, each with the loop depth the revision's origin marker
// gives.
func (ru *run) applyRevision(ctx context.Context, evs []raftstore.Event) {
	rev := evs[0].Revision
	depth := map[string]int{}
	quiet := true
	for _, ev := range evs {
		pid, _, _ := strings.Cut(ev.Path, "/")
		if quiet && !strings.HasPrefix(ev.Path, keys.Under(keys.TriggerStates(pid))) {
			quiet = false
			if rev > ru.loud.Load() {
				ru.loud.Store(rev)
			}
		}
		if ev.Path == keys.TriggerOrigin(pid) && ev.Doc != nil {
			var o Origin
			if err := json.Unmarshal(ev.Doc.Data, &o); err == nil {
				depth[pid] = o.Depth
			}
			continue
		}
		if pid, name, ok := keys.ParseTrigger(ev.Path); ok {
			ru.onDef(ctx, ev, pid, name)
		}
	}
	for _, ev := range evs {
		pid, _, _ := strings.Cut(ev.Path, "/")
		ch, ok := ChangeFromEvent(ev, depth[pid])
		if !ok {
			if ev.Type == raftstore.EventSet {
				ru.onQueued(ev, pid)
			}
			continue
		}
		for _, t := range ru.byProject[pid] {
			ru.dispatch(ctx, t, &ch, rev)
		}
	}
}

// dispatch hands ch to trigger t when it fires it.
func (ru *run) dispatch(ctx context.Context, t *trig, ch *Change, rev uint64) {
	t.mu.Lock()
	c, skip := t.c, t.disabled || t.lagging || rev <= t.seen
	t.mu.Unlock()
	if skip || c == nil {
		return
	}
	params, fire, err := c.Fires(ctx, ch)
	if err != nil {
		t.mu.Lock()
		t.noteErrorLocked(err.Error(), ru.r.clock.Now())
		t.mu.Unlock()
		return
	}
	if !fire {
		return
	}
	if ch.Depth >= ru.r.tu.MaxDepth {
		ru.r.metrics.loopStops.WithLabelValues(t.pid, t.name).Inc()
		t.mu.Lock()
		t.st.LoopStops++
		t.mu.Unlock()
		return
	}
	it := &item{p: Parked{Payload: NewPayload(c, ch, params), Depth: ch.Depth}, ch: ch}
	select {
	case ru.room <- struct{}{}:
	case <-ctx.Done():
		return
	}
	it.token = true
	ru.add(t, it)
}

// onQueued picks up a parked event another writer (the service's replay)
// put in a trigger's queue.
func (ru *run) onQueued(ev raftstore.Event, pid string) {
	for _, t := range ru.byProject[pid] {
		if strings.HasPrefix(ev.Path, keys.Under(keys.TriggerQueueDir(t.pid, t.name))) {
			t.mu.Lock()
			off := t.disabled
			t.mu.Unlock()
			if !off {
				ru.merge(t, ev.Path, ev.Doc)
			}
			return
		}
	}
}

// scanQueues looks for parked events the runner does not know of.
func (ru *run) scanQueues(ctx context.Context) {
	for _, t := range ru.trigs {
		if ctx.Err() != nil {
			return
		}
		t.mu.Lock()
		off := t.disabled
		t.mu.Unlock()
		if !off {
			ru.loadQueue(t)
		}
	}
}

// ---- definitions -----------------------------------------------------------

// trig is one trigger as the runner runs it.
type trig struct {
	pid, name   string
	defRevision uint64 // CreateRevision of its definition
	ctx         context.Context
	cancel      context.CancelFunc
	wg          sync.WaitGroup // its lanes' workers

	mu       sync.Mutex
	c        *Compiled
	defRev   uint64 // Revision of the definition compiled
	disabled bool   // by the owner, or a definition that does not compile
	dropped  bool   // deleted: its series are gone and stay gone
	secret   string
	// seen is the last revision handed to the trigger; lagging marks one
	// whose seen is behind the reader's (a catch-up brings it along).
	seen    uint64
	lagging bool
	lanes   map[string]*lane
	// revs and counts track the unsettled events by revision (revs in
	// order): the cursor is just below the first with a count.
	revs   []uint64
	counts map[uint64]int
	parked int   // durable events in lanes
	st     State // counters, as committed plus this term's
	wrote  State // the last committed State
	// wroteMark is min(cursor, run.loud) as last committed.
	wroteMark uint64
}

func (t *trig) noteErrorLocked(msg string, now time.Time) {
	t.st.LastError = truncate(msg, 500)
	t.st.LastErrorAt = now.UTC().Format(time.RFC3339Nano)
}

// cursorLocked is the low watermark: every event at or below it settled.
func (t *trig) cursorLocked() uint64 {
	for len(t.revs) > 0 && t.counts[t.revs[0]] == 0 {
		delete(t.counts, t.revs[0])
		t.revs = t.revs[1:]
	}
	if len(t.revs) > 0 {
		return t.revs[0] - 1
	}
	return t.seen
}

// loadAll (re)loads every trigger from the index: at the start, and after
// the reader lost the feed (its definitions may have moved meanwhile).
func (ru *run) loadAll(ctx context.Context) error {
	found := map[trigKey]bool{}
	after := ""
	for ctx.Err() == nil {
		docs, next, err := ru.r.cfg.Store.List(keys.TriggerIndexDir(), after, 256)
		if err != nil {
			return fmt.Errorf("list triggers: %w", err)
		}
		for _, d := range docs {
			pid, name, ok := keys.ParseTriggerIndex(d.Path)
			if !ok {
				continue
			}
			found[trigKey{pid, name}] = true
			def, err := ru.r.cfg.Store.Get(keys.Trigger(pid, name))
			if err != nil {
				return fmt.Errorf("read trigger %s/%s: %w", pid, name, err)
			}
			if def == nil {
				continue
			}
			ru.onDefDoc(ctx, pid, name, def, 0)
		}
		if next == "" {
			break
		}
		after = next
	}
	for k, t := range ru.trigs {
		if !found[k] {
			ru.drop(t)
		}
	}
	return ctx.Err()
}

// onDef follows a change of a definition, in feed order.
func (ru *run) onDef(ctx context.Context, ev raftstore.Event, pid, name string) {
	t := ru.trigs[trigKey{pid, name}]
	if ev.Type == raftstore.EventDelete || ev.Doc == nil {
		if t != nil && ev.Revision > t.defRev {
			ru.drop(t)
		}
		return
	}
	if t == nil {
		// A definition the runner does not run: make sure it still exists
		// (a replay of the log meets definitions deleted since).
		cur, err := ru.r.cfg.Store.Get(ev.Path)
		if err != nil || cur == nil || cur.CreateRevision != ev.Doc.CreateRevision {
			return
		}
	}
	ru.onDefDoc(ctx, pid, name, ev.Doc, ev.Revision)
}

// onDefDoc runs definition doc of pid/name, met at revision at (0: read
// from the tree at the start).
func (ru *run) onDefDoc(ctx context.Context, pid, name string, doc *raftstore.Document, at uint64) {
	t := ru.trigs[trigKey{pid, name}]
	if t != nil && doc.CreateRevision != t.defRevision {
		ru.drop(t)
		t = nil
	}
	if t != nil && doc.Revision <= t.defRev {
		return // met again in a replay of the log
	}
	var def Definition
	c, err := func() (*Compiled, error) {
		if err := json.Unmarshal(doc.Data, &def); err != nil {
			return nil, fmt.Errorf("decode definition: %w", err)
		}
		return Compile(pid, name, &def, doc.CreateRevision)
	}()
	var secret string
	if err == nil && c.Def.Action.Webhook != nil {
		secret, err = OpenSecret(ru.r.cfg.Sealer, pid, name, c.Def.Action.Webhook.Secret)
	}
	off := err != nil || def.Disabled
	if t == nil {
		t = ru.newTrig(pid, name, doc)
		if t == nil {
			return
		}
	}
	t.mu.Lock()
	wasOff := t.disabled
	t.defRev, t.disabled = doc.Revision, off
	if err == nil {
		t.c, t.secret = c, secret
	} else {
		t.noteErrorLocked(fmt.Sprintf("definition at revision %d: %v", doc.Revision, err), ru.r.clock.Now())
		ru.r.logger.Error("triggers: definition does not run", "project", pid, "trigger", name, "err", err)
	}
	t.mu.Unlock()
	switch {
	case off && !wasOff:
		ru.stop(t)
	case !off && (wasOff || t.ctx == nil):
		ru.start(t, at)
	}
}

// newTrig registers a trigger with its committed progress (disabled until
// onDefDoc judges its definition).
func (ru *run) newTrig(pid, name string, doc *raftstore.Document) *trig {
	t := &trig{pid: pid, name: name, defRevision: doc.CreateRevision, disabled: true, seen: doc.CreateRevision,
		lanes: map[string]*lane{}, counts: map[uint64]int{}}
	sd, err := ru.r.cfg.Store.Get(keys.TriggerState(pid, name))
	if err != nil {
		ru.r.logger.Error("triggers: read state", "project", pid, "trigger", name, "err", err)
		return nil
	}
	if sd != nil {
		var st State
		if err := json.Unmarshal(sd.Data, &st); err == nil && st.DefRevision == doc.CreateRevision {
			t.st, t.wrote = st, st
			t.seen = max(st.Cursor, doc.CreateRevision)
		}
	}
	t.wroteMark = t.seen
	t.st.DefRevision = doc.CreateRevision
	ru.mu.Lock()
	ru.trigs[trigKey{pid, name}] = t
	if ru.byProject[pid] == nil {
		ru.byProject[pid] = map[string]*trig{}
	}
	ru.byProject[pid][name] = t
	ru.mu.Unlock()
	return t
}

// start runs an enabled trigger: its parked events, and the changes after
// its cursor (a catch-up when that is behind revision at, where the
// reader is).
func (ru *run) start(t *trig, at uint64) {
	t.ctx, t.cancel = context.WithCancel(ru.ctx)
	t.mu.Lock()
	if at != 0 && t.seen < at {
		t.lagging = true
	}
	t.mu.Unlock()
	ru.rewind = true
	ru.loadQueue(t)
}

// stop ends a trigger's workers and forgets its unsettled events: its
// cursor stays where they start, so they are handed again when it runs.
func (ru *run) stop(t *trig) {
	if t.cancel == nil {
		return
	}
	t.cancel()
	t.wg.Wait()
	t.mu.Lock()
	t.seen = t.cursorLocked()
	for _, l := range t.lanes {
		for _, it := range l.items {
			if it.token {
				<-ru.room
			}
		}
	}
	t.lanes, t.revs, t.counts, t.parked = map[string]*lane{}, nil, map[uint64]int{}, 0
	t.mu.Unlock()
	t.ctx, t.cancel = nil, nil
}

// drop forgets a trigger that was deleted (or replaced by one of the same
// name).
func (ru *run) drop(t *trig) {
	ru.stop(t)
	t.mu.Lock()
	t.dropped = true
	t.mu.Unlock()
	ru.mu.Lock()
	delete(ru.trigs, trigKey{t.pid, t.name})
	delete(ru.byProject[t.pid], t.name)
	if len(ru.byProject[t.pid]) == 0 {
		delete(ru.byProject, t.pid)
	}
	ru.mu.Unlock()
	ru.r.metrics.forget(t.pid, t.name)
}

func (ru *run) stopAll() {
	for _, t := range ru.trigs {
		ru.stop(t)
		ru.r.metrics.forget(t.pid, t.name)
	}
	ru.r.metrics.inFlight.Set(0)
}

// ---- checkpoints -----------------------------------------------------------

// checkpointLoop commits each trigger's cursor and counts when they moved,
// and refreshes the gauges.
func (ru *run) checkpointLoop(ctx context.Context) {
	tick := time.NewTicker(ru.r.tu.Checkpoint)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			ru.checkpoint(ctx)
		}
	}
}

func (ru *run) checkpoint(ctx context.Context) {
	ru.mu.Lock()
	ts := make([]*trig, 0, len(ru.trigs))
	for _, t := range ru.trigs {
		ts = append(ts, t)
	}
	ru.mu.Unlock()
	sort.Slice(ts, func(i, j int) bool { return ts[i].pid+"/"+ts[i].name < ts[j].pid+"/"+ts[j].name })
	applied := ru.r.cfg.Store.AppliedIndex()
	for _, t := range ts {
		if ctx.Err() != nil {
			return
		}
		t.mu.Lock()
		if t.dropped {
			t.mu.Unlock()
			continue
		}
		st := t.st
		st.Cursor = t.cursorLocked()
		mark := min(st.Cursor, ru.loud.Load())
		counts, wrote := st, t.wrote
		counts.Cursor, wrote.Cursor = 0, 0
		changed := counts != wrote || mark > t.wroteMark
		// The gauges are set under t.mu: drop removes the series after
		// marking the trigger dropped, so they are not made again.
		m := ru.r.metrics
		m.cursor.WithLabelValues(t.pid, t.name).Set(float64(st.Cursor))
		m.lag.WithLabelValues(t.pid, t.name).Set(float64(applied - min(applied, st.Cursor)))
		m.pending.WithLabelValues(t.pid, t.name).Set(float64(t.parked))
		t.mu.Unlock()
		if !changed {
			continue
		}
		data, err := json.Marshal(st)
		if err != nil {
			continue
		}
		res, err := ru.r.cfg.Store.Txn(ctx, &raftstore.Txn{Time: ru.r.clock.Now().UnixNano(),
			Conds: []raftstore.Cond{{Path: keys.Trigger(t.pid, t.name), Kind: raftstore.CondExists}},
			Ops:   []raftstore.Op{{Kind: raftstore.OpPut, Path: keys.TriggerState(t.pid, t.name), Data: data}}})
		if err != nil || !res.OK() {
			if ctx.Err() == nil && err != nil {
				ru.r.logger.Warn("triggers: checkpoint", "project", t.pid, "trigger", t.name, "err", err)
			}
			continue
		}
		t.mu.Lock()
		t.wrote = st
		t.wroteMark = max(t.wroteMark, mark)
		t.mu.Unlock()
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

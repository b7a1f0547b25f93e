package realtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
)

// conn is one WebSocket client. Three kinds of goroutine touch it: the
// reader (its own, Server.readConn), the writer, and short-lived workers for
// subscribing and re-checking access. Outgoing messages go through one
// bounded queue drained by the writer; the hub never blocks on it.
type conn struct {
	srv   *Server
	ws    *websocket.Conn
	cork  *corkConn // ws's connection
	shard *shard
	token string
	pid   string
	uid   string

	ctx     context.Context
	cancel  context.CancelFunc
	out     *outQueue
	watches []string // the system documents it watches (Server.open)
	// minRev is the connection's session revision (X-Min-Revision or
	// ?minRevision of the upgrade): every subscription's snapshot or
	// replay waits until the node has applied it.
	minRev uint64

	mu        sync.Mutex
	principal *auth.Principal
	subs      map[string]*sub

	closeOnce   sync.Once
	closing     chan struct{} // closed by kill
	closeCode   int
	closeReason string
	checking    atomic.Bool // a recheck runs
	again       atomic.Bool // and another was asked for meanwhile
	// access counts the changes of the project's rules and of the
	// caller's account the shard has routed: a subscription whose view was
	// decided at an older count holds its changes until it is judged again.
	access      atomic.Uint64
	expiry      *time.Timer
	pingTimer   *time.Timer // under mu
	pingStopped bool        // under mu
}

// sub is one subscription. view, seq, visible, live, after, pending and
// removed belong to the shard's goroutine; cur and curSeq to whoever holds
// syncMu; the rest is fixed at creation.
type sub struct {
	c      *conn
	id     string
	head   []byte // {"op":"change","id":"<id>" of its change messages
	path   string // full path, project first
	prefix bool
	ctx    context.Context
	cancel context.CancelFunc

	// syncMu is held while the subscription is set up or set up again
	// (access check, snapshot or replay): by startSub, then by refresh.
	syncMu     sync.Mutex
	cur        *view  // the view of the last setup
	curSeq     uint64 // the conn's access count it was decided at
	want       atomic.Bool
	refreshing atomic.Bool

	view    *view
	seq     uint64              // the conn's access count view was decided at
	visible map[string]struct{} // ReadByData: the documents the subscriber holds
	live    bool
	after   uint64 // once live: changes at or below it were in the snapshot or replay
	pending []pendingEv
	removed bool

	// q is a live query's state (nil for a path subscription): path and
	// prefix are then unused.
	q *querySub
}

// pendingEv is a change held for a subscription: judged when it is sent.
type pendingEv struct {
	ev  *raftstore.Event
	msg *changeMsg
}

// deliver runs in the shard: a live subscription whose view is current
// sends the change if its subscriber may read it; one still sending its
// snapshot or replay, or whose access is being judged again after a rules
// or account change, holds it.
func (s *sub) deliver(ev *raftstore.Event, m *changeMsg, d *decisions) {
	if s.removed || (s.live && ev.Revision <= s.after) {
		// The state a snapshot or replay read may be committed before its
		// batch reaches the shard: such changes were already sent.
		return
	}
	if !s.live || s.seq != s.c.access.Load() {
		if len(s.pending) >= s.c.srv.cfg.QueueSize {
			s.c.kill(closeSlowConsumer, "too many changes arrived while the subscription was syncing")
			return
		}
		s.pending = append(s.pending, pendingEv{ev: ev, msg: m})
		return
	}
	s.emit(ev, m, d)
}

func (s *sub) emit(ev *raftstore.Event, m *changeMsg, d *decisions) {
	if s.q != nil {
		s.queryEvent(ev, d)
		return
	}
	if b := s.render(ev, m, d); b != nil && s.c.enqueue(b) {
		s.c.srv.metrics.eventSent()
	}
}

// flush sends the held changes once the subscription is live under a
// current view (shard).
func (s *sub) flush() {
	if s.removed || !s.live || s.seq != s.c.access.Load() {
		return
	}
	for _, pe := range s.pending {
		if pe.ev.Revision > s.after {
			s.emit(pe.ev, pe.msg, nil)
		}
	}
	s.pending = nil
	if s.q != nil {
		s.queryFlush()
	}
}

// goLive makes the subscription live after a snapshot or replay complete
// up to rev, with the documents it showed (ReadByData), and sends what it
// held (shard).
func (s *sub) goLive(rev uint64, visible map[string]struct{}) {
	if s.removed {
		return
	}
	s.live, s.after, s.visible = true, rev, visible
	kept := s.pending[:0]
	for _, pe := range s.pending {
		if pe.ev.Revision > rev {
			kept = append(kept, pe)
		}
	}
	s.pending = kept
	s.flush()
}

// enqueue queues a message without blocking; a full queue means the client
// does not keep up, and it is cut off (it resumes with since).
func (c *conn) enqueue(msg []byte) bool {
	if !c.out.tryPush(msg) {
		c.kill(closeSlowConsumer, "slow consumer: the client did not read fast enough; resume with since")
		return false
	}
	return true
}

// send queues a message, waiting for room: for the subscriber's own snapshot
// and replay, which must not be dropped and may wait for the writer.
func (c *conn) send(ctx context.Context, msg []byte) error {
	return c.out.push(ctx, msg)
}

func (c *conn) sendError(id, code, msg string) {
	c.enqueue(encode(errorMsg{Op: "error", ID: id, Code: code, Message: msg}))
}

// kill ends the connection once with a close code. It stops the
// subscriptions at once; the writer then sends what is already queued (an
// error message explaining the close, typically), briefly, and performs the
// close handshake, which also ends the reader.
func (c *conn) kill(code int, reason string) {
	c.closeOnce.Do(func() {
		c.srv.metrics.dropped(code, c.srv.shutdown.Load())
		c.closeCode, c.closeReason = code, truncate(reason, 120)
		close(c.closing)
		c.cancel()
		c.out.close()
	})
}

func (c *conn) isClosing() bool {
	select {
	case <-c.closing:
		return true
	default:
		return false
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// writer drains the queue; when the connection is killed it flushes the
// queue and closes with the code. It runs only while there is something to
// do: the queue starts it when a message arrives at an idle connection (or
// the connection is killed), and it ends when the queue is empty, so an idle
// connection holds no writer goroutine and no stack.
func (c *conn) writer() {
	for {
		if c.isClosing() {
			c.flushAndClose()
			return
		}
		if err := c.drain(); err != nil {
			c.kill(closeSlowConsumer, "write timed out")
			_ = c.ws.CloseNow()
			return
		}
		if c.out.idle() {
			return
		}
	}
}

// schedulePing arms the next ping, unless the connection is over.
func (c *conn) schedulePing() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pingStopped {
		return
	}
	c.pingTimer = time.AfterFunc(c.srv.cfg.PingInterval, c.ping)
}

func (c *conn) stopPing() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pingStopped = true
	if c.pingTimer != nil {
		c.pingTimer.Stop()
	}
}

// ping detects a dead peer: no pong within PingTimeout ends the connection,
// unless the socket accepted data meanwhile. A peer reading slowly through
// megabytes of backlog sees the ping only after that backlog; it is alive,
// and the slow-consumer limit, not the ping, decides whether it keeps up.
func (c *conn) ping() {
	if c.isClosing() {
		return
	}
	sentBefore := c.cork.sent.Load()
	ctx, cancel := context.WithTimeout(context.Background(), c.srv.cfg.PingTimeout)
	err := c.ws.Ping(ctx)
	cancel()
	if err != nil {
		if c.isClosing() {
			return // the writer is closing the connection
		}
		if c.cork.sent.Load() > sentBefore {
			c.schedulePing() // the peer is reading: alive, if slow
			return
		}
		c.kill(int(websocket.StatusGoingAway), "ping timed out")
		_ = c.ws.CloseNow()
		return
	}
	c.schedulePing()
}

// drain writes every queued message as one batch: the frames are corked and
// sent with one write (several when they exceed corkBatchMax), which must
// complete within WriteTimeout. Corked frames never touch the socket, so
// they need no deadline of their own.
func (c *conn) drain() error {
	c.cork.cork()
	for {
		msg, ok := c.out.pop()
		if !ok {
			break
		}
		if err := c.ws.Write(context.Background(), websocket.MessageText, msg); err != nil {
			_ = c.cork.uncork(c.srv.cfg.WriteTimeout)
			return err
		}
		if c.isClosing() {
			break
		}
		if c.cork.buffered() >= corkBatchMax {
			if err := c.cork.uncork(c.srv.cfg.WriteTimeout); err != nil {
				return err
			}
			c.cork.cork()
		}
	}
	return c.cork.uncork(c.srv.cfg.WriteTimeout)
}

// flushBudget bounds how long a closing connection spends sending what was
// queued before its close frame.
const flushBudget = time.Second

func (c *conn) flushAndClose() {
	write := func(msg []byte, timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return c.ws.Write(ctx, websocket.MessageText, msg)
	}
	deadline := time.Now().Add(flushBudget)
	for {
		if c.closeCode == closeSlowConsumer {
			break // the peer is not reading: what is queued would not get through
		}
		msg, ok := c.out.pop()
		if !ok {
			break
		}
		left := time.Until(deadline)
		if left <= 0 || write(msg, left) != nil {
			_ = c.ws.CloseNow()
			return
		}
	}
	// Close sends the code and waits (bounded by the library) for the
	// peer's, reading through the connection's reader: the reader goroutine
	// must not look at it meanwhile (waitReadable).
	unlock := c.cork.lockRead()
	_ = c.ws.Close(websocket.StatusCode(c.closeCode), c.closeReason)
	unlock()
}

// readOne waits for the next client message and handles it; false when the
// connection ended. It waits in waitReadable, a shallow frame, and only
// then enters the library's deep Read (see Server.readConn).
func (c *conn) readOne() bool {
	if err := c.cork.waitReadable(); err != nil {
		c.kill(int(websocket.StatusNormalClosure), "")
		return false
	}
	// Not c.ctx: a kill must not tear the socket down under the close
	// handshake; the writer's Close ends this Read.
	typ, b, err := c.ws.Read(context.Background())
	if errors.Is(err, errControlOnly) {
		return true // a pong (or ping) was all the client sent: handled
	}
	if err != nil {
		c.kill(int(websocket.StatusNormalClosure), "")
		return false
	}
	return c.handle(typ, b)
}

// handle handles one client message and reports whether to read on.
func (c *conn) handle(typ websocket.MessageType, b []byte) bool {
	if typ != websocket.MessageText {
		c.kill(int(websocket.StatusPolicyViolation), "text JSON messages only")
		return false
	}
	var m clientMsg
	if err := json.Unmarshal(b, &m); err != nil {
		c.sendError("", "invalid_json", "a message is not a JSON object")
		c.kill(int(websocket.StatusPolicyViolation), "invalid JSON")
		return false
	}
	switch m.Op {
	case "subscribe":
		c.subscribe(m)
	case "unsubscribe":
		c.unsubscribe(m.ID, true)
	case "ping":
		c.enqueue([]byte(`{"op":"pong"}`))
	case "auth":
		c.sendError("", "invalid_argument", "already authenticated")
	default:
		c.sendError("", "unknown_op", fmt.Sprintf("unknown op %q", m.Op))
		c.kill(int(websocket.StatusPolicyViolation), "unknown op")
		return false
	}
	return true
}

const maxIDLen = 64

func (c *conn) subscribe(m clientMsg) {
	if m.ID == "" || len(m.ID) > maxIDLen {
		c.sendError(m.ID, "invalid_argument", "id must be 1..64 characters")
		return
	}
	var q *querySub
	if len(m.Query) > 0 {
		var qe *queryRefusal
		if q, qe = c.parseQuerySub(m); qe != nil {
			c.enqueue(encode(errorMsg{Op: "error", ID: m.ID, Code: qe.code, Message: qe.msg, Field: qe.field}))
			return
		}
	} else if err := raftstore.ValidatePath(m.Collection); err != nil {
		c.sendError(m.ID, "invalid_path", err.Error())
		return
	}
	minRev, err := parseMinRevision(m.MinRevision)
	if err != nil {
		c.enqueue(encode(errorMsg{Op: "error", ID: m.ID, Code: "invalid_argument", Message: err.Error(), Field: "minRevision"}))
		return
	}
	minRev = max(minRev, c.minRev)
	if m.Since != nil {
		// The subscriber holds everything up to since (from this or
		// another node): a replay or a snapshot from a node behind it
		// would take it back in time.
		minRev = max(minRev, *m.Since)
	}
	c.mu.Lock()
	if _, dup := c.subs[m.ID]; dup {
		c.mu.Unlock()
		c.sendError(m.ID, "duplicate_id", "a subscription with this id is open")
		return
	}
	if len(c.subs) >= c.srv.cfg.MaxSubscriptions {
		c.mu.Unlock()
		c.sendError(m.ID, "subscription_limit", fmt.Sprintf("at most %d subscriptions per connection", c.srv.cfg.MaxSubscriptions))
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	s := &sub{c: c, id: m.ID, head: changeHead(m.ID), path: keys.Doc(c.pid, m.Collection), prefix: m.Prefix, ctx: ctx, cancel: cancel, q: q}
	c.subs[m.ID] = s
	c.srv.subscriptions.Add(1)
	// Locked before the worker starts: a refresh asked for meanwhile waits
	// for the setup.
	s.syncMu.Lock()
	c.mu.Unlock()
	if q != nil {
		go c.startQuerySub(s, m.Since, minRev)
		return
	}
	go c.startSub(s, m.Collection, m.Since, minRev)
}

// awaitRevision waits, bounded by ReadTimeout, until the node has applied
// minRev; false when it did not (the subscription is then refused with
// unavailable) or the subscription ended meanwhile. It runs before the
// subscription is registered with its shard, so no changes pile up for
// it while it waits.
func (c *conn) awaitRevision(s *sub, minRev uint64) bool {
	if minRev == 0 || c.srv.store.AppliedIndex() >= minRev {
		return true
	}
	ctx, cancel := context.WithTimeout(s.ctx, c.srv.cfg.ReadTimeout)
	defer cancel()
	err := c.srv.store.WaitApplied(ctx, minRev)
	if s.ctx.Err() != nil {
		return false
	}
	if err != nil || c.srv.store.AppliedIndex() < minRev {
		c.srv.logger.Debug("realtime subscription: minRevision not reached", "min_revision", minRev,
			"applied", c.srv.store.AppliedIndex(), "err", err)
		c.dropSub(s, "unavailable", fmt.Sprintf("this node has not reached revision %d in time; retry, or use another node", minRev))
		return false
	}
	return true
}

// startSub checks access, registers the subscription (holding its changes),
// sends the snapshot or the replay, then lets the held changes through.
func (c *conn) startSub(s *sub, collection string, since *uint64, minRev uint64) {
	defer s.syncMu.Unlock()
	if !c.awaitRevision(s, minRev) {
		return
	}
	seq := c.access.Load()
	p := c.currentPrincipal()
	rules, err := c.srv.rules(p)
	if s.ctx.Err() != nil {
		return // unsubscribed (or the connection ended) meanwhile
	}
	if err != nil || !allowPath(rules, p, collection) {
		c.dropSub(s, "forbidden", "the access rules do not allow reading "+collection)
		return
	}
	v := newView(rules, p, s)
	s.cur, s.curSeq = v, seq
	if err := c.shard.do(s.ctx, func() { s.view, s.seq = v, seq; c.shard.addSub(s) }); err != nil {
		return
	}
	rev, visible, err := c.catchUp(s, v, since)
	if err != nil {
		c.syncFailed(s, err)
		return
	}
	_ = c.shard.do(s.ctx, func() { s.goLive(rev, visible) })
}

func (c *conn) syncFailed(s *sub, err error) {
	if s.ctx.Err() == nil {
		c.srv.logger.Warn("realtime subscribe failed", "err", err)
		c.dropSub(s, "unavailable", "the subscription could not be started; retry")
	}
}

func (c *conn) currentPrincipal() *auth.Principal {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.principal
}

// replayPage is how many changes one change log read returns.
const replayPage = 512

// catchUp sends what the subscriber is missing, judged by v, and returns
// the revision it is complete up to and (ReadByData) the documents it now
// holds: the replay of the change log after since, or a reset and a
// snapshot when the log no longer reaches back to since or a replay cannot
// tell what the subscriber holds (ReadByData; a change of the rules or of
// the caller's account after since), or without since a snapshot.
func (c *conn) catchUp(s *sub, v *view, since *uint64) (uint64, map[string]struct{}, error) {
	if since == nil {
		return c.snapshot(s, v)
	}
	if v.scope == auth.ReadByData {
		return c.resetAndSnapshot(s, v, c.srv.store.AppliedIndex())
	}
	rulesKey, userKey := keys.Rules(c.pid), keys.User(c.pid, c.uid)
	cur := *since
	for {
		evs, upTo, err := c.srv.store.ChangesSince(cur, replayPage)
		if errors.Is(err, raftstore.ErrCompacted) {
			return c.resetAndSnapshot(s, v, upTo)
		}
		if err != nil {
			return 0, nil, err
		}
		for i := range evs {
			ev := &evs[i]
			if ev.Path == rulesKey || ev.Path == userKey {
				// What the subscriber may read changed after since: a
				// replay under today's rules would not correct what it
				// holds.
				return c.resetAndSnapshot(s, v, ev.Revision)
			}
			if s.matches(ev.Path) && v.allows(userPath(ev.Path), eventData(ev)) {
				if err := c.send(s.ctx, newChangeMsg(ev).forSub(s.head)); err != nil {
					return 0, nil, err
				}
				c.srv.metrics.eventSent()
			}
		}
		if upTo > cur {
			cur = upTo
		}
		if len(evs) < replayPage {
			break
		}
	}
	return cur, nil, c.send(s.ctx, encode(revMsg{Op: "resumed", ID: s.id, Revision: cur}))
}

func (c *conn) resetAndSnapshot(s *sub, v *view, rev uint64) (uint64, map[string]struct{}, error) {
	if err := c.send(s.ctx, encode(revMsg{Op: "reset", ID: s.id, Revision: rev})); err != nil {
		return 0, nil, err
	}
	return c.snapshot(s, v)
}

// snapshotPage is how many documents one snapshot message carries.
const snapshotPage = 256

// snapshot sends the documents v allows, in pages of at most snapshotPage,
// and returns their revision and (ReadByData) their paths.
func (c *conn) snapshot(s *sub, v *view) (uint64, map[string]struct{}, error) {
	var visible map[string]struct{}
	if v.scope == auth.ReadByData {
		visible = map[string]struct{}{}
	}
	var held *snapshotMsg
	rev, err := c.srv.store.SnapshotRead(s.path, s.prefix, snapshotPage, func(rev uint64, docs []*raftstore.Document) error {
		out := make([]docOut, 0, len(docs))
		for _, d := range docs {
			if v.allows(userPath(d.Path), d.Data) {
				out = append(out, toDocOut(d))
				if visible != nil {
					visible[d.Path] = struct{}{}
				}
			}
		}
		if len(out) == 0 {
			return nil
		}
		if held != nil {
			held.More = true
			if err := c.send(s.ctx, encode(held)); err != nil {
				return err
			}
		}
		held = &snapshotMsg{Op: "snapshot", ID: s.id, Revision: rev, Documents: out}
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	if held == nil {
		held = &snapshotMsg{Op: "snapshot", ID: s.id, Revision: rev, Documents: []docOut{}}
	}
	return rev, visible, c.send(s.ctx, encode(held))
}

func (s *sub) matches(full string) bool {
	if full == s.path {
		return true
	}
	return s.prefix && len(full) > len(s.path) && full[len(s.path)] == '/' && full[:len(s.path)] == s.path
}

// dropSub ends a subscription with an error message naming it, unless it
// has already ended (a same-id successor is left alone).
func (c *conn) dropSub(s *sub, code, msg string) {
	c.mu.Lock()
	current := c.subs[s.id] == s
	if current {
		delete(c.subs, s.id)
		c.srv.subscriptions.Add(-1)
	}
	c.mu.Unlock()
	if !current {
		return
	}
	c.sendError(s.id, code, msg)
	c.endSub(s)
}

func (c *conn) unsubscribe(id string, confirm bool) {
	c.mu.Lock()
	s := c.subs[id]
	if s != nil {
		delete(c.subs, id)
		c.srv.subscriptions.Add(-1)
	}
	c.mu.Unlock()
	if s == nil {
		if confirm {
			c.sendError(id, "not_found", "no subscription with this id")
		}
		return
	}
	c.endSub(s)
	if confirm {
		c.enqueue(encode(revMsg{Op: "unsubscribed", ID: id}))
	}
}

// endSub stops a subscription and forgets it in the shard.
func (c *conn) endSub(s *sub) {
	s.cancel()
	_ = c.shard.do(context.Background(), func() { c.shard.removeSub(s) })
}

// recheck judges the connection's access again after a change to its
// session, its account or its project's rules (or at session expiry): a
// session that ended closes the connection; each subscription is judged
// again (refresh).
func (c *conn) recheck() {
	rerun(&c.again, &c.checking, c.recheckOnce)
}

// rerun runs fn in a goroutine until no run was asked for since the last
// one began; at most one runs at a time.
func rerun(again, running *atomic.Bool, fn func()) {
	again.Store(true)
	if !running.CompareAndSwap(false, true) {
		return
	}
	go func() {
		for {
			for again.Swap(false) {
				fn()
			}
			running.Store(false)
			// Asked for after the last Swap but before the Store: the
			// asker saw running and left it to us.
			if !again.Load() || !running.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}

func (c *conn) recheckOnce() {
	if c.ctx.Err() != nil {
		return
	}
	p, err := c.srv.accounts.Authenticate(c.token)
	if err != nil || p.ProjectID != c.pid {
		c.sendError("", "session_ended", "the session ended (logout, password change or expiry)")
		c.kill(closeUnauthenticated, "session ended")
		return
	}
	c.mu.Lock()
	c.principal = p
	subs := make([]*sub, 0, len(c.subs))
	for _, s := range c.subs {
		subs = append(subs, s)
	}
	c.mu.Unlock()
	for _, s := range subs {
		rerun(&s.want, &s.refreshing, func() { c.refresh(s) })
	}
}

// refresh judges a subscription again under the current rules and caller:
// one the rules no longer allow is ended with an error; one whose view
// changed in a way that may change which documents its subscriber may read
// starts over with a reset and a snapshot under the new view (the changes
// that arrive meanwhile are held, and judged by the new view); otherwise
// it takes the new view and lets its held changes through.
func (c *conn) refresh(s *sub) {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if s.ctx.Err() != nil || s.cur == nil {
		return // ended, or its setup failed
	}
	if s.q != nil {
		c.refreshQuery(s)
		return
	}
	seq := c.access.Load()
	p := c.currentPrincipal()
	rules, err := c.srv.rules(p)
	if err != nil || !allowPath(rules, p, userPath(s.path)) {
		c.dropSub(s, "forbidden", "the access rules no longer allow reading "+userPath(s.path))
		return
	}
	v := newView(rules, p, s)
	if seq == s.curSeq && v.same(s.cur) {
		return
	}
	old := s.cur
	s.cur, s.curSeq = v, seq
	if v.same(old) || (old.scope == auth.ReadAll && v.scope == auth.ReadAll) {
		_ = c.shard.do(s.ctx, func() { s.view, s.seq = v, seq; s.flush() })
		return
	}
	// The held changes are all at or below the snapshot's revision.
	if err := c.shard.do(s.ctx, func() {
		s.view, s.seq, s.live, s.pending, s.visible = v, seq, false, nil, nil
	}); err != nil {
		return
	}
	rev, visible, err := c.resetAndSnapshot(s, v, c.srv.store.AppliedIndex())
	if err != nil {
		c.syncFailed(s, err)
		return
	}
	_ = c.shard.do(s.ctx, func() { s.goLive(rev, visible) })
}

// close releases the connection's registrations in its shard.
func (c *conn) release(watches []string) {
	if c.expiry != nil {
		c.expiry.Stop()
	}
	c.stopPing()
	c.mu.Lock()
	subs := c.subs
	c.subs = map[string]*sub{}
	c.srv.subscriptions.Add(-int64(len(subs)))
	c.mu.Unlock()
	// The connection's context is over: register the removal with a
	// background context so the shard still forgets it.
	_ = c.shard.do(context.Background(), func() {
		for _, s := range subs {
			c.shard.removeSub(s)
		}
		for _, w := range watches {
			remove(c.shard.watch, w, c)
		}
	})
}

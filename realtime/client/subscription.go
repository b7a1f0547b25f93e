package client

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
)

// Subscription is one live subscription. Its Events continue across
// reconnects: after a dropped connection the client subscribes again with
// since = the last revision it delivered (one less while that revision's
// transaction may be incomplete, see Revision), and drops any change it has
// already delivered, so Events carries every change once, in order.
type Subscription struct {
	c          *Conn
	seq        uint64
	id         string
	collection string
	prefix     bool
	since      *uint64 // the Since option

	events chan Event
	ready  chan struct{} // closed when the initial state arrived
	done   chan struct{} // closed when the subscription ended

	// deliverMu serialises sends on events with closing it.
	deliverMu sync.Mutex

	mu       sync.Mutex
	finished bool
	// endedByServer: the server ended it with an error (it holds nothing
	// to unsubscribe from).
	endedByServer bool
	err           error
	gen           uint64 // session the subscribe was last sent on
	started       bool   // the initial state arrived
	docs          []Document
	pending       []Document // snapshot pages so far
	reset         bool       // a reset arrived: the next full snapshot is an event
	early         []Event    // events before the initial state arrived
	// rev is the last revision delivered. open says it came from a change,
	// so more changes of the same revision (transaction) may follow; seen
	// holds the collections of the changes delivered at rev then.
	rev  uint64
	open bool
	seen map[string]struct{}

	// A live query's window (query non-nil): win as the server describes
	// it, base as it was at baseRev, the last revision known complete (the
	// resume point), shown as the application last saw it while a resume
	// replays (resuming).
	query    json.RawMessage
	win      []Document
	base     []Document
	baseRev  uint64
	shown    []Document
	resuming bool
}

// ID is the subscription id on the wire.
func (s *Subscription) ID() string { return s.id }

// Collection is the subscribed path.
func (s *Subscription) Collection() string { return s.collection }

// Events delivers changes, and after reconnects KindResumed, or KindReset
// followed by KindSnapshot. It is closed when the subscription ends; Err
// then says why. Events that do not fit its buffer hold up the whole
// connection: read it promptly.
func (s *Subscription) Events() <-chan Event { return s.events }

// Documents is the latest full snapshot: the initial one, or the one after
// a reset. Empty for a subscription resumed with Since and never reset.
func (s *Subscription) Documents() []Document {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.docs
}

// Revision is the last revision seen: of the snapshot, the resumed answer,
// or the last change delivered. A reconnect resumes from it, or from
// Revision()-1 when it came from a change (its transaction may have been
// cut by the drop; the replayed part already delivered is dropped).
func (s *Subscription) Revision() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

// Err is why Events was closed: ErrUnsubscribed, ErrClosed, a *Error from
// the server (e.g. forbidden), or the connection's end. Nil while open.
func (s *Subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Unsubscribe ends the subscription (Events is closed at once; events
// already buffered stay readable) and waits for the server to confirm,
// within ctx.
func (s *Subscription) Unsubscribe(ctx context.Context) error {
	sess, sent := s.end(ErrUnsubscribed)
	if !sent {
		return nil
	}
	ack := sess.expectAck(s.id)
	defer sess.dropAck(s.id, ack)
	if err := sess.send(ctx, idMsg{Op: opUnsubscribe, ID: s.id}); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("realtime: unsubscribe %s: %w", s.collection, err)
		}
		return nil // the connection is gone, and the subscription with it
	}
	select {
	case <-ack:
		return nil
	case <-sess.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("realtime: unsubscribe %s: %w", s.collection, ctx.Err())
	}
}

// end finishes the subscription with err and returns the session the
// server holds it on, if any.
func (s *Subscription) end(err error) (sess *session, sent bool) {
	sess = s.c.current()
	s.mu.Lock()
	sent = sess != nil && s.gen == sess.gen && !s.finished
	s.mu.Unlock()
	if !s.finish(err) {
		return nil, false
	}
	return sess, sent
}

// abandon ends a subscription whose Subscribe gave up, and tells the server
// without waiting.
func (s *Subscription) abandon(err error) {
	sess, sent := s.end(err)
	if sent {
		go func() { _ = sess.send(sess.ctx, idMsg{Op: opUnsubscribe, ID: s.id}) }()
	}
}

// finish ends the subscription once: Events is closed and it leaves the
// Conn. It reports whether this call ended it.
func (s *Subscription) finish(err error) bool {
	s.mu.Lock()
	if s.finished {
		s.mu.Unlock()
		return false
	}
	s.finished = true
	s.err = err
	s.early, s.pending = nil, nil
	s.mu.Unlock()
	close(s.done) // unblocks a read loop waiting in deliver
	s.deliverMu.Lock()
	close(s.events)
	s.deliverMu.Unlock()
	s.c.remove(s)
	return true
}

// sendSubscribe sends the subscribe message on sess, once per session: from
// Subscribe, or from the reconnect, whichever comes first.
func (s *Subscription) sendSubscribe(ctx context.Context, sess *session) error {
	s.mu.Lock()
	if s.finished || s.gen == sess.gen {
		s.mu.Unlock()
		return nil
	}
	s.gen = sess.gen
	s.pending = nil
	msg := subscribeMsg{Op: opSubscribe, ID: s.id, Collection: s.collection, Prefix: s.prefix, Since: s.resumeFrom()}
	if s.query != nil {
		msg = subscribeMsg{Op: opSubscribe, ID: s.id, Query: s.query, Since: s.queryResumeFrom()}
	}
	msg.MinRevision = s.c.cfg.Session.Revision()
	s.mu.Unlock()
	if err := sess.send(ctx, msg); err != nil {
		return err
	}
	s.mu.Lock()
	unsubscribe := s.finished && !s.endedByServer
	s.mu.Unlock()
	if unsubscribe {
		// Unsubscribed meanwhile, maybe before this subscribe was queued.
		// (Not when the server's own answer ended it: it holds nothing.)
		return sess.send(ctx, idMsg{Op: opUnsubscribe, ID: s.id})
	}
	return nil
}

// resumeFrom is the since of the next subscribe. s.mu must be held.
func (s *Subscription) resumeFrom() *uint64 {
	if !s.started && s.since == nil {
		return nil // never got a state: take the snapshot again
	}
	r := s.rev
	if s.open && r > 0 {
		// The changes of revision r may be incomplete: ask for them again;
		// those already delivered are dropped by accept.
		r--
	}
	return &r
}

// boundary records a revision the server declared complete (snapshot,
// resumed): no change at or below it is delivered any more.
func (s *Subscription) boundary(rev uint64) {
	s.rev, s.open = rev, false
	clear(s.seen)
}

// accept decides whether a change is new: revision above the last one, or
// the same revision as the last change and a document not yet delivered at
// it. s.mu must be held.
func (s *Subscription) accept(rev uint64, collection string) bool {
	switch {
	case rev > s.rev:
		s.rev, s.open = rev, true
		if s.seen == nil {
			s.seen = make(map[string]struct{})
		}
		clear(s.seen)
		s.seen[collection] = struct{}{}
		return true
	case rev == s.rev && s.open:
		if _, dup := s.seen[collection]; dup {
			return false
		}
		s.seen[collection] = struct{}{}
		return true
	}
	return false
}

// handle applies one server message for this subscription (read loop).
func (s *Subscription) handle(sess *session, f *frame) {
	s.mu.Lock()
	if s.finished || s.gen != sess.gen {
		s.mu.Unlock()
		return
	}
	if s.query != nil {
		s.handleQuery(sess, f)
		return
	}
	var evs []Event
	ready := false
	switch f.Op {
	case opSnapshot:
		s.pending = append(s.pending, f.Documents...)
		if f.More {
			break
		}
		docs := s.pending
		if docs == nil {
			docs = []Document{}
		}
		s.pending = nil
		s.docs = docs
		s.boundary(f.Revision)
		if s.reset || s.started {
			evs = append(evs, Event{Kind: KindSnapshot, Revision: f.Revision, Documents: docs})
		}
		s.reset = false
		ready = !s.started
	case opReset:
		s.pending = nil
		s.reset = true
		evs = append(evs, Event{Kind: KindReset, Revision: f.Revision})
	case opResumed:
		if f.Revision >= s.rev {
			s.boundary(f.Revision)
		}
		if s.started {
			evs = append(evs, Event{Kind: KindResumed, Revision: f.Revision})
		} else {
			ready = true
		}
	case opChange:
		if !s.accept(f.Revision, f.Collection) {
			s.c.log.Debug("realtime duplicate change dropped", "id", s.id, "revision", f.Revision, "collection", f.Collection)
			break
		}
		evs = append(evs, Event{
			Kind:       KindChange,
			Revision:   f.Revision,
			Collection: f.Collection,
			Type:       f.Type,
			Data:       nullToNil(f.Data),
			UpdateTime: f.UpdateTime,
		})
	case opError:
		s.endedByServer = true
		s.mu.Unlock()
		s.finish(&Error{Code: f.Code, Message: f.Message})
		return
	default:
		s.mu.Unlock()
		return
	}
	s.release(sess, evs, ready)
}

// release hands a message's events on, with s.mu held (it unlocks it):
// before Subscribe has returned they are held back (bounded by what the
// server replays, so a replay longer than the buffer cannot deadlock it),
// and the message that makes the subscription ready delivers them first.
func (s *Subscription) release(sess *session, evs []Event, ready bool) {
	if !s.started && !ready {
		s.early = append(s.early, evs...)
		s.mu.Unlock()
		return
	}
	if ready {
		s.started = true
		evs = append(s.early, evs...)
		s.early = nil
	}
	s.mu.Unlock()
	if ready {
		close(s.ready)
	}
	s.deliver(sess, evs)
}

// deliver hands events to the application, waiting while Events is full:
// the read loop then stops reading the socket, which is the backpressure.
func (s *Subscription) deliver(sess *session, evs []Event) {
	if len(evs) == 0 {
		return
	}
	s.deliverMu.Lock()
	defer s.deliverMu.Unlock()
	for _, ev := range evs {
		select {
		case <-s.done:
			return
		case s.events <- ev:
			continue
		default:
		}
		sess.waitApp(true)
		select {
		case s.events <- ev:
		case <-s.done:
		}
		sess.waitApp(false)
	}
}

package client

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/edgebase/edgebase/query"
)

// SubscribeQuery subscribes to a live query: q is the body of POST
// /api/db/query (collection, collectionGroup, where, orderBy, limit,
// select; not count nor startAfter). It returns once the first window
// arrived (Window, and Documents). Events then carries the window's
// changes in order: Type TypeAdded, TypeModified or TypeRemoved with the
// document's Index in the window, as the server sends them.
//
// After a dropped connection the subscription resumes from the last
// revision its window was complete at: the server replays what changed in
// the window since then, or answers reset and a snapshot (KindReset, then
// KindSnapshot with the whole window). The replay is applied to the window
// and Events carries, before KindResumed, the changes that turn the window
// the application last saw into the current one, so an application that
// applies the events to its own copy stays equal to Window.
func (c *Conn) SubscribeQuery(ctx context.Context, q query.Query, opts ...SubOption) (*Subscription, error) {
	var o subOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.since != nil {
		return nil, fmt.Errorf("realtime: subscribe query %s: Since is not supported for queries (the window is not known)", q.Collection)
	}
	body, err := json.Marshal(q)
	if err != nil {
		return nil, fmt.Errorf("realtime: subscribe query %s: %w", q.Collection, err)
	}
	seq := c.nextID.Add(1)
	sub := &Subscription{
		c:          c,
		seq:        seq,
		id:         "q" + strconv.FormatUint(seq, 10),
		collection: q.Collection,
		query:      body,
		events:     make(chan Event, c.cfg.EventBuffer),
		ready:      make(chan struct{}),
		done:       make(chan struct{}),
	}
	c.mu.Lock()
	if c.closing || c.err != nil {
		err := cmp.Or(c.err, ErrClosed)
		c.mu.Unlock()
		return nil, fmt.Errorf("realtime: subscribe query %s: %w", q.Collection, err)
	}
	c.subs[sub.id] = sub
	s := c.sess
	c.mu.Unlock()
	if s != nil {
		_ = sub.sendSubscribe(ctx, s)
	}
	select {
	case <-sub.ready:
		return sub, nil
	case <-sub.done:
		select {
		case <-sub.ready:
			return sub, nil
		default:
		}
		return nil, fmt.Errorf("realtime: subscribe query %s: %w", q.Collection, sub.Err())
	case <-ctx.Done():
		sub.abandon(ctx.Err())
		return nil, fmt.Errorf("realtime: subscribe query %s: %w", q.Collection, ctx.Err())
	}
}

// Window is a live query's current window, in query order (nil for a path
// subscription).
func (s *Subscription) Window() []Document {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resuming {
		return slices.Clone(s.shown)
	}
	return slices.Clone(s.win)
}

// queryResumeFrom is the since of a live query's next subscribe, and
// prepares the window for the replay. s.mu must be held.
func (s *Subscription) queryResumeFrom() *uint64 {
	if !s.started {
		return nil
	}
	if !s.resuming {
		s.shown = s.win
	}
	s.resuming = true
	s.win = slices.Clone(s.base)
	s.rev = s.baseRev
	r := s.baseRev
	return &r
}

// queryBoundary records that the window is complete at rev.
func (s *Subscription) queryBoundary(rev uint64) {
	s.rev, s.baseRev = rev, rev
	s.base = slices.Clone(s.win)
}

// handleQuery applies one server message to a live query (read loop; s.mu
// held, released here).
func (s *Subscription) handleQuery(sess *session, f *frame) {
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
		s.win = slices.Clone(docs)
		s.resuming, s.shown = false, nil
		s.queryBoundary(f.Revision)
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
		if s.resuming {
			evs = windowDiff(s.shown, s.win, f.Revision)
			s.resuming, s.shown = false, nil
		}
		s.queryBoundary(f.Revision)
		evs = append(evs, Event{Kind: KindResumed, Revision: f.Revision})
	case opChange:
		if f.Revision < s.rev {
			s.c.log.Warn("realtime live query change out of order", "id", s.id, "revision", f.Revision, "after", s.rev)
			break
		}
		s.rev = f.Revision
		ev, ok := applyWindow(&s.win, f)
		if f.Checkpoint {
			// The window is now exactly the query's at this revision.
			s.base, s.baseRev = slices.Clone(s.win), f.Revision
		}
		if !ok {
			s.c.log.Warn("realtime live query change does not fit the window", "id", s.id, "type", f.Type, "collection", f.Collection)
		}
		if ok && !s.resuming {
			evs = append(evs, ev)
		}
	case opError:
		s.endedByServer = true
		s.mu.Unlock()
		s.finish(&Error{Code: f.Code, Message: f.Message, Field: f.Field})
		return
	default:
		s.mu.Unlock()
		return
	}
	s.release(sess, evs, ready)
}

// applyWindow applies one change message to a window.
func applyWindow(win *[]Document, f *frame) (Event, bool) {
	w := *win
	at := slices.IndexFunc(w, func(d Document) bool { return d.Collection == f.Collection })
	ev := Event{Kind: KindChange, Revision: f.Revision, Collection: f.Collection, Type: f.Type, UpdateTime: f.UpdateTime}
	if f.Index == nil {
		return ev, false
	}
	ev.Index = *f.Index
	if at >= 0 {
		w = slices.Delete(w, at, at+1)
	}
	switch f.Type {
	case TypeRemoved:
	case TypeAdded, TypeModified:
		i := min(max(*f.Index, 0), len(w))
		d := Document{Collection: f.Collection, Data: nullToNil(f.Data), Revision: f.Revision, CreateTime: f.CreateTime, UpdateTime: f.UpdateTime}
		w = slices.Insert(w, i, d)
		ev.Data = d.Data
	default:
		return ev, false
	}
	*win = w
	return ev, true
}

// windowDiff is the changes that turn the window from into to, in the
// server's message semantics (see docs/api.md): removals first, then
// insertions and moves in ascending position.
func windowDiff(from, to []Document, rev uint64) []Event {
	inTo := make(map[string]int, len(to))
	for i, d := range to {
		inTo[d.Collection] = i
	}
	var evs []Event
	for i := len(from) - 1; i >= 0; i-- {
		if _, ok := inTo[from[i].Collection]; !ok {
			evs = append(evs, Event{Kind: KindChange, Revision: rev, Collection: from[i].Collection, Type: TypeRemoved, Index: i})
		}
	}
	work := slices.DeleteFunc(slices.Clone(from), func(d Document) bool { _, ok := inTo[d.Collection]; return !ok })
	change := func(typ string, d Document, i int) {
		evs = append(evs, Event{Kind: KindChange, Revision: rev, Collection: d.Collection, Type: typ, Data: d.Data, UpdateTime: d.UpdateTime, Index: i})
	}
	same := func(a, b Document) bool { return a.UpdateTime == b.UpdateTime && bytes.Equal(a.Data, b.Data) }
	for i, d := range to {
		if i < len(work) && work[i].Collection == d.Collection {
			if !same(work[i], d) {
				change(TypeModified, d, i)
			}
			work[i] = d
			continue
		}
		j := slices.IndexFunc(work[min(i, len(work)):], func(x Document) bool { return x.Collection == d.Collection })
		if j < 0 {
			change(TypeAdded, d, i)
		} else {
			work = slices.Delete(work, i+j, i+j+1)
			change(TypeModified, d, i)
		}
		work = slices.Insert(work, i, d)
	}
	return evs
}

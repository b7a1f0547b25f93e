package realtime

import (
	"context"
	"errors"
	"strings"

	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
)

// hub fans the store's change feed out to subscriptions. One dispatcher reads
// the feed and hands every batch to each shard in order; a shard owns the
// subscriptions of its connections and matches events against them in its
// own goroutine, so no lock is shared across shards. Registrations travel
// through the same channel as batches, which orders them exactly against
// the stream: that is what makes snapshot + live changes gap-free.
type hub struct {
	srv    *Server
	store  Store
	shards []*shard
}

// shardMsg is a batch to route or a function to run in the shard.
type shardMsg struct {
	batch *raftstore.Batch
	fn    func()
}

type shard struct {
	in     chan shardMsg
	exact  map[string]map[*sub]struct{} // full path → one-document subscriptions
	prefix map[string]map[*sub]struct{} // full path → prefix subscriptions
	watch  map[string]map[*conn]struct{}
	// queries are the live queries by queryRouteKey: the full path of a
	// collection, or a collection group's project and name.
	queries map[string]map[*sub]struct{}
	groups  int       // live collection-group queries among them
	dirty   []*sub    // live queries changed by the revision being routed
	dec     decisions // of the change being routed
}

// feedBuffer batches may queue between Apply and the dispatcher before the
// feed drops the hub (then every connection is told to resume).
const feedBuffer = 4096

func newHub(srv *Server, store Store, shards int) *hub {
	h := &hub{srv: srv, store: store}
	for i := 0; i < shards; i++ {
		h.shards = append(h.shards, &shard{
			in:      make(chan shardMsg, 256),
			exact:   map[string]map[*sub]struct{}{},
			prefix:  map[string]map[*sub]struct{}{},
			watch:   map[string]map[*conn]struct{}{},
			queries: map[string]map[*sub]struct{}{},
		})
	}
	return h
}

// run dispatches until ctx ends. The feed subscription is taken before run
// returns to its caller's goroutine, so nothing committed after New is missed.
func (h *hub) run(ctx context.Context, sub *raftstore.Subscription) {
	for _, sh := range h.shards {
		go sh.loop(ctx)
	}
	for {
		select {
		case <-ctx.Done():
			sub.Close()
			return
		case b, ok := <-sub.C():
			if !ok {
				// The feed dropped us (we fell behind Apply): every
				// connection may have missed changes. Take a new
				// subscription first, then tell all to resume.
				err := sub.Err()
				if ctx.Err() != nil || errors.Is(err, raftstore.ErrClosed) {
					return
				}
				sub = h.store.Feed().Subscribe(feedBuffer)
				h.srv.logger.Warn("realtime hub fell behind the change feed; connections must resume", "err", err)
				h.dropAll(closeLagged, "the node's change stream restarted; resume with since")
				continue
			}
			if b.Reset {
				h.dropAll(closeLagged, "the node restored a snapshot; resume with since")
				continue
			}
			bb := b
			for _, sh := range h.shards {
				select {
				case sh.in <- shardMsg{batch: &bb}:
				case <-ctx.Done():
					return
				}
			}
		}
	}
}

// dropAll closes every connection (they resume with since).
func (h *hub) dropAll(code int, reason string) {
	for _, c := range h.srv.connections() {
		c.kill(code, reason)
	}
}

// do runs fn in the shard's goroutine, in order with the batches.
func (sh *shard) do(ctx context.Context, fn func()) error {
	select {
	case sh.in <- shardMsg{fn: fn}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (sh *shard) loop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-sh.in:
			if m.fn != nil {
				m.fn()
				continue
			}
			sh.route(m.batch)
		}
	}
}

func add[K comparable, V comparable](m map[K]map[V]struct{}, k K, v V) {
	s := m[k]
	if s == nil {
		s = map[V]struct{}{}
		m[k] = s
	}
	s[v] = struct{}{}
}

func remove[K comparable, V comparable](m map[K]map[V]struct{}, k K, v V) {
	if s := m[k]; s != nil {
		delete(s, v)
		if len(s) == 0 {
			delete(m, k)
		}
	}
}

func (sh *shard) addSub(s *sub) {
	if s.removed || s.ctx.Err() != nil {
		// Ended before its registration ran: removeSub may already have run.
		s.removed = true
		return
	}
	if s.q != nil {
		add(sh.queries, s.q.route, s)
		if s.q.group {
			sh.groups++
		}
		return
	}
	if s.prefix {
		add(sh.prefix, s.path, s)
	} else {
		add(sh.exact, s.path, s)
	}
}

func (sh *shard) removeSub(s *sub) {
	if s.q != nil {
		if !s.removed {
			if _, ok := sh.queries[s.q.route][s]; ok && s.q.group {
				sh.groups--
			}
			remove(sh.queries, s.q.route, s)
		}
		s.removed = true
		return
	}
	s.removed = true
	if s.prefix {
		remove(sh.prefix, s.path, s)
	} else {
		remove(sh.exact, s.path, s)
	}
}

// route matches one batch against the shard's subscriptions and watches.
func (sh *shard) route(b *raftstore.Batch) {
	for i := range b.Events {
		ev := &b.Events[i]
		if len(sh.dirty) > 0 && i > 0 && ev.Revision != b.Events[i-1].Revision {
			sh.flushQueries()
		}
		p := ev.Path
		if len(sh.watch) > 0 {
			sh.routeWatch(ev)
		}
		var msg *changeMsg
		deliver := func(set map[*sub]struct{}) {
			for s := range set {
				if msg == nil {
					msg = newChangeMsg(ev)
					sh.dec.reset(ev)
				}
				s.deliver(ev, msg, &sh.dec)
			}
		}
		deliver(sh.exact[p])
		if len(sh.queries) > 0 {
			sh.routeQueries(ev)
		}
		if len(sh.prefix) == 0 {
			continue
		}
		deliver(sh.prefix[p])
		for j := len(p) - 1; j > 0; j-- {
			if p[j] == '/' {
				deliver(sh.prefix[p[:j]])
			}
		}
	}
	if len(sh.dirty) > 0 {
		sh.flushQueries()
	}
	sh.dec.reset(nil) // keeps no batch alive
}

func (sh *shard) routeWatch(ev *raftstore.Event) {
	if set := sh.watch[ev.Path]; len(set) > 0 {
		// A change of the rules or of the account (not of a session) may
		// change what each subscription may read: from here on they hold
		// their changes until they are judged again.
		access := !strings.HasPrefix(ev.Path, keys.Under(keys.SessionsDir()))
		for c := range set {
			if access {
				c.access.Add(1)
			}
			c.recheck()
		}
	}
	// A notification committed to a watched inbox (keys.Inbox): every node
	// delivers it to the user's connections as {"op":"notification", ...the
	// document's fields}.
	if ev.Type != raftstore.EventSet {
		return
	}
	if pid, uid, nid, ok := keys.ParseInbox(ev.Path); ok {
		if set := sh.watch[keys.InboxDir(pid, uid)]; len(set) > 0 {
			msg := notificationMsg(ev, nid)
			for c := range set {
				c.enqueue(msg)
			}
		}
	}
}

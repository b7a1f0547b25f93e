package realtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/query"
	"github.com/edgebase/edgebase/raftstore"
)

// Live queries. A subscription with a "query" instead of a "collection"
// holds a window: the first `limit` documents of the query's results that
// its subscriber may read, in the query's order (package query). It sends
// the window as a snapshot, then, in revision order, how the window changes:
// a document added to it, modified within it (maybe moved), or removed from
// it, each with its position ("index") in the window as the subscriber holds
// it after the message (for a removal: before it).
//
// The window is kept in the shard's goroutine from the change feed: an event
// of a document of the query's collection (or, for a collection group, of
// any collection of that name) is judged by the query's filters and the read
// rule of the document's path on its new data, and placed by its SortKey. A
// full window that loses a document (deleted, no longer matching or
// readable, moved past the end) is refilled from the store: the documents
// after the window's last one (Store.Query with a cursor). The store may be
// ahead of the event being routed when it answers; the refilled documents
// are then newer than the event, and the events in between that concern
// them are skipped by revision. The changes of one revision are applied
// together and sent as one group, the difference of the window before and
// after; its last message is a checkpoint when the window is then exactly
// the query's first `limit` results at that revision (no refill read beyond
// it): the point a subscriber resumes from.
//
// Resume (since R): the change log holds no document's state before a
// change, so the window at R is rebuilt from the current state: at one
// revision A, the window of size limit+k (Store.Query) and the k documents
// of the query's collections that changed in (R, A] (the change log). A
// document whose first change after R created it was absent at R; for one
// that existed, its state at R is looked up in the change log before R
// (bounded by resumeLookback). With every such state known, the window at
// R is the first `limit` of the unchanged documents and the changed ones
// as they were at R; the changes in (R, A] are then replayed revision by
// revision and each step's difference is sent, then "resumed" with A. When
// the log does not reach back to R or to a needed state, when k is above
// maxResumeChanges, or when the rules or the caller's account changed after
// R, the answer is "reset" and a fresh snapshot.

// Bounds of live queries.
const (
	// maxResumeChanges bounds the changed documents a resume replays; more
	// answer reset and a snapshot.
	maxResumeChanges = 1000
	// resumeLookback is how many revisions before since a resume reads
	// from the change log to find the state at since of a changed document.
	resumeLookback = 4096
	// resumeSlack is added to the window a resume reads, for documents
	// that change while it reads.
	resumeSlack = 16
	// queryTimeout bounds one store query of a live query.
	queryTimeout = 10 * time.Second
)

// querySub is the live-query part of a subscription. c, route, group, key
// and coll are fixed; win, exactRev and failed belong to the shard.
type querySub struct {
	c     *query.Compiled
	route string // queryRouteKey of its collection(s)
	group bool
	key   string // the query's canonical JSON: refills of equal queries are shared
	coll  string // the collection, relative to the project

	id string // the subscription's

	win      []qdoc // the window, in query order
	exactRev uint64 // the revision of the newest refill
	failed   bool
	// While a revision's changes are applied: the window before them,
	// and the revision.
	dirty    bool
	from     []qdoc
	groupRev uint64
}

// qdoc is a document of a window with its SortKey.
type qdoc struct {
	doc *raftstore.Document
	key []byte
}

// queryRouteKey is where the shard files live queries: the full path of
// the collection, or for a collection group "\x00" + project + "/" + name
// (no path starts with a NUL).
func queryRouteKey(pid, coll string, group bool) string {
	if group {
		return "\x00" + pid + "/" + coll
	}
	return keys.Doc(pid, coll)
}

// queryRefusal is a refused live-query subscribe.
type queryRefusal struct {
	code, field, msg string
}

// parseQuerySub validates a subscribe with a query.
func (c *conn) parseQuerySub(m clientMsg) (*querySub, *queryRefusal) {
	if m.Collection != "" {
		return nil, &queryRefusal{"invalid_argument", "collection", "give either collection or query, not both"}
	}
	if m.Prefix {
		return nil, &queryRefusal{"invalid_argument", "prefix", "prefix is for path subscriptions; a query names its collection"}
	}
	cq, err := query.Parse(m.Query)
	if err != nil {
		var qe *query.Error
		if errors.As(err, &qe) {
			return nil, &queryRefusal{qe.Code, "query." + qe.Field, qe.Message}
		}
		return nil, &queryRefusal{"invalid_query", "query", err.Error()}
	}
	switch {
	case cq.Q.Count:
		return nil, &queryRefusal{"invalid_query", "query.count", "a live query cannot count; use POST /api/db/query"}
	case cq.Q.StartAfter != "":
		return nil, &queryRefusal{"invalid_query", "query.startAfter", "a live query starts at its first result"}
	}
	if err := raftstore.ValidatePath(cq.Q.Collection); err != nil {
		return nil, &queryRefusal{"invalid_path", "query.collection", err.Error()}
	}
	canon, err := json.Marshal(cq.Q)
	if err != nil {
		return nil, &queryRefusal{"invalid_query", "query", err.Error()}
	}
	return &querySub{c: cq, id: m.ID, route: queryRouteKey(c.pid, cq.Q.Collection, cq.Q.CollectionGroup),
		group: cq.Q.CollectionGroup, key: string(canon), coll: cq.Q.Collection}, nil
}

func (q *querySub) limit() int { return q.c.Q.Limit }

// routeQueries hands ev to the live queries of its collection (shard).
func (sh *shard) routeQueries(ev *raftstore.Event) {
	p := ev.Path
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return
	}
	parent := p[:i]
	deliver := func(set map[*sub]struct{}) {
		for s := range set {
			if sh.dec.ev != ev {
				sh.dec.reset(ev)
			}
			s.deliver(ev, nil, &sh.dec)
		}
	}
	deliver(sh.queries[parent])
	if sh.groups == 0 {
		return
	}
	j := strings.LastIndexByte(parent, '/')
	k := strings.IndexByte(p, '/')
	if j <= 0 || k <= 0 || strings.Contains(p[k:], "/_") {
		return // a project's own document, or a system path
	}
	deliver(sh.queries["\x00"+p[:k]+"/"+parent[j+1:]])
}

// newQueryView is how a live query judges documents: for a collection, the
// rules' verdict on it as a whole (as POST /api/db/query asks it); for a
// collection group, every document by its path and data.
func newQueryView(rules *auth.CompiledRules, p *auth.Principal, q *querySub) *view {
	who := p.AuthInfo()
	scope := auth.ReadByData
	if !q.group {
		scope = rules.ReadScope(context.Background(), q.coll, true, who)
	}
	return &view{rules: rules, who: who, scope: scope}
}

// allowFunc is v as Store.Query's Allow (nil: all).
func (v *view) allowFunc() func(*raftstore.Document) bool {
	if v.scope == auth.ReadAll {
		return nil
	}
	return func(d *raftstore.Document) bool { return v.allows(userPath(d.Path), d.Data) }
}

// entry is d as a window entry when it matches q and v lets it be read.
func (q *querySub) entry(v *view, d *raftstore.Document) (qdoc, bool) {
	if d == nil || !q.c.Match(d.Data) || !v.allows(userPath(d.Path), d.Data) {
		return qdoc{}, false
	}
	return qdoc{doc: d, key: q.c.SortKey(d.Path, d.Data)}, true
}

// ------------------------------------------------------------ setup

// startQuerySub registers a live query (holding its changes), sends its
// snapshot or resume, then lets the held changes through.
func (c *conn) startQuerySub(s *sub, since *uint64, minRev uint64) {
	defer s.syncMu.Unlock()
	if !c.awaitRevision(s, minRev) {
		return
	}
	seq := c.access.Load()
	p := c.currentPrincipal()
	rules, err := c.srv.rules(p)
	if s.ctx.Err() != nil {
		return
	}
	if err != nil {
		c.syncFailed(s, err)
		return
	}
	v := newQueryView(rules, p, s.q)
	s.cur, s.curSeq = v, seq
	if err := c.shard.do(s.ctx, func() { s.view, s.seq = v, seq; c.shard.addSub(s) }); err != nil {
		return
	}
	var rev uint64
	var win []qdoc
	if since == nil {
		rev, win, err = c.querySnapshot(s, v)
	} else {
		rev, win, err = c.queryResume(s, v, *since)
	}
	if err != nil {
		c.queryFailed(s, err)
		return
	}
	_ = c.shard.do(s.ctx, func() { s.q.win = win; s.goLive(rev, nil) })
}

// refreshQuery judges a live query again after a change of the rules or of
// the caller's account: under a view that may judge a document otherwise,
// it starts over with reset and a snapshot (syncMu held).
func (c *conn) refreshQuery(s *sub) {
	seq := c.access.Load()
	p := c.currentPrincipal()
	rules, err := c.srv.rules(p)
	if err != nil {
		c.syncFailed(s, err)
		return
	}
	v := newQueryView(rules, p, s.q)
	if seq == s.curSeq && v.same(s.cur) {
		return
	}
	old := s.cur
	s.cur, s.curSeq = v, seq
	if v.same(old) || (old.scope == auth.ReadAll && v.scope == auth.ReadAll) {
		_ = c.shard.do(s.ctx, func() { s.view, s.seq = v, seq; s.flush() })
		return
	}
	if err := c.shard.do(s.ctx, func() {
		s.view, s.seq, s.live, s.pending, s.q.win = v, seq, false, nil, nil
	}); err != nil {
		return
	}
	rev, win, err := c.queryReset(s, v, c.srv.store.AppliedIndex())
	if err != nil {
		c.queryFailed(s, err)
		return
	}
	_ = c.shard.do(s.ctx, func() { s.q.win = win; s.goLive(rev, nil) })
}

// queryFailed ends a live query whose setup failed, with the reason when
// the query itself is at fault (index_required, a bad cursor).
func (c *conn) queryFailed(s *sub, err error) {
	if s.ctx.Err() != nil {
		return
	}
	if code, field, msg, ok := queryErrorOf(err); ok {
		c.dropSubField(s, code, field, msg)
		return
	}
	c.syncFailed(s, err)
}

func queryErrorOf(err error) (code, field, msg string, ok bool) {
	var ire *raftstore.IndexRequiredError
	if errors.As(err, &ire) {
		return "index_required", "query", ire.Error(), true
	}
	var qe *query.Error
	if errors.As(err, &qe) {
		return qe.Code, "query." + qe.Field, qe.Message, true
	}
	return "", "", "", false
}

// dropSubField is dropSub with the request field at fault.
func (c *conn) dropSubField(s *sub, code, field, msg string) {
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
	c.enqueue(encode(errorMsg{Op: "error", ID: s.id, Code: code, Message: msg, Field: field}))
	c.endSub(s)
}

// fetch reads up to n results of q after the SortKey after (nil: from the
// first), in pages, all at one revision (read again when a write came
// between two pages).
func (c *conn) fetch(ctx context.Context, q *querySub, v *view, after []byte, n int) ([]qdoc, uint64, error) {
	if v.scope == auth.ReadNone || n <= 0 {
		return nil, c.srv.store.AppliedIndex(), nil
	}
	return fetchWindow(ctx, c.srv.store, c.pid, c.srv.cfg.QueryScanLimit, q, v.allowFunc(), after, n)
}

func fetchWindow(ctx context.Context, store Store, pid string, scanLimit int, q *querySub, allow func(*raftstore.Document) bool, after []byte, n int) ([]qdoc, uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		var out []qdoc
		var rev uint64
		cursor := ""
		if after != nil {
			cursor = q.c.Cursor(after)
		}
		consistent := true
		for len(out) < n {
			qq := q.c.Q
			qq.StartAfter, qq.Limit = cursor, min(n-len(out), query.MaxLimit)
			cq, err := query.Compile(&qq)
			if err != nil {
				return nil, 0, fmt.Errorf("live query page: %w", err)
			}
			res, err := store.Query(ctx, raftstore.QueryRequest{ProjectID: pid, Query: cq, ScanLimit: scanLimit, Allow: allow})
			if err != nil {
				return nil, 0, fmt.Errorf("live query: %w", err)
			}
			if rev != 0 && res.Revision != rev {
				consistent = false
				break
			}
			rev = res.Revision
			for _, d := range res.Documents {
				out = append(out, qdoc{doc: d, key: q.c.SortKey(d.Path, d.Data)})
			}
			if res.NextCursor == "" {
				break
			}
			cursor = res.NextCursor
		}
		if consistent {
			return out, rev, nil
		}
		if attempt == 3 {
			return nil, 0, errors.New("live query: the results kept changing between pages")
		}
	}
}

// querySnapshot sends the window (pages of snapshotPage documents, the
// select applied) and returns it with its revision.
func (c *conn) querySnapshot(s *sub, v *view) (uint64, []qdoc, error) {
	win, rev, err := c.fetch(s.ctx, s.q, v, nil, s.q.limit())
	if err != nil {
		return 0, nil, err
	}
	for i := 0; ; i += snapshotPage {
		end := min(i+snapshotPage, len(win))
		m := snapshotMsg{Op: "snapshot", ID: s.id, Revision: rev, Documents: make([]docOut, 0, end-i), More: end < len(win)}
		for _, e := range win[i:end] {
			m.Documents = append(m.Documents, s.q.docOut(e.doc))
		}
		if err := c.send(s.ctx, encode(m)); err != nil {
			return 0, nil, err
		}
		if !m.More {
			return rev, win, nil
		}
	}
}

func (q *querySub) docOut(d *raftstore.Document) docOut {
	o := toDocOut(d)
	o.Data = q.c.Project(d.Data)
	return o
}

func (c *conn) queryReset(s *sub, v *view, rev uint64) (uint64, []qdoc, error) {
	if err := c.send(s.ctx, encode(revMsg{Op: "reset", ID: s.id, Revision: rev})); err != nil {
		return 0, nil, err
	}
	return c.querySnapshot(s, v)
}

// errResumeReset: the resume cannot be exact; reset and snapshot.
var errResumeReset = errors.New("resume not possible")

// queryResume sends what changed in the window after since (see the top of
// this file), or reset and a snapshot.
func (c *conn) queryResume(s *sub, v *view, since uint64) (uint64, []qdoc, error) {
	rev, win, err := c.tryResume(s, v, since)
	if errors.Is(err, errResumeReset) {
		return c.queryReset(s, v, rev)
	}
	return rev, win, err
}

// replayLog is the change log after since as a resume reads it.
type replayLog struct {
	c     *conn
	q     *querySub
	upTo  uint64            // every change up to it is read
	evs   []raftstore.Event // of the query's collections, in order
	first map[string]int    // path → index in evs of its first change
	floor uint64            // when a read found the log compacted
	stop  bool              // the rules or the account changed
}

func (q *querySub) covers(pid, full string) bool {
	i := strings.LastIndexByte(full, '/')
	if i <= 0 {
		return false
	}
	parent := full[:i]
	if !q.group {
		return parent == keys.Doc(pid, q.coll)
	}
	j := strings.LastIndexByte(parent, '/')
	return j > 0 && parent[j+1:] == q.coll && strings.HasPrefix(full, pid+"/") && !strings.Contains(full[len(pid):], "/_")
}

// readTo reads the log until it holds every change up to target.
func (l *replayLog) readTo(target uint64) error {
	rulesKey, userKey := keys.Rules(l.c.pid), keys.User(l.c.pid, l.c.uid)
	for l.upTo < target {
		evs, upTo, err := l.c.srv.store.ChangesSince(l.upTo, replayPage)
		if errors.Is(err, raftstore.ErrCompacted) {
			l.floor = upTo
			return errResumeReset
		}
		if err != nil {
			return fmt.Errorf("live query resume: read the change log: %w", err)
		}
		for i := range evs {
			ev := evs[i]
			if ev.Path == rulesKey || ev.Path == userKey {
				l.stop = true
				return errResumeReset
			}
			if !l.q.covers(l.c.pid, ev.Path) {
				continue
			}
			if _, seen := l.first[ev.Path]; !seen {
				if len(l.first) >= maxResumeChanges {
					return errResumeReset
				}
				l.first[ev.Path] = len(l.evs)
			}
			l.evs = append(l.evs, ev)
		}
		if upTo <= l.upTo {
			break // nothing more is applied yet
		}
		l.upTo = upTo
	}
	return nil
}

// tryResume is the exact resume, or errResumeReset (with the revision the
// reset names).
func (c *conn) tryResume(s *sub, v *view, since uint64) (uint64, []qdoc, error) {
	q := s.q
	store := c.srv.store
	if applied := store.AppliedIndex(); since > applied {
		// Resuming on a node behind the one the subscriber came from.
		wctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
		err := store.WaitRead(wctx, raftstore.Local, since)
		cancel()
		if err != nil {
			return store.AppliedIndex(), nil, errResumeReset
		}
	}
	log := &replayLog{c: c, q: q, upTo: since, first: map[string]int{}}
	if err := log.readTo(store.AppliedIndex()); err != nil {
		return max(log.floor, store.AppliedIndex()), nil, err
	}
	var win []qdoc
	var rev uint64
	for attempt := 0; ; attempt++ {
		k := len(log.first)
		var err error
		win, rev, err = c.fetch(s.ctx, q, v, nil, q.limit()+k+resumeSlack)
		if err != nil {
			return 0, nil, err
		}
		if err := log.readTo(rev); err != nil {
			return max(log.floor, rev), nil, err
		}
		if changed := countUpTo(log, rev); changed <= k+resumeSlack || len(win) < q.limit()+k+resumeSlack {
			break
		}
		if attempt == 2 {
			return rev, nil, errResumeReset
		}
	}
	// The changes in (since, rev], and the state at since of each document
	// they touch.
	n := 0
	for n < len(log.evs) && log.evs[n].Revision <= rev {
		n++
	}
	evs := log.evs[:n]
	changed := map[string]*qdoc{} // path → its entry at the replay point (nil: none)
	var unknown []string
	for _, ev := range evs {
		if _, ok := changed[ev.Path]; ok {
			continue
		}
		changed[ev.Path] = nil
		if ev.Doc != nil && ev.Doc.CreateRevision == ev.Revision {
			continue // created after since: absent at since
		}
		unknown = append(unknown, ev.Path)
	}
	if len(unknown) > 0 {
		before, err := c.statesBefore(since, unknown)
		if err != nil {
			return rev, nil, err
		}
		for p, d := range before {
			if e, ok := q.entry(v, d); ok {
				changed[p] = &e
			}
		}
	}
	var base []qdoc // the unchanged documents of the window
	for _, e := range win {
		if _, ok := changed[e.doc.Path]; !ok && len(base) < q.limit() {
			base = append(base, e)
		}
	}
	window := func() []qdoc {
		out := slices.Clone(base)
		for _, e := range changed {
			if e != nil {
				out = append(out, *e)
			}
		}
		slices.SortFunc(out, func(a, b qdoc) int { return bytes.Compare(a.key, b.key) })
		return out[:min(len(out), q.limit())]
	}
	cur := window()
	for i := 0; i < len(evs); {
		r := evs[i].Revision
		for ; i < len(evs) && evs[i].Revision == r; i++ {
			ev := &evs[i]
			if e, ok := q.entry(v, ev.Doc); ok {
				changed[ev.Path] = &e
			} else {
				changed[ev.Path] = nil
			}
		}
		next := window()
		for _, m := range q.changes(cur, next, r, true) {
			if err := c.send(s.ctx, encode(m)); err != nil {
				return 0, nil, err
			}
		}
		cur = next
	}
	return rev, cur, c.send(s.ctx, encode(revMsg{Op: "resumed", ID: s.id, Revision: rev}))
}

func countUpTo(l *replayLog, rev uint64) int {
	seen := map[string]struct{}{}
	for _, ev := range l.evs {
		if ev.Revision > rev {
			break
		}
		seen[ev.Path] = struct{}{}
	}
	return len(seen)
}

// statesBefore finds, for each path, its state at revision since (nil:
// absent) from its last change at or before since in the change log, which
// it reads back at most resumeLookback revisions; a path without one there
// is errResumeReset.
func (c *conn) statesBefore(since uint64, paths []string) (map[string]*raftstore.Document, error) {
	want := map[string]struct{}{}
	for _, p := range paths {
		want[p] = struct{}{}
	}
	from := uint64(0)
	if since > resumeLookback {
		from = since - resumeLookback
	}
	found := map[string]*raftstore.Document{}
	cur := from
	for cur < since {
		evs, upTo, err := c.srv.store.ChangesSince(cur, replayPage)
		if errors.Is(err, raftstore.ErrCompacted) {
			if upTo <= cur || upTo >= since {
				return nil, errResumeReset
			}
			cur = upTo // the log starts later: read what it holds
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("live query resume: read the change log: %w", err)
		}
		for i := range evs {
			ev := &evs[i]
			if ev.Revision > since {
				break
			}
			if _, ok := want[ev.Path]; ok {
				found[ev.Path] = ev.Doc
			}
		}
		if upTo <= cur || len(evs) == 0 {
			break
		}
		cur = upTo
	}
	if len(found) < len(want) {
		return nil, errResumeReset
	}
	return found, nil
}

// ------------------------------------------------------------ live

// queryEvent applies one change of the query's collections to the window
// and sends the difference (shard).
func (s *sub) queryEvent(ev *raftstore.Event, d *decisions) {
	q := s.q
	if q.failed {
		return
	}
	if !q.dirty {
		// The first change of a revision: its messages go out when the
		// revision is over (queryFlush).
		q.dirty, q.from = true, q.win
		s.c.shard.dirty = append(s.c.shard.dirty, s)
	}
	q.groupRev = max(q.groupRev, ev.Revision)
	idx := -1
	for i := range q.win {
		if q.win[i].doc.Path == ev.Path {
			idx = i
			break
		}
	}
	if idx >= 0 && q.win[idx].doc.Revision >= ev.Revision {
		return // a refill read it at this change or a later one
	}
	var nd *qdoc
	if ev.Doc != nil && q.c.Match(ev.Doc.Data) && d.allows(s.view, ev) {
		nd = &qdoc{doc: ev.Doc, key: q.c.SortKey(ev.Path, ev.Doc.Data)}
	}
	if idx < 0 && nd == nil {
		return
	}
	limit := q.limit()
	full := len(q.win) >= limit
	var last []byte
	if len(q.win) > 0 {
		last = q.win[len(q.win)-1].key
	}
	if idx < 0 && full && bytes.Compare(nd.key, last) > 0 {
		return // beyond the end of a full window
	}
	next := slices.Clone(q.win)
	if idx >= 0 {
		next = slices.Delete(next, idx, idx+1)
	}
	refill := false
	switch {
	case nd != nil && (!full || bytes.Compare(nd.key, last) <= 0):
		at, _ := slices.BinarySearchFunc(next, nd.key, func(e qdoc, k []byte) int { return bytes.Compare(e.key, k) })
		next = slices.Insert(next, at, *nd)
		if len(next) > limit {
			next = next[:limit]
		}
	case full:
		// It left a full window, or moved past its end: what follows the
		// window in the store takes its place.
		refill = true
	}
	if refill {
		var err error
		if next, err = s.refillWindow(next, ev.Revision, d); err != nil {
			q.failed = true
			s.c.srv.logger.Warn("realtime live query refill failed", "err", err)
			code, field, msg, ok := queryErrorOf(err)
			if !ok {
				code, field, msg = "unavailable", "", "the live query could not be kept; subscribe again"
			}
			go s.c.dropSubField(s, code, field, msg)
			return
		}
	}
	q.win = next
}

// queryFlush sends how the window changed over the revision (or the held
// changes) just applied: one group of messages at that revision, the last
// one marked as a checkpoint when the window is then exact (shard).
func (s *sub) queryFlush() {
	q := s.q
	if !q.dirty {
		return
	}
	from, rev := q.from, q.groupRev
	q.dirty, q.from = false, nil
	if q.failed || s.removed {
		return
	}
	for _, m := range q.changes(from, q.win, rev, q.exactRev <= rev) {
		if s.c.enqueue(encode(m)) {
			s.c.srv.metrics.eventSent()
		}
	}
}

// flushQueries ends the revision for the live queries it changed (shard).
func (sh *shard) flushQueries() {
	for _, s := range sh.dirty {
		s.queryFlush()
	}
	clear(sh.dirty)
	sh.dirty = sh.dirty[:0]
}

// refillWindow fills next up to the limit with what follows it in the
// store. A document the store has moved past the window's end since the
// state next holds of it comes back from the store: its older entry is
// dropped, and what is then missing is read again.
func (s *sub) refillWindow(next []qdoc, at uint64, d *decisions) ([]qdoc, error) {
	q := s.q
	for tries := 0; len(next) < q.limit() && tries < 4; tries++ {
		var after []byte
		if len(next) > 0 {
			after = next[len(next)-1].key
		}
		want := q.limit() - len(next)
		more, brev, err := s.refill(after, want, at, d)
		if err != nil {
			return nil, err
		}
		q.exactRev = max(q.exactRev, brev)
		if len(more) > 0 {
			fresh := make(map[string]struct{}, len(more))
			for _, e := range more {
				fresh[e.doc.Path] = struct{}{}
			}
			next = slices.DeleteFunc(next, func(e qdoc) bool { _, ok := fresh[e.doc.Path]; return ok })
			next = append(next, more...)
		}
		if len(more) < want {
			break // the store has no more
		}
	}
	return next, nil
}

// refillKey identifies a refill that equal live queries share within one
// change.
type refillKey struct {
	query string
	view  viewKey
	after string
	n     int
}

type refillResult struct {
	docs []qdoc
	rev  uint64
	err  error
}

// refill reads the n results after the SortKey after (shard; shared by the
// live queries that ask the same during one change).
func (s *sub) refill(after []byte, n int, at uint64, d *decisions) ([]qdoc, uint64, error) {
	v := s.view
	k := refillKey{query: s.q.key, view: viewKey{rules: v.rules}, after: string(after), n: n}
	if v.scope != auth.ReadAll {
		k.view.who = v.who
	}
	if d != nil {
		if r, ok := d.refills[k]; ok {
			return r.docs, r.rev, r.err
		}
	}
	var r refillResult
	if v.scope == auth.ReadNone || n <= 0 {
		r.rev = s.c.srv.store.AppliedIndex()
	} else {
		r.docs, r.rev, r.err = fetchWindow(s.ctx, s.c.srv.store, s.c.pid, s.c.srv.cfg.QueryScanLimit, s.q, v.allowFunc(), after, n)
		if r.err == nil && r.rev > at {
			// The store answered at a later revision than the change being
			// routed. When no change lies in between (the applied index
			// also counts entries that change no document), it is the
			// state at that change.
			evs, _, err := s.c.srv.store.ChangesSince(at, 1)
			if err == nil && (len(evs) == 0 || evs[0].Revision > r.rev) {
				r.rev = at
			}
		}
	}
	if d != nil {
		if d.refills == nil {
			d.refills = map[refillKey]refillResult{}
		}
		d.refills[k] = r
	}
	return r.docs, r.rev, r.err
}

// qchangeMsg is a change of a live query's window.
type qchangeMsg struct {
	Op         string          `json:"op"`
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Revision   uint64          `json:"revision"`
	Collection string          `json:"collection"`
	Data       json.RawMessage `json:"data,omitempty"`
	CreateTime string          `json:"createTime,omitempty"`
	UpdateTime string          `json:"updateTime,omitempty"`
	Index      int             `json:"index"`
	// Checkpoint marks the last message of a revision after which the
	// subscriber's window is exactly the query's window at Revision: the
	// point to resume from.
	Checkpoint bool `json:"checkpoint,omitempty"`
}

// changes is the messages that turn the window cur into next, at revision
// rev; checkpoint marks the last one.
func (q *querySub) changes(cur, next []qdoc, rev uint64, checkpoint bool) []qchangeMsg {
	var out []qchangeMsg
	diffWindows(cur, next, func(typ string, d *raftstore.Document, index int) {
		m := qchangeMsg{Op: "change", ID: q.id, Type: typ, Revision: rev, Collection: userPath(d.Path), Index: index}
		if typ != "removed" {
			m.Data = q.c.Project(d.Data)
			m.CreateTime, m.UpdateTime = stamp(d.CreateTime), stamp(d.UpdateTime)
		}
		out = append(out, m)
	})
	if len(out) > 0 {
		out[len(out)-1].Checkpoint = checkpoint
	}
	return out
}

// diffWindows calls emit with the messages that turn the window cur into
// next for a subscriber that applies them in order: "removed" (drop the
// document; index is where it was), "added" (insert at index), "modified"
// (drop it, insert its new state at index). Documents that did not change
// keep their relative order, so only changed ones move, except when several
// changed ones cross (then one that did not change may be moved too).
func diffWindows(cur, next []qdoc, emit func(typ string, d *raftstore.Document, index int)) {
	inNext := make(map[string]int, len(next))
	for i, e := range next {
		inNext[e.doc.Path] = i
	}
	work := make([]qdoc, 0, max(len(cur), len(next)))
	for i := len(cur) - 1; i >= 0; i-- {
		if _, ok := inNext[cur[i].doc.Path]; !ok {
			emit("removed", cur[i].doc, i)
		}
	}
	for _, e := range cur {
		if _, ok := inNext[e.doc.Path]; ok {
			work = append(work, e)
		}
	}
	sent := map[string]bool{}
	for i := 0; i < len(next); {
		nd := next[i]
		if i < len(work) && work[i].doc.Path == nd.doc.Path {
			if work[i].doc.Revision != nd.doc.Revision && !sent[nd.doc.Path] {
				emit("modified", nd.doc, i)
			}
			work[i] = nd
			i++
			continue
		}
		if i < len(work) {
			// A changed document that moved later: put it in its place.
			x := work[i]
			if k := inNext[x.doc.Path]; k > i && x.doc.Revision != next[k].doc.Revision && !sent[x.doc.Path] {
				work = slices.Delete(work, i, i+1)
				at := min(k, len(work))
				work = slices.Insert(work, at, next[k])
				sent[x.doc.Path] = true
				emit("modified", next[k].doc, at)
				continue
			}
		}
		j := -1
		for t := i + 1; t < len(work); t++ {
			if work[t].doc.Path == nd.doc.Path {
				j = t
				break
			}
		}
		if j < 0 {
			work = slices.Insert(work, i, nd)
			emit("added", nd.doc, i)
		} else {
			work = slices.Delete(work, j, j+1)
			work = slices.Insert(work, i, nd)
			if !sent[nd.doc.Path] {
				sent[nd.doc.Path] = true
			}
			emit("modified", nd.doc, i)
		}
		i++
	}
}

package triggers

import (
	"cmp"
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
)

// A lane is one (trigger, document path): its events are attempted one at
// a time in revision order, by one worker goroutine that lives while the
// lane has events. Lanes run in parallel, at most InFlight attempts at once.
//
// An event is settled when it was delivered, parked (stored in the
// trigger's queue: after a failed attempt, or behind a parked event of its
// path) or dead-lettered; the trigger's cursor is just below its first
// unsettled event. Once a lane holds a parked event, every later event of
// the lane is parked behind it before anything else is attempted, so the
// order survives a change of leader.
type lane struct {
	path    string
	items   []*item // by revision
	fresh   int     // items not durable
	running bool    // a worker owns the lane
	kick    chan struct{}
}

// item is one event in a lane.
type item struct {
	p       Parked
	ch      *Change // nil: rebuilt from p (an event read from the queue)
	durable bool    // stored at its queue key
	token   bool    // unsettled, holding a place in run.room
}

// laneLocked is t's lane of path, made when absent. Callers hold t.mu.
func (t *trig) laneLocked(path string) *lane {
	l := t.lanes[path]
	if l == nil {
		l = &lane{path: path, kick: make(chan struct{}, 1)}
		t.lanes[path] = l
	}
	return l
}

// pendLocked counts an unsettled event of revision rev (revisions come in
// order). Callers hold t.mu.
func (t *trig) pendLocked(rev uint64) {
	if n := len(t.revs); n == 0 || t.revs[n-1] != rev {
		t.revs = append(t.revs, rev)
	}
	t.counts[rev]++
}

// settleLocked marks a live event settled. Callers hold t.mu.
func (ru *run) settleLocked(t *trig, it *item) {
	if it.token {
		it.token = false
		t.counts[it.p.Revision]--
		<-ru.room
	}
}

// removeLocked takes a finished event out of its lane. Callers hold t.mu.
func (ru *run) removeLocked(t *trig, l *lane, it *item) {
	if len(l.items) > 0 && l.items[0] == it {
		l.items[0] = nil
		l.items = l.items[1:] // the usual case, without a copy
	} else if i := slices.Index(l.items, it); i >= 0 {
		l.items = slices.Delete(l.items, i, i+1)
	}
	if it.durable {
		t.parked--
	} else {
		l.fresh--
	}
	ru.settleLocked(t, it)
}

// wakeLocked gives lane l a worker, or tells its worker there is news.
// Callers hold t.mu; t runs (t.ctx set by the reader).
func (ru *run) wakeLocked(t *trig, l *lane) {
	if !l.running {
		l.running = true
		t.wg.Add(1)
		go ru.work(t.ctx, t, l)
		return
	}
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// add (reader) hands a live event to its lane.
func (ru *run) add(t *trig, it *item) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.laneLocked(it.p.Path)
	if n := len(l.items); n > 0 && l.items[n-1].p.Revision >= it.p.Revision {
		// Settled before (a parked event met again in a replay of the
		// log after a restart): what is parked has everything before it.
		ru.settleLocked(t, it)
		return
	}
	l.items = append(l.items, it)
	l.fresh++
	t.pendLocked(it.p.Revision)
	ru.wakeLocked(t, l)
}

// loadQueue (reader) merges t's parked events into its lanes.
func (ru *run) loadQueue(t *trig) {
	dir := keys.TriggerQueueDir(t.pid, t.name)
	after := ""
	for {
		docs, next, err := ru.r.cfg.Store.List(dir, after, 256)
		if err != nil {
			ru.r.logger.Warn("triggers: list parked events", "project", t.pid, "trigger", t.name, "err", err)
			return
		}
		for _, d := range docs {
			ru.merge(t, d.Path, d)
		}
		if next == "" {
			return
		}
		after = next
	}
}

// merge (reader) adds the parked event at path (as seen, listed or
// met in the feed) to its lane unless the lane knows it. It reads the event
// again under t.mu: a worker removes an event from its lane only after its
// removal from the queue committed, so an event that is neither known nor
// stored was finished, not missed.
func (ru *run) merge(t *trig, path string, seen *raftstore.Document) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ctx == nil {
		return
	}
	// known finds p's place in its lane (items are in revision order).
	known := func(p *Parked) (int, bool) {
		l := t.lanes[p.Path]
		if l == nil {
			return 0, false
		}
		return slices.BinarySearchFunc(l.items, p.Revision, func(it *item, rev uint64) int {
			return cmp.Compare(it.p.Revision, rev)
		})
	}
	var p Parked
	if seen != nil && json.Unmarshal(seen.Data, &p) == nil {
		if _, ok := known(&p); ok {
			return
		}
	}
	d, err := ru.r.cfg.Store.Get(path)
	if err != nil || d == nil {
		return
	}
	p = Parked{}
	if err := json.Unmarshal(d.Data, &p); err != nil || p.Path == "" ||
		path != keys.Under(keys.TriggerQueueDir(t.pid, t.name))+keys.TriggerQueueKey(p.Path, p.Revision) {
		ru.r.logger.Error("triggers: bad parked event", "path", path, "err", err)
		return
	}
	i, ok := known(&p)
	if ok {
		return
	}
	l := t.laneLocked(p.Path)
	it := &item{p: p, durable: true}
	l.items = append(l.items, nil)
	copy(l.items[i+1:], l.items[i:])
	l.items[i] = it
	t.parked++
	ru.wakeLocked(t, l)
}

// work runs lane l until it is empty or ctx ends.
func (ru *run) work(ctx context.Context, t *trig, l *lane) {
	defer t.wg.Done()
	tu := ru.r.tu
	for ctx.Err() == nil {
		t.mu.Lock()
		if len(l.items) == 0 {
			l.running = false
			if t.lanes[l.path] == l {
				delete(t.lanes, l.path)
			}
			t.mu.Unlock()
			return
		}
		head := l.items[0]
		var toPark []*item
		if l.fresh > 0 && l.fresh < len(l.items) {
			// Fresh events are (nearly always) the lane's tail: look
			// from the end, then put them back in revision order.
			for i := len(l.items) - 1; i >= 0 && len(toPark) < l.fresh; i-- {
				if !l.items[i].durable {
					toPark = append(toPark, l.items[i])
				}
			}
			slices.Reverse(toPark)
		}
		c, secret := t.c, t.secret
		t.mu.Unlock()
		if len(toPark) > 0 {
			if !ru.park(ctx, t, l, toPark) {
				ru.pause(ctx, l, tu.MinBackoff)
			}
			continue
		}
		if head.durable && head.p.NextAttemptAt > 0 {
			if wait := time.Unix(0, head.p.NextAttemptAt).Sub(ru.r.clock.Now()); wait > 0 {
				ru.pause(ctx, l, min(wait, tu.Poll))
				continue
			}
		}
		select {
		case ru.sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		ru.r.metrics.inFlight.Inc()
		err := ru.attempt(ctx, t, c, secret, head)
		ru.r.metrics.inFlight.Dec()
		<-ru.sem
		if ctx.Err() != nil {
			return // leadership ended (or the trigger stopped): the next run tries again
		}
		ru.settle(ctx, t, l, head, err)
	}
}

// pause waits d, or until the lane has news or ctx ends.
func (ru *run) pause(ctx context.Context, l *lane, d time.Duration) {
	timer := time.NewTimer(max(d, time.Millisecond))
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-l.kick:
	case <-timer.C:
	}
}

// queuePath and deadPath are where event p of t is parked or dead.
func queuePath(t *trig, p *Parked) string {
	return keys.Under(keys.TriggerQueueDir(t.pid, t.name)) + keys.TriggerQueueKey(p.Path, p.Revision)
}

func deadPath(t *trig, p *Parked) string {
	return keys.Under(keys.TriggerDeadDir(t.pid, t.name)) + keys.TriggerDeadKey(p.Path, p.Revision)
}

// parkBatch bounds the events one transaction parks.
const parkBatch = 64

// park stores events queued behind a parked one of their path.
func (ru *run) park(ctx context.Context, t *trig, l *lane, items []*item) bool {
	for len(items) > 0 {
		n := min(len(items), parkBatch)
		ops := make([]raftstore.Op, 0, n)
		for _, it := range items[:n] {
			data, err := json.Marshal(&it.p)
			if err != nil {
				ru.r.logger.Error("triggers: encode parked event", "err", err)
				return false
			}
			ops = append(ops, raftstore.Op{Kind: raftstore.OpPut, Path: queuePath(t, &it.p), Data: data})
		}
		if !ru.commit(ctx, t, ops) {
			return false
		}
		ru.r.logger.Debug("triggers: events parked behind a retry", "project", t.pid, "trigger", t.name, "path", l.path, "events", n)
		t.mu.Lock()
		for _, it := range items[:n] {
			if !it.durable {
				it.durable = true
				l.fresh--
				t.parked++
				ru.settleLocked(t, it)
			}
		}
		t.mu.Unlock()
		items = items[n:]
	}
	return true
}

// commit writes ops of trigger t while its definition exists.
func (ru *run) commit(ctx context.Context, t *trig, ops []raftstore.Op) bool {
	res, err := ru.r.cfg.Store.Txn(ctx, &raftstore.Txn{Time: ru.r.clock.Now().UnixNano(),
		Conds: []raftstore.Cond{{Path: keys.Trigger(t.pid, t.name), Kind: raftstore.CondExists}}, Ops: ops})
	switch {
	case err != nil:
		if ctx.Err() == nil {
			ru.r.logger.Warn("triggers: commit progress", "project", t.pid, "trigger", t.name, "err", err)
		}
		return false
	case res.Err == raftstore.ErrCodeCondFailed:
		return false // the trigger was deleted: the reader stops it
	case !res.OK():
		ru.r.logger.Error("triggers: progress refused", "project", t.pid, "trigger", t.name, "err", res.Err)
		return false
	}
	return true
}

// settle records the outcome of an attempt of it, the head of lane l.
func (ru *run) settle(ctx context.Context, t *trig, l *lane, it *item, err error) {
	now := ru.r.clock.Now()
	m := ru.r.metrics
	tu := ru.r.tu
	if err == nil {
		if it.durable && !ru.commitOps(ctx, t, []raftstore.Op{{Kind: raftstore.OpDelete, Path: queuePath(t, &it.p), IfExists: true}}) {
			ru.pause(ctx, l, tu.MinBackoff)
			return
		}
		m.deliveries.WithLabelValues(t.pid, t.name, resultOK).Inc()
		if it.p.Attempts == 0 && it.ch != nil && !it.ch.Time.IsZero() && t.isWebhook() {
			m.latency.Observe(max(now.Sub(it.ch.Time), 0).Seconds())
		}
		t.mu.Lock()
		ru.removeLocked(t, l, it)
		t.st.Delivered++
		t.st.LastSuccessAt = now.UTC().Format(time.RFC3339Nano)
		t.mu.Unlock()
		return
	}
	it.p.Attempts++
	if it.p.FirstAttemptAt == 0 {
		it.p.FirstAttemptAt = now.UnixNano()
	}
	it.p.LastError = truncate(err.Error(), 500)
	t.mu.Lock()
	t.st.Failed++
	t.noteErrorLocked(err.Error(), now)
	t.mu.Unlock()
	if isPermanent(err) || now.Sub(time.Unix(0, it.p.FirstAttemptAt)) >= tu.RetryFor {
		it.p.NextAttemptAt = 0
		data, jerr := json.Marshal(&Dead{Parked: it.p, DeadAt: now.UTC().Format(time.RFC3339Nano)})
		if jerr != nil {
			ru.r.logger.Error("triggers: encode dead letter", "err", jerr)
			return
		}
		ops := []raftstore.Op{{Kind: raftstore.OpPut, Path: deadPath(t, &it.p), Data: data}}
		if it.durable {
			ops = append(ops, raftstore.Op{Kind: raftstore.OpDelete, Path: queuePath(t, &it.p), IfExists: true})
		}
		if !ru.commit(ctx, t, ops) {
			ru.pause(ctx, l, tu.MinBackoff)
			return
		}
		m.deliveries.WithLabelValues(t.pid, t.name, resultDead).Inc()
		ru.r.logger.Warn("triggers: event dead-lettered", "project", t.pid, "trigger", t.name, "path", it.p.Path,
			"revision", it.p.Revision, "attempts", it.p.Attempts, "err", err)
		t.mu.Lock()
		ru.removeLocked(t, l, it)
		t.st.Dead++
		t.mu.Unlock()
		return
	}
	wait := ru.r.backoff(it.p.Attempts)
	if ra, ok := retryAfterOf(err); ok {
		wait = min(ra, tu.MaxBackoff)
	}
	it.p.NextAttemptAt = now.Add(wait).UnixNano()
	data, jerr := json.Marshal(&it.p)
	if jerr != nil {
		ru.r.logger.Error("triggers: encode parked event", "err", jerr)
		return
	}
	if !ru.commit(ctx, t, []raftstore.Op{{Kind: raftstore.OpPut, Path: queuePath(t, &it.p), Data: data}}) {
		ru.pause(ctx, l, tu.MinBackoff)
		return
	}
	m.deliveries.WithLabelValues(t.pid, t.name, resultRetry).Inc()
	t.mu.Lock()
	if !it.durable {
		it.durable = true
		l.fresh--
		t.parked++
		ru.settleLocked(t, it)
	}
	t.mu.Unlock()
}

// commitOps writes ops without a condition (removing a delivered event
// needs none: removing what is gone is a no-op).
func (ru *run) commitOps(ctx context.Context, t *trig, ops []raftstore.Op) bool {
	res, err := ru.r.cfg.Store.Txn(ctx, &raftstore.Txn{Time: ru.r.clock.Now().UnixNano(), Ops: ops})
	if err != nil || !res.OK() {
		if ctx.Err() == nil {
			ru.r.logger.Warn("triggers: remove a delivered event", "project", t.pid, "trigger", t.name, "err", err)
		}
		return false
	}
	return true
}

func (t *trig) isWebhook() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.c != nil && t.c.Def.Action.Webhook != nil
}

// backoff is the wait after the n-th failed attempt: MinBackoff doubled
// per earlier failure, at most MaxBackoff, drawn from its upper half so
// that events failing together do not retry together.
func (r *Runner) backoff(n int) time.Duration {
	d := r.tu.MinBackoff
	for i := 1; i < n && d < r.tu.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, r.tu.MaxBackoff)
	return d/2 + rand.N(d/2+1)
}

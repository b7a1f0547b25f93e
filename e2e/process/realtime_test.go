package process

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgebase/edgebase/realtime/client"
)

// rtpEvent is one change: as a write's answer acknowledged it, or as a
// subscriber received it.
type rtpEvent struct {
	Rev        uint64
	Coll       string
	Type       string // client.TypeSet / client.TypeDelete
	Data       string // compacted JSON; "" for a delete
	UpdateTime string
	Marker     string // for unknown outcomes: a string the data contains
}

func (e rtpEvent) String() string {
	return fmt.Sprintf("{rev %d %s %s %s}", e.Rev, e.Type, e.Coll, e.Data)
}

func rtpCompact(b []byte) string {
	if len(b) == 0 || string(b) == "null" {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return "!invalid:" + string(b)
	}
	return buf.String()
}

// rtpLedger records what the writes' answers say: acknowledged changes, and
// writes whose outcome the writer could not know (a dropped connection or a
// 5xx while the cluster elected a leader), which may land at most once.
type rtpLedger struct {
	t   *testing.T
	c   *cluster
	via *proc
	pr  project

	mu      sync.Mutex
	acked   []rtpEvent
	maybe   []rtpEvent
	ops     int
	retries map[string]int
	last    map[string]string
}

func (l *rtpLedger) ack(e rtpEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acked = append(l.acked, e)
	l.ops++
}

func (l *rtpLedger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ops
}

func (l *rtpLedger) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := fmt.Sprintf("%d acknowledged writes, %d of unknown outcome", l.ops, len(l.maybe))
	for why, n := range l.retries {
		s += fmt.Sprintf("; %dx %s (last: %s)", n, why, l.last[why])
	}
	return s
}

// do runs one write until it is acknowledged: an answer that may mean
// "applied" is recorded as an unknown outcome before the retry.
func (l *rtpLedger) do(what, coll string, try func(attempt int) (*response, rtpEvent, error), done func(r *response) bool) bool {
	deadline := time.Now().Add(40 * time.Second)
	for attempt := 0; ; attempt++ {
		r, maybe, err := try(attempt)
		why := ""
		switch {
		case err == nil && (r.status == http.StatusOK || r.status == http.StatusCreated):
			return done(r)
		case err != nil || r.status >= 500:
			why = what + " unknown outcome"
			l.mu.Lock()
			l.maybe = append(l.maybe, maybe)
			l.mu.Unlock()
		case r.status == http.StatusConflict:
			why = what + " 409"
		default:
			l.t.Errorf("%s %s: %s", what, coll, r)
			return false
		}
		detail := fmt.Sprint(err)
		if err == nil {
			detail = r.String()
		}
		l.mu.Lock()
		l.retries[why]++
		l.last[why] = coll + ": " + detail
		l.mu.Unlock()
		if l.c.ctx.Err() != nil || time.Now().After(deadline) {
			l.t.Errorf("%s %s: not acknowledged within 40s: %s", what, coll, detail)
			return false
		}
		select { // pacing while a leader is elected, not synchronisation
		case <-time.After(50 * time.Millisecond):
		case <-l.c.ctx.Done():
		}
	}
}

func (l *rtpLedger) docEvent(r *response, coll, what string) (rtpEvent, bool) {
	var d doc
	rev, perr := strconv.ParseUint(r.header.Get("X-Revision"), 10, 64)
	if err := json.Unmarshal(r.body, &d); err != nil || perr != nil || rev == 0 || d.Revision != rev || d.Collection != coll {
		l.t.Errorf("%s %s: X-Revision %q and answer %s disagree", what, coll, r.header.Get("X-Revision"), r)
		return rtpEvent{}, false
	}
	return rtpEvent{Rev: rev, Coll: coll, Type: client.TypeSet, Data: rtpCompact(d.Data), UpdateTime: d.UpdateTime}, true
}

func (l *rtpLedger) post(coll string, data map[string]any) (rtpEvent, bool) {
	var ev rtpEvent
	ok := l.do("POST", coll, func(attempt int) (*response, rtpEvent, error) {
		d := map[string]any{"a": attempt}
		for k, v := range data {
			d[k] = v
		}
		b, _ := json.Marshal(d)
		r, err := doJSON(l.c.ctx, httpClient, 15*time.Second, http.MethodPost, l.via.url()+"/api/db", l.pr.headers(), map[string]any{"collection": coll, "data": d})
		return r, rtpEvent{Coll: coll, Type: client.TypeSet, Data: string(b)}, err
	}, func(r *response) bool {
		var ok bool
		if ev, ok = l.docEvent(r, coll, "POST"); ok {
			l.ack(ev)
		}
		return ok
	})
	return ev, ok
}

func (l *rtpLedger) put(coll, value string) bool {
	return l.do("PUT", coll, func(attempt int) (*response, rtpEvent, error) {
		v := fmt.Sprintf("%s.%d", value, attempt)
		r, err := doJSON(l.c.ctx, httpClient, 15*time.Second, http.MethodPut, l.via.url()+"/api/db?collection="+url.QueryEscape(coll), l.pr.headers(),
			map[string]any{"oldKey": "f", "newKey": "f", "value": v})
		return r, rtpEvent{Coll: coll, Type: client.TypeSet, Marker: `"f":"` + v + `"`}, err
	}, func(r *response) bool {
		ev, ok := l.docEvent(r, coll, "PUT")
		if ok {
			l.ack(ev)
		}
		return ok
	})
}

func (l *rtpLedger) del(coll string) bool {
	unknownBefore := false
	return l.do("DELETE", coll, func(int) (*response, rtpEvent, error) {
		r, err := doJSON(l.c.ctx, httpClient, 15*time.Second, http.MethodDelete, l.via.url()+"/api/db?collection="+url.QueryEscape(coll), l.pr.headers(), nil)
		if err == nil && r.status == http.StatusNotFound && unknownBefore {
			// An earlier attempt of unknown outcome deleted it.
			r = &response{status: http.StatusOK, header: http.Header{"X-Already": {"1"}}}
		}
		if err != nil || r.status >= 500 {
			unknownBefore = true
		}
		return r, rtpEvent{Coll: coll, Type: client.TypeDelete}, err
	}, func(r *response) bool {
		if r.header.Get("X-Already") != "" {
			l.mu.Lock()
			l.ops++
			l.mu.Unlock()
			return true
		}
		var out struct {
			Deleted  bool   `json:"deleted"`
			Revision uint64 `json:"revision"`
		}
		rev, perr := strconv.ParseUint(r.header.Get("X-Revision"), 10, 64)
		if err := json.Unmarshal(r.body, &out); err != nil || perr != nil || !out.Deleted || out.Revision != rev || rev == 0 {
			l.t.Errorf("DELETE %s: X-Revision %q and answer %s disagree", coll, r.header.Get("X-Revision"), r)
			return false
		}
		l.ack(rtpEvent{Rev: rev, Coll: coll, Type: client.TypeDelete})
		return true
	})
}

// rtpCollector gathers a subscription's changes until it ends.
type rtpCollector struct {
	name   string
	conn   *client.Conn
	sub    *client.Subscription
	start  uint64
	docs   []client.Document
	closed chan struct{}

	mu     sync.Mutex
	events []rtpEvent
	other  []string
	last   uint64
	wake   chan struct{}
	ended  time.Time
}

func rtpDial(t *testing.T, name string, p *proc, pr project, reconnect bool, prefix string, opts ...client.SubOption) *rtpCollector {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := client.Dial(ctx, client.Config{URL: p.url(), Token: pr.Token, ProjectID: pr.ID, APIKey: pr.APIKey, Reconnect: reconnect,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 500 * time.Millisecond})
	if err != nil {
		t.Fatalf("%s: dial %s: %v", name, p.id, err)
	}
	t.Cleanup(func() { _ = conn.CloseNow() })
	sub, err := conn.Subscribe(ctx, prefix, true, opts...)
	if err != nil {
		t.Fatalf("%s: subscribe %s: %v", name, prefix, err)
	}
	col := &rtpCollector{name: name, conn: conn, sub: sub, start: sub.Revision(), docs: sub.Documents(), closed: make(chan struct{}), wake: make(chan struct{})}
	go func() {
		defer close(col.closed)
		for ev := range sub.Events() {
			col.mu.Lock()
			if ev.Kind == client.KindChange {
				col.events = append(col.events, rtpEvent{Rev: ev.Revision, Coll: ev.Collection, Type: ev.Type, Data: rtpCompact(ev.Data), UpdateTime: ev.UpdateTime})
				col.last = ev.Revision
			} else {
				col.other = append(col.other, fmt.Sprintf("%s %d", ev.Kind, ev.Revision))
			}
			close(col.wake)
			col.wake = make(chan struct{})
			col.mu.Unlock()
		}
		col.mu.Lock()
		col.ended = time.Now()
		close(col.wake)
		col.wake = make(chan struct{})
		col.mu.Unlock()
	}()
	return col
}

// waitFor waits, event by event, until cond holds or total passed.
func (col *rtpCollector) waitFor(t *testing.T, what string, total time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(total)
	defer deadline.Stop()
	for {
		col.mu.Lock()
		ok, wake, n, last := cond(), col.wake, len(col.events), col.last
		col.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-wake:
		case <-deadline.C:
			t.Fatalf("%s: %s not reached within %v (%d changes, last revision %d, ended: %v)", col.name, what, total, n, last, col.sub.Err())
		}
	}
}

func (col *rtpCollector) received() ([]rtpEvent, []string) {
	col.mu.Lock()
	defer col.mu.Unlock()
	return slices.Clone(col.events), slices.Clone(col.other)
}

// rtpCheck compares a received sequence (above the starting revision) with
// the acknowledged writes: revision order, no revision shared (one document
// per REST write), every acknowledged change exactly once with its data and
// update time, anything else the single landing of an unknown outcome.
func rtpCheck(t *testing.T, name string, got []rtpEvent, above uint64, l *rtpLedger) {
	t.Helper()
	l.mu.Lock()
	var want []rtpEvent
	for _, e := range l.acked {
		if e.Rev > above {
			want = append(want, e)
		}
	}
	maybe := slices.Clone(l.maybe)
	l.mu.Unlock()
	sort.Slice(want, func(i, j int) bool { return want[i].Rev < want[j].Rev })
	byRev := map[uint64]rtpEvent{}
	for _, e := range want {
		byRev[e.Rev] = e
	}
	errs := 0
	report := func(format string, args ...any) {
		if errs++; errs <= 12 {
			t.Errorf("%s: "+format, append([]any{name}, args...)...)
		}
	}
	seen := map[uint64]int{}
	var prev uint64
	for i, e := range got {
		if e.Rev <= above {
			report("change %d %v at or below the starting revision %d", i, e, above)
		}
		if e.Rev <= prev {
			report("change %d %v after revision %d: not strictly increasing (duplicate or out of order)", i, e, prev)
		}
		prev = max(prev, e.Rev)
		if w, ok := byRev[e.Rev]; ok {
			seen[e.Rev]++
			if e.Coll != w.Coll || e.Type != w.Type || e.Data != w.Data || (w.Type == client.TypeSet && e.UpdateTime != w.UpdateTime) {
				report("change %v (updateTime %q) differs from the acknowledged write %v (updateTime %q)", e, e.UpdateTime, w, w.UpdateTime)
			}
			continue
		}
		k := slices.IndexFunc(maybe, func(m rtpEvent) bool {
			return m.Coll == e.Coll && m.Type == e.Type && (m.Data == "" || m.Data == e.Data) && (m.Marker == "" || strings.Contains(e.Data, m.Marker))
		})
		if k < 0 {
			report("change %d %v matches no acknowledged write and no write of unknown outcome", i, e)
			continue
		}
		maybe = slices.Delete(maybe, k, k+1)
	}
	for _, w := range want {
		switch seen[w.Rev] {
		case 0:
			report("acknowledged change %v never received (gap)", w)
		case 1:
		default:
			report("acknowledged change %v received %d times", w, seen[w.Rev])
		}
	}
	if errs > 12 {
		t.Errorf("%s: ... %d problems in all", name, errs)
	}
}

// TestRealtimeKillNineResumeOnAnotherProcess runs three real edgebase
// processes. A realtime subscriber on n3 (realtime/client) follows a prefix
// while documents are written through n1; n3 is killed with SIGKILL in the
// middle of the stream; a new subscription on n2 resumes with since = the
// last revision received minus one. Together the two receive every
// acknowledged write exactly once, in order, and snapshot + changes equal
// what n2 lists.
func TestRealtimeKillNineResumeOnAnotherProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 170*time.Second)
	defer cancel()
	t0 := time.Now()
	c := mustStartCluster(t, ctx, clusterOpts{})
	t.Logf("3-voter cluster ready in %v", time.Since(t0).Round(time.Millisecond))
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	rtpKillNine(t, ctx, c, n3, n1, n2)
}

// TestRealtimeKillNineLeaderResumeOnFollower is the same with the
// subscriber on the leader, writes through a follower (which see the
// election: answers of unknown outcome, retried), and the resume on the
// other follower.
func TestRealtimeKillNineLeaderResumeOnFollower(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 170*time.Second)
	defer cancel()
	t0 := time.Now()
	c := mustStartCluster(t, ctx, clusterOpts{})
	t.Logf("3-voter cluster ready in %v", time.Since(t0).Round(time.Millisecond))
	leader := c.mustLeader(c.nodes[0], 10*time.Second)
	var followers []*proc
	for _, p := range c.nodes {
		if p != leader {
			followers = append(followers, p)
		}
	}
	rtpKillNine(t, ctx, c, leader, followers[0], followers[1])
}

// rtpKillNine subscribes on victim, writes through via, kills victim with
// SIGKILL mid-stream and resumes on resume.
func rtpKillNine(t *testing.T, ctx context.Context, c *cluster, victim, via, resume *proc) {
	t0 := time.Now()
	pr := c.mustCreateProject(via)
	const prefix = "live"
	l := &rtpLedger{t: t, c: c, via: via, pr: pr, retries: map[string]int{}, last: map[string]string{}}
	for i := 0; i < 20; i++ {
		if _, ok := l.post(fmt.Sprintf("%s/seed-%02d", prefix, i), map[string]any{"seed": i}); !ok {
			t.Fatal("seed write failed")
		}
	}
	a := rtpDial(t, "subscriber on "+victim.id, victim, pr, false, prefix)
	if len(a.docs) != 20 {
		t.Fatalf("%s: snapshot of %d documents, want 20", a.name, len(a.docs))
	}

	// Three writers through via: creates, replacements, field updates and
	// deletes of their own documents.
	const writers, perWriter = 3, 250
	start := time.Now()
	var wg sync.WaitGroup
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			live := []string{fmt.Sprintf("%s/seed-%02d", prefix, g)}
			for n := 0; n < perWriter && ctx.Err() == nil; n++ {
				switch k := n % 10; {
				case k == 4 && len(live) > 0:
					l.put(live[n%len(live)], fmt.Sprintf("g%d-n%d", g, n))
				case k == 7 && len(live) > 0:
					i := (n * 7) % len(live)
					if l.del(live[i]) {
						live = slices.Delete(live, i, i+1)
					}
				case k == 9 && len(live) > 0:
					l.post(live[(n*3)%len(live)], map[string]any{"g": g, "n": n, "replaced": true})
				default:
					coll := fmt.Sprintf("%s/g%d-%03d", prefix, g, n)
					if _, ok := l.post(coll, map[string]any{"g": g, "n": n}); ok {
						live = append(live, coll)
					}
				}
			}
		}()
	}

	a.waitFor(t, "150 changes", 60*time.Second, func() bool { return len(a.events) >= 150 })
	st, _ := c.clusterStatus(via)
	leaderID := ""
	if st != nil {
		leaderID = st.Leader
	}
	killAt := time.Now()
	victim.mustKill9()
	select {
	case <-a.closed:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: still open 20s after kill -9 of %s", a.name, victim.id)
	}
	before, _ := a.received()
	last := before[len(before)-1].Rev
	since := last - 1
	t.Logf("kill -9 %s (leader was %s) after %d acknowledged writes, %v into the stream; its subscriber ended %v later (%v) with %d changes up to %d",
		victim.id, leaderID, l.count(), killAt.Sub(start).Round(time.Millisecond), a.ended.Sub(killAt).Round(time.Millisecond), a.sub.Err(), len(before), last)

	b := rtpDial(t, "resumed on "+resume.id, resume, pr, true, prefix, client.Since(since))
	t.Logf("resumed on %s with since %d, %v after the kill", resume.id, since, time.Since(killAt).Round(time.Millisecond))
	wg.Wait()
	fence, ok := l.post(prefix+"/fence", map[string]any{"fence": true})
	if !ok {
		t.Fatal("fence write failed")
	}
	t.Logf("%s in %v", l.summary(), time.Since(start).Round(time.Millisecond))
	b.waitFor(t, fmt.Sprintf("revision %d", fence.Rev), 60*time.Second, func() bool { return b.last >= fence.Rev })

	after, other := b.received()
	if len(other) > 0 {
		t.Errorf("%s: unexpected events %v", b.name, other)
	}
	// Merge: the changes of the last revision the victim delivered come
	// again from resume (since = last - 1) and are dropped; nothing at or below since.
	merged := slices.Clone(before)
	for _, e := range after {
		if e.Rev <= since {
			t.Errorf("%s: got %v at or below since %d", b.name, e, since)
		}
		if e.Rev == last && e.Coll == before[len(before)-1].Coll {
			continue
		}
		merged = append(merged, e)
	}
	rtpCheck(t, a.name+" then "+b.name, merged, a.start, l)

	// Snapshot + changes = what resume lists.
	state := map[string]rtpEvent{}
	for _, d := range a.docs {
		state[d.Collection] = rtpEvent{Rev: d.Revision, Coll: d.Collection, Data: rtpCompact(d.Data)}
	}
	for _, e := range merged {
		if e.Type == client.TypeDelete {
			delete(state, e.Coll)
		} else {
			state[e.Coll] = rtpEvent{Rev: e.Rev, Coll: e.Coll, Data: e.Data}
		}
	}
	listed := c.mustListAll(resume, pr, prefix, fence.Rev, 500)
	if len(listed) != len(state) {
		t.Errorf("%s lists %d documents under %s; snapshot + changes hold %d", resume.id, len(listed), prefix, len(state))
	}
	for _, d := range listed {
		s, ok := state[d.Collection]
		if !ok || s.Rev != d.Revision || s.Data != rtpCompact(d.Data) {
			t.Errorf("%s lists %s rev %d %s; snapshot + changes give %+v (present %v)", resume.id, d.Collection, d.Revision, d.Data, s, ok)
		}
	}
	t.Logf("%s: snapshot of %d at %d, %d changes before the kill, %d after resuming on %s; %d documents at the end; total %v",
		a.name, len(a.docs), a.start, len(before), len(after), resume.id, len(listed), time.Since(t0).Round(time.Millisecond))
}

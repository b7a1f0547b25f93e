package process

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/streamcheck"
	"github.com/edgebase/edgebase/realtime/client"
)

// rtpWriter writes through one process and records what the answers say in
// a ledger: acknowledged changes, and writes whose outcome it could not know
// (a dropped connection or a 5xx while the cluster elected a leader), which
// may land at most once.
type rtpWriter struct {
	t   *testing.T
	c   *cluster
	via *proc
	pr  project
	l   *streamcheck.Ledger
}

// do runs one write until it is acknowledged: an answer that may mean
// "applied" is recorded as an unknown outcome before the retry.
func (w *rtpWriter) do(what, coll string, try func(attempt int) (*response, streamcheck.Event, error), done func(r *response) bool) bool {
	deadline := time.Now().Add(40 * time.Second)
	for attempt := 0; ; attempt++ {
		r, maybe, err := try(attempt)
		detail := fmt.Sprint(err)
		if err == nil {
			detail = r.String()
		}
		switch {
		case err == nil && (r.status == http.StatusOK || r.status == http.StatusCreated):
			return done(r)
		case err != nil || r.status >= 500:
			w.l.Unknown(what+" unknown outcome", coll+": "+detail, maybe)
		case r.status == http.StatusConflict:
			w.l.Retried(what+" 409", coll+": "+detail)
		default:
			w.t.Errorf("%s %s: %s", what, coll, r)
			return false
		}
		if w.c.ctx.Err() != nil || time.Now().After(deadline) {
			w.t.Errorf("%s %s: not acknowledged within 40s: %s", what, coll, detail)
			return false
		}
		select { // pacing while a leader is elected, not synchronisation
		case <-time.After(50 * time.Millisecond):
		case <-w.c.ctx.Done():
		}
	}
}

func (w *rtpWriter) docEvent(r *response, coll, what string) (streamcheck.Event, bool) {
	var d doc
	rev, perr := strconv.ParseUint(r.header.Get("X-Revision"), 10, 64)
	if err := json.Unmarshal(r.body, &d); err != nil || perr != nil || rev == 0 || d.Revision != rev || d.Collection != coll {
		w.t.Errorf("%s %s: X-Revision %q and answer %s disagree", what, coll, r.header.Get("X-Revision"), r)
		return streamcheck.Event{}, false
	}
	return streamcheck.Event{Rev: rev, Coll: coll, Type: client.TypeSet, Data: streamcheck.Compact(d.Data), UpdateTime: d.UpdateTime}, true
}

func (w *rtpWriter) post(coll string, data map[string]any) (streamcheck.Event, bool) {
	var ev streamcheck.Event
	ok := w.do("POST", coll, func(attempt int) (*response, streamcheck.Event, error) {
		d := map[string]any{"a": attempt}
		for k, v := range data {
			d[k] = v
		}
		b, _ := json.Marshal(d)
		r, err := doJSON(w.c.ctx, httpClient, 15*time.Second, http.MethodPost, w.via.url()+"/api/db", w.pr.Headers(), map[string]any{"collection": coll, "data": d})
		return r, streamcheck.Event{Coll: coll, Type: client.TypeSet, Data: string(b)}, err
	}, func(r *response) bool {
		var ok bool
		if ev, ok = w.docEvent(r, coll, "POST"); ok {
			w.l.Ack(false, ev)
		}
		return ok
	})
	return ev, ok
}

func (w *rtpWriter) put(coll, value string) bool {
	return w.do("PUT", coll, func(attempt int) (*response, streamcheck.Event, error) {
		v := fmt.Sprintf("%s.%d", value, attempt)
		r, err := doJSON(w.c.ctx, httpClient, 15*time.Second, http.MethodPut, w.via.url()+"/api/db?collection="+url.QueryEscape(coll), w.pr.Headers(),
			map[string]any{"oldKey": "f", "newKey": "f", "value": v})
		return r, streamcheck.Event{Coll: coll, Type: client.TypeSet, Marker: `"f":"` + v + `"`}, err
	}, func(r *response) bool {
		ev, ok := w.docEvent(r, coll, "PUT")
		if ok {
			w.l.Ack(false, ev)
		}
		return ok
	})
}

func (w *rtpWriter) del(coll string) bool {
	unknownBefore := false
	return w.do("DELETE", coll, func(int) (*response, streamcheck.Event, error) {
		r, err := doJSON(w.c.ctx, httpClient, 15*time.Second, http.MethodDelete, w.via.url()+"/api/db?collection="+url.QueryEscape(coll), w.pr.Headers(), nil)
		if err == nil && r.status == http.StatusNotFound && unknownBefore {
			// An earlier attempt of unknown outcome deleted it.
			r = &response{status: http.StatusOK, header: http.Header{"X-Already": {"1"}}}
		}
		if err != nil || r.status >= 500 {
			unknownBefore = true
		}
		return r, streamcheck.Event{Coll: coll, Type: client.TypeDelete}, err
	}, func(r *response) bool {
		if r.header.Get("X-Already") != "" {
			w.l.Ack(false) // an operation without a change of its own
			return true
		}
		var out struct {
			Deleted  bool   `json:"deleted"`
			Revision uint64 `json:"revision"`
		}
		rev, perr := strconv.ParseUint(r.header.Get("X-Revision"), 10, 64)
		if err := json.Unmarshal(r.body, &out); err != nil || perr != nil || !out.Deleted || out.Revision != rev || rev == 0 {
			w.t.Errorf("DELETE %s: X-Revision %q and answer %s disagree", coll, r.header.Get("X-Revision"), r)
			return false
		}
		w.l.Ack(false, streamcheck.Event{Rev: rev, Coll: coll, Type: client.TypeDelete})
		return true
	})
}

func rtpDial(t *testing.T, name string, p *proc, pr project, reconnect bool, prefix string, opts ...client.SubOption) *streamcheck.Collector {
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
	return streamcheck.NewCollector(name, sub)
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
	w := &rtpWriter{t: t, c: c, via: via, pr: pr, l: streamcheck.NewLedger()}
	for i := 0; i < 20; i++ {
		if _, ok := w.post(fmt.Sprintf("%s/seed-%02d", prefix, i), map[string]any{"seed": i}); !ok {
			t.Fatal("seed write failed")
		}
	}
	a := rtpDial(t, "subscriber on "+victim.id, victim, pr, false, prefix)
	if len(a.Docs) != 20 {
		t.Fatalf("%s: snapshot of %d documents, want 20", a.Name, len(a.Docs))
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
					w.put(live[n%len(live)], fmt.Sprintf("g%d-n%d", g, n))
				case k == 7 && len(live) > 0:
					i := (n * 7) % len(live)
					if w.del(live[i]) {
						live = slices.Delete(live, i, i+1)
					}
				case k == 9 && len(live) > 0:
					w.post(live[(n*3)%len(live)], map[string]any{"g": g, "n": n, "replaced": true})
				default:
					coll := fmt.Sprintf("%s/g%d-%03d", prefix, g, n)
					if _, ok := w.post(coll, map[string]any{"g": g, "n": n}); ok {
						live = append(live, coll)
					}
				}
			}
		}()
	}

	a.WaitCount(t, 150, 60*time.Second)
	st, _ := c.clusterStatus(via)
	leaderID := ""
	if st != nil {
		leaderID = st.Leader
	}
	killAt := time.Now()
	victim.mustKill9()
	select {
	case <-a.Closed():
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: still open 20s after kill -9 of %s", a.Name, victim.id)
	}
	before, _ := a.Snapshot()
	last := before[len(before)-1].Rev
	since := last - 1
	ended, _ := a.End()
	t.Logf("kill -9 %s (leader was %s) after %d acknowledged writes, %v into the stream; its subscriber ended %v later (%v) with %d changes up to %d",
		victim.id, leaderID, w.l.Acks(), killAt.Sub(start).Round(time.Millisecond), ended.Sub(killAt).Round(time.Millisecond), a.Sub.Err(), len(before), last)

	b := rtpDial(t, "resumed on "+resume.id, resume, pr, true, prefix, client.Since(since))
	t.Logf("resumed on %s with since %d, %v after the kill", resume.id, since, time.Since(killAt).Round(time.Millisecond))
	wg.Wait()
	fence, ok := w.post(prefix+"/fence", map[string]any{"fence": true})
	if !ok {
		t.Fatal("fence write failed")
	}
	t.Logf("%s in %v", w.l.Summary(), time.Since(start).Round(time.Millisecond))
	b.WaitRev(t, fence.Rev, 60*time.Second)

	after, other := b.Snapshot()
	if len(other) > 0 {
		t.Errorf("%s: unexpected events %v", b.Name, other)
	}
	// Merge: the changes of the last revision the victim delivered come
	// again from resume (since = last - 1) and are dropped; nothing at or below since.
	merged := slices.Clone(before)
	for _, e := range after {
		if e.Rev <= since {
			t.Errorf("%s: got %v at or below since %d", b.Name, e, since)
		}
		if e.Rev == last && e.Coll == before[len(before)-1].Coll {
			continue
		}
		merged = append(merged, e)
	}
	streamcheck.Check(t, a.Name+" then "+b.Name, merged, a.Start, w.l)

	// Snapshot + changes = what resume lists.
	state := map[string]streamcheck.Event{}
	for _, d := range a.Docs {
		state[d.Collection] = streamcheck.Event{Rev: d.Revision, Coll: d.Collection, Data: streamcheck.Compact(d.Data)}
	}
	for _, e := range merged {
		if e.Type == client.TypeDelete {
			delete(state, e.Coll)
		} else {
			state[e.Coll] = streamcheck.Event{Rev: e.Rev, Coll: e.Coll, Data: e.Data}
		}
	}
	listed := c.mustListAll(resume, pr, prefix, fence.Rev, 500)
	if len(listed) != len(state) {
		t.Errorf("%s lists %d documents under %s; snapshot + changes hold %d", resume.id, len(listed), prefix, len(state))
	}
	for _, d := range listed {
		s, ok := state[d.Collection]
		if !ok || s.Rev != d.Revision || s.Data != streamcheck.Compact(d.Data) {
			t.Errorf("%s lists %s rev %d %s; snapshot + changes give %+v (present %v)", resume.id, d.Collection, d.Revision, d.Data, s, ok)
		}
	}
	t.Logf("%s: snapshot of %d at %d, %d changes before the kill, %d after resuming on %s; %d documents at the end; total %v",
		a.Name, len(a.Docs), a.Start, len(before), len(after), resume.id, len(listed), time.Since(t0).Round(time.Millisecond))
}

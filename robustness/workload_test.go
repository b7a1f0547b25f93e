package robustness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/edgebase/edgebase/realtime/client"
)

// kvCollection holds the small key set the clients contend on; logCollection
// gets one new document per acknowledged create, never overwritten, so that
// "no acknowledged write is lost" is a plain presence check.
const (
	kvCollection  = "kv"
	logCollection = "log"
	numKeys       = 4
)

func kvKey(i int) string { return kvCollection + "/k" + strconv.Itoa(i) }

// ackedCreate is an acknowledged create of a log document.
type ackedCreate struct {
	Path  string `json:"path"`
	Value string `json:"value"`
	Rev   uint64 `json:"rev"`
	Node  string `json:"node"`
	Acked int64  `json:"acked"` // when the answer arrived (ns since the run began)
}

// workload runs clients pinned to nodes and records what they saw.
type workload struct {
	c     *cluster
	start time.Time
	// opTimeout bounds one request: past it the outcome is unknown.
	opTimeout time.Duration

	mu      sync.Mutex
	recs    []Record
	creates []ackedCreate
	counts  map[Outcome]int
}

func newWorkload(c *cluster) *workload {
	return &workload{c: c, start: time.Now(), opTimeout: 4 * time.Second, counts: map[Outcome]int{}}
}

func (w *workload) now() int64 { return time.Since(w.start).Nanoseconds() }

func (w *workload) record(r Record) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.recs = append(w.recs, r)
	w.counts[r.Output.Outcome]++
}

// snapshot returns copies of what was recorded.
func (w *workload) snapshot() ([]Record, []ackedCreate) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Record(nil), w.recs...), append([]ackedCreate(nil), w.creates...)
}

// okCount is the number of operations that completed with an answer.
func (w *workload) okCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.counts[OutOK] + w.counts[OutNotFound] + w.counts[OutPrecondition]
}

// outcome classifies an answer. Only an answer the server gave, or a
// connection that was never made, tells whether a write took effect; every
// other failure leaves it unknown.
func outcome(r *response, err error) Outcome {
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return OutFailed
		}
		return OutUnknown
	}
	switch {
	case r.Status >= 200 && r.Status < 300:
		return OutOK
	case r.Status == http.StatusNotFound:
		return OutNotFound
	case r.Status == http.StatusPreconditionFailed:
		return OutPrecondition
	case r.Status == http.StatusForbidden && errorCode(r) == "forbidden":
		return OutForbidden // refused by the access rules (or a role) at its commit
	case r.Status >= 400 && r.Status < 500:
		return OutFailed // refused before it was proposed
	default:
		return OutUnknown // 5xx: may or may not have been applied
	}
}

// errorCode is the code of an error answer ({"error":{"code"}}), or "".
func errorCode(r *response) string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &e)
	return e.Error.Code
}

// runClient issues operations through n until ctx ends. Each client has its
// own rng (derived from the run's seed) and remembers the last revision it
// saw per key, for its conditional puts.
func (w *workload) runClient(ctx context.Context, id int, n *node, rng *rand.Rand) {
	lastRev := map[string]uint64{}
	seq := 0
	for ctx.Err() == nil {
		seq++
		key := kvKey(rng.IntN(numKeys))
		val := fmt.Sprintf("c%d-%d", id, seq)
		var in Input
		switch p := rng.IntN(100); {
		case p < 30:
			in = Input{Kind: OpPut, Key: key, Value: val}
		case p < 65:
			in = Input{Kind: OpGet, Key: key}
		case p < 80:
			in = Input{Kind: OpCAS, Key: key, Value: val, IfRev: lastRev[key]}
		case p < 88:
			in = Input{Kind: OpDelete, Key: key}
		default:
			w.create(n, fmt.Sprintf("%s/c%d-%d", logCollection, id, seq), val)
			continue
		}
		// The request runs on the test's context, not ctx: an operation in
		// flight when the load stops is finished, not cut (that would make
		// its outcome unknown for no reason).
		rec := w.do(id, n, in)
		w.record(rec)
		if rec.Output.Outcome == OutOK && rec.Output.Rev > 0 {
			lastRev[key] = rec.Output.Rev
		}
		// Pace the clients so a history stays a size porcupine checks in
		// seconds: a few thousand operations per run.
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(5+rng.IntN(20)) * time.Millisecond):
		}
	}
}

// do runs one operation on n and records its times and outcome.
func (w *workload) do(clientID int, n *node, in Input) Record {
	rec := Record{Client: clientID, Node: n.id, Input: in}
	h := w.c.pr.Headers()
	if clientID%2 == 0 {
		// Without X-API-Key a write checks the token on local state and
		// carries what it read as conditions (the fast path): half the
		// clients take it, half the path through a strong read.
		delete(h, "X-API-Key")
	}
	q := "/api/db?collection=" + url.QueryEscape(in.Key)
	var r *response
	var err error
	rec.Call = w.now()
	switch in.Kind {
	case OpPut:
		r, err = w.c.do(n, w.opTimeout, http.MethodPost, "/api/db", h, map[string]any{"collection": in.Key, "data": map[string]string{"v": in.Value}})
	case OpCAS:
		h["If-Match"] = strconv.FormatUint(in.IfRev, 10)
		r, err = w.c.do(n, w.opTimeout, http.MethodPost, "/api/db", h, map[string]any{"collection": in.Key, "data": map[string]string{"v": in.Value}})
	case OpGet:
		r, err = w.c.do(n, w.opTimeout, http.MethodGet, q, h, nil)
	case OpDelete:
		r, err = w.c.do(n, w.opTimeout, http.MethodDelete, q, h, nil)
	}
	rec.Return = w.now()
	rec.Output.Outcome = outcome(r, err)
	if err != nil {
		rec.Err = err.Error()
	} else if rec.Output.Outcome != OutOK {
		rec.Err = r.String()
	}
	if rec.Output.Outcome == OutOK {
		if perr := parseOK(in.Kind, r, &rec.Output); perr != nil {
			// An answer we cannot read is a failure of the service: keep it
			// visible in the history as unknown, and in Err.
			rec.Output = Output{Outcome: OutUnknown}
			rec.Err = perr.Error()
		}
	}
	return rec
}

// parseOK fills out from a 200/201 answer.
func parseOK(kind OpKind, r *response, out *Output) error {
	switch kind {
	case OpPut, OpCAS, OpGet:
		var d struct {
			Data struct {
				V string `json:"v"`
			} `json:"data"`
			Revision uint64 `json:"revision"`
		}
		if err := json.Unmarshal(r.Body, &d); err != nil || d.Revision == 0 {
			return fmt.Errorf("answer %s: not a document (%v)", r, err)
		}
		out.Rev = d.Revision
		if kind == OpGet {
			out.Value = d.Data.V
		} else if x := r.Header.Get("X-Revision"); x != strconv.FormatUint(d.Revision, 10) {
			return fmt.Errorf("answer %s: X-Revision %q differs from the document's revision", r, x)
		}
	case OpDelete:
		var d struct {
			Deleted  bool   `json:"deleted"`
			Revision uint64 `json:"revision"`
		}
		if err := json.Unmarshal(r.Body, &d); err != nil || !d.Deleted || d.Revision == 0 {
			return fmt.Errorf("answer %s: not a deletion (%v)", r, err)
		}
		out.Rev = d.Revision
	}
	return nil
}

// create writes a new log document and remembers it when acknowledged.
func (w *workload) create(n *node, path, val string) {
	r, err := w.c.do(n, w.opTimeout, http.MethodPost, "/api/db", w.c.pr.Headers(), map[string]any{"collection": path, "data": map[string]string{"v": val}})
	if outcome(r, err) != OutOK {
		return
	}
	rev, perr := strconv.ParseUint(r.Header.Get("X-Revision"), 10, 64)
	if perr != nil {
		return
	}
	w.mu.Lock()
	w.creates = append(w.creates, ackedCreate{Path: path, Value: val, Rev: rev, Node: n.id, Acked: w.now()})
	w.mu.Unlock()
}

// ---- realtime ----

// streamRecorder keeps one realtime subscription to the kv collection on a
// node, with the client's automatic reconnect and resume, and records what
// it delivers.
type streamRecorder struct {
	name string
	node *node
	conn *client.Conn
	sub  *client.Subscription

	mu     sync.Mutex
	stream Stream
	err    error
	done   chan struct{}
}

// startStream subscribes through n; since nil takes a snapshot first.
func (c *cluster) startStream(ctx context.Context, name string, n *node, since *uint64) (*streamRecorder, error) {
	conn, err := client.Dial(ctx, client.Config{URL: n.url(), Token: c.pr.Token, ProjectID: c.pr.ID, APIKey: c.pr.APIKey,
		Reconnect: true, MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second, EventBuffer: 4096})
	if err != nil {
		return nil, fmt.Errorf("realtime dial %s: %w", n.id, err)
	}
	var opts []client.SubOption
	if since != nil {
		opts = append(opts, client.Since(*since))
	}
	sub, err := conn.Subscribe(ctx, kvCollection, true, opts...)
	if err != nil {
		_ = conn.CloseNow()
		return nil, fmt.Errorf("subscribe on %s: %w", n.id, err)
	}
	s := &streamRecorder{name: name, node: n, conn: conn, sub: sub, done: make(chan struct{}),
		stream: Stream{Name: name, Node: n.id, From: sub.Revision(), Resumed: since != nil}}
	if since != nil {
		s.stream.From = *since
	}
	go s.collect()
	return s, nil
}

func (s *streamRecorder) collect() {
	defer close(s.done)
	for ev := range s.sub.Events() {
		s.mu.Lock()
		switch ev.Kind {
		case client.KindChange:
			s.stream.Events = append(s.stream.Events, StreamEvent{Revision: ev.Revision, Collection: ev.Collection, Type: ev.Type, Data: ev.Data})
		case client.KindReset, client.KindSnapshot:
			// A reset would mean the log no longer held what followed: with
			// an hour of retention it never should here.
			s.err = fmt.Errorf("%s: unexpected %s event at revision %d", s.name, ev.Kind, ev.Revision)
		}
		s.mu.Unlock()
	}
}

// last is the highest revision delivered so far (From if none).
func (s *streamRecorder) last() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := len(s.stream.Events); k > 0 {
		return s.stream.Events[k-1].Revision
	}
	return s.stream.From
}

// stop closes the connection and returns what was recorded.
func (s *streamRecorder) stop() (Stream, error) {
	_ = s.conn.CloseNow()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stream
	st.Events = append([]StreamEvent(nil), st.Events...)
	return st, s.err
}

package process

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/fcmfake"
	"github.com/edgebase/edgebase/internal/hookcheck"
)

// triggerFlags are what the trigger tests run every node with: the
// receiver on loopback allowed, and retries short enough to see a dead
// letter within seconds.
var triggerFlags = []string{
	"--allow-private-webhooks", "127.0.0.1",
	"--trigger-min-backoff", "50ms",
	"--trigger-max-backoff", "200ms",
	"--trigger-retry-for", "3s",
}

// ---- the triggers API ----

type triggerStatus struct {
	Cursor        uint64 `json:"cursor"`
	LagRevisions  uint64 `json:"lagRevisions"`
	Pending       int    `json:"pending"`
	DeadLetters   int    `json:"deadLetters"`
	Delivered     uint64 `json:"delivered"`
	Failed        uint64 `json:"failed"`
	Dead          uint64 `json:"dead"`
	LoopStops     uint64 `json:"loopStops"`
	LastError     string `json:"lastError"`
	LastErrorAt   string `json:"lastErrorAt"`
	LastSuccessAt string `json:"lastSuccessAt"`
}

type triggerView struct {
	Name      string   `json:"name"`
	Match     string   `json:"match"`
	On        []string `json:"on"`
	Condition string   `json:"condition"`
	Action    struct {
		Webhook *struct {
			URL        string `json:"url"`
			Secret     string `json:"secret"`
			SecretHint string `json:"secretHint"`
		} `json:"webhook"`
		Push  json.RawMessage `json:"push"`
		Write json.RawMessage `json:"write"`
	} `json:"action"`
	CreatedAt string        `json:"createdAt"`
	UpdatedAt string        `json:"updatedAt"`
	Status    triggerStatus `json:"status"`
}

type apiErr struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field"`
	} `json:"error"`
}

func (c *cluster) triggers(p *proc, pr project, method, path string, body any) (*response, error) {
	r, err := doJSON(c.ctx, httpClient, 15*time.Second, method, p.url()+"/api/triggers"+path, pr.Headers(), body)
	if err != nil {
		return nil, fmt.Errorf("%s /api/triggers%s on %s: %w", method, path, p.id, err)
	}
	return r, nil
}

// mustPutTrigger declares a trigger and returns the answer (201 or 200).
func (c *cluster) mustPutTrigger(p *proc, pr project, name string, def any) triggerView {
	c.t.Helper()
	r, err := c.triggers(p, pr, http.MethodPut, "/"+name, def)
	if err != nil {
		c.t.Fatal(err)
	}
	var v triggerView
	if (r.status != http.StatusCreated && r.status != http.StatusOK) || json.Unmarshal(r.body, &v) != nil || v.Name != name {
		c.t.Fatalf("PUT trigger %s: %s", name, r)
	}
	if rev, err := strconv.ParseUint(r.header.Get("X-Revision"), 10, 64); err != nil || rev == 0 {
		c.t.Fatalf("PUT trigger %s: X-Revision %q", name, r.header.Get("X-Revision"))
	}
	return v
}

func (c *cluster) triggerView(p *proc, pr project, name string) (triggerView, error) {
	var v triggerView
	r, err := c.triggers(p, pr, http.MethodGet, "/"+name, nil)
	if err != nil {
		return v, err
	}
	if r.status != http.StatusOK {
		return v, fmt.Errorf("GET trigger %s on %s: %s", name, p.id, r)
	}
	if err := json.Unmarshal(r.body, &v); err != nil {
		return v, fmt.Errorf("GET trigger %s: decode %s: %w", name, r, err)
	}
	return v, nil
}

// mustRefuse expects status and code from r, and a field that starts with
// field (the member at fault, or an element of it: "on" matches "on[0]").
func mustRefuse(t *testing.T, what string, r *response, err error, status int, code, field string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var e apiErr
	if r.status != status || json.Unmarshal(r.body, &e) != nil || e.Error.Code != code || !strings.HasPrefix(e.Error.Field, field) {
		t.Errorf("%s: %s, want %d %s (field %q)", what, r, status, code, field)
	}
}

// ---- documents ----

// ack is an acknowledged write: the document path, its revision and the
// data written (nil for a delete).
type ack struct {
	path string
	rev  uint64
	data json.RawMessage
}

func (c *cluster) del(p *proc, pr project, coll string) (uint64, error) {
	r, err := doJSON(c.ctx, httpClient, 15*time.Second, http.MethodDelete, p.url()+"/api/db?collection="+url.QueryEscape(coll), pr.Headers(), nil)
	if err != nil {
		return 0, fmt.Errorf("DELETE %s on %s: %w", coll, p.id, err)
	}
	if r.status == http.StatusNotFound {
		return 0, fmt.Errorf("DELETE %s on %s: %w", coll, p.id, errNoDocument)
	}
	if r.status != http.StatusOK {
		return 0, fmt.Errorf("DELETE %s on %s: %s", coll, p.id, r)
	}
	return strconv.ParseUint(r.header.Get("X-Revision"), 10, 64)
}

// errNoDocument: a delete found nothing to delete (404).
var errNoDocument = errors.New("no document")

// expectedFrom turns the acknowledged writes of a set of paths into the
// events a trigger on them must deliver: per path in revision order, the
// first a create, a delete after a delete nothing, and so on.
func expectedFrom(trigger string, acks []ack) []hookcheck.Expected {
	acks = slices.Clone(acks)
	slices.SortFunc(acks, func(a, b ack) int { return int(a.rev) - int(b.rev) })
	exists := map[string]bool{}
	var out []hookcheck.Expected
	for _, a := range acks {
		e := hookcheck.Expected{Trigger: trigger, Path: a.path, Revision: a.rev, After: a.data}
		switch {
		case a.data == nil && !exists[a.path]:
			continue // deleting nothing changes nothing
		case a.data == nil:
			e.Type = "delete"
		case exists[a.path]:
			e.Type = "update"
		default:
			e.Type = "create"
		}
		exists[a.path] = a.data != nil
		out = append(out, e)
	}
	return out
}

// awaitAccepted waits until every expected event was accepted at least
// once.
func awaitAccepted(t *testing.T, ctx context.Context, recv *hookcheck.Receiver, expected []hookcheck.Expected, total time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, total)
	defer cancel()
	err := recv.Await(ctx, func(ds []hookcheck.Delivery) error {
		rep, _ := hookcheck.Check(expected, ds, hookcheck.Options{})
		if rep.Missing > 0 {
			return fmt.Errorf("%d of %d events not delivered, e.g. %v", rep.Missing, rep.Expected, rep.MissingList[:min(3, len(rep.MissingList))])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// ofPath is every delivery of path (accepted or not), in arrival order.
func ofPath(ds []hookcheck.Delivery, path string) []hookcheck.Delivery {
	var out []hookcheck.Delivery
	for _, d := range ds {
		if d.Payload.Path == path {
			out = append(out, d)
		}
	}
	return out
}

// ofTriggers is every delivery of the named triggers, in arrival order.
func ofTriggers(recv *hookcheck.Receiver, names ...string) []hookcheck.Delivery {
	var out []hookcheck.Delivery
	for _, d := range recv.Deliveries() {
		if slices.Contains(names, d.Payload.Trigger) {
			out = append(out, d)
		}
	}
	return out
}

// TestTriggersProcess runs three edgebase processes and a real webhook
// receiver in this test, and proves through the public API only: every
// action (webhook, push through the FCM stand-in, a derived write with
// increment), the signature (checked by the receiver), order per path
// under concurrent writes through every node, retry then success, the dead
// letter and its replay, the loop limit, a disabled trigger, the status and
// the metrics, and parked events retried by the next leader after a kill -9.
func TestTriggersProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	fcm, err := fcmfake.New(fcmfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fcm.Close)
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	recv := hookcheck.New(t, nil)
	c := mustStartCluster(t, ctx, clusterOpts{env: []string{"EDGEBASE_FCM_ENDPOINT=" + fcm.Endpoint(), "EDGEBASE_SECRET_KEY=" + hex.EncodeToString(key)}, args: triggerFlags})
	leader := c.mustLeader(c.nodes[0], 10*time.Second)
	pr := c.mustCreateProject(leader)
	// Any node serves the API: the subtests spread their calls.
	node := func(i int) *proc { return c.nodes[i%len(c.nodes)] }
	webhook := func(name, match string, extra map[string]any) triggerView {
		def := map[string]any{"match": match, "action": map[string]any{"webhook": map[string]any{"url": recv.URL() + "/" + name}}}
		for k, v := range extra {
			def[k] = v
		}
		v := c.mustPutTrigger(node(len(name)), pr, name, def)
		if v.Action.Webhook == nil || !strings.HasPrefix(v.Action.Webhook.Secret, "whsec_") {
			t.Fatalf("PUT %s: no generated secret in the answer: %+v", name, v)
		}
		recv.SetSecret(name, v.Action.Webhook.Secret)
		return v
	}

	t.Run("webhook", func(t *testing.T) {
		webhook("orders", "orders/{id}", nil)
		webhook("big", "orders/{id}", map[string]any{"on": []string{"create", "update"}, "condition": "after != null && after.total > 100"})
		var acks []ack
		start := time.Now()
		for i, data := range []string{`{"total":5}`, `{"total":500}`, `{"total":7}`, ""} {
			var rev uint64
			var err error
			if data == "" {
				rev, err = c.del(node(i), pr, "orders/o 1")
			} else {
				_, rev, err = c.write(node(i), pr, "orders/o 1", json.RawMessage(data))
			}
			if err != nil {
				t.Fatal(err)
			}
			acks = append(acks, ack{path: "orders/o 1", rev: rev, data: json.RawMessage(data)})
			if data == "" {
				acks[len(acks)-1].data = nil
			}
		}
		want := expectedFrom("orders", acks)
		big := []hookcheck.Expected{{Trigger: "big", Path: "orders/o 1", Revision: acks[1].rev, Type: "update", After: json.RawMessage(`{"total":500}`)}}
		awaitAccepted(t, ctx, recv, append(slices.Clone(want), big...), 30*time.Second)
		rep, errs := hookcheck.Check(append(want, big...), ofTriggers(recv, "orders", "big"), hookcheck.Options{})
		for _, err := range errs {
			t.Error(err)
		}
		t.Logf("webhook: %+v", rep)
		// The payload: before and after as committed, the commit time, the
		// match's variables.
		for _, d := range recv.Deliveries() {
			p := d.Payload
			if p.Trigger != "orders" && p.Trigger != "big" {
				continue
			}
			if p.Project != pr.ID || p.Params["id"] != "o 1" {
				t.Errorf("delivery %s: project %q params %v", p.ID, p.Project, p.Params)
			}
			at, err := time.Parse(time.RFC3339Nano, p.Time)
			if err != nil || at.Before(start.Add(-time.Second)) || at.After(d.Received.Add(time.Second)) {
				t.Errorf("delivery %s: time %q, the writes began at %s", p.ID, p.Time, start.Format(time.RFC3339Nano))
			}
			if p.Type == "update" && p.Revision == acks[2].rev && string(p.Before) != `{"total":500}` {
				t.Errorf("update at %d: before %s, want the previous data", p.Revision, p.Before)
			}
			if p.Type == "delete" && string(p.Before) != `{"total":7}` {
				t.Errorf("delete: before %s", p.Before)
			}
			if d.Attempt != 1 {
				t.Errorf("delivery %s: attempt %d with a receiver that never failed", p.ID, d.Attempt)
			}
		}
	})

	t.Run("docs-snippet", func(t *testing.T) {
		// The receiver's check the docs show (docs/sdk-js.md, Node) accepts
		// a real delivery and refuses it with one byte changed.
		verifyWithDocsSnippet(t, recv, "orders")
	})

	t.Run("order", func(t *testing.T) {
		// Eight writers through every node on sixteen shared paths: per
		// path the events must arrive in revision order.
		webhook("seq", "seq/{id}", nil)
		var mu sync.Mutex
		var acks []ack
		var wg sync.WaitGroup
		for w := range 8 {
			rng := mrand.New(mrand.NewPCG(uint64(w), 22))
			wg.Go(func() {
				for k := range 15 {
					path := fmt.Sprintf("seq/p%02d", rng.IntN(16))
					data := json.RawMessage(fmt.Sprintf(`{"w":%d,"k":%d}`, w, k))
					p := node(w + k)
					var rev uint64
					var err error
					if rng.IntN(10) == 0 {
						rev, err = c.del(p, pr, path)
						data = nil
						if errors.Is(err, errNoDocument) {
							continue // deleting nothing changes nothing
						}
					} else {
						_, rev, err = c.write(p, pr, path, data)
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					acks = append(acks, ack{path: path, rev: rev, data: data})
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		want := expectedFrom("seq", acks)
		awaitAccepted(t, ctx, recv, want, 60*time.Second)
		mine := ofTriggers(recv, "seq")
		// No leader change: a duplicate is a violation too.
		rep, errs := hookcheck.Check(want, mine, hookcheck.Options{})
		for _, err := range errs {
			t.Error(err)
		}
		t.Logf("order: %d writes, %d events: %+v", len(acks), len(want), rep)
	})

	t.Run("retry", func(t *testing.T) {
		webhook("retry", "retry/{id}", nil)
		// r1 answers 503 until healed: its first event is retried, its next
		// one waits behind it; r2, another lane, goes on meanwhile; r3 gets
		// a 429 with Retry-After once (retried, not dead).
		recv.Script("retry/r1", hookcheck.Rule{Status: http.StatusServiceUnavailable})
		recv.Script("retry/r3", hookcheck.Rule{Status: http.StatusTooManyRequests, RetryAfter: "1", Times: 1})
		var acks []ack
		for i, w := range []struct {
			path string
			v    int
		}{{"retry/r1", 1}, {"retry/r1", 2}, {"retry/r2", 1}, {"retry/r3", 1}} {
			data := json.RawMessage(fmt.Sprintf(`{"v":%d}`, w.v))
			_, rev, err := c.write(node(i), pr, w.path, data)
			if err != nil {
				t.Fatal(err)
			}
			acks = append(acks, ack{path: w.path, rev: rev, data: data})
		}
		want := expectedFrom("retry", acks)
		awaitAccepted(t, ctx, recv, want[2:], 30*time.Second) // r2 and r3, while r1 fails
		wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
		defer wcancel()
		if err := recv.Await(wctx, func(ds []hookcheck.Delivery) error {
			if n := len(ofPath(ds, "retry/r1")); n < 3 {
				return fmt.Errorf("%d attempts on retry/r1", n)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		healed := time.Now()
		recv.Clear("retry/r1")
		awaitAccepted(t, ctx, recv, want, 30*time.Second)
		mine := ofTriggers(recv, "retry")
		rep, errs := hookcheck.Check(want, mine, hookcheck.Options{})
		for _, err := range errs {
			t.Error(err)
		}
		r1 := ofPath(mine, "retry/r1")
		var got []string
		for _, d := range r1 {
			got = append(got, fmt.Sprintf("%d/attempt %d: %d", d.Payload.Revision, d.Attempt, d.Status))
		}
		// rev1 503 (attempts 1..n-1), rev1 200 (attempt n), rev2 200 (attempt
		// 1): nothing of rev2 before rev1 was accepted.
		n := len(r1)
		ok := n >= 4 && r1[n-1].Payload.Revision == acks[1].rev && r1[n-1].Attempt == 1 && r1[n-1].Accepted() &&
			r1[n-2].Payload.Revision == acks[0].rev && r1[n-2].Accepted() && r1[n-2].Received.After(healed)
		for i := 0; ok && i < n-2; i++ {
			ok = r1[i].Payload.Revision == acks[0].rev && r1[i].Attempt == i+1 && r1[i].Status == http.StatusServiceUnavailable
		}
		if !ok {
			t.Errorf("retry/r1 deliveries %q, want %d failing with attempts 1, 2, ..., then accepted, then %d", got, acks[0].rev, acks[1].rev)
		}
		if r3 := ofPath(mine, "retry/r3"); len(r3) != 2 || r3[0].Status != http.StatusTooManyRequests || !r3[1].Accepted() || r3[1].Attempt != 2 {
			t.Errorf("retry/r3: %d deliveries, want a 429 then a 200 (attempt 2)", len(r3))
		}
		// The status is the runner's checkpoint: it catches up.
		var v triggerView
		checkFor(t, 10*time.Second, 100*time.Millisecond, func() error {
			var err error
			if v, err = c.triggerView(node(2), pr, "retry"); err != nil {
				return err
			}
			if v.Status.Failed != uint64(rep.Refused) || v.Status.LastError == "" || v.Status.LastErrorAt == "" || v.Status.LastSuccessAt == "" ||
				v.Status.Delivered != 4 || v.Status.Dead != 0 || v.Status.Pending != 0 {
				return fmt.Errorf("status after %d failed attempts and 4 deliveries: %+v", rep.Refused, v.Status)
			}
			return nil
		})
		t.Logf("retry: r1 %q; %+v; status %+v", got, rep, v.Status)
	})

	t.Run("dead-letter-and-replay", func(t *testing.T) {
		webhook("dead", "dead/{id}", nil)
		// d1: 500 until healed, so dead after --trigger-retry-for; d2: 404,
		// dead at once (no retry on a 4xx).
		recv.Script("dead/d1", hookcheck.Rule{Status: http.StatusInternalServerError})
		recv.Script("dead/d2", hookcheck.Rule{Status: http.StatusNotFound})
		_, rev1, err := c.write(node(0), pr, "dead/d1", map[string]int{"v": 1})
		if err != nil {
			t.Fatal(err)
		}
		_, rev2, err := c.write(node(1), pr, "dead/d2", map[string]int{"v": 1})
		if err != nil {
			t.Fatal(err)
		}
		var dead struct {
			DeadLetters []struct {
				ID       string `json:"id"`
				Revision uint64 `json:"revision"`
				Path     string `json:"path"`
				Attempts int    `json:"attempts"`
				DeadAt   string `json:"deadAt"`
				LastErr  string `json:"lastError"`
			} `json:"deadLetters"`
			NextPageToken string `json:"nextPageToken"`
		}
		t0 := time.Now()
		checkFor(t, 30*time.Second, 100*time.Millisecond, func() error {
			r, err := c.triggers(node(2), pr, http.MethodGet, "/dead/dead?limit=50", nil)
			if err != nil {
				return err
			}
			if r.status != http.StatusOK || json.Unmarshal(r.body, &dead) != nil {
				return fmt.Errorf("GET dead: %s", r)
			}
			if len(dead.DeadLetters) < 2 {
				return fmt.Errorf("%d dead letters", len(dead.DeadLetters))
			}
			return nil
		})
		t.Logf("two dead letters after %v: %+v", time.Since(t0).Round(time.Millisecond), dead.DeadLetters)
		if len(dead.DeadLetters) != 2 || dead.DeadLetters[0].Revision != rev1 || dead.DeadLetters[1].Revision != rev2 ||
			dead.DeadLetters[0].Path != "dead/d1" || dead.DeadLetters[1].Attempts != 1 || dead.DeadLetters[0].Attempts < 2 ||
			dead.DeadLetters[0].LastErr == "" || dead.DeadLetters[0].DeadAt == "" {
			t.Errorf("dead letters %+v, want d1 at %d (retried) and d2 at %d (one attempt)", dead.DeadLetters, rev1, rev2)
		}
		if d2 := ofPath(recv.Deliveries(), "dead/d2"); len(d2) != 1 {
			t.Errorf("dead/d2 (404) was tried %d times, want once", len(d2))
		}
		d1 := ofPath(recv.Deliveries(), "dead/d1")
		if len(d1) < 2 || d1[len(d1)-1].At.Sub(d1[0].At) < 2*time.Second {
			t.Errorf("dead/d1 tried %d times over %v, want retries for about 3s", len(d1), d1[len(d1)-1].At.Sub(d1[0].At))
		}
		// The path goes on after its dead letter.
		recv.Clear("dead/d1")
		recv.Clear("dead/d2")
		_, rev3, err := c.write(node(2), pr, "dead/d1", map[string]int{"v": 2})
		if err != nil {
			t.Fatal(err)
		}
		awaitAccepted(t, ctx, recv, []hookcheck.Expected{{Trigger: "dead", Path: "dead/d1", Revision: rev3, Type: "update"}}, 20*time.Second)

		// An unknown id is 404 naming it; then replay everything.
		r, err := c.triggers(node(0), pr, http.MethodPost, "/dead/replay", map[string]any{"ids": []string{dead.DeadLetters[0].ID, "no-such-id"}})
		mustRefuse(t, "replay of an unknown id", r, err, http.StatusNotFound, "not_found", "ids[1]")
		r, err = c.triggers(node(0), pr, http.MethodPost, "/dead/replay", map[string]any{})
		var rep struct {
			Replayed int    `json:"replayed"`
			Revision uint64 `json:"revision"`
		}
		if err != nil || r.status != http.StatusOK || json.Unmarshal(r.body, &rep) != nil || rep.Replayed != 2 || rep.Revision == 0 {
			t.Fatalf("replay: %v %v", r, err)
		}
		want := []hookcheck.Expected{
			{Trigger: "dead", Path: "dead/d1", Revision: rev1, Type: "create"},
			{Trigger: "dead", Path: "dead/d2", Revision: rev2, Type: "create"},
			{Trigger: "dead", Path: "dead/d1", Revision: rev3, Type: "update"},
		}
		awaitAccepted(t, ctx, recv, want, 30*time.Second)
		mine := ofTriggers(recv, "dead")
		_, errs := hookcheck.Check(want, mine, hookcheck.Options{Replayed: map[string]bool{want[0].ID(): true, want[1].ID(): true}})
		for _, err := range errs {
			t.Error(err)
		}
		checkFor(t, 10*time.Second, 100*time.Millisecond, func() error {
			r, err := c.triggers(node(1), pr, http.MethodGet, "/dead/dead", nil)
			if err != nil {
				return err
			}
			dead.DeadLetters = nil
			if r.status != http.StatusOK || json.Unmarshal(r.body, &dead) != nil || len(dead.DeadLetters) != 0 {
				return fmt.Errorf("after the replay: %s", r)
			}
			return nil
		})
		checkFor(t, 10*time.Second, 100*time.Millisecond, func() error {
			v, err := c.triggerView(node(1), pr, "dead")
			if err != nil {
				return err
			}
			if v.Status.Dead != 2 || v.Status.DeadLetters != 0 || v.Status.Pending != 0 || v.Status.Delivered != 3 {
				return fmt.Errorf("status after two dead letters replayed and three deliveries: %+v", v.Status)
			}
			return nil
		})
	})

	t.Run("push", func(t *testing.T) {
		r, err := doJSON(ctx, httpClient, 15*time.Second, http.MethodPut, node(0).url()+"/api/notifications/fcm-credentials", pr.Headers(),
			json.RawMessage(fcm.ServiceAccountJSON("fcm-"+strings.ToLower(pr.ID))))
		if err != nil || r.status != http.StatusOK {
			t.Fatalf("PUT fcm-credentials: %v %v", r, err)
		}
		r, err = doJSON(ctx, httpClient, 30*time.Second, http.MethodPost, node(1).url()+"/api/auth", map[string]string{"X-Project-Id": pr.ID, "X-API-Key": pr.APIKey},
			map[string]string{"action": "register", "email": "seller@example.com", "password": "a seller's password", "name": "Seller"})
		var reg struct {
			Token string `json:"token"`
			User  struct {
				ID string `json:"id"`
			} `json:"user"`
		}
		if err != nil || r.status != http.StatusCreated || json.Unmarshal(r.body, &reg) != nil || reg.User.ID == "" {
			t.Fatalf("register: %v %v", r, err)
		}
		tok := "trigger00:APA91b" + strings.Repeat("t", 96)
		r, err = doJSON(ctx, httpClient, 30*time.Second, http.MethodPost, node(1).url()+"/api/notifications/register",
			map[string]string{"Authorization": "Bearer " + reg.Token, "X-Project-Id": pr.ID, "X-API-Key": pr.APIKey},
			map[string]any{"token": tok, "deviceInfo": map[string]string{"platform": "android"}})
		if err != nil || r.status != http.StatusCreated {
			t.Fatalf("register device: %v %v", r, err)
		}
		c.mustPutTrigger(node(2), pr, "notify", map[string]any{"match": "sales/{id}", "on": []string{"create"},
			"action": map[string]any{"push": map[string]any{"to": "user", "userIdFrom": "after.seller",
				"title": "Sold {{ params.id }}", "body": "{{ after.item }} for {{ after.price }}", "data": map[string]string{"sale": "{{ params.id }}"}}}})
		if _, _, err := c.write(node(0), pr, "sales/s1", map[string]any{"seller": reg.User.ID, "item": "a lamp", "price": 12}); err != nil {
			t.Fatal(err)
		}
		checkFor(t, 30*time.Second, 100*time.Millisecond, func() error {
			for _, d := range fcm.Deliveries() {
				if d.Token == tok {
					if d.Title != "Sold s1" || d.Body != "a lamp for 12" || d.Data["sale"] != "s1" {
						t.Fatalf("push %+v, want title %q body %q data sale=s1", d, "Sold s1", "a lamp for 12")
					}
					return nil
				}
			}
			return fmt.Errorf("no push to the seller's device yet (%d deliveries)", len(fcm.Deliveries()))
		})
		if rej := fcm.Rejections(); len(rej) > 0 {
			t.Errorf("the FCM stand-in saw %d protocol violations, first %+v", len(rej), rej[0])
		}
	})

	t.Run("write", func(t *testing.T) {
		c.mustPutTrigger(node(0), pr, "likes", map[string]any{"match": "likes/{id}", "on": []string{"create"},
			"action": map[string]any{"write": map[string]any{"op": "increment", "collection": "counters/{{ after.post }}", "field": "n", "by": 1}}})
		c.mustPutTrigger(node(1), pr, "audit", map[string]any{"match": "likes/{id}", "on": []string{"create"},
			"action": map[string]any{"write": map[string]any{"op": "set", "collection": "audit/{{ params.id }}", "data": map[string]any{"post": "{{ after.post }}", "rev": "{{ revision }}"}}}})
		var likeRevs []uint64
		for i := range 5 {
			_, rev, err := c.write(node(i), pr, fmt.Sprintf("likes/l%d", i), map[string]string{"post": "p1"})
			if err != nil {
				t.Fatal(err)
			}
			likeRevs = append(likeRevs, rev)
		}
		checkFor(t, 30*time.Second, 100*time.Millisecond, func() error {
			r, err := c.getDoc(node(2), pr, "counters/p1", "", 0)
			if err != nil {
				return err
			}
			var d doc
			if r.status != http.StatusOK || json.Unmarshal(r.body, &d) != nil {
				return fmt.Errorf("counters/p1: %s", r)
			}
			if string(d.Data) != `{"n":5}` {
				return fmt.Errorf("counters/p1 = %s", d.Data)
			}
			return nil
		})
		for i, rev := range likeRevs {
			r, err := c.getDoc(node(i), pr, fmt.Sprintf("audit/l%d", i), "", 0)
			var d doc
			if err != nil || r.status != http.StatusOK || json.Unmarshal(r.body, &d) != nil {
				t.Fatalf("audit/l%d: %v %v", i, r, err)
			}
			var got struct {
				Post string `json:"post"`
				Rev  uint64 `json:"rev"`
			}
			if json.Unmarshal(d.Data, &got) != nil || got.Post != "p1" || got.Rev != rev {
				t.Errorf("audit/l%d = %s, want post p1 and rev %d (a template that is one expression keeps its JSON value)", i, d.Data, rev)
			}
		}
	})

	t.Run("loop-limit", func(t *testing.T) {
		// Each change of loops/{id} increments loops/{id}: the app's write
		// is depth 0, and the changes of depth 1 and 2 fire again; the one of
		// depth 3 does not.
		c.mustPutTrigger(node(0), pr, "loop", map[string]any{"match": "loops/{id}",
			"action": map[string]any{"write": map[string]any{"op": "increment", "collection": "loops/{{ params.id }}", "field": "n", "by": 1}}})
		if _, _, err := c.write(node(1), pr, "loops/x", map[string]int{"n": 0}); err != nil {
			t.Fatal(err)
		}
		var v triggerView
		checkFor(t, 30*time.Second, 100*time.Millisecond, func() error {
			var err error
			if v, err = c.triggerView(node(2), pr, "loop"); err != nil {
				return err
			}
			if v.Status.LoopStops < 1 {
				return fmt.Errorf("no loop stop yet: %+v", v.Status)
			}
			return nil
		})
		// Once the cursor is past a later write, the chain has ended.
		_, later, err := c.write(node(0), pr, "loops-elsewhere/y", map[string]int{"v": 1})
		if err != nil {
			t.Fatal(err)
		}
		checkFor(t, 20*time.Second, 100*time.Millisecond, func() error {
			var err error
			if v, err = c.triggerView(node(2), pr, "loop"); err != nil {
				return err
			}
			if v.Status.Cursor < later {
				return fmt.Errorf("loop's cursor %d, want past %d", v.Status.Cursor, later)
			}
			return nil
		})
		r, err := c.getDoc(node(2), pr, "loops/x", "", later)
		var d doc
		if err != nil || r.status != http.StatusOK || json.Unmarshal(r.body, &d) != nil {
			t.Fatalf("loops/x: %v %v", r, err)
		}
		if string(d.Data) != `{"n":3}` || v.Status.LoopStops != 1 {
			t.Errorf("loops/x = %s with status %+v, want n 3 (depths 0, 1, 2 fired) and one loop stop", d.Data, v.Status)
		}
	})

	t.Run("disabled", func(t *testing.T) {
		// A disabled trigger delivers nothing; enabled again, it delivers
		// what was committed meanwhile, from where its cursor stayed.
		v := webhook("off", "off/{id}", nil)
		_, rev1, err := c.write(node(0), pr, "off/a", map[string]int{"v": 1})
		if err != nil {
			t.Fatal(err)
		}
		awaitAccepted(t, ctx, recv, []hookcheck.Expected{{Trigger: "off", Path: "off/a", Revision: rev1, Type: "create"}}, 20*time.Second)
		def := map[string]any{"match": "off/{id}", "disabled": true, "action": map[string]any{"webhook": map[string]any{"url": v.Action.Webhook.URL}}}
		c.mustPutTrigger(node(1), pr, "off", def)
		_, rev2, err := c.write(node(2), pr, "off/a", map[string]int{"v": 2})
		if err != nil {
			t.Fatal(err)
		}
		// Meanwhile another trigger delivers a later change: the runner
		// has gone past rev2 and left it.
		_, rev3, err := c.write(node(0), pr, "orders/after-off", map[string]int{"total": 1})
		if err != nil {
			t.Fatal(err)
		}
		awaitAccepted(t, ctx, recv, []hookcheck.Expected{{Trigger: "orders", Path: "orders/after-off", Revision: rev3, Type: "create"}}, 20*time.Second)
		if got := ofTriggers(recv, "off"); len(got) != 1 {
			t.Fatalf("the disabled trigger delivered %d events, want only the one before it was disabled", len(got))
		}
		def["disabled"] = false
		c.mustPutTrigger(node(1), pr, "off", def)
		want := []hookcheck.Expected{{Trigger: "off", Path: "off/a", Revision: rev1, Type: "create"}, {Trigger: "off", Path: "off/a", Revision: rev2, Type: "update"}}
		awaitAccepted(t, ctx, recv, want, 20*time.Second)
		_, errs := hookcheck.Check(want, ofTriggers(recv, "off"), hookcheck.Options{})
		for _, err := range errs {
			t.Error(err)
		}
	})

	t.Run("status-and-metrics", func(t *testing.T) {
		r, err := c.triggers(node(1), pr, http.MethodGet, "", nil)
		var list struct {
			Triggers []triggerView `json:"triggers"`
		}
		if err != nil || r.status != http.StatusOK || json.Unmarshal(r.body, &list) != nil {
			t.Fatalf("GET /api/triggers: %v %v", r, err)
		}
		var names []string
		for _, v := range list.Triggers {
			names = append(names, v.Name)
			if v.Action.Webhook != nil && (v.Action.Webhook.Secret != "" || v.Action.Webhook.SecretHint == "") {
				t.Errorf("listed %s shows secret %q, hint %q: want only the hint", v.Name, v.Action.Webhook.Secret, v.Action.Webhook.SecretHint)
			}
		}
		if want := []string{"audit", "big", "dead", "likes", "loop", "notify", "off", "orders", "retry", "seq"}; !slices.Equal(names, want) {
			t.Errorf("listed %v, want %v (sorted)", names, want)
		}
		// The cursor reaches the last write; the counts add up.
		_, last, err := c.write(node(0), pr, "other/x", map[string]int{"v": 1})
		if err != nil {
			t.Fatal(err)
		}
		checkFor(t, 20*time.Second, 100*time.Millisecond, func() error {
			v, err := c.triggerView(node(2), pr, "seq")
			if err != nil {
				return err
			}
			if v.Status.Cursor < last || v.Status.LastSuccessAt == "" || v.Status.Failed != 0 {
				return fmt.Errorf("seq status %+v, want the cursor at %d", v.Status, last)
			}
			return nil
		})
		leader := c.mustLeader(c.nodes[0], 10*time.Second)
		r, err = doJSON(ctx, httpClient, 10*time.Second, http.MethodGet, leader.url()+"/metrics", nil, nil)
		if err != nil || r.status != http.StatusOK {
			t.Fatalf("metrics: %v %v", r, err)
		}
		m := string(r.body)
		for _, want := range []string{
			`edgebase_trigger_deliveries_total{project="` + pr.ID + `",result="ok",trigger="seq"}`,
			`edgebase_trigger_deliveries_total{project="` + pr.ID + `",result="retry",trigger="retry"}`,
			`edgebase_trigger_deliveries_total{project="` + pr.ID + `",result="dead",trigger="dead"}`,
			`edgebase_trigger_cursor_revision{project="` + pr.ID + `",trigger="seq"}`,
			`edgebase_trigger_lag_revisions{project="` + pr.ID + `",trigger="seq"}`,
			`edgebase_trigger_pending{project="` + pr.ID + `",trigger="seq"}`,
			`edgebase_trigger_loop_stops_total{project="` + pr.ID + `",trigger="loop"} 1`,
			`edgebase_trigger_delivery_seconds_count`,
			`edgebase_trigger_in_flight`,
		} {
			if !strings.Contains(m, want) {
				t.Errorf("the leader's /metrics has no %s", want)
			}
		}
		// A deleted trigger's series go; so do its definition and status.
		r, err = c.triggers(node(2), pr, http.MethodDelete, "/seq", nil)
		if err != nil || r.status != http.StatusOK || !strings.Contains(string(r.body), `"deleted":true`) {
			t.Fatalf("DELETE seq: %v %v", r, err)
		}
		r, err = c.triggers(node(0), pr, http.MethodGet, "/seq", nil)
		mustRefuse(t, "GET a deleted trigger", r, err, http.StatusNotFound, "not_found", "")
		checkFor(t, 10*time.Second, 100*time.Millisecond, func() error {
			r, err := doJSON(ctx, httpClient, 10*time.Second, http.MethodGet, leader.url()+"/metrics", nil, nil)
			if err != nil {
				return err
			}
			var left []string
			for _, line := range strings.Split(string(r.body), "\n") {
				if strings.Contains(line, `trigger="seq"`) {
					left = append(left, line)
				}
			}
			if len(left) > 0 {
				return fmt.Errorf("the deleted trigger's series are still on %s's /metrics: %q", leader.id, left)
			}
			return nil
		})
	})

	t.Run("failover", func(t *testing.T) {
		// Parked events survive the leader: fo/a fails until healed, its
		// two events park (durably), the leader is killed, and the new one
		// retries them in order once the receiver heals; fo/b goes on.
		webhook("fo", "fo/{id}", nil)
		recv.Script("fo/a", hookcheck.Rule{Status: http.StatusServiceUnavailable})
		leader := c.mustLeader(c.nodes[0], 10*time.Second)
		var live []*proc
		for _, p := range c.nodes {
			if p != leader {
				live = append(live, p)
			}
		}
		var acks []ack
		w := func(p *proc, path string, v int) {
			data := json.RawMessage(fmt.Sprintf(`{"v":%d}`, v))
			_, rev, err := c.write(p, pr, path, data)
			if err != nil {
				t.Fatal(err)
			}
			acks = append(acks, ack{path: path, rev: rev, data: data})
		}
		w(live[0], "fo/a", 1)
		w(live[1], "fo/a", 2)
		for v := 1; v <= 5; v++ {
			w(live[v%2], "fo/b", v)
		}
		// Both events of fo/a parked and checkpointed before the kill.
		checkFor(t, 20*time.Second, 100*time.Millisecond, func() error {
			v, err := c.triggerView(live[0], pr, "fo")
			if err != nil {
				return err
			}
			if v.Status.Pending < 2 || v.Status.Delivered < 5 {
				return fmt.Errorf("status %+v, want fo/a's 2 events pending and fo/b's 5 delivered", v.Status)
			}
			return nil
		})
		before := len(ofPath(recv.Deliveries(), "fo/a"))
		leader.mustKill9()
		killed := time.Now()
		var next *proc
		checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
			st, err := c.clusterStatus(live[0])
			if err != nil {
				return err
			}
			if next = c.byID(st.Leader); next == nil || next == leader {
				return fmt.Errorf("no new leader yet: %+v", *st)
			}
			return nil
		})
		t.Logf("killed leader %s after %d attempts on fo/a; new leader %s after %v", leader.id, before, next.id, time.Since(killed).Round(time.Millisecond))
		w(next, "fo/b", 6)
		recv.Clear("fo/a")
		want := expectedFrom("fo", acks)
		awaitAccepted(t, ctx, recv, want, 60*time.Second)
		mine := ofTriggers(recv, "fo")
		rep, errs := hookcheck.Check(want, mine, hookcheck.Options{Changes: []hookcheck.LeaderChange{{At: killed}}, Slack: 2 * time.Second, Window: 30 * time.Second})
		for _, err := range errs {
			t.Error(err)
		}
		a := ofPath(mine, "fo/a")
		if len(a) <= before || a[before].Attempt < 2 {
			t.Errorf("fo/a: %d attempts before the kill; the first after it is %+v, want attempt 2 or more (the parked count kept)", before, a[min(before, len(a)-1)].Attempt)
		}
		t.Logf("failover: %+v", rep)
		leader.mustStart()
		c.mustReady(leader, 60*time.Second)
	})

	if rej := recv.Rejections(); len(rej) > 0 {
		t.Errorf("the receiver rejected %d requests (signature or wire format), first %s", len(rej), rej[0])
	}
}

// TestTriggersRefuseBadInput runs one node WITHOUT --allow-private-webhooks:
// webhooks to private and loopback addresses are refused (400
// url_not_allowed), and every other bad member is 400 naming its field.
func TestTriggersRefuseBadInput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := mustStartCluster(t, ctx, clusterOpts{voters: 1})
	p := c.nodes[0]
	pr := c.mustCreateProject(p)
	hook := func(u string) map[string]any {
		return map[string]any{"match": "orders/{id}", "action": map[string]any{"webhook": map[string]any{"url": u}}}
	}
	for _, u := range []string{"http://127.0.0.1:9/hook", "http://10.0.0.1/hook", "http://[::1]:8080/hook", "http://localhost/hook",
		"https://192.168.1.20/x", "http://169.254.169.254/latest/meta-data"} {
		r, err := c.triggers(p, pr, http.MethodPut, "/private", hook(u))
		mustRefuse(t, "webhook to "+u, r, err, http.StatusBadRequest, "url_not_allowed", "action.webhook.url")
	}
	type bad struct {
		name, path string
		body       any
		field      string
	}
	for _, b := range []bad{
		{"ftp URL", "/t1", hook("ftp://93.184.216.34/x"), "action.webhook.url"},
		{"userinfo", "/t1", hook("https://user:pw@93.184.216.34/x"), "action.webhook.url"},
		{"unknown member", "/t1", map[string]any{"match": "a/{id}", "retries": 3, "action": map[string]any{"webhook": map[string]any{"url": "https://93.184.216.34/x"}}}, "retries"},
		{"unknown action member", "/t1", map[string]any{"match": "a/{id}", "action": map[string]any{"webhook": map[string]any{"url": "https://93.184.216.34/x", "retries": 1}}}, "action.webhook.retries"},
		{"bad condition", "/t1", map[string]any{"match": "a/{id}", "condition": "after.total >", "action": map[string]any{"webhook": map[string]any{"url": "https://93.184.216.34/x"}}}, "condition"},
		{"bad match", "/t1", map[string]any{"match": "a/{id", "action": map[string]any{"webhook": map[string]any{"url": "https://93.184.216.34/x"}}}, "match"},
		{"bad on", "/t1", map[string]any{"match": "a/{id}", "on": []string{"upsert"}, "action": map[string]any{"webhook": map[string]any{"url": "https://93.184.216.34/x"}}}, "on"},
		{"two actions", "/t1", map[string]any{"match": "a/{id}", "action": map[string]any{"webhook": map[string]any{"url": "https://93.184.216.34/x"},
			"write": map[string]any{"op": "set", "collection": "b/x", "data": map[string]int{}}}}, "action"},
		{"no action", "/t1", map[string]any{"match": "a/{id}", "action": map[string]any{}}, "action"},
		{"bad name", "/-bad", hook("https://93.184.216.34/x"), "name"},
		{"unknown write op", "/t1", map[string]any{"match": "a/{id}", "action": map[string]any{"write": map[string]any{"op": "bump", "collection": "b/x"}}}, "action.write.op"},
		{"push to nobody", "/t1", map[string]any{"match": "a/{id}", "action": map[string]any{"push": map[string]any{"to": "everyone", "title": "x", "body": "y"}}}, "action.push.to"},
	} {
		r, err := c.triggers(p, pr, http.MethodPut, b.path, b.body)
		mustRefuse(t, b.name, r, err, http.StatusBadRequest, "invalid_argument", b.field)
	}
	// Not JSON.
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, p.url()+"/api/triggers/t1", strings.NewReader(`{"match":`))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range pr.Headers() {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	if resp, err := httpClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("PUT with a truncated body: %d, want 400", resp.StatusCode)
		}
	}
	// A public address is fine (the PUT makes no request); the owner's
	// secret is answered once, then only its hint.
	v := c.mustPutTrigger(p, pr, "public", map[string]any{"match": "orders/{id}",
		"action": map[string]any{"webhook": map[string]any{"url": "https://93.184.216.34/hook", "secret": "whsec_mine-and-long-enough-1234"}}})
	if v.Action.Webhook == nil || v.Action.Webhook.Secret != "whsec_mine-and-long-enough-1234" {
		t.Errorf("PUT answer %+v: want the owner's secret once", v.Action.Webhook)
	}
	got, err := c.triggerView(p, pr, "public")
	if err != nil {
		t.Fatal(err)
	}
	if got.Action.Webhook == nil || got.Action.Webhook.Secret != "" || got.Action.Webhook.SecretHint != "1234" || got.CreatedAt == "" {
		t.Errorf("GET answer %+v: want no secret, hint 1234", got.Action.Webhook)
	}
	// A PUT without the secret keeps the old one, and answers none.
	r3, err := c.triggers(p, pr, http.MethodPut, "/public", map[string]any{"match": "orders/{id}", "on": []string{"create"},
		"action": map[string]any{"webhook": map[string]any{"url": "https://93.184.216.34/hook2"}}})
	var again triggerView
	if err != nil || r3.status != http.StatusOK || json.Unmarshal(r3.body, &again) != nil || again.Action.Webhook == nil ||
		again.Action.Webhook.Secret != "" || again.Action.Webhook.SecretHint != "1234" || again.CreatedAt != got.CreatedAt {
		t.Errorf("PUT replacing public without a secret: %v %v, want 200, the old secret kept (hint 1234), createdAt kept", r3, err)
	}
	// At most MaxTriggers (100) per project: the 101st is 409.
	for i := 1; i < 100; i++ {
		c.mustPutTrigger(p, pr, fmt.Sprintf("many-%03d", i), map[string]any{"match": "m/{id}",
			"action": map[string]any{"write": map[string]any{"op": "set", "collection": "n/x", "data": map[string]int{"v": 1}}}})
	}
	r3, err = c.triggers(p, pr, http.MethodPut, "/one-too-many", map[string]any{"match": "m/{id}",
		"action": map[string]any{"write": map[string]any{"op": "set", "collection": "n/x", "data": map[string]int{"v": 1}}}})
	mustRefuse(t, "the 101st trigger", r3, err, http.StatusConflict, "too_many_triggers", "")
	// Replacing one of the hundred is fine.
	c.mustPutTrigger(p, pr, "many-001", map[string]any{"match": "m/{id}", "disabled": true,
		"action": map[string]any{"write": map[string]any{"op": "set", "collection": "n/y", "data": map[string]int{"v": 1}}}})
	// Absent: 404. Not the owner: refused.
	r2, err := c.triggers(p, pr, http.MethodGet, "/absent", nil)
	mustRefuse(t, "GET absent", r2, err, http.StatusNotFound, "not_found", "")
	r2, err = c.triggers(p, pr, http.MethodDelete, "/absent", nil)
	mustRefuse(t, "DELETE absent", r2, err, http.StatusNotFound, "not_found", "")
	r2, err = doJSON(ctx, httpClient, 10*time.Second, http.MethodGet, p.url()+"/api/triggers", map[string]string{"X-Project-Id": pr.ID, "X-API-Key": pr.APIKey}, nil)
	if err != nil || r2.status != http.StatusUnauthorized && r2.status != http.StatusForbidden {
		t.Errorf("GET /api/triggers without a token: %v %v", r2, err)
	}
	// A signed-in user who is not the owner may neither read nor declare.
	r2, err = doJSON(ctx, httpClient, 30*time.Second, http.MethodPost, p.url()+"/api/auth", map[string]string{"X-Project-Id": pr.ID, "X-API-Key": pr.APIKey},
		map[string]string{"action": "register", "email": "user@example.com", "password": "a user's password 1", "name": "User"})
	var reg struct {
		Token string `json:"token"`
	}
	if err != nil || r2.status != http.StatusCreated || json.Unmarshal(r2.body, &reg) != nil || reg.Token == "" {
		t.Fatalf("register: %v %v", r2, err)
	}
	user := map[string]string{"Authorization": "Bearer " + reg.Token, "X-Project-Id": pr.ID, "X-API-Key": pr.APIKey}
	for _, m := range []struct {
		method, path string
		body         any
	}{{http.MethodGet, "", nil}, {http.MethodGet, "/public", nil}, {http.MethodPut, "/mine", hook("https://93.184.216.34/x")},
		{http.MethodDelete, "/public", nil}, {http.MethodGet, "/public/dead", nil}, {http.MethodPost, "/public/replay", map[string]any{}}} {
		r2, err = doJSON(ctx, httpClient, 10*time.Second, m.method, p.url()+"/api/triggers"+m.path, user, m.body)
		mustRefuse(t, "a user's "+m.method+" /api/triggers"+m.path, r2, err, http.StatusForbidden, "forbidden", "")
	}
}

// TestTriggersRetryAfterAndTimeout runs one node whose backoff cap is long
// enough to see a receiver's Retry-After (seconds, and an HTTP date)
// honoured over the 50ms minimum backoff, and whose webhook timeout is
// short: an answer later than it is a failed attempt, tried again. The
// owner's extra headers go out with every delivery.
func TestTriggersRetryAfterAndTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	recv := hookcheck.New(t, nil)
	c := mustStartCluster(t, ctx, clusterOpts{voters: 1, args: []string{"--allow-private-webhooks", "127.0.0.1",
		"--trigger-min-backoff", "50ms", "--trigger-max-backoff", "10s", "--trigger-retry-for", "1m", "--trigger-timeout", "500ms"}})
	p := c.nodes[0]
	pr := c.mustCreateProject(p)
	v := c.mustPutTrigger(p, pr, "ra", map[string]any{"match": "ra/{id}",
		"action": map[string]any{"webhook": map[string]any{"url": recv.URL() + "/ra", "headers": map[string]string{"X-App": "shop"}}}})
	recv.SetSecret("ra", v.Action.Webhook.Secret)

	recv.Script("ra/seconds", hookcheck.Rule{Status: http.StatusServiceUnavailable, RetryAfter: "2", Times: 1})
	// An HTTP date 3 s ahead (second resolution): at least 2 s.
	recv.Script("ra/date", hookcheck.Rule{Status: http.StatusTooManyRequests, RetryAfter: time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat), Times: 1})
	recv.Script("ra/slow", hookcheck.Rule{Delay: 3 * time.Second, Times: 1})
	var acks []ack
	for _, path := range []string{"ra/seconds", "ra/date", "ra/slow"} {
		data := json.RawMessage(`{"v":1}`)
		_, rev, err := c.write(p, pr, path, data)
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, ack{path: path, rev: rev, data: data})
	}
	want := expectedFrom("ra", acks)
	awaitAccepted(t, ctx, recv, want, 60*time.Second)
	ds := recv.Deliveries()
	_, errs := hookcheck.Check(want, ds, hookcheck.Options{})
	for _, err := range errs {
		t.Error(err)
	}
	for _, tc := range []struct {
		path     string
		min, max time.Duration
	}{{"ra/seconds", 1900 * time.Millisecond, 5 * time.Second}, {"ra/date", 1 * time.Second, 6 * time.Second}, {"ra/slow", 0, 3 * time.Second}} {
		got := ofPath(ds, tc.path)
		if len(got) != 2 || got[0].Accepted() || !got[1].Accepted() || got[1].Attempt != 2 {
			t.Errorf("%s: %d deliveries, want a failed one then an accepted second attempt", tc.path, len(got))
			continue
		}
		// From the refused answer (or, for the slow one, the sender giving
		// up) to the next request.
		if gap := got[1].Received.Sub(got[0].Received); gap < tc.min || gap > tc.max+got[0].At.Sub(got[0].Received) {
			t.Errorf("%s: the retry came %v after the first attempt, want within [%v, %v] of its answer", tc.path, gap, tc.min, tc.max)
		}
		for _, d := range got {
			if d.Header.Get("X-App") != "shop" {
				t.Errorf("%s attempt %d: X-App %q, want the trigger's header", tc.path, d.Attempt, d.Header.Get("X-App"))
			}
		}
	}
	if slow := ofPath(ds, "ra/slow"); len(slow) > 0 && !slow[0].Canceled {
		t.Errorf("ra/slow's first attempt was not given up by the sender within --trigger-timeout 500ms: %+v", slow[0])
	}
	if rej := recv.Rejections(); len(rej) > 0 {
		t.Errorf("the receiver rejected %d requests, first %s", len(rej), rej[0])
	}
}

// verifyWithDocsSnippet runs the Node signature check of docs/sdk-js.md on
// the first delivery of trigger: it must say true, and false once the
// body is changed or the secret is another.
func verifyWithDocsSnippet(t *testing.T, recv *hookcheck.Receiver, trigger string) {
	t.Helper()
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node here to run the docs' snippet")
	}
	md, err := os.ReadFile(filepath.Join("..", "..", "docs", "sdk-js.md"))
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(md), "```js\nimport { createHmac")
	if start < 0 {
		t.Fatal("docs/sdk-js.md shows no Node signature check (```js import { createHmac ...)")
	}
	code := string(md[start+len("```js\n"):])
	code = code[:strings.Index(code, "```")]
	ds := ofTriggers(recv, trigger)
	if len(ds) == 0 {
		t.Fatalf("no delivery of %s to check", trigger)
	}
	d := ds[0]
	secret, ok := recv.Secret(trigger)
	if !ok {
		t.Fatalf("no secret of %s", trigger)
	}
	args, _ := json.Marshal([]string{d.Header.Get(hookcheck.HeaderSignature), string(d.Body)})
	script := code + "\nconst [header, body] = " + string(args) + ";\n" +
		"console.log(JSON.stringify([verified(process.env.SECRET, header, body), verified(process.env.SECRET, header, body.replace('\"revision\":', '\"revision\": ')), verified('whsec_other', header, body)]));\n"
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "verify.mjs"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(nodeBin, filepath.Join(dir, "verify.mjs"))
	cmd.Env = append(os.Environ(), "SECRET="+secret)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "[true,false,false]" {
		t.Errorf("the docs' snippet said %s for (the delivery, its body changed, another secret), want [true,false,false]", got)
	}
}

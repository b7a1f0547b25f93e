package robustness

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/edgebase/edgebase/internal/proctest"
)

// The access workload: writes racing access changes.
//
// Each guarded key is the one document of a project of its own, so that an
// access change of one key's project couples no other key and the history
// stays partitioned by key. In that project an owner client changes, again
// and again, who may write the key, and reads it; two writer clients (one
// account, a user) write it through random nodes meanwhile. Every write is
// judged in Apply against the access committed before it, so the history,
// checked with the model's grant and revoke operations, proves that no write
// commits under a rule or role that no longer held at its commit.
const (
	guardedCollection = "guarded"
	writerEmail       = "writer@example.com"
	writerPassword    = "writer password 123"
	// batchHalf marks the value the first op of a batch sets: the second op
	// of the same batch replaces it, so no read may ever see it.
	batchHalf = "~half"
)

// guardKind is how a guarded key's owner grants and revokes its writers.
type guardKind uint8

const (
	// guardRules: the writer stays a user; the owner switches the
	// project's rules between ones that let the writer write guarded/**
	// and ones that let only owners write.
	guardRules guardKind = iota
	// guardRole: the rules let only owners write (the defaults); the
	// owner makes the writer an owner and a user again.
	guardRole
)

func (k guardKind) String() string {
	if k == guardRole {
		return "role"
	}
	return "rules"
}

// guardedKey is one guarded key with its project and accounts.
type guardedKey struct {
	kind     guardKind
	key      string  // the document's path, also the model's key
	owner    project // the project's owner: changes access, reads
	writerID string
	writer   string // the writer's session token
}

// writerHeaders authenticate as the writer; without the API key the write
// takes the fast path (the token checked on local state).
func (g *guardedKey) writerHeaders(apiKey bool) map[string]string {
	h := map[string]string{"Authorization": "Bearer " + g.writer, "X-Project-Id": g.owner.ID}
	if apiKey {
		h["X-API-Key"] = g.owner.APIKey
	}
	return h
}

// ownerOnly are rules under which only owners read or write anything.
var ownerOnly = map[string]string{"match": "**", "read": "auth.role == 'owner'", "write": "auth.role == 'owner'"}

// rules is the rules document that grants (allow) or revokes the writer's
// writes to guarded/**.
func (g *guardedKey) rules(allow bool) map[string]any {
	if !allow {
		return map[string]any{"rules": []map[string]string{ownerOnly}}
	}
	return map[string]any{"rules": []map[string]string{
		{"match": guardedCollection + "/**", "read": "auth.role == 'owner'", "write": "auth.role == 'owner' || auth.uid == '" + g.writerID + "'"},
		ownerOnly,
	}}
}

// setAccess sends the access change: grant (allow) or revoke.
func (g *guardedKey) setAccess(c *cluster, n *node, timeout time.Duration, allow bool) (*response, error) {
	if g.kind == guardRules {
		return c.do(n, timeout, http.MethodPut, "/api/db/rules", g.owner.Headers(), g.rules(allow))
	}
	role := "user"
	if allow {
		role = "owner"
	}
	return c.do(n, timeout, http.MethodPost, "/api/auth", g.owner.Headers(), map[string]string{"action": "set-role", "userId": g.writerID, "role": role})
}

func guardedNames(gs []*guardedKey) string {
	var names []string
	for _, g := range gs {
		names = append(names, fmt.Sprintf("%s (access by %s, project %s)", g.key, g.kind, g.owner.ID))
	}
	return strings.Join(names, ", ")
}

// setupGuarded creates one project per kind with its writer, grants the
// writer, and returns the keys. It goes through the leader, whose state
// holds every answer it gave (the brokenreads build answers strong reads
// from local state).
func setupGuarded(c *cluster, kinds []guardKind) []*guardedKey {
	c.t.Helper()
	leader := c.leader(20 * time.Second)
	gs := make([]*guardedKey, len(kinds))
	errs := make([]error, len(kinds))
	var wg sync.WaitGroup
	for i, kind := range kinds {
		gs[i] = &guardedKey{kind: kind, key: fmt.Sprintf("%s/%s%d", guardedCollection, kind, i)}
		wg.Go(func() { errs[i] = gs[i].setup(c, leader) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			c.t.Fatalf("guarded key %s: %v", gs[i].key, err)
		}
	}
	return gs
}

func (g *guardedKey) setup(c *cluster, n *node) error {
	ctx, cancel := context.WithTimeout(c.ctx, 60*time.Second)
	defer cancel()
	pr, err := proctest.CreateProject(ctx, c.http, c.bin, n.url(), adminToken, "guarded-"+g.kind.String(), ownerEmail, ownerPassword)
	if err != nil {
		return err
	}
	g.owner = pr
	r, err := c.do(n, 20*time.Second, http.MethodPost, "/api/auth", map[string]string{"X-Project-Id": pr.ID, "X-API-Key": pr.APIKey},
		map[string]string{"action": "register", "email": writerEmail, "password": writerPassword, "name": "writer"})
	if err != nil {
		return fmt.Errorf("register the writer: %w", err)
	}
	var reg struct {
		Token string `json:"token"`
		User  struct {
			ID string `json:"id"`
		} `json:"user"`
	}
	if r.Status != http.StatusCreated || json.Unmarshal(r.Body, &reg) != nil || reg.Token == "" || reg.User.ID == "" {
		return fmt.Errorf("register the writer: %s", r)
	}
	if strings.ContainsAny(reg.User.ID, `'"\`) {
		return fmt.Errorf("writer id %q cannot be quoted in a rule", reg.User.ID)
	}
	g.writer, g.writerID = reg.Token, reg.User.ID
	// Writers start allowed, as the model's keys do.
	return waitFor(ctx, 20*time.Second, func() error {
		r, err := g.setAccess(c, n, 5*time.Second, true)
		if err != nil {
			return err
		}
		if r.Status != http.StatusOK {
			return fmt.Errorf("grant: %s", r)
		}
		return nil
	})
}

// randomNode is any node, voter or edge, running or not.
func (w *workload) randomNode(rng *rand.Rand) *node { return w.c.nodes[rng.IntN(len(w.c.nodes))] }

// pause paces a client: a few thousand operations per run in all.
func pause(ctx context.Context, rng *rand.Rand, minMS, spanMS int) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Duration(minMS+rng.IntN(spanMS)) * time.Millisecond):
	}
}

// runGuardOwner is g's owner client: through random nodes it revokes and
// grants the writer in turn (one operation in three) and reads the key
// (strong reads, the owner may always read).
func (w *workload) runGuardOwner(ctx context.Context, g *guardedKey, id int, rng *rand.Rand) {
	allowed := true // setupGuarded granted
	for ctx.Err() == nil {
		n := w.randomNode(rng)
		in := Input{Kind: OpGet, Key: g.key}
		if rng.IntN(3) == 0 {
			allowed = !allowed
			in.Kind = OpRevoke
			if allowed {
				in.Kind = OpGrant
			}
		}
		w.record(w.doGuarded(g, id, n, in, true))
		pause(ctx, rng, 10, 30)
	}
}

// runGuardWriter is a writer client of g: through random nodes it puts,
// puts with If-Match (the last revision it wrote, or 0), sends 2-op
// batches (set then update, sometimes with ifMatch) and deletes the key.
func (w *workload) runGuardWriter(ctx context.Context, g *guardedKey, id int, rng *rand.Rand, apiKey bool) {
	var lastRev uint64
	seq := 0
	for ctx.Err() == nil {
		seq++
		val := fmt.Sprintf("g%d-%d", id, seq)
		var in Input
		switch p := rng.IntN(100); {
		case p < 30:
			in = Input{Kind: OpPut, Key: g.key, Value: val}
		case p < 50:
			in = Input{Kind: OpCAS, Key: g.key, Value: val, IfRev: lastRev}
		case p < 72:
			in = Input{Kind: OpPut, Key: g.key, Value: val, Batch: true}
		case p < 87:
			in = Input{Kind: OpCAS, Key: g.key, Value: val, IfRev: lastRev, Batch: true}
		default:
			in = Input{Kind: OpDelete, Key: g.key}
		}
		rec := w.doGuarded(g, id, w.randomNode(rng), in, apiKey)
		w.record(rec)
		if rec.Output.Outcome == OutOK {
			lastRev = rec.Output.Rev
			if in.Kind == OpDelete {
				lastRev = 0
			}
		}
		pause(ctx, rng, 5, 20)
	}
}

// doGuarded runs one operation of the access workload on n: access changes
// and reads as g's owner, writes as g's writer.
func (w *workload) doGuarded(g *guardedKey, clientID int, n *node, in Input, apiKey bool) Record {
	rec := Record{Client: clientID, Node: n.id, Input: in}
	h := g.writerHeaders(apiKey)
	q := "/api/db?collection=" + url.QueryEscape(in.Key)
	var r *response
	var err error
	rec.Call = w.now()
	switch {
	case in.Kind == OpGrant || in.Kind == OpRevoke:
		r, err = g.setAccess(w.c, n, w.opTimeout, in.Kind == OpGrant)
	case in.Kind == OpGet:
		r, err = w.c.do(n, w.opTimeout, http.MethodGet, q, g.owner.Headers(), nil)
	case in.Batch:
		set := map[string]any{"op": "set", "collection": in.Key, "data": map[string]string{"v": in.Value + batchHalf}}
		if in.Kind == OpCAS {
			set["ifMatch"] = in.IfRev
		}
		update := map[string]any{"op": "update", "collection": in.Key, "oldKey": "v", "newKey": "v", "value": in.Value}
		r, err = w.c.do(n, w.opTimeout, http.MethodPost, "/api/db/batch", h, map[string]any{"writes": []any{set, update}})
	case in.Kind == OpPut || in.Kind == OpCAS:
		if in.Kind == OpCAS {
			h["If-Match"] = strconv.FormatUint(in.IfRev, 10)
		}
		r, err = w.c.do(n, w.opTimeout, http.MethodPost, "/api/db", h, map[string]any{"collection": in.Key, "data": map[string]string{"v": in.Value}})
	case in.Kind == OpDelete:
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
		var perr error
		switch {
		case in.Kind == OpGrant || in.Kind == OpRevoke:
			perr = parseRevision(r, &rec.Output)
		case in.Batch:
			perr = parseBatch(r, in.Key, &rec.Output)
		default:
			perr = parseOK(in.Kind, r, &rec.Output)
		}
		if perr != nil {
			rec.Output = Output{Outcome: OutUnknown}
			rec.Err = perr.Error()
		}
	}
	return rec
}

// parseRevision reads an access change's commit revision (X-Revision).
func parseRevision(r *response, out *Output) error {
	rev, err := strconv.ParseUint(r.Header.Get("X-Revision"), 10, 64)
	if err != nil || rev == 0 {
		return fmt.Errorf("answer %s: no commit revision (X-Revision %q)", r, r.Header.Get("X-Revision"))
	}
	out.Rev = rev
	return nil
}

// parseBatch reads a batch's answer: one revision for both ops, each
// leaving key in existence.
func parseBatch(r *response, key string, out *Output) error {
	var b struct {
		Revision uint64 `json:"revision"`
		Results  []struct {
			Collection string `json:"collection"`
			Revision   uint64 `json:"revision"`
			Exists     bool   `json:"exists"`
		} `json:"results"`
	}
	if err := json.Unmarshal(r.Body, &b); err != nil || b.Revision == 0 || len(b.Results) != 2 {
		return fmt.Errorf("answer %s: not a batch of 2 (%v)", r, err)
	}
	for i, res := range b.Results {
		if res.Collection != key || res.Revision != b.Revision || !res.Exists {
			return fmt.Errorf("answer %s: result %d is %+v, want %s at revision %d, existing", r, i, res, key, b.Revision)
		}
	}
	if x := r.Header.Get("X-Revision"); x != strconv.FormatUint(b.Revision, 10) {
		return fmt.Errorf("answer %s: X-Revision %q differs from the batch's revision", r, x)
	}
	out.Rev = b.Revision
	return nil
}

// startGuarded starts g's owner client and two writer clients (one with
// the API key, one on the fast path) under wg, with ids from firstID.
func (w *workload) startGuarded(ctx context.Context, wg *sync.WaitGroup, gs []*guardedKey, seed uint64, firstID int) {
	id := firstID
	for _, g := range gs {
		ownerID := id
		wg.Go(func() { w.runGuardOwner(ctx, g, ownerID, rand.New(rand.NewPCG(seed, uint64(ownerID)))) })
		for k := range 2 {
			writerID := id + 1 + k
			wg.Go(func() {
				w.runGuardWriter(ctx, g, writerID, rand.New(rand.NewPCG(seed, uint64(writerID))), k == 0)
			})
		}
		id += 3
	}
}

// guardStats counts, for one guarded key, what the access workload saw.
type guardStats struct {
	grants, revokes    int // answered OK
	writesOK, refused  int // writes answered 2xx, 403
	unknown            int // writes and access changes of unknown outcome
	racing             int // writes answered 2xx or 403 while an access change answered OK was in flight
	batchesOK, batches int
}

func accessStats(recs []Record, key string) guardStats {
	var st guardStats
	var changes [][2]int64
	for _, r := range recs {
		if r.Input.Key != key {
			continue
		}
		isWrite := r.Input.Kind == OpPut || r.Input.Kind == OpCAS || r.Input.Kind == OpDelete
		switch {
		case r.Output.Outcome == OutUnknown && r.Input.Kind != OpGet:
			st.unknown++
		case r.Output.Outcome != OutOK:
		case r.Input.Kind == OpGrant:
			st.grants++
			changes = append(changes, [2]int64{r.Call, r.Return})
		case r.Input.Kind == OpRevoke:
			st.revokes++
			changes = append(changes, [2]int64{r.Call, r.Return})
		}
		if isWrite && r.Output.Outcome == OutOK {
			st.writesOK++
		}
		if isWrite && r.Output.Outcome == OutForbidden {
			st.refused++
		}
		if r.Input.Batch {
			st.batches++
			if r.Output.Outcome == OutOK {
				st.batchesOK++
			}
		}
	}
	for _, r := range recs {
		if r.Input.Key != key || (r.Output.Outcome != OutOK && r.Output.Outcome != OutForbidden) ||
			(r.Input.Kind != OpPut && r.Input.Kind != OpCAS && r.Input.Kind != OpDelete) {
			continue
		}
		for _, c := range changes {
			if r.Call < c[1] && c[0] < r.Return {
				st.racing++
				break
			}
		}
	}
	return st
}

func (st guardStats) String() string {
	return fmt.Sprintf("%d grants and %d revokes answered OK; writes: %d OK, %d refused (403), %d raced an access change; batches: %d of %d OK; %d of unknown outcome",
		st.grants, st.revokes, st.writesOK, st.refused, st.racing, st.batchesOK, st.batches, st.unknown)
}

// exercised says what the run lacked to prove anything of g: both
// answers, each access change, and writes racing them.
func (st guardStats) exercised() error {
	var missing []string
	if st.grants == 0 || st.revokes == 0 {
		missing = append(missing, "a grant and a revoke answered OK")
	}
	if st.writesOK == 0 || st.refused == 0 {
		missing = append(missing, "writes answered OK and 403")
	}
	if st.racing == 0 {
		missing = append(missing, "a write racing an access change")
	}
	if len(missing) > 0 {
		return fmt.Errorf("the access workload lacked %s (%s)", strings.Join(missing, ", "), st)
	}
	return nil
}

// acceptRefusedWrite returns the records of key with one write that was
// refused (403) after a completed revoke turned into an acknowledged one: a
// write that would have committed under the revoke. No grant could have
// come between (none was called before the write returned, after the
// revoke was called), so the checker must find the result Illegal. It
// takes the last such write, so that the checker has the whole history
// before it to get through. ok is false when the history holds none.
func acceptRefusedWrite(recs []Record, key string) (out []Record, idx int, ok bool) {
	for _, r := range recs {
		if r.Input.Key == key {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b Record) int { return cmp.Compare(b.Call, a.Call) })
	isWrite := func(k OpKind) bool { return k == OpPut || k == OpCAS || k == OpDelete }
	for i, w := range out {
		if !isWrite(w.Input.Kind) || w.Output.Outcome != OutForbidden {
			continue
		}
		for _, rv := range out {
			if rv.Input.Kind != OpRevoke || rv.Output.Outcome != OutOK || rv.Return >= w.Call {
				continue
			}
			between := false
			for _, g := range out {
				// A grant that may take effect after the revoke and before
				// the write: failed ones never do, unknown ones at any time
				// after their call.
				if g.Input.Kind == OpGrant && g.Output.Outcome != OutFailed && g.Call < w.Return &&
					(g.Output.Outcome == OutUnknown || g.Return > rv.Call) {
					between = true
					break
				}
			}
			if between {
				continue
			}
			bad := slices.Clone(out)
			bad[i].Output = Output{Outcome: OutOK, Rev: rv.Output.Rev + 1}
			return bad, i, true
		}
	}
	return nil, 0, false
}

func TestModelAcceptRefusedWrite(t *testing.T) {
	recs := []Record{
		hRec(0, hRevoke("g"), hOK(2), 0, 1),
		hRec(1, hPut("g", "1"), hForbidden, 2, 3), // after a completed revoke
		hRec(0, hGrant("g"), hOK(4), 4, 5),
		hRec(0, hRevoke("g"), hOK(6), 6, 7),
		hRec(0, hGrant("g"), hUnknown, 8, 9),
		hRec(1, hPut("g", "2"), hForbidden, 10, 11), // an unknown grant may come between
		hRec(2, hRevoke("other"), hOK(12), 12, 13),
		hRec(2, hPut("other", "x"), hForbidden, 14, 15),
	}
	if res, _ := Check(recs, 5*time.Second); res != porcupine.Ok {
		t.Fatalf("the history itself: Check = %s, want Ok", res)
	}
	bad, i, ok := acceptRefusedWrite(recs, "g")
	if !ok || bad[i].Input.Value != "1" || bad[i].Output != hOK(3) || len(bad) != 6 {
		t.Fatalf("acceptRefusedWrite = %v, %d, %v; want the first put accepted at revision 3", bad, i, ok)
	}
	if res, _ := Check(bad, 5*time.Second); res != porcupine.Illegal {
		t.Fatalf("with the refused write accepted: Check = %s, want Illegal", res)
	}
	if _, _, ok := acceptRefusedWrite(recs[2:6], "g"); ok {
		t.Fatal("found a write although an unknown grant may come between")
	}
}

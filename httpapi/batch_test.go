package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

type batchReply struct {
	Revision uint64 `json:"revision"`
	Results  []struct {
		Collection string `json:"collection"`
		Revision   uint64 `json:"revision"`
		Exists     bool   `json:"exists"`
	} `json:"results"`
}

func (e *env) batch(t *testing.T, tok string, writes ...string) reply {
	t.Helper()
	return e.mustSend(t, http.MethodPost, "/api/db/batch", bearer(tok), `{"writes":[`+strings.Join(writes, ",")+`]}`)
}

// Every op of a batch commits in one entry, with one revision, and sees the
// ops before it.
func TestBatch_AllOpsCommitTogether(t *testing.T) {
	e := newEnv(t)
	own := "users/" + e.user.ID + "/"
	r := e.batch(t, e.user.Token,
		`{"op":"set","collection":"`+own+`a","data":{"n":1,"tags":["x"],"gone":true},"ifMatch":0}`,
		`{"op":"update","collection":"`+own+`a","oldKey":"n","newKey":"count","value":5,"type":"integer"}`,
		`{"op":"increment","collection":"`+own+`a","field":"count","by":2.5}`,
		`{"op":"increment","collection":"`+own+`counter","field":"hits","by":1}`,
		`{"op":"serverTimestamp","collection":"`+own+`a","field":"at"}`,
		`{"op":"arrayUnion","collection":"`+own+`a","field":"tags","values":["y","x",{"k":1}]}`,
		`{"op":"arrayRemove","collection":"`+own+`a","field":"tags","values":["x"]}`,
		`{"op":"deleteField","collection":"`+own+`a","field":"gone"}`,
		`{"op":"set","collection":"`+own+`b","data":{"v":1}}`,
		`{"op":"delete","collection":"`+own+`b"}`,
	)
	if r.Status != http.StatusOK {
		t.Fatalf("batch: status %d: %s", r.Status, r.Body)
	}
	checkJSONResponse(t, r)
	var out batchReply
	mustDecode(t, r.Body, &out)
	if len(out.Results) != 10 || out.Revision == 0 {
		t.Fatalf("batch answered %s", r.Body)
	}
	checkRevisionHeader(t, r, out.Revision)
	for i, res := range out.Results {
		if res.Revision != out.Revision {
			t.Errorf("results[%d].revision = %d, want the batch's %d", i, res.Revision, out.Revision)
		}
		if want := i != 9; res.Exists != want {
			t.Errorf("results[%d].exists = %v, want %v", i, res.Exists, want)
		}
	}
	a, ok := e.get(t, own+"a")
	if !ok || a.Revision != out.Revision {
		t.Fatalf("%sa = %+v (present %v), want revision %d", own, a, ok, out.Revision)
	}
	var got map[string]any
	mustDecode(t, a.Data, &got)
	at, _ := got["at"].(string)
	if ts, err := time.Parse(time.RFC3339Nano, at); err != nil || time.Since(ts) > time.Minute || time.Since(ts) < -time.Minute {
		t.Errorf("at = %q, want the commit time in RFC 3339", at)
	}
	delete(got, "at")
	if want := `{"count":7.5,"tags":["y",{"k":1}]}`; !jsonEqual(mustMarshal(t, got), []byte(want)) {
		t.Errorf("%sa = %s, want %s plus at", own, a.Data, want)
	}
	if c, ok := e.get(t, own+"counter"); !ok || string(c.Data) != `{"hits":1}` {
		t.Errorf("counter = %s (present %v), want {\"hits\":1}", c.Data, ok)
	}
	if _, ok := e.get(t, own+"b"); ok {
		t.Error(own + "b was set and deleted in the batch, and exists")
	}
}

func mustMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A batch with one refused op writes nothing, and the answer is that op's
// error with field writes[i]. Every kind of bad input is refused the same way.
func TestBatch_RefusedOpWritesNothing(t *testing.T) {
	e := newEnv(t)
	own := "users/" + e.user.ID + "/"
	before := e.mustPut(t, e.user.Token, own+"keep", `{"v":1}`)
	set := func(path string) string { return `{"op":"set","collection":"` + path + `","data":{"v":2}}` }
	for _, tc := range []struct {
		name   string
		writes []string
		status int
		code   string
		field  string
	}{
		{"rules refuse the second op", []string{set(own + "keep"), set("users/" + e.other.ID + "/x")}, 403, "forbidden", "writes[1]"},
		{"ifMatch on the current revision moved by an earlier op", []string{set(own + "keep"), `{"op":"set","collection":"` + own + `keep","data":{"v":3},"ifMatch":` + fmt.Sprint(before.Revision) + `}`}, 412, "precondition_failed", "writes[1]"},
		{"ifMatch 0 on an existing document", []string{`{"op":"set","collection":"` + own + `keep","data":{},"ifMatch":0}`}, 412, "precondition_failed", "writes[0]"},
		{"update of a missing document", []string{set(own + "keep"), `{"op":"update","collection":"` + own + `nope","oldKey":"a","newKey":"a","value":1}`}, 404, "not_found", "writes[1]"},
		{"delete of a missing document", []string{set(own + "keep"), `{"op":"delete","collection":"` + own + `nope"}`}, 404, "not_found", "writes[1]"},
		{"increment of a string", []string{set(own + "keep"), `{"op":"set","collection":"` + own + `s","data":{"f":"x"}}`, `{"op":"increment","collection":"` + own + `s","field":"f","by":1}`}, 400, "invalid_argument", "writes[2]"},
		{"arrayUnion on a number", []string{set(own + "keep"), `{"op":"arrayUnion","collection":"` + own + `keep","field":"v","values":[1]}`}, 400, "invalid_argument", "writes[1]"},
		{"deleteField of a missing field", []string{set(own + "keep"), `{"op":"deleteField","collection":"` + own + `keep","field":"nope"}`}, 404, "field_not_found", "writes[1]"},
		{"unknown op", []string{set(own + "keep"), `{"op":"upsert","collection":"` + own + `keep"}`}, 400, "invalid_argument", "writes[1]"},
		{"missing op", []string{`{"collection":"` + own + `keep"}`}, 400, "invalid_argument", "writes[0]"},
		{"unknown member", []string{`{"op":"set","collection":"` + own + `keep","data":{},"where":1}`}, 400, "invalid_argument", "writes[0]"},
		{"bad path", []string{`{"op":"set","collection":"a//b","data":{}}`}, 400, "invalid_path", "writes[0]"},
		{"reserved path", []string{`{"op":"set","collection":"_users/x","data":{}}`}, 400, "invalid_path", "writes[0]"},
		{"data not an object", []string{`{"op":"set","collection":"` + own + `keep","data":[1]}`}, 400, "invalid_argument", "writes[0]"},
		{"increment without by", []string{`{"op":"increment","collection":"` + own + `keep","field":"v"}`}, 400, "invalid_argument", "writes[0]"},
		{"increment by a string", []string{`{"op":"increment","collection":"` + own + `keep","field":"v","by":"1"}`}, 400, "invalid_argument", "writes[0]"},
		{"values not an array", []string{`{"op":"arrayUnion","collection":"` + own + `keep","field":"v","values":1}`}, 400, "invalid_argument", "writes[0]"},
		{"negative ifMatch", []string{`{"op":"delete","collection":"` + own + `keep","ifMatch":-1}`}, 400, "invalid_argument", "writes[0]"},
		{"a write that is not an object", []string{`[1]`}, 400, "invalid_argument", "writes[0]"},
		{"bad type", []string{`{"op":"update","collection":"` + own + `keep","oldKey":"v","newKey":"v","value":"x","type":"integer"}`}, 400, "invalid_argument", "writes[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkError(t, e.batch(t, e.user.Token, tc.writes...), tc.status, tc.code, tc.field)
			if d, ok := e.get(t, own+"keep"); !ok || d.Revision != before.Revision || string(d.Data) != `{"v":1}` {
				t.Fatalf("keep = %+v (present %v) after a refused batch, want it unchanged", d, ok)
			}
			if _, ok := e.get(t, own+"s"); ok {
				t.Fatal("a document of a refused batch was stored")
			}
		})
	}
	for _, tc := range []struct{ name, body string }{
		{"no writes", `{"writes":[]}`},
		{"writes missing", `{}`},
		{"writes not an array", `{"writes":{}}`},
		{"not JSON", `{"writes":[`},
	} {
		r := e.mustSend(t, http.MethodPost, "/api/db/batch", bearer(e.user.Token), tc.body)
		if r.Status != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400: %s", tc.name, r.Status, r.Body)
		}
		checkError(t, r, http.StatusBadRequest, "", "")
	}
	many := make([]string, 501)
	for i := range many {
		many[i] = `{"op":"delete","collection":"x"}`
	}
	checkError(t, e.batch(t, e.user.Token, many...), http.StatusRequestEntityTooLarge, "too_many_writes", "writes")
	checkError(t, e.mustSend(t, http.MethodPost, "/api/db/batch", nil, `{"writes":[`+set(own+"keep")+`]}`), http.StatusUnauthorized, "missing_token", "")
	checkError(t, e.mustSend(t, http.MethodPost, "/api/db/batch", bearer("ebt_nope"), `{"writes":[`+set(own+"keep")+`]}`), http.StatusUnauthorized, "invalid_token", "")
	checkError(t, e.mustSend(t, http.MethodGet, "/api/db/batch", bearer(e.user.Token), ""), http.StatusMethodNotAllowed, "", "")
}

// An earlier op of a batch changes what the rules see for a later one: the
// rules are judged per op against the state the batch left so far.
func TestBatch_RulesSeeEarlierOps(t *testing.T) {
	e := newEnv(t)
	rules := `{"rules":[{"match":"rooms/{r}","read":"true","write":"request.data.open == true || (resource.data != null && resource.data.open == true)"},` +
		`{"match":"rooms/{r}/msgs/{m}","read":"true","write":"request.time > timestamp('2020-01-01T00:00:00Z')"},` +
		`{"match":"**","read":"auth.role == 'owner'","write":"auth.role == 'owner'"}]}`
	if r := e.mustSend(t, http.MethodPut, "/api/db/rules", bearer(e.p.OwnerToken), rules); r.Status != http.StatusOK {
		t.Fatalf("set rules: %d %s", r.Status, r.Body)
	}
	// Opening a room and closing it in one batch: the close is allowed
	// because the open before it is what the rules see as the resource.
	r := e.batch(t, e.user.Token,
		`{"op":"set","collection":"rooms/r1","data":{"open":true}}`,
		`{"op":"update","collection":"rooms/r1","oldKey":"open","newKey":"open","value":false}`,
		`{"op":"set","collection":"rooms/r1/msgs/m1","data":{"t":"hi"}}`)
	if r.Status != http.StatusOK {
		t.Fatalf("open-and-close batch: %d %s", r.Status, r.Body)
	}
	// Now closed: a write that does not reopen it is refused.
	checkError(t, e.batch(t, e.user.Token, `{"op":"set","collection":"rooms/r1","data":{"open":false}}`), http.StatusForbidden, "forbidden", "writes[0]")
}

// Many clients writing the same document with plain writes all succeed:
// an unconditional write never loses a race (it is decided at commit).
// Increments from many clients add up exactly.
func TestDB_HotDocumentLastWriterWins(t *testing.T) {
	e := newEnv(t)
	const writers, each = 32, 10
	path := "users/" + e.user.ID + "/hot"
	var wg sync.WaitGroup
	errs := make(chan string, writers*each*3)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				r, err := e.send(t.Context(), http.MethodPost, "/api/db", bearer(e.user.Token), fmt.Sprintf(`{"collection":%q,"data":{"w":%d,"i":%d}}`, path, w, i))
				if err != nil || (r.Status != http.StatusOK && r.Status != http.StatusCreated) {
					errs <- fmt.Sprintf("post: %v %d %s", err, r.Status, r.Body)
				}
				r, err = e.send(t.Context(), http.MethodPut, docQuery(path), bearer(e.user.Token), fmt.Sprintf(`{"oldKey":"i","newKey":"i","value":%d}`, i))
				if err != nil || r.Status != http.StatusOK {
					errs <- fmt.Sprintf("put: %v %d %s", err, r.Status, r.Body)
				}
				r, err = e.send(t.Context(), http.MethodPost, "/api/db/batch", bearer(e.user.Token), `{"writes":[{"op":"increment","collection":"`+path+`-counter","field":"n","by":1}]}`)
				if err != nil || r.Status != http.StatusOK {
					errs <- fmt.Sprintf("increment: %v %d %s", err, r.Status, r.Body)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	n := 0
	for msg := range errs {
		if n++; n <= 5 {
			t.Error(msg)
		}
	}
	if n > 0 {
		t.Fatalf("%d of %d writes failed", n, writers*each*3)
	}
	if c, ok := e.get(t, path+"-counter"); !ok || string(c.Data) != fmt.Sprintf(`{"n":%d}`, writers*each) {
		t.Fatalf("counter = %s (present %v), want n = %d", c.Data, ok, writers*each)
	}
	d, ok := e.get(t, path)
	var v struct{ W, I *int }
	if ok {
		mustDecode(t, d.Data, &v)
	}
	if !ok || v.W == nil || v.I == nil || *v.W < 0 || *v.W >= writers || *v.I < 0 || *v.I >= each {
		t.Fatalf("final document %s (present %v) is not one of the written values", d.Data, ok)
	}
}

// Two owners demoting each other at once: at most one succeeds, and the
// project keeps an owner. A demoted owner's next write is refused.
func TestDB_OwnersCannotDemoteEachOtherToNone(t *testing.T) {
	e := newEnv(t)
	authAs := func(tok, body string) reply {
		return e.mustSend(t, http.MethodPost, "/api/auth", map[string]string{"X-Project-Id": e.p.ID, "X-API-Key": e.p.APIKey, "Authorization": "Bearer " + tok}, body)
	}
	for round := range 5 {
		a, b := e.mustRegister(t, e.p, ""), e.mustRegister(t, e.p, "")
		for _, acc := range []account{a, b} {
			if r := authAs(e.p.OwnerToken, setRoleBody(acc.ID, "owner")); r.Status != http.StatusOK {
				t.Fatalf("promote: %d %s", r.Status, r.Body)
			}
		}
		// The project's first owner steps down, so that a and b are the
		// only owners.
		if r := authAs(a.Token, setRoleBody(e.p.OwnerID, "user")); r.Status != http.StatusOK {
			t.Fatalf("round %d: demote the first owner: %d %s", round, r.Status, r.Body)
		}
		var wg sync.WaitGroup
		var ra, rb reply
		wg.Add(2)
		go func() { defer wg.Done(); ra = authAs(a.Token, setRoleBody(b.ID, "user")) }()
		go func() { defer wg.Done(); rb = authAs(b.Token, setRoleBody(a.ID, "user")) }()
		wg.Wait()
		if ra.Status == http.StatusOK && rb.Status == http.StatusOK {
			t.Fatalf("round %d: both owners demoted each other: %s / %s", round, ra.Body, rb.Body)
		}
		if ra.Status != http.StatusOK && rb.Status != http.StatusOK {
			t.Fatalf("round %d: neither demotion went through: %d %s / %d %s", round, ra.Status, ra.Body, rb.Status, rb.Body)
		}
		winner, loser := a, b
		lost := rb
		if rb.Status == http.StatusOK {
			winner, loser, lost = b, a, ra
		}
		checkError(t, lost, http.StatusForbidden, "forbidden", "")
		// The demoted owner can no longer write outside its own documents.
		checkError(t, e.mustSend(t, http.MethodPost, "/api/db", bearer(loser.Token), `{"collection":"shared/x","data":{"v":1}}`), http.StatusForbidden, "forbidden", "")
		// The last owner cannot be demoted by anyone (it cannot demote
		// itself either).
		checkError(t, authAs(winner.Token, setRoleBody(winner.ID, "user")), http.StatusConflict, "own_role", "userId")
		// Hand ownership back to the project's first owner for the next round.
		if r := authAs(winner.Token, setRoleBody(e.p.OwnerID, "owner")); r.Status != http.StatusOK {
			t.Fatalf("round %d: restore the first owner: %d %s", round, r.Status, r.Body)
		}
		if r := authAs(e.p.OwnerToken, setRoleBody(winner.ID, "user")); r.Status != http.StatusOK {
			t.Fatalf("round %d: demote the winner: %d %s", round, r.Status, r.Body)
		}
	}
}

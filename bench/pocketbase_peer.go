package main

// The end-user workloads of --peer pocketbase (issue 23): W1, W64, HOT, R64,
// L32 and RT, single-node edgebase against one PocketBase process, both
// written, read and subscribed to by one authenticated END USER (neither
// the project owner nor PocketBase's superuser) under rules that want an
// authenticated caller.
//
// edgebase: the bench registers one user of the project and logs it in
// before each scenario (a fresh session: L32's logins may push an earlier
// one past the 100 live sessions an account keeps); the user writes under
// users/<uid>/notes with the default rules (a user may read and write their
// own users/<uid> tree, decided from the path). PocketBase: the "notes"
// collection of bench/pocketbase, whose list, view, create and update rules
// are @request.auth.id != "".
//
// The edgebase side runs the scenarios of pbPeerScenarios (not in the main
// table: they exist for the comparison), the PocketBase side the same
// shapes through runOnce, or the paced realtime writer of pbRealtime.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"
)

// pbNotes is the PocketBase collection of the end-user workloads.
const pbNotes = "notes"

// pbPeerScenarios are edgebase's sides of the end-user comparisons with
// PocketBase. Their operations are bound when a comparison prepares them
// (ebUserSide): they need the user's session.
var pbPeerScenarios = []scenario{
	{
		Name:       "W1U",
		What:       "serial writes as an end user: 1 client creates documents under users/<uid>/notes, one after another, on a single node",
		Clients:    func(*options) int { return 1 },
		DefaultOps: 1000,
		Target:     func(e *env) string { return "leader " + e.c.leader.id },
	},
	{
		Name:       "W64",
		What:       "concurrent writes as an end user: 64 clients create distinct documents under users/<uid>/notes",
		Clients:    func(*options) int { return 64 },
		DefaultOps: 6000,
		Target:     func(e *env) string { return "leader " + e.c.leader.id },
	},
	{
		Name:       "HOTU",
		What:       "one hot document as an end user: 64 clients update field v of users/<uid>/notes/hot (PUT /api/db, oldKey == newKey); every update must succeed",
		Clients:    func(*options) int { return 64 },
		DefaultOps: 6000,
		Target:     func(e *env) string { return "leader " + e.c.leader.id },
	},
	{
		Name:       "R64",
		What:       "one document read as an end user: 64 clients GET users/<uid>/notes/r with the default (linearizable) consistency",
		Clients:    func(*options) int { return 64 },
		DefaultOps: 20000,
		Target:     func(e *env) string { return "leader " + e.c.leader.id },
	},
	{
		Name:       "L32",
		What:       "logins: 32 clients log in as the one end user (correct password); 503 + Retry-After counts as shed, not as an error or an op",
		Clients:    func(*options) int { return 32 },
		DefaultOps: 300,
		Target:     func(e *env) string { return "leader " + e.c.leader.id },
		ExpectShed: true,
	},
	{
		Name:       "RTU",
		What:       "realtime fan-out to an end user: --subscribers WebSocket connections of the user subscribe to users/<uid>/rt (prefix); a paced writer (the same user) creates --rate documents a second under it (ops = deliveries; latency = write sent -> change received)",
		Clients:    func(o *options) int { return o.subscribers },
		DefaultOps: 150,
		Target:     func(e *env) string { return "subscribers on leader " + e.c.leader.id },
		Realtime:   &rtSpec{paced: true, cutsAreErrors: true},
	},
}

// findOursScenario finds name in the main table or in pbPeerScenarios.
func findOursScenario(name string) (*scenario, bool) {
	if s, ok := findScenario(name); ok {
		return s, true
	}
	for i := range pbPeerScenarios {
		if pbPeerScenarios[i].Name == name {
			return &pbPeerScenarios[i], true
		}
	}
	return nil, false
}

// isPBPeerScenario: s is one of pbPeerScenarios (its side is ebUserSide's).
func isPBPeerScenario(s *scenario) bool {
	for i := range pbPeerScenarios {
		if s == &pbPeerScenarios[i] {
			return true
		}
	}
	return false
}

// ebUser is the end user of the edgebase side.
type ebUser struct {
	e    *env
	acct benchAccount
	id   string
	seq  atomic.Uint64 // documents written (w<n>)

	registered bool
}

func newEBUser(e *env) *ebUser {
	return &ebUser{e: e, acct: benchAccount{email: "bench-notes@example.com", password: "bench notes " + randomHex(16)}}
}

// session registers the user (once) and logs it in, and returns an env
// that acts as the user: its project token is the user's session.
func (u *ebUser) session(ctx context.Context) (*env, error) {
	e := u.e
	if !u.registered {
		if err := e.register(ctx, e.c.leader, u.acct, "bench notes"); err != nil {
			return nil, fmt.Errorf("register the end user: %w", err)
		}
		u.registered = true
	}
	b, err := e.authCall(ctx, e.c.leader, "login", map[string]string{"action": "login", "email": u.acct.email, "password": u.acct.password}, http.StatusOK)
	if err != nil {
		return nil, fmt.Errorf("log the end user in: %w", err)
	}
	token, id, err := parseEBLogin(b)
	if err != nil {
		return nil, err
	}
	u.id = id
	ue := &env{hc: e.hc, c: e.c, pr: project{ID: e.pr.ID, APIKey: e.pr.APIKey, Token: token}, o: e.o,
		value: e.value, used: e.used, log: e.log}
	return ue, nil
}

// parseEBLogin reads the token and the user's id from a login answer.
func parseEBLogin(b []byte) (token, id string, err error) {
	var res struct {
		RequiresTotp bool   `json:"requiresTotp"`
		Token        string `json:"token"`
		User         struct {
			ID   string `json:"id"`
			Role string `json:"role"`
		} `json:"user"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return "", "", fmt.Errorf("login answer: %w", err)
	}
	switch {
	case res.RequiresTotp || res.Token == "" || res.User.ID == "":
		return "", "", fmt.Errorf("login answer without a token and a user id: %.200s", b)
	case res.User.Role == "owner":
		return "", "", errors.New("login answer: the bench's end user is an owner")
	}
	return res.Token, res.User.ID, nil
}

// notes is the user's collection of documents (its own tree).
func (u *ebUser) notes() string { return "users/" + u.id + "/notes" }

// side prepares edgebase's side of spec as the end user: s is one of
// pbPeerScenarios.
func (u *ebUser) side(ctx context.Context, spec compareSpec, s *scenario, logf func(string, ...any)) (*side, error) {
	ue, err := u.session(ctx)
	if err != nil {
		return nil, err
	}
	e := u.e
	n := e.c.leader
	sd := &side{nodes: e.c.nodes, leader: n, settle: func(ctx context.Context) { e.c.settle(ctx, e.hc) }, close: func() {}}
	var op func(ctx context.Context, c, i int) error
	switch s.Name {
	case "W1U", "W64":
		op = func(ctx context.Context, _, _ int) error {
			_, err := ue.post(ctx, n, u.notes()+"/w"+strconv.FormatUint(u.seq.Add(1), 10))
			return err
		}
	case "HOTU":
		hot := u.notes() + "/hot"
		if _, err := ue.post(ctx, n, hot); err != nil {
			return nil, fmt.Errorf("create %s: %w", hot, err)
		}
		body := fieldUpdateBody("v", e.value)
		op = func(ctx context.Context, _, _ int) error { return ebPutField(ctx, ue, n, hot, body) }
	case "R64":
		doc := u.notes() + "/r"
		if _, err := ue.post(ctx, n, doc); err != nil {
			return nil, fmt.Errorf("create %s: %w", doc, err)
		}
		op = func(ctx context.Context, _, _ int) error { return ue.read(ctx, n, doc, false, 0, false) }
	case "L32":
		op = func(ctx context.Context, _, _ int) error { return e.login(ctx, n, u.acct) }
	case "RTU":
		rs, err := startUserRealtime(ctx, ue, s, "users/"+u.id+"/rt", logf)
		if err != nil {
			return nil, fmt.Errorf("subscribers: %w", err)
		}
		sd.run, sd.close = rs.run, func() { rs.close(logf) }
		e.c.settle(ctx, e.hc)
		return sd, nil
	default:
		return nil, fmt.Errorf("no end-user side of %s", s.Name)
	}
	e.c.settle(ctx, e.hc)
	es := *s
	es.Op = func(ctx context.Context, _ *env, c, i int) error { return op(ctx, c, i) }
	clients := s.Clients(e.o)
	sd.run = func(ctx context.Context, ops int) (runResult, *histogram, map[string]int, map[string]int) {
		return runOnce(ctx, ue, &es, clients, ops)
	}
	return sd, nil
}

// fieldUpdateBody is the PUT /api/db body that sets field to value (a JSON
// literal).
func fieldUpdateBody(field string, value []byte) []byte {
	b := make([]byte, 0, len(value)+2*len(field)+40)
	b = append(b, `{"oldKey":`...)
	b = strconv.AppendQuote(b, field)
	b = append(b, `,"newKey":`...)
	b = strconv.AppendQuote(b, field)
	b = append(b, `,"value":`...)
	b = append(b, value...)
	return append(b, '}')
}

// ebPutField sends PUT /api/db?collection=coll with body as ue's user; 200
// with an X-Revision is success.
func ebPutField(ctx context.Context, ue *env, n *benchNode, coll string, body []byte) error {
	_, err := ue.sendRev(ctx, n, http.MethodPut, "/api/db?collection="+url.QueryEscape(coll), "PUT", body, http.StatusOK)
	return err
}

// startUserRealtime connects --subscribers subscribers of ue's user to
// prefix on the leader, as startRealtime does for the owner under bench/rt
// (without its memory figures), and returns the session whose run writes
// as that user.
func startUserRealtime(ctx context.Context, ue *env, s *scenario, prefix string, logf func(string, ...any)) (*rtSession, error) {
	node := ue.c.leader
	n := ue.o.subscribers
	rs := &rtSession{e: ue, s: s, spec: s.Realtime, node: node, prefix: prefix, base: time.Now(), log: &rtLog{cuts: map[string]int{}},
		hc: rtHTTPClient()}
	rs.res = rtResult{Subscribers: n, Node: node.id, Prefix: prefix, RatePerSec: ue.o.rate}
	var err error
	if rs.res.BenchFDLimit, rs.res.NodeFDLimit, err = checkRealtimeLimits(node, n); err != nil {
		return nil, err
	}
	t0 := time.Now()
	rs.subs = make([]*rtSubscriber, n)
	err = parallel(ctx, n, rtDialers, func(i int) error {
		sub, err := rs.connect(ctx)
		if err != nil {
			return fmt.Errorf("subscriber %d of %d on %s: %w", i+1, n, node.id, err)
		}
		rs.subs[i] = sub
		return nil
	})
	if err != nil {
		var kept []*rtSubscriber
		for _, x := range rs.subs {
			if x != nil {
				kept = append(kept, x)
			}
		}
		rs.subs = kept
		rs.close(logf)
		return nil, err
	}
	logf("bench: %s edgebase: %d WebSocket subscribers of %s on %s in %.1fs", s.Name, n, prefix, node.id, time.Since(t0).Seconds())
	return rs, nil
}

// ---- the PocketBase side ----

// pbRecord is the answer of a record's create, update or view.
type pbRecord struct {
	ID string `json:"id"`
	V  string `json:"v"`
}

// pbNoteBody is a notes record {"v": value} (value a JSON string literal).
func pbNoteBody(value []byte) []byte {
	b := make([]byte, 0, len(value)+8)
	b = append(b, `{"v":`...)
	b = append(b, value...)
	return append(b, '}')
}

// checkPBRecord checks a record answer: an id, and v when want is not nil.
func checkPBRecord(b []byte, want []byte) (string, error) {
	var r pbRecord
	if err := json.Unmarshal(b, &r); err != nil || r.ID == "" {
		return "", &opError{kind: "pocketbase record: unreadable answer"}
	}
	if want != nil {
		var v string
		if err := json.Unmarshal(want, &v); err != nil || r.V != v {
			return "", &opError{kind: "pocketbase record: another value than written"}
		}
	}
	return r.ID, nil
}

// createNote creates a notes record as the end user and returns its id.
func (pe *pbEnv) createNote(ctx context.Context, body []byte) (string, error) {
	b, err := pe.do(ctx, http.MethodPost, "/api/collections/"+pbNotes+"/records", pe.userToken, body)
	if err != nil {
		return "", err
	}
	return checkPBRecord(b, nil)
}

// pbLoginOp is one L32 login: a token in a 200 answer.
func (pe *pbEnv) pbLoginOp(ctx context.Context, body []byte) error {
	b, err := pe.do(ctx, http.MethodPost, "/api/collections/users/auth-with-password", "", body)
	if err != nil {
		return err
	}
	return needToken(b, "pocketbase login 200 without a token")
}

// userSide prepares PocketBase's side of an end-user comparison.
func (pe *pbEnv) userSide(ctx context.Context, spec compareSpec, s *scenario, logf func(string, ...any)) (*side, error) {
	sd := &side{nodes: []*benchNode{pe.node}, leader: pe.node, settle: func(context.Context) {}, close: func() {}}
	var op func(ctx context.Context, c, i int) error
	records := "/api/collections/" + pbNotes + "/records"
	body := pbNoteBody(pe.value)
	switch spec.Name {
	case "W1", "W64":
		op = func(ctx context.Context, _, _ int) error {
			b, err := pe.do(ctx, http.MethodPost, records, pe.userToken, body)
			if err != nil {
				return err
			}
			_, err = checkPBRecord(b, pe.value)
			return err
		}
	case "HOT":
		id, err := pe.createNote(ctx, body)
		if err != nil {
			return nil, fmt.Errorf("create the hot record: %w", err)
		}
		op = func(ctx context.Context, _, _ int) error {
			b, err := pe.do(ctx, http.MethodPatch, records+"/"+id, pe.userToken, body)
			if err != nil {
				return err
			}
			_, err = checkPBRecord(b, pe.value)
			return err
		}
	case "R64":
		id, err := pe.createNote(ctx, body)
		if err != nil {
			return nil, fmt.Errorf("create the record to read: %w", err)
		}
		op = func(ctx context.Context, _, _ int) error {
			b, err := pe.do(ctx, http.MethodGet, records+"/"+id, pe.userToken, nil)
			if err != nil {
				return err
			}
			_, err = checkPBRecord(b, pe.value)
			return err
		}
	case "L32":
		login, _ := json.Marshal(map[string]string{"identity": pe.userEmail, "password": pe.userPassword}) // strings: cannot fail
		op = func(ctx context.Context, _, _ int) error { return pe.pbLoginOp(ctx, login) }
	case "RT":
		rt, err := startPBRealtime(ctx, pe, logf)
		if err != nil {
			return nil, fmt.Errorf("subscribers: %w", err)
		}
		sd.run, sd.close = rt.run, rt.close
		return sd, nil
	default:
		return nil, fmt.Errorf("no PocketBase counterpart of %s", spec.Name)
	}
	es := *s
	es.Op = func(ctx context.Context, _ *env, c, i int) error { return op(ctx, c, i) }
	e := &env{o: pe.o}
	clients := s.Clients(pe.o)
	sd.run = func(ctx context.Context, ops int) (runResult, *histogram, map[string]int, map[string]int) {
		return runOnce(ctx, e, &es, clients, ops)
	}
	return sd, nil
}

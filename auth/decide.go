package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
)

// Decider is the domain's half of every write decided in Apply: it
// implements raftstore.Decider. A txn proposed for a caller carries the hash
// of the caller's session token (Txn.Caller); at the entry's commit, on every
// node, the Decider
//
//   - resolves that session against committed state: it must exist, not be
//     expired at the txn's Time, and belong to an account whose session
//     generation it carries (not ended by a password change or reset);
//   - allows each op by the caller's role and the project's access rules as
//     committed at that point of the log, with request.time the txn's Time:
//     project documents by the rules' write expression, reserved state
//     (_users, _rules, _origins, ...) to owners only, nothing outside the
//     caller's project but its triggers' entries in the cluster's list
//     (keys.TriggerIndex), also to owners only;
//   - keeps every project with at least one owner, whoever writes (ErrCodeLastOwner).
//
// It reads nothing but the View and the Txn, so its answer is the same on
// every node. Its caches are keyed by the content of what they were built
// from, so they never change an answer.
type Decider struct {
	mu      sync.Mutex
	rules   map[string]decidedRules // by project id
	callers map[string]decidedCaller
}

type decidedRules struct {
	data  []byte // the rules document's data (nil: the defaults)
	rules *CompiledRules
}

type decidedCaller struct {
	sess, acc []byte // the session's and the account's data
	p         Principal
	expires   int64 // Unix seconds
}

// maxDecidedCallers bounds the callers the Decider remembers.
const maxDecidedCallers = 16384

// NewDecider returns the Decider every node of a cluster must run.
func NewDecider() *Decider {
	return &Decider{rules: map[string]decidedRules{}, callers: map[string]decidedCaller{}}
}

// Begin implements raftstore.Decider.
func (d *Decider) Begin(v raftstore.View, t *raftstore.Txn) (raftstore.EntryDecider, raftstore.OpError) {
	e := &decidedEntry{d: d, v: v, t: t}
	if t.Caller == "" {
		return e, raftstore.ErrCodeNone // a system write: invariants only
	}
	p, code := d.caller(v, t)
	if code != raftstore.ErrCodeNone {
		return nil, code
	}
	e.caller = p
	return e, raftstore.ErrCodeNone
}

// caller resolves t.Caller at the txn's Time. When the session and account
// documents are byte for byte those it last resolved, it answers from memory
// (no JSON decode on a write's path); the answer is the same either way.
func (d *Decider) caller(v raftstore.View, t *raftstore.Txn) (*Principal, raftstore.OpError) {
	sdoc, err := v.Get(keys.Session(t.Caller))
	if err != nil || sdoc == nil {
		return nil, raftstore.ErrCodeUnauthenticated
	}
	now := time.Unix(0, t.Time).Unix()
	d.mu.Lock()
	c, ok := d.callers[t.Caller]
	d.mu.Unlock()
	if ok && bytes.Equal(c.sess, sdoc.Data) {
		if now >= c.expires {
			return nil, raftstore.ErrCodeUnauthenticated
		}
		adoc, err := v.Get(keys.User(c.p.ProjectID, c.p.UserID))
		if err != nil || adoc == nil {
			return nil, raftstore.ErrCodeUnauthenticated
		}
		if bytes.Equal(c.acc, adoc.Data) {
			p := c.p
			return &p, raftstore.ErrCodeNone
		}
	}
	var sess session
	if json.Unmarshal(sdoc.Data, &sess) != nil || sess.ProjectID == "" {
		return nil, raftstore.ErrCodeUnauthenticated
	}
	if now >= sess.ExpiresAt {
		return nil, raftstore.ErrCodeUnauthenticated
	}
	adoc, err := v.Get(keys.User(sess.ProjectID, sess.UserID))
	if err != nil || adoc == nil {
		return nil, raftstore.ErrCodeUnauthenticated
	}
	var acc account
	if json.Unmarshal(adoc.Data, &acc) != nil || acc.SessionGen != sess.Gen {
		return nil, raftstore.ErrCodeUnauthenticated
	}
	p := Principal{ProjectID: sess.ProjectID, UserID: acc.ID, Email: acc.Email, Role: acc.Role, ExpiresAt: time.Unix(sess.ExpiresAt, 0)}
	d.mu.Lock()
	if len(d.callers) >= maxDecidedCallers {
		clear(d.callers)
	}
	d.callers[t.Caller] = decidedCaller{sess: sdoc.Data, acc: adoc.Data, p: p, expires: sess.ExpiresAt}
	d.mu.Unlock()
	return &p, raftstore.ErrCodeNone
}

// projectRules returns the rules of project pid as v shows them.
func (d *Decider) projectRules(v raftstore.View, pid string) (*CompiledRules, bool) {
	doc, err := v.Get(keys.Rules(pid))
	if err != nil {
		return nil, false
	}
	var data []byte
	if doc != nil {
		data = doc.Data
	}
	d.mu.Lock()
	c, ok := d.rules[pid]
	d.mu.Unlock()
	if ok && bytes.Equal(c.data, data) && (c.data == nil) == (data == nil) {
		return c.rules, true
	}
	rs := DefaultRules()
	if data != nil {
		if json.Unmarshal(data, &rs) != nil {
			return nil, false
		}
	}
	compiled, err := CompileRules(rs)
	if err != nil {
		return nil, false
	}
	d.mu.Lock()
	d.rules[pid] = decidedRules{data: data, rules: compiled}
	d.mu.Unlock()
	return compiled, true
}

type decidedEntry struct {
	d      *Decider
	v      raftstore.View
	t      *raftstore.Txn
	caller *Principal // nil: a system write
}

// Op implements raftstore.EntryDecider.
func (e *decidedEntry) Op(_ int, op *raftstore.Op, cur, next *raftstore.Document) raftstore.OpError {
	p := e.caller
	if p == nil {
		return raftstore.ErrCodeNone
	}
	if pid, _, ok := keys.ParseTriggerIndex(op.Path); ok {
		// A trigger's entry in the cluster's list of triggers (the leader's
		// runner reads it), written with the trigger: its project's owners'.
		if pid != p.ProjectID || p.Role != RoleOwner {
			return raftstore.ErrCodeForbidden
		}
		return raftstore.ErrCodeNone
	}
	rel, ok := keys.Rel(p.ProjectID, op.Path)
	if !ok {
		return raftstore.ErrCodeForbidden
	}
	if keys.IsReserved(rel) {
		// Reserved state of the project (accounts, rules, origins, devices):
		// the handlers that write it for a caller are owner-only.
		if p.Role != RoleOwner {
			return raftstore.ErrCodeForbidden
		}
		return raftstore.ErrCodeNone
	}
	rules, ok := e.d.projectRules(e.v, p.ProjectID)
	if !ok {
		return raftstore.ErrCodeForbidden
	}
	in := RuleInput{Path: rel, Auth: p.AuthInfo(), Time: time.Unix(0, e.t.Time).UTC()}
	if cur != nil {
		in.Resource = cur.Data
	}
	if next != nil {
		in.Request = next.Data
	}
	// No deadline: CEL's cost limit bounds the evaluation, and a context
	// that could end would make the answer depend on timing.
	allowed, _ := rules.Allow(context.Background(), OpWrite, in)
	if !allowed {
		return raftstore.ErrCodeForbidden
	}
	return raftstore.ErrCodeNone
}

// End implements raftstore.EntryDecider: no txn may leave a project
// without an owner.
func (e *decidedEntry) End(written []string, before func(string) *raftstore.Document) raftstore.OpError {
	for _, path := range written {
		pid, _, ok := keys.ParseUser(path)
		if !ok || !isOwnerDoc(before(path)) {
			continue
		}
		after, err := e.v.Get(path)
		if err != nil {
			return raftstore.ErrCodeInvalid
		}
		if isOwnerDoc(after) {
			continue
		}
		owner := false
		if err := e.v.Scan(keys.Under(keys.UsersDir(pid)), func(d *raftstore.Document) bool {
			owner = isOwnerDoc(d)
			return !owner
		}); err != nil {
			return raftstore.ErrCodeInvalid
		}
		if !owner {
			return raftstore.ErrCodeLastOwner
		}
	}
	return raftstore.ErrCodeNone
}

func isOwnerDoc(d *raftstore.Document) bool {
	if d == nil {
		return false
	}
	var a struct {
		Role string `json:"role"`
	}
	return json.Unmarshal(d.Data, &a) == nil && a.Role == RoleOwner
}

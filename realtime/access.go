package realtime

import (
	"context"
	"encoding/json"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/raftstore"
)

// Every document a subscription delivers (snapshot, replay, change) is
// judged by the read rule of its own path, not only the subscribed one.
// What a subscription judges with is its view: the project's compiled rules
// (compiled once per rules revision), the caller, and what those rules say
// of the whole subscribed path or subtree, decided once (auth.ReadScope):
//
//   - ReadAll: every document there is readable from its path alone; nothing
//     is evaluated per document (the usual case, e.g. users/{uid}/**).
//   - ReadByPath: each document is judged by its path; its data never
//     changes the answer, so what a subscriber holds is fixed by the rules.
//   - ReadByData: the data may change the answer, so a document can become
//     readable or unreadable by a write. The subscription remembers which
//     documents its subscriber holds (visible) and sends a delete for one
//     that stops being readable, a set for one that becomes readable.
//
// Live changes are judged in the shard's goroutine, once per change and
// (rules, caller) however many subscriptions share them (decisions).

// view is how a subscription judges its documents.
type view struct {
	rules *auth.CompiledRules
	who   auth.AuthInfo
	scope auth.ReadScope
}

type viewKey struct {
	rules *auth.CompiledRules
	who   auth.AuthInfo
}

// newView decides s's view under rules for p.
func newView(rules *auth.CompiledRules, p *auth.Principal, s *sub) *view {
	who := p.AuthInfo()
	return &view{rules: rules, who: who, scope: rules.ReadScope(context.Background(), userPath(s.path), s.prefix, who)}
}

// allows judges one document: its path without the project, and its data
// (nil when it was deleted).
func (v *view) allows(path string, data json.RawMessage) bool {
	switch v.scope {
	case auth.ReadAll:
		return true
	case auth.ReadNone:
		return false
	case auth.ReadByPath:
		data = nil // no rule there reads it: not decoded for nothing
	}
	ok, _ := v.rules.Allow(context.Background(), auth.OpRead, auth.RuleInput{Path: path, Auth: v.who, Resource: data})
	return ok
}

// same reports whether v and o judge every document alike: the same
// caller and the same rules (compiled once per revision, so usually the
// same pointer; an identical rewrite compares equal too).
func (v *view) same(o *view) bool {
	if o == nil || v.who != o.who {
		return false
	}
	if v.rules == o.rules {
		return true
	}
	a, b := v.rules.Source().Rules, o.rules.Source().Rules
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// decisions caches, for the change being routed, whether each (rules,
// caller) may read it, and the delete message sent to subscribers that held
// a document it makes unreadable.
type decisions struct {
	ev      *raftstore.Event
	allowed map[viewKey]bool
	gone    *changeMsg
	// refills are the store reads live queries made for this change.
	refills map[refillKey]refillResult
}

func (d *decisions) reset(ev *raftstore.Event) {
	d.ev, d.gone = ev, nil
	if len(d.allowed) > 0 {
		clear(d.allowed)
	}
	if len(d.refills) > 0 {
		clear(d.refills)
	}
}

func eventData(ev *raftstore.Event) json.RawMessage {
	if ev.Doc == nil {
		return nil
	}
	return ev.Doc.Data
}

// allows judges ev for v; d may be nil (no cache).
func (d *decisions) allows(v *view, ev *raftstore.Event) bool {
	if d == nil || d.ev != ev {
		return v.allows(userPath(ev.Path), eventData(ev))
	}
	k := viewKey{v.rules, v.who}
	if ok, seen := d.allowed[k]; seen {
		return ok
	}
	ok := v.allows(userPath(ev.Path), eventData(ev))
	if d.allowed == nil {
		d.allowed = map[viewKey]bool{}
	}
	d.allowed[k] = ok
	return ok
}

// goneMsg is ev's document as deleted: for a subscriber that held it and
// may not read what ev made of it.
func (d *decisions) goneMsg(ev *raftstore.Event) *changeMsg {
	if d != nil && d.ev == ev && d.gone != nil {
		return d.gone
	}
	m := newChangeMsg(&raftstore.Event{Revision: ev.Revision, Path: ev.Path, Type: raftstore.EventDelete})
	if d != nil && d.ev == ev {
		d.gone = m
	}
	return m
}

// render is what s sends of ev (nil: nothing), and it keeps s.visible. It
// runs in the shard.
func (s *sub) render(ev *raftstore.Event, m *changeMsg, d *decisions) []byte {
	switch s.view.scope {
	case auth.ReadAll:
		return m.forSub(s.head)
	case auth.ReadNone:
		return nil
	case auth.ReadByPath:
		if d.allows(s.view, ev) {
			return m.forSub(s.head)
		}
		return nil
	}
	if ev.Doc != nil && d.allows(s.view, ev) {
		if s.visible == nil {
			s.visible = map[string]struct{}{}
		}
		s.visible[ev.Path] = struct{}{}
		return m.forSub(s.head)
	}
	if _, held := s.visible[ev.Path]; held {
		delete(s.visible, ev.Path)
		if ev.Doc == nil {
			return m.forSub(s.head)
		}
		return d.goneMsg(ev).forSub(s.head)
	}
	return nil
}

// rules returns the project's compiled rules (compiled once per revision by
// the accounts service).
func (s *Server) rules(p *auth.Principal) (*auth.CompiledRules, error) {
	return s.accounts.Rules(p.ProjectID)
}

// allowPath judges the subscribed path itself (no document data), as a
// subscription is allowed or refused.
func allowPath(rules *auth.CompiledRules, p *auth.Principal, path string) bool {
	ok, _ := rules.Allow(context.Background(), auth.OpRead, auth.RuleInput{Path: path, Auth: p.AuthInfo()})
	return ok
}

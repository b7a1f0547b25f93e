package auth

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
)

// Client is what a session records of the client that opened it: its
// address (as the brute-force limits count it) and its User-Agent.
type Client struct {
	Addr      string
	UserAgent string
}

// maxUserAgent bounds the User-Agent a session keeps (bytes).
const maxUserAgent = 256

type userAgentKey struct{}

// WithUserAgent returns ctx carrying the request's User-Agent, for the
// session a sign-in opens. The HTTP layer sets it once per request, so that
// the many sign-in paths (and their addr parameters) stay as they are.
func WithUserAgent(ctx context.Context, ua string) context.Context {
	return context.WithValue(ctx, userAgentKey{}, ua)
}

// clientOf is the client of a request: addr and the User-Agent in ctx,
// cut to maxUserAgent bytes of printable UTF-8.
func clientOf(ctx context.Context, addr string) Client {
	ua, _ := ctx.Value(userAgentKey{}).(string)
	ua = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return -1
		}
		return r
	}, ua)
	for len(ua) > maxUserAgent {
		_, n := utf8.DecodeLastRuneInString(ua)
		ua = ua[:len(ua)-n]
	}
	return Client{Addr: addr, UserAgent: ua}
}

// SessionInfo is one live session of an account as its owner sees it. ID
// is the session's entry in the account's session index, never its token
// or the token's hash.
type SessionInfo struct {
	ID         string `json:"id"`
	CreatedAt  string `json:"createdAt"`
	LastUsedAt string `json:"lastUsedAt"`
	Address    string `json:"address"`
	UserAgent  string `json:"userAgent"`
	Current    bool   `json:"current"`
}

// ListSessions lists the caller's live sessions, oldest first (see
// listSessions); the caller's own is marked current.
func (s *Service) ListSessions(p *Principal) ([]SessionInfo, error) {
	list, err := s.listSessions(p.ProjectID, p.UserID, p.Session)
	if err != nil {
		return nil, err
	}
	if list == nil {
		return nil, ErrInvalidToken
	}
	return list, nil
}

// listSessions lists the live sessions of account uid of project pid,
// oldest first: those of the account's index whose session exists, has not
// expired and carries the account's generation (a password change or a
// disable ends the others without touching the index). current is the token
// hash of the caller's session (marked current), or "". The index holds at
// most about MaxSessionsPerAccount entries (newSession trims it). A nil list
// means the account does not exist.
func (s *Service) listSessions(pid, uid, current string) ([]SessionInfo, error) {
	acc, err := s.account(pid, uid)
	if err != nil {
		return nil, err
	}
	if acc == nil {
		return nil, nil
	}
	now := s.now().Unix()
	out := []SessionInfo{}
	after := ""
	for {
		docs, next, err := s.store.List(keys.AccountSessionsDir(pid, uid), after, 200)
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		for _, d := range docs {
			var e sessionEntry
			if decodeJSON(d, &e) != nil || e.Session == "" {
				continue
			}
			var sess session
			ok, err := s.getJSON(keys.Session(e.Session), &sess)
			if err != nil {
				return nil, err
			}
			if !ok || sess.Gen != acc.SessionGen || now >= sess.ExpiresAt {
				continue
			}
			created := e.CreatedAt
			if created == 0 {
				created = sess.CreatedAt // an entry from before the metadata
			}
			used := max(e.LastUsedAt, created)
			out = append(out, SessionInfo{ID: keys.Base(d.Path), CreatedAt: timestamp(time.Unix(created, 0).UTC()),
				LastUsedAt: timestamp(time.Unix(used, 0).UTC()), Address: e.Address, UserAgent: e.UserAgent,
				Current: current != "" && EqualHash(e.Session, current)})
		}
		if next == "" {
			return out, nil
		}
		after = next
	}
}

// RevokeSession ends one of the caller's sessions, named by its id from
// ListSessions (the calling session too, like logout). An id that is not one
// of the caller's live sessions is ErrSessionNotFound: the path is built
// from the caller's own account, so another user's session cannot be named.
func (s *Service) RevokeSession(ctx context.Context, p *Principal, id, addr string) (uint64, error) {
	return s.revokeSession(ctx, p.ProjectID, p.UserID, id, nil,
		AuditEvent{Type: AuditSessionsRevoked, UserID: p.UserID, Address: addr, Detail: map[string]string{"session": id}})
}

// revokeSession ends session id of account uid of project pid in one system
// write, recording ev in the audit log. guard, when set, is judged on the
// state the txn is built from and returns the conditions under which the
// revoke may commit (an owner's: ownerGuard); its error ends the call.
func (s *Service) revokeSession(ctx context.Context, pid, uid, id string, guard func() ([]raftstore.Cond, error), ev AuditEvent) (uint64, error) {
	if id == "" || len(id) > 100 || strings.ContainsAny(id, "/\x00") || keys.IsReserved(id) {
		return 0, ErrSessionNotFound
	}
	index := keys.AccountSession(pid, uid, id)
	// The entry's revision guards the delete: a touch of its lastUsedAt
	// meanwhile makes Guarded judge it again.
	res, _, err := raftstore.Guarded(ctx, s.store, func() (*raftstore.Txn, error) {
		var conds []raftstore.Cond
		if guard != nil {
			c, err := guard()
			if err != nil {
				return nil, err
			}
			conds = c
		}
		doc, err := s.store.Get(index)
		if err != nil {
			return nil, err
		}
		if doc == nil {
			return nil, ErrSessionNotFound
		}
		var e sessionEntry
		if err := decodeJSON(doc, &e); err != nil || e.Session == "" {
			return nil, ErrSessionNotFound
		}
		acc, err := s.account(pid, uid)
		if err != nil {
			return nil, err
		}
		var sess session
		ok, err := s.getJSON(keys.Session(e.Session), &sess)
		if err != nil {
			return nil, err
		}
		if acc == nil || !ok || sess.Gen != acc.SessionGen || s.now().Unix() >= sess.ExpiresAt {
			return nil, ErrSessionNotFound
		}
		s.forgetGuard(e.Session)
		return &raftstore.Txn{Time: s.now().UnixNano(),
			Conds: append(conds, raftstore.Cond{Path: index, Kind: raftstore.CondRevision, Revision: doc.Revision}),
			Ops: []raftstore.Op{
				{Kind: raftstore.OpDelete, Path: keys.Session(e.Session), IfExists: true},
				{Kind: raftstore.OpDelete, Path: index},
				s.auditOp(pid, ev),
			}}, nil
	})
	if err != nil {
		return 0, err
	}
	if !res.OK() {
		return 0, fmt.Errorf("revoke session refused: %s", res.Err)
	}
	return res.Revision, nil
}

// touchEvery is how often a session's lastUsedAt is committed at most.
const touchEvery = time.Hour

// maxTouchQueue and maxTouchSeen bound the lastUsedAt writer: a full queue
// drops the touch (the next use an hour on tries again), and past
// maxTouchSeen remembered sessions the memory is cleared.
const (
	maxTouchQueue = 256
	maxTouchSeen  = 16384
)

// sessionTouches remembers, on this node, when each session's lastUsedAt
// was last queued, and queues the touches for RunSessionTouches. It never
// blocks a request.
type sessionTouches struct {
	mu   sync.Mutex
	seen map[string]int64 // index entry path → Unix seconds queued
	ch   chan touch
}

// touch is a use of the session with index entry index at Unix second at.
type touch struct {
	index string
	at    int64
}

func newSessionTouches() *sessionTouches {
	return &sessionTouches{seen: map[string]int64{}, ch: make(chan touch, maxTouchQueue)}
}

// noteSessionUse queues a lastUsedAt touch of the session with index entry
// index, unless this node queued one within touchEvery.
func (s *Service) noteSessionUse(index string) {
	t := s.touches
	if t == nil || index == "" {
		return
	}
	now := s.now().Unix()
	t.mu.Lock()
	defer t.mu.Unlock()
	if last, ok := t.seen[index]; ok && now-last < int64(touchEvery/time.Second) {
		return
	}
	if len(t.seen) >= maxTouchSeen {
		clear(t.seen)
	}
	select {
	case t.ch <- touch{index: index, at: now}:
		t.seen[index] = now
	default: // under load the touch is dropped; a later use queues it again
	}
}

// RunSessionTouches commits the queued lastUsedAt touches until ctx ends.
// The node runs one per service; without it touches are dropped.
func (s *Service) RunSessionTouches(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case tc := <-s.touches.ch:
			if err := s.touchSession(ctx, tc); err != nil && ctx.Err() == nil {
				s.logger.Debug("session lastUsedAt not recorded", "err", err)
			}
		}
	}
}

// touchSession commits lastUsedAt of one session index entry as the time
// of the use, unless some node recorded one within touchEvery before. The
// entry's revision guards the write, so a revoked session is never brought
// back; a lost race is simply dropped.
func (s *Service) touchSession(ctx context.Context, tc touch) error {
	index := tc.index
	doc, err := s.store.Get(index)
	if err != nil || doc == nil {
		return err
	}
	var e sessionEntry
	if err := decodeJSON(doc, &e); err != nil {
		return err
	}
	if tc.at-max(e.LastUsedAt, e.CreatedAt) < int64(touchEvery/time.Second) {
		return nil
	}
	e.LastUsedAt = tc.at
	now := s.now()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = s.store.Txn(ctx, &raftstore.Txn{Time: now.UnixNano(),
		Conds: []raftstore.Cond{{Path: index, Kind: raftstore.CondRevision, Revision: doc.Revision}},
		Ops:   []raftstore.Op{{Kind: raftstore.OpPut, Path: index, Data: mustJSON(e)}}})
	if err != nil {
		return fmt.Errorf("touch session: %w", err)
	}
	return nil
}

package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
)

// Deleting an account happens in two steps, in this order:
//
//  1. One transaction removes the account record and its email index entry
//     and records a purge (keys.AccountPurge). From that commit on the
//     account is gone on every node: its sessions fail (the Decider and
//     readCaller find no account), its email is free to register again.
//  2. The purge removes everything else that is the user's, in bounded
//     transactions of at most purgeChunk deletes: sessions and their index,
//     login tickets and verify tokens, email codes and their links, devices
//     and their tokens, topics (both mirrors), schedules (with their due
//     entries and the user's index of them), preferences, the inbox, the
//     push lock, and the user documents users/<uid> and everything below.
//     The purge record is deleted last, so a purge that stopped half-way
//     (a failed chunk, a node that died) is found and finished by the
//     leader's sweep (Sweep → finishPurges). Every delete is IfExists, so
//     running a purge twice is harmless.

// purgeChunk bounds the deletes of one purge transaction.
const purgeChunk = 256

// accountPurge is the record of a deleted account whose data is still
// being removed.
type accountPurge struct {
	ProjectID string `json:"projectId"`
	UserID    string `json:"userId"`
	// Email is the account's address (its email codes are keyed by it).
	Email string `json:"email,omitempty"`
}

// DeleteAccount removes account uid of project pid and everything that is
// the user's (see above): the account and its email index at once, the
// rest in chunks. It returns the revision of the commit that removed the
// account. ErrUserNotFound when there is no such account; ErrLastOwner when
// it is the project's only owner (judged in Apply). It is a system write:
// the caller decides who may delete whom (the owner route checks the
// caller's role; delete-account acts for the account itself).
func (s *Service) DeleteAccount(ctx context.Context, pid, uid string) (uint64, error) {
	return s.deleteAccount(ctx, pid, uid, "", nil)
}

// DeleteAccountAs is DeleteAccount recording actorID (an owner deleting a
// user) as the actor of the audit event.
func (s *Service) DeleteAccountAs(ctx context.Context, pid, uid, actorID string) (uint64, error) {
	return s.deleteAccount(ctx, pid, uid, actorID, nil)
}

// deleteSelf is delete-account: the caller deletes its own account, which
// needs a recent proof of the password (recentProof), held at the commit.
// An anonymous account has no password to prove: its session is all it
// has, so it is enough.
func (s *Service) deleteSelf(ctx context.Context, p *Principal) (uint64, error) {
	return s.deleteAccount(ctx, p.ProjectID, p.UserID, "", func(acc *account) ([]raftstore.Cond, error) {
		if acc.Anonymous {
			doc, _, err := s.sessionDoc(p.Session)
			if err != nil {
				return nil, err
			}
			return []raftstore.Cond{{Path: doc.Path, Kind: raftstore.CondRevision, Revision: doc.Revision}}, nil
		}
		proof, err := s.recentProof(p)
		if err != nil {
			return nil, err
		}
		return []raftstore.Cond{proof}, nil
	})
}

// DeleteSelf deletes the caller's own account (delete-account).
func (s *Service) DeleteSelf(ctx context.Context, p *Principal) (uint64, error) {
	if p == nil || p.Session == "" {
		return 0, ErrInvalidToken
	}
	return s.deleteSelf(ctx, p)
}

// deleteAccount runs step 1 and then the purge. check, when set, is asked
// for extra conditions of the removal (or refuses it) given the account.
func (s *Service) deleteAccount(ctx context.Context, pid, uid, actor string, check func(*account) ([]raftstore.Cond, error)) (uint64, error) {
	if uid == "" || strings.Contains(uid, "/") || keys.IsReserved(uid) || len(uid) > 200 {
		return 0, ErrUserNotFound
	}
	var acc *account
	res, _, err := raftstore.Guarded(ctx, s.store, func() (*raftstore.Txn, error) {
		var rev uint64
		var err error
		if acc, rev, err = s.accountRev(pid, uid); err != nil {
			return nil, err
		}
		if acc == nil {
			return nil, ErrUserNotFound
		}
		txn := &raftstore.Txn{Time: s.now().UnixNano(),
			Conds: []raftstore.Cond{{Path: keys.User(pid, uid), Kind: raftstore.CondRevision, Revision: rev}}}
		if check != nil {
			conds, err := check(acc)
			if err != nil {
				return nil, err
			}
			txn.Conds = append(txn.Conds, conds...)
		}
		txn.Ops = append(txn.Ops,
			raftstore.Op{Kind: raftstore.OpDelete, Path: keys.User(pid, uid)},
			raftstore.Op{Kind: raftstore.OpDelete, Path: keys.AccountDisabled(pid, uid), IfExists: true},
			raftstore.Op{Kind: raftstore.OpPut, Path: keys.AccountPurge(pid, uid), Data: mustJSON(accountPurge{ProjectID: pid, UserID: uid, Email: acc.Email})})
		if acc.Email != "" {
			// The index entry goes only if it is this account's (it is, unless
			// the state is damaged): conditioned on the revision read.
			idx, err := s.store.Get(keys.Email(pid, acc.Email))
			if err != nil {
				return nil, err
			}
			var e emailIndex
			if idx != nil && json.Unmarshal(idx.Data, &e) == nil && e.UserID == uid {
				txn.Conds = append(txn.Conds, raftstore.Cond{Path: idx.Path, Kind: raftstore.CondRevision, Revision: idx.Revision})
				txn.Ops = append(txn.Ops, raftstore.Op{Kind: raftstore.OpDelete, Path: idx.Path})
			}
		}
		txn.Ops = append(txn.Ops, s.auditOp(pid, AuditEvent{Type: AuditAccountDeleted, UserID: uid, ActorID: actor}))
		return txn, nil
	})
	if err != nil {
		return 0, err
	}
	if !res.OK() {
		if derr := DecidedRefusal(res.Err); derr != nil {
			return 0, derr
		}
		return 0, fmt.Errorf("delete account refused: %s", res.Err)
	}
	s.forgetAccountGuards(uid)
	s.logger.Info("account deleted", "project", pid, "user", uid)
	if err := s.purge(ctx, accountPurge{ProjectID: pid, UserID: uid, Email: acc.Email}); err != nil {
		// The account is gone; the leader's sweep finishes the purge.
		s.logger.Warn("account purge stopped; the sweep finishes it", "project", pid, "user", uid, "err", err)
	}
	return res.Revision, nil
}

// forgetAccountGuards drops the callers Caller remembers for account uid, so
// that this node stops answering for its sessions from memory at once.
func (s *Service) forgetAccountGuards(uid string) {
	s.guardMu.Lock()
	for h, p := range s.guards {
		if p.UserID == uid {
			delete(s.guards, h)
		}
	}
	s.guardMu.Unlock()
}

// prefixReader reads every document under a path: the user documents of an
// account nest at any depth, which List (children only) cannot reach.
// raftstore.Store implements it.
type prefixReader interface {
	SnapshotRead(path string, prefix bool, pageSize int, fn func(rev uint64, docs []*raftstore.Document) error) (uint64, error)
}

// purger collects the deletes of a purge and commits them in chunks.
type purger struct {
	s   *Service
	ctx context.Context
	ops []raftstore.Op
	n   int // documents deleted
}

func (p *purger) del(paths ...string) error {
	for _, path := range paths {
		p.ops = append(p.ops, raftstore.Op{Kind: raftstore.OpDelete, Path: path, IfExists: true})
	}
	if len(p.ops) >= purgeChunk {
		return p.flush()
	}
	return nil
}

func (p *purger) flush() error {
	for len(p.ops) > 0 {
		n := min(len(p.ops), purgeChunk)
		res, err := p.s.store.Txn(p.ctx, &raftstore.Txn{Time: p.s.now().UnixNano(), Ops: p.ops[:n]})
		if err != nil {
			return err
		}
		if !res.OK() {
			return fmt.Errorf("purge chunk refused: %s", res.Err)
		}
		p.n += n
		p.ops = p.ops[n:]
	}
	p.ops = nil
	return nil
}

// eachChild calls fn for every child document of dir, page by page.
func (p *purger) eachChild(dir string, fn func(d *raftstore.Document) error) error {
	after := ""
	for {
		if err := p.ctx.Err(); err != nil {
			return err
		}
		docs, next, err := p.s.store.List(dir, after, purgeChunk)
		if err != nil {
			return err
		}
		for _, d := range docs {
			if err := fn(d); err != nil {
				return err
			}
		}
		if next == "" {
			return nil
		}
		after = next
	}
}

// purge removes what account a.UserID left behind (step 2 above) and
// finally its purge record.
func (s *Service) purge(ctx context.Context, a accountPurge) error {
	p := &purger{s: s, ctx: ctx}
	pid, uid := a.ProjectID, a.UserID

	// Sessions through the account's index; tickets and verify tokens by a
	// scan of their (short-lived, so small) directories.
	if err := p.eachChild(keys.AccountSessionsDir(pid, uid), func(d *raftstore.Document) error {
		var e sessionEntry
		if json.Unmarshal(d.Data, &e) == nil && e.Session != "" {
			if err := p.del(keys.Session(e.Session)); err != nil {
				return err
			}
		}
		return p.del(d.Path)
	}); err != nil {
		return fmt.Errorf("purge sessions: %w", err)
	}
	for _, dir := range []string{keys.TicketsDir(), keys.VerifyDir()} {
		if err := p.eachChild(dir, func(d *raftstore.Document) error {
			var g grant
			if json.Unmarshal(d.Data, &g) == nil && g.ProjectID == pid && g.UserID == uid {
				return p.del(d.Path)
			}
			return nil
		}); err != nil {
			return fmt.Errorf("purge %s: %w", dir, err)
		}
	}

	// Email codes and their links.
	for _, path := range s.emailCodePaths(pid, uid, a.Email) {
		d, err := s.store.Get(path)
		if err != nil {
			return fmt.Errorf("purge email codes: %w", err)
		}
		if d == nil {
			continue
		}
		var c emailCode
		if json.Unmarshal(d.Data, &c) == nil && c.UserID != uid {
			continue // another account's code for the same address
		}
		if c.LinkHash != "" {
			if err := p.del(keys.EmailLink(c.LinkHash)); err != nil {
				return err
			}
		}
		if err := p.del(path); err != nil {
			return err
		}
	}

	// Push: devices and the token records still naming this user, topics
	// (both mirrors), schedules with their due entries, preferences, the
	// inbox and the push lock.
	if err := p.eachChild(keys.DevicesDir(pid, uid), func(d *raftstore.Document) error {
		th := keys.Base(d.Path)
		owner, err := s.store.Get(keys.DeviceToken(pid, th))
		if err != nil {
			return err
		}
		var o struct {
			UserID string `json:"userId"`
		}
		if owner != nil && json.Unmarshal(owner.Data, &o) == nil && o.UserID == uid {
			if err := p.del(owner.Path); err != nil {
				return err
			}
		}
		return p.del(d.Path)
	}); err != nil {
		return fmt.Errorf("purge devices: %w", err)
	}
	if err := p.eachChild(keys.UserTopicsDir(pid, uid), func(d *raftstore.Document) error {
		return p.del(keys.TopicMember(pid, keys.Base(d.Path), uid), d.Path)
	}); err != nil {
		return fmt.Errorf("purge topics: %w", err)
	}
	if err := p.eachChild(keys.MySchedulesDir(pid, uid), func(d *raftstore.Document) error {
		sid := keys.Base(d.Path)
		sd, err := s.store.Get(keys.Schedule(pid, sid))
		if err != nil {
			return err
		}
		var sc struct {
			CreatedBy string `json:"createdBy"`
			DueKey    string `json:"dueKey"`
		}
		if sd != nil && json.Unmarshal(sd.Data, &sc) == nil && sc.CreatedBy == uid {
			if sc.DueKey != "" {
				if err := p.del(keys.PushDue(sc.DueKey)); err != nil {
					return err
				}
			}
			if err := p.del(sd.Path); err != nil {
				return err
			}
		}
		return p.del(d.Path)
	}); err != nil {
		return fmt.Errorf("purge schedules: %w", err)
	}
	if err := p.eachChild(keys.InboxDir(pid, uid), func(d *raftstore.Document) error {
		return p.del(d.Path)
	}); err != nil {
		return fmt.Errorf("purge inbox: %w", err)
	}
	if err := p.del(keys.Prefs(pid, uid), keys.PushLock(pid, uid)); err != nil {
		return err
	}

	// The user documents: users/<uid> and everything below it, read a chunk
	// at a time (each read starts again: what was deleted is gone).
	if err := p.del(keys.UserData(pid, uid)); err != nil {
		return err
	}
	if err := p.flush(); err != nil {
		return err
	}
	pr, ok := s.store.(prefixReader)
	if !ok {
		return errors.New("purge user documents: the store cannot read by prefix")
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var paths []string
		// The read offers the document at the path itself (written again
		// meanwhile, if at all) and every one below it.
		_, err := pr.SnapshotRead(keys.UserData(pid, uid), true, purgeChunk, func(_ uint64, docs []*raftstore.Document) error {
			for _, d := range docs {
				paths = append(paths, d.Path)
			}
			if len(paths) >= purgeChunk {
				return errChunkFull
			}
			return nil
		})
		if err != nil && !errors.Is(err, errChunkFull) {
			return fmt.Errorf("purge user documents: %w", err)
		}
		if len(paths) == 0 {
			break
		}
		if err := p.del(paths...); err != nil {
			return err
		}
		if err := p.flush(); err != nil {
			return err
		}
	}
	if err := p.del(keys.AccountPurge(pid, uid)); err != nil {
		return err
	}
	if err := p.flush(); err != nil {
		return err
	}
	s.logger.Info("account purged", "project", pid, "user", uid, "deleted", p.n)
	return nil
}

// errChunkFull stops a prefix read once a chunk of paths is collected.
var errChunkFull = errors.New("chunk full")

// finishPurges finishes the purges that stopped half-way (the leader's sweep
// runs it). It returns how many it finished.
func (s *Service) finishPurges(ctx context.Context) (int, error) {
	done := 0
	after := ""
	for {
		docs, next, err := s.store.List(keys.AccountPurgesDir(), after, 100)
		if err != nil {
			return done, err
		}
		for _, d := range docs {
			var a accountPurge
			if err := decodeJSON(d, &a); err != nil {
				return done, err
			}
			// An account of that id may exist again only if it was never
			// deleted (ids are random): then there is nothing to purge.
			if acc, err := s.account(a.ProjectID, a.UserID); err != nil || acc != nil {
				continue
			}
			if err := s.purge(ctx, a); err != nil {
				return done, err
			}
			done++
		}
		if next == "" {
			return done, nil
		}
		after = next
	}
}

package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
)

// Disabled accounts. An owner's disable sets User.Disabled and bumps the
// account's SessionGen in one commit (every session, ticket and verify
// token ends on every node at once), and puts the marker
// keys.AccountDisabled. Every path that opens a session
//
//   - refuses an account it read as disabled (account.checkEnabled), and
//   - conditions its commit on the marker's absence (enabledCond), so that
//     a disable committed between the read and the commit still wins: the
//     check that guards the write happens where the write commits.

// condDisabled names enabledCond's condition in a txn (TxnResult.Failed).
const condDisabled = "account-disabled"

// checkEnabled refuses an account an owner disabled (ErrAccountDisabled).
// Callers check the password or code first, so the answer does not tell a
// stranger that the account exists.
func (a *account) checkEnabled() error {
	if a.Disabled {
		return ErrAccountDisabled
	}
	return nil
}

// enabledCond is the condition a txn that opens a session of account uid
// carries: it fails, by name, when the account was disabled by the commit.
// After the commit, test disabledAtCommit(res, txn).
func enabledCond(pid, uid string) raftstore.Cond {
	return raftstore.Cond{Path: keys.AccountDisabled(pid, uid), Kind: raftstore.CondNotExists, Name: condDisabled}
}

// disabledAtCommit reports whether txn was refused because its account was
// disabled (enabledCond failed).
func disabledAtCommit(res *raftstore.TxnResult, txn *raftstore.Txn) bool {
	return res != nil && txn != nil && !res.OK() && res.Failed(txn) == condDisabled
}

// User administration (owners only). Reads are judged on the state the HTTP
// layer synced (strong); writes carry the owner's session (Txn.Caller), so
// the Decider decides at the commit that the caller is still an owner with
// a live session, and the account's revision guards the read-modify-write.

// Listing bounds: a page holds 1..MaxUserPage users (DefaultUserPage when
// zero), and one call reads at most userScanBudget accounts: a query that
// matches few users answers a short page with a nextCursor to go on from.
const (
	DefaultUserPage = 50
	MaxUserPage     = 100
	userScanBudget  = 1000
)

// cursorPrefix versions the opaque cursor of ListUsers.
const cursorPrefix = "u1:"

// errInvalidLimit means the page size is outside 1..MaxUserPage.
var errInvalidLimit = &FieldError{Field: "limit", Err: fmt.Errorf("%w: limit must be 1..%d", ErrInvalidArgument, MaxUserPage)}

// ListUsers lists the caller's project's accounts in id order, a page at a
// time. query, when set, keeps the accounts whose email starts with it,
// whose id is it, or whose name contains it (case-insensitive). cursor is
// "" or a nextCursor of an earlier page; the answer's nextCursor is ""
// when no account is left to look at.
func (s *Service) ListUsers(p *Principal, query, cursor string, limit int) ([]User, string, error) {
	if p.Role != RoleOwner {
		return nil, "", ErrForbidden
	}
	if limit == 0 {
		limit = DefaultUserPage
	}
	if limit < 1 || limit > MaxUserPage {
		return nil, "", errInvalidLimit
	}
	query = strings.ToLower(strings.TrimSpace(query))
	if len(query) > maxEmailLen {
		return nil, "", &FieldError{Field: "query", Err: fmt.Errorf("%w: query must be at most %d bytes", ErrInvalidArgument, maxEmailLen)}
	}
	after, err := decodeUserCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	out := []User{}
	scanned := 0
	for scanned < userScanBudget {
		docs, next, err := s.store.List(keys.UsersDir(p.ProjectID), after, min(userScanBudget-scanned, 200))
		if err != nil {
			return nil, "", fmt.Errorf("list users: %w", err)
		}
		for i, d := range docs {
			scanned++
			after = keys.Base(d.Path)
			var acc account
			if decodeJSON(d, &acc) != nil || !userMatches(&acc.User, query) {
				continue
			}
			out = append(out, acc.User)
			if len(out) == limit {
				if i == len(docs)-1 && next == "" {
					return out, "", nil
				}
				return out, encodeUserCursor(after), nil
			}
		}
		if next == "" {
			return out, "", nil
		}
	}
	// The budget ran out before the page filled: go on from here.
	return out, encodeUserCursor(after), nil
}

func userMatches(u *User, query string) bool {
	return query == "" || u.ID == query || (u.Email != "" && strings.HasPrefix(u.Email, query)) ||
		strings.Contains(strings.ToLower(u.Name), query)
}

func encodeUserCursor(after string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + after))
}

func decodeUserCursor(c string) (string, error) {
	if c == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", ErrInvalidCursor
	}
	after, ok := strings.CutPrefix(string(b), cursorPrefix)
	if !ok || checkUserID(after) != nil {
		return "", ErrInvalidCursor
	}
	return after, nil
}

// checkUserID refuses what cannot be an account id (ErrUserNotFound,
// naming the path's id): it must be one path segment, not reserved.
func checkUserID(uid string) error {
	if uid == "" || len(uid) > 200 || strings.ContainsAny(uid, "/\x00") || keys.IsReserved(uid) {
		return &FieldError{Field: "id", Err: ErrUserNotFound}
	}
	return nil
}

// GetUser returns account uid of the caller's project.
func (s *Service) GetUser(p *Principal, uid string) (*User, error) {
	if p.Role != RoleOwner {
		return nil, ErrForbidden
	}
	if err := checkUserID(uid); err != nil {
		return nil, err
	}
	acc, err := s.account(p.ProjectID, uid)
	if err != nil {
		return nil, err
	}
	if acc == nil {
		return nil, &FieldError{Field: "id", Err: ErrUserNotFound}
	}
	return &acc.User, nil
}

// disabledMarker is the record at keys.AccountDisabled.
type disabledMarker struct {
	DisabledAt string `json:"disabledAt"`
	By         string `json:"by"`
}

// DisableUser disables account uid: it cannot sign in, and every session,
// ticket and verify token it holds ends at once on every node (the new
// session generation), in one commit. An owner cannot disable themselves.
func (s *Service) DisableUser(ctx context.Context, p *Principal, uid, addr string) (*User, uint64, error) {
	return s.adminUpdate(ctx, p, uid, func(acc *account, now time.Time) []raftstore.Op {
		acc.Disabled = true
		acc.SessionGen++
		return []raftstore.Op{
			{Kind: raftstore.OpPut, Path: keys.AccountDisabled(p.ProjectID, uid), Data: mustJSON(disabledMarker{DisabledAt: timestamp(now), By: p.UserID})},
			s.auditOp(p.ProjectID, AuditEvent{Type: AuditAccountDisabled, UserID: uid, ActorID: p.UserID, Address: addr, Time: now}),
		}
	})
}

// EnableUser lets a disabled account sign in again (its old sessions stay
// ended).
func (s *Service) EnableUser(ctx context.Context, p *Principal, uid, addr string) (*User, uint64, error) {
	return s.adminUpdate(ctx, p, uid, func(acc *account, now time.Time) []raftstore.Op {
		acc.Disabled = false
		return []raftstore.Op{
			{Kind: raftstore.OpDelete, Path: keys.AccountDisabled(p.ProjectID, uid), IfExists: true},
			s.auditOp(p.ProjectID, AuditEvent{Type: AuditAccountEnabled, UserID: uid, ActorID: p.UserID, Address: addr, Time: now}),
		}
	})
}

// RevokeUserSessions ends every session, ticket and verify token of
// account uid at once on every node (a new session generation). The
// account may sign in again.
func (s *Service) RevokeUserSessions(ctx context.Context, p *Principal, uid, addr string) (uint64, error) {
	_, rev, err := s.adminUpdate(ctx, p, uid, func(acc *account, now time.Time) []raftstore.Op {
		acc.SessionGen++
		return []raftstore.Op{s.auditOp(p.ProjectID, AuditEvent{Type: AuditSessionsRevoked, UserID: uid, ActorID: p.UserID, Address: addr, Time: now})}
	})
	return rev, err
}

// adminUpdate changes account uid for the owner p: change mutates the
// account and returns the txn's other ops. The txn carries p's session, so
// Apply refuses it unless p is still an owner with a live session, and the
// account's revision, so a concurrent change makes change run again on it.
// An owner cannot disable their own account (ErrOwnAccount).
func (s *Service) adminUpdate(ctx context.Context, p *Principal, uid string, change func(acc *account, now time.Time) []raftstore.Op) (*User, uint64, error) {
	if p.Role != RoleOwner {
		return nil, 0, ErrForbidden
	}
	if err := checkUserID(uid); err != nil {
		return nil, 0, err
	}
	var acc *account
	res, _, err := raftstore.Guarded(ctx, s.store, func() (*raftstore.Txn, error) {
		a, rev, err := s.accountRev(p.ProjectID, uid)
		if err != nil {
			return nil, err
		}
		if a == nil {
			return nil, &FieldError{Field: "id", Err: ErrUserNotFound}
		}
		now := s.now()
		extra := change(a, now)
		if a.Disabled && uid == p.UserID {
			return nil, ErrOwnAccount
		}
		acc = a
		return &raftstore.Txn{Time: now.UnixNano(), Caller: p.Session,
			Conds: []raftstore.Cond{{Path: keys.User(p.ProjectID, uid), Kind: raftstore.CondRevision, Revision: rev}},
			Ops:   append([]raftstore.Op{{Kind: raftstore.OpPut, Path: keys.User(p.ProjectID, uid), Data: mustJSON(a)}}, extra...),
		}, nil
	})
	if err != nil {
		return nil, 0, err
	}
	if !res.OK() {
		if err := DecidedRefusal(res.Err); err != nil {
			return nil, 0, err
		}
		return nil, 0, fmt.Errorf("update account %s refused: %s", uid, res.Err)
	}
	return &acc.User, res.Revision, nil
}

// DeleteUser deletes account uid and everything that is the user's
// (DeleteAccountAs), for an owner; not the owner's own account (they leave
// with delete-account). The owner's role is judged on the strong-synced
// state the HTTP layer read; the deletion itself is a system write, and
// Apply keeps the project's last owner (ErrLastOwner).
func (s *Service) DeleteUser(ctx context.Context, p *Principal, uid, addr string) (uint64, error) {
	if p.Role != RoleOwner {
		return 0, ErrForbidden
	}
	if err := checkUserID(uid); err != nil {
		return 0, err
	}
	if uid == p.UserID {
		return 0, ErrOwnAccount
	}
	// The deletion commits only while the caller's session and account are
	// as ownerGuard judged them (still an owner, not disabled or signed
	// out): a demotion racing the delete makes it judged again.
	rev, err := s.deleteAccount(ctx, p.ProjectID, uid, p.UserID, func(*account) ([]raftstore.Cond, error) {
		return s.ownerGuard(p)
	})
	if errors.Is(err, ErrUserNotFound) {
		return 0, &FieldError{Field: "id", Err: ErrUserNotFound}
	}
	return rev, err
}

package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/edgebase/edgebase/raftstore"
)

// ChangePassword replaces the password of the caller after checking the
// current one. Every session, ticket and verify token of the account ends
// (the calling session included) and a new session is returned in one
// commit, so a thief holding an old token is out on every node at once.
func (s *Service) ChangePassword(ctx context.Context, p *Principal, current, next, addr string) (*AuthResult, error) {
	if current == "" {
		return nil, &FieldError{Field: "currentPassword", Err: fmt.Errorf("%w: currentPassword is required", ErrInvalidArgument)}
	}
	if err := ValidatePassword(next); err != nil {
		return nil, &FieldError{Field: "newPassword", Err: err}
	}
	at := attempt{kind: kindPassword, action: actionChangePassword, pid: p.ProjectID, email: p.Email, addr: addr}
	if err := s.checkLimits(at); err != nil {
		return nil, err
	}
	acc, err := s.account(p.ProjectID, p.UserID)
	if err != nil {
		return nil, err
	}
	if acc == nil {
		return nil, ErrInvalidToken
	}
	ok, err := s.hasher.Verify(ctx, acc.PasswordHash, current)
	if err != nil {
		return nil, err
	}
	if !ok {
		if err := s.recordFailure(ctx, at); err != nil {
			return nil, err
		}
		return nil, &FieldError{Field: "currentPassword", Err: ErrInvalidCredentials}
	}
	hash, err := s.hasher.Hash(ctx, next)
	if err != nil {
		return nil, fmt.Errorf("hash password: %w", err)
	}
	oldHash := acc.PasswordHash
	var token string
	acc, rev, err := s.updateAccount(ctx, p.ProjectID, p.UserID, func(acc *account) ([]raftstore.Op, []raftstore.Cond, error) {
		if acc.PasswordHash != oldHash {
			// Changed or reset concurrently: the password we checked is gone.
			return nil, nil, ErrInvalidToken
		}
		gate, err := s.limitGate(at)
		if err != nil {
			return nil, nil, err
		}
		acc.PasswordHash = hash
		acc.SessionGen++
		tok, sessOp, err := s.newSession(p.ProjectID, acc.ID, acc.SessionGen)
		if err != nil {
			return nil, nil, err
		}
		token = tok
		return []raftstore.Op{sessOp}, gate, nil
	})
	if err != nil {
		return nil, err
	}
	return &AuthResult{Token: token, User: acc.User, Revision: rev}, nil
}

// ResetPassword sets a new password with a verify token from VerifyForReset
// and ends every session of the account. The token is single use and must
// belong to the account of email.
func (s *Service) ResetPassword(ctx context.Context, pid, email, verifyTok, next, addr string) (uint64, error) {
	if err := ValidatePassword(next); err != nil {
		return 0, &FieldError{Field: "newPassword", Err: err}
	}
	at := attempt{kind: kindReset, action: actionResetPassword, pid: pid, email: email, addr: addr}
	if err := s.checkLimits(at); err != nil {
		return 0, err
	}
	fail := func() (uint64, error) {
		if err := s.recordFailure(ctx, at); err != nil {
			return 0, err
		}
		return 0, ErrInvalidVerifyToken
	}
	if verifyTok == "" {
		return fail()
	}
	vpath := verifyPath(HashToken(verifyTok))
	vdoc, err := s.store.Get(vpath)
	if err != nil {
		return 0, err
	}
	if vdoc == nil {
		return fail()
	}
	var g grant
	if err := decodeJSON(vdoc, &g); err != nil {
		return 0, err
	}
	acc, err := s.account(pid, g.UserID)
	if err != nil {
		return 0, err
	}
	if g.ProjectID != pid || s.now().Unix() >= g.ExpiresAt || acc == nil || acc.SessionGen != g.Gen ||
		acc.Email != NormalizeEmail(email) {
		return fail()
	}
	hash, err := s.hasher.Hash(ctx, next)
	if err != nil {
		return 0, fmt.Errorf("hash password: %w", err)
	}
	_, rev, err := s.updateAccount(ctx, pid, g.UserID, func(acc *account) ([]raftstore.Op, []raftstore.Cond, error) {
		// Look at the token again: a retry after a conflict may find it
		// used by a concurrent reset.
		cur, err := s.store.Get(vpath)
		if err != nil {
			return nil, nil, err
		}
		if acc.SessionGen != g.Gen || cur == nil || cur.Revision != vdoc.Revision {
			return nil, nil, ErrInvalidVerifyToken
		}
		acc.PasswordHash = hash
		acc.SessionGen++
		return []raftstore.Op{{Kind: raftstore.OpDelete, Path: vpath}},
			[]raftstore.Cond{{Path: vpath, Kind: raftstore.CondRevision, Revision: vdoc.Revision}}, nil
	})
	if errors.Is(err, ErrInvalidVerifyToken) {
		return fail()
	}
	if err != nil {
		return 0, err
	}
	s.logger.Info("password reset", "project", pid, "user", g.UserID)
	return rev, nil
}

// SetRole makes another account of the caller's project an owner or a user.
// Only owners may; nobody may change their own role, so a project always
// keeps an owner. The change counts on every node at once: roles are read
// from the account on each request.
func (s *Service) SetRole(ctx context.Context, p *Principal, uid, role string) (*User, uint64, error) {
	if p.Role != RoleOwner {
		return nil, 0, ErrForbidden
	}
	uid = strings.TrimSpace(uid)
	if uid == "" {
		return nil, 0, &FieldError{Field: "userId", Err: fmt.Errorf("%w: userId is required", ErrInvalidArgument)}
	}
	if role != RoleOwner && role != RoleUser {
		return nil, 0, &FieldError{Field: "role", Err: fmt.Errorf("%w: role must be %q or %q", ErrInvalidArgument, RoleOwner, RoleUser)}
	}
	if uid == p.UserID {
		return nil, 0, &FieldError{Field: "userId", Err: ErrOwnRole}
	}
	acc, rev, err := s.updateAccount(ctx, p.ProjectID, uid, func(acc *account) ([]raftstore.Op, []raftstore.Cond, error) {
		acc.Role = role
		return nil, nil, nil
	})
	if errors.Is(err, ErrInvalidToken) {
		return nil, 0, &FieldError{Field: "userId", Err: ErrUserNotFound}
	}
	if err != nil {
		return nil, 0, err
	}
	s.logger.Info("role changed", "project", p.ProjectID, "user", uid, "role", role, "by", p.UserID)
	return &acc.User, rev, nil
}

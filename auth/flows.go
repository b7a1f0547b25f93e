package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/edgebase/edgebase/keys"
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
		tok, sessOps, err := s.newSessionFor(p.ProjectID, acc.ID, acc.SessionGen, clientOf(ctx, addr))
		if err != nil {
			return nil, nil, err
		}
		token = tok
		return append(sessOps, s.auditOp(p.ProjectID, AuditEvent{Type: AuditPasswordChanged, UserID: acc.ID, Address: addr})), gate, nil
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
	vpath := keys.Verify(HashToken(verifyTok))
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
		return []raftstore.Op{{Kind: raftstore.OpDelete, Path: vpath},
				s.auditOp(pid, AuditEvent{Type: AuditPasswordReset, UserID: acc.ID, Address: addr, Detail: map[string]string{"method": "totp"}})},
			[]raftstore.Cond{{Path: vpath, Kind: raftstore.CondRevision, Revision: vdoc.Revision}}, nil
	})
	if errors.Is(err, ErrInvalidVerifyToken) {
		return fail()
	}
	if err != nil {
		return 0, err
	}
	s.logger.Info("password reset", "project", pid, "user", g.UserID)
	s.securityChanged(ctx, pid, g.UserID, "password-reset")
	return rev, nil
}

// SetRole makes another account of the caller's project an owner or a user.
// Only owners may, judged at the commit (a caller demoted by a change
// committed just before is refused); nobody may change their own role, and
// no change may leave the project without an owner (checked in Apply for
// every write, whoever makes it). The change counts on every node at once:
// every write is judged against the account as committed.
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
	if strings.Contains(uid, "/") || keys.IsReserved(uid) || len(uid) > 200 {
		return nil, 0, &FieldError{Field: "userId", Err: ErrUserNotFound}
	}
	res, err := s.commitAs(ctx, p, raftstore.Op{Kind: raftstore.OpSetField, Path: keys.User(p.ProjectID, uid), Field: "role", Data: mustJSON(role)},
		s.auditOp(p.ProjectID, AuditEvent{Type: AuditRoleChanged, UserID: uid, ActorID: p.UserID, Detail: map[string]string{"role": role}}))
	if res != nil && res.Err == raftstore.ErrCodeNotFound {
		return nil, 0, &FieldError{Field: "userId", Err: ErrUserNotFound}
	}
	if err != nil {
		return nil, 0, err
	}
	var acc account
	if err := decodeJSON(res.Docs[0], &acc); err != nil {
		return nil, 0, err
	}
	s.logger.Info("role changed", "project", p.ProjectID, "user", uid, "role", role, "by", p.UserID)
	return &acc.User, res.Revision, nil
}

// SetOwner makes the account with email an owner of project pid: the
// operator's way back into a project (PUT /admin/projects/{id}/owner). It
// is a system write, allowed by the admin token, not by a session.
func (s *Service) SetOwner(ctx context.Context, pid, email string) (*User, uint64, error) {
	if err := ValidateEmail(email); err != nil {
		return nil, 0, err
	}
	// The email moving to another account meanwhile makes it read again.
	res, _, err := raftstore.Guarded(ctx, s.store, func() (*raftstore.Txn, error) {
		var idx emailIndex
		doc, err := s.store.Get(keys.Email(pid, email))
		if err != nil {
			return nil, err
		}
		if doc == nil {
			return nil, &FieldError{Field: "email", Err: ErrUserNotFound}
		}
		if err := decodeJSON(doc, &idx); err != nil {
			return nil, err
		}
		return &raftstore.Txn{
			Time:  s.now().UnixNano(),
			Conds: []raftstore.Cond{{Path: doc.Path, Kind: raftstore.CondRevision, Revision: doc.Revision}},
			Ops: []raftstore.Op{{Kind: raftstore.OpSetField, Path: keys.User(pid, idx.UserID), Field: "role", Data: mustJSON(RoleOwner)},
				s.auditOp(pid, AuditEvent{Type: AuditRoleChanged, UserID: idx.UserID, ActorID: AuditActorSystem, Detail: map[string]string{"role": RoleOwner}})},
		}, nil
	})
	switch {
	case err != nil:
		return nil, 0, err
	case res.Err == raftstore.ErrCodeNotFound:
		return nil, 0, &FieldError{Field: "email", Err: ErrUserNotFound}
	case !res.OK():
		return nil, 0, fmt.Errorf("set owner refused: %s", res.Err)
	}
	var acc account
	if err := decodeJSON(res.Docs[0], &acc); err != nil {
		return nil, 0, err
	}
	s.logger.Info("owner set by the operator", "project", pid, "user", acc.ID)
	return &acc.User, res.Revision, nil
}

package auth

import (
	"context"
	"fmt"
	"time"

	"github.com/edgebase/edgebase/raftstore"
)

// recentProof checks that the caller's session proved the password (or a
// second factor) within the RecentLogin window, as of now, and returns the
// condition that makes the check hold at the commit: the session at the
// revision read (a session revoked, or replaced, meanwhile fails it, and the
// guarded loop decides again).
func (s *Service) recentProof(p *Principal) (raftstore.Cond, error) {
	doc, sess, err := s.sessionDoc(p.Session)
	if err != nil {
		return raftstore.Cond{}, err
	}
	if sess.ProvedAt == 0 || s.now().Sub(time.Unix(sess.ProvedAt, 0)) > s.recent {
		return raftstore.Cond{}, ErrReauthRequired
	}
	return raftstore.Cond{Path: doc.Path, Kind: raftstore.CondRevision, Revision: doc.Revision}, nil
}

// Reauthenticate refreshes the caller's session's proof of identity: the
// password, and a TOTP or recovery code when the account has a second
// factor. Wrong answers count against the brute-force limits like a login's.
// Returns the commit's revision.
func (s *Service) Reauthenticate(ctx context.Context, p *Principal, password, code, addr string) (uint64, error) {
	if p.Session == "" {
		return 0, ErrInvalidToken
	}
	if password == "" {
		return 0, &FieldError{Field: "password", Err: fmt.Errorf("%w: password is required", ErrInvalidArgument)}
	}
	at := attempt{kind: kindPassword, action: actionReauthenticate, pid: p.ProjectID, email: p.Email, addr: addr}
	if err := s.checkLimits(at); err != nil {
		return 0, err
	}
	acc, err := s.account(p.ProjectID, p.UserID)
	if err != nil {
		return 0, err
	}
	if acc == nil {
		return 0, ErrInvalidToken
	}
	ok, err := s.hasher.Verify(ctx, acc.PasswordHash, password)
	if err != nil {
		return 0, err
	}
	if !ok {
		if err := s.recordFailure(ctx, at); err != nil {
			return 0, err
		}
		return 0, &FieldError{Field: "password", Err: ErrInvalidCredentials}
	}
	if acc.totpEnabled() && code == "" {
		return 0, &FieldError{Field: "code", Err: fmt.Errorf("%w: code is required: this account has an authenticator", ErrInvalidArgument)}
	}
	codeAt := attempt{kind: kindCode, action: actionReauthenticate, pid: p.ProjectID, email: p.Email, addr: addr}
	if acc.totpEnabled() {
		if err := s.checkLimits(codeAt); err != nil {
			return 0, err
		}
	}
	oldHash := acc.PasswordHash
	_, rev, err := s.updateAccount(ctx, p.ProjectID, p.UserID, func(acc *account) ([]raftstore.Op, []raftstore.Cond, error) {
		if acc.PasswordHash != oldHash {
			return nil, nil, ErrInvalidToken // changed meanwhile: the proof is void
		}
		doc, sess, err := s.sessionDoc(p.Session)
		if err != nil {
			return nil, nil, err
		}
		if sess.Gen != acc.SessionGen || s.now().Unix() >= sess.ExpiresAt {
			return nil, nil, ErrInvalidToken
		}
		gate, err := s.limitGate(at)
		if err != nil {
			return nil, nil, err
		}
		if acc.totpEnabled() {
			cg, err := s.proveCode(acc, p.ProjectID, code, codeAt)
			if err != nil {
				return nil, nil, err
			}
			gate = append(gate, cg...)
		}
		sess.ProvedAt = s.now().Unix()
		conds := append(gate, raftstore.Cond{Path: doc.Path, Kind: raftstore.CondRevision, Revision: doc.Revision})
		return []raftstore.Op{{Kind: raftstore.OpPut, Path: doc.Path, Data: mustJSON(sess)}}, conds, nil
	})
	if err == ErrInvalidCode {
		if rerr := s.recordFailure(ctx, codeAt); rerr != nil {
			return 0, rerr
		}
		return 0, &FieldError{Field: "code", Err: ErrInvalidCode}
	}
	if err != nil {
		return 0, err
	}
	return rev, nil
}

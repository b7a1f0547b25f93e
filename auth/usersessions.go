package auth

import (
	"context"
	"errors"
	"net/http"

	"github.com/edgebase/edgebase/raftstore"
)

// Owner administration of one user's sessions: the list an owner sees of
// account uid is the one the user sees of their own (listSessions, none
// marked current), and a revoke is the same system write as the user's own
// revoke-session, committed only under ownerGuard's conditions: the owner's
// session and account as judged (still an owner, not disabled or signed
// out), so a demotion racing the revoke makes it judged again.

// UserSessions lists the live sessions of account uid of the owner's
// project, oldest first.
func (s *Service) UserSessions(p *Principal, uid string) ([]SessionInfo, error) {
	if p.Role != RoleOwner {
		return nil, ErrForbidden
	}
	if err := checkUserID(uid); err != nil {
		return nil, err
	}
	list, err := s.listSessions(p.ProjectID, uid, p.Session)
	if err != nil {
		return nil, err
	}
	if list == nil {
		return nil, &FieldError{Field: "id", Err: ErrUserNotFound}
	}
	return list, nil
}

// RevokeUserSession ends session sid of account uid of the owner's
// project (the owner's own sessions too), recorded in the audit log as
// sessions-revoked with the owner as actor and detail session=sid. An
// unknown account is ErrUserNotFound (field id); a session id that is not
// one of the account's live sessions is ErrSessionNotFound.
func (s *Service) RevokeUserSession(ctx context.Context, p *Principal, uid, sid, addr string) (uint64, error) {
	if p.Role != RoleOwner {
		return 0, ErrForbidden
	}
	if err := checkUserID(uid); err != nil {
		return 0, err
	}
	acc, err := s.account(p.ProjectID, uid)
	if err != nil {
		return 0, err
	}
	if acc == nil {
		return 0, &FieldError{Field: "id", Err: ErrUserNotFound}
	}
	rev, err := s.revokeSession(ctx, p.ProjectID, uid, sid, func() ([]raftstore.Cond, error) { return s.ownerGuard(p) },
		AuditEvent{Type: AuditSessionsRevoked, UserID: uid, ActorID: p.UserID, Address: addr, Detail: map[string]string{"session": sid}})
	if errors.Is(err, ErrSessionNotFound) {
		return 0, errSessionNotFoundOf
	}
	return rev, err
}

// errSessionNotFoundOf is ErrSessionNotFound as an owner reads it: the
// session is not one of that user's.
var errSessionNotFoundOf = refusal(http.StatusNotFound, "not_found", "sessionId", "the user has no live session with this id")

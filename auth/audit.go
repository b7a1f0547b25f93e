package auth

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
)

// DefaultAuditRetention is how long audit log entries are kept unless the
// operator says otherwise (--audit-retention).
const DefaultAuditRetention = 90 * 24 * time.Hour

// The types of security events the audit log records.
const (
	AuditLogin                = "login"
	AuditLoginFailedThreshold = "login-failed-threshold"
	AuditLogout               = "logout"
	AuditRegister             = "register"
	AuditTOTPEnabled          = "totp-enabled"
	AuditTOTPDisabled         = "totp-disabled"
	AuditPasswordChanged      = "password-changed"
	AuditPasswordReset        = "password-reset"
	AuditEmailVerified        = "email-verified"
	AuditEmailChanged         = "email-changed"
	AuditRoleChanged          = "role-changed"
	AuditAccountDisabled      = "account-disabled"
	AuditAccountEnabled       = "account-enabled"
	AuditAccountDeleted       = "account-deleted"
	AuditSessionsRevoked      = "sessions-revoked"
	AuditKeyCreated           = "key-created"
	AuditKeyDeleted           = "key-deleted"
	AuditOAuthLinked          = "oauth-linked"
	AuditAnonymousLinked      = "anonymous-linked"
	AuditSMTPChanged          = "smtp-changed"
)

// AuditTypes lists every audit event type, for validating a filter.
var auditTypes = map[string]bool{
	AuditLogin: true, AuditLoginFailedThreshold: true, AuditLogout: true, AuditRegister: true,
	AuditTOTPEnabled: true, AuditTOTPDisabled: true, AuditPasswordChanged: true, AuditPasswordReset: true,
	AuditEmailVerified: true, AuditEmailChanged: true, AuditRoleChanged: true, AuditAccountDisabled: true,
	AuditAccountEnabled: true, AuditAccountDeleted: true, AuditSessionsRevoked: true, AuditKeyCreated: true,
	AuditKeyDeleted: true, AuditOAuthLinked: true, AuditAnonymousLinked: true, AuditSMTPChanged: true,
}

// AuditEvent is one security event of a project. UserID is the account the
// event is about, ActorID who caused it when that is someone else (an owner
// disabling a user), Address the client's address as the node saw it.
// A zero Time is the service's clock when the op is made.
type AuditEvent struct {
	Type    string
	UserID  string
	ActorID string
	Address string
	Detail  map[string]string
	Time    time.Time
}

// auditRecord is an audit event as stored (and as ListAudit answers it,
// with the id being the document's name).
type auditRecord struct {
	ID      string            `json:"id,omitempty"`
	Time    string            `json:"time"`
	Type    string            `json:"type"`
	UserID  string            `json:"userId"`
	ActorID string            `json:"actorId"`
	Address string            `json:"address"`
	Detail  map[string]string `json:"detail"`
}

// maxAuditAddress bounds the stored client address (it comes from a header
// behind a trusted proxy, so its length is not ours to choose).
const maxAuditAddress = 100

// auditOp returns the op that records e in project pid's audit log; the
// caller adds it to the transaction of the event itself, so the log holds
// exactly the events that committed. The document's name (time and a random
// part) is drawn here, by the proposer, so Apply stays deterministic; call
// it inside a Guarded build so a retried txn records its own time.
func (s *Service) auditOp(pid string, e AuditEvent) raftstore.Op {
	at := e.Time
	if at.IsZero() {
		at = s.now()
	}
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it aborts the program instead)
	addr := e.Address
	if len(addr) > maxAuditAddress {
		addr = addr[:maxAuditAddress]
	}
	rec := auditRecord{Time: timestamp(at.UTC()), Type: e.Type, UserID: e.UserID, ActorID: e.ActorID, Address: addr, Detail: e.Detail}
	if rec.Detail == nil {
		rec.Detail = map[string]string{}
	}
	return raftstore.Op{Kind: raftstore.OpPut, Path: keys.Audit(pid, keys.AuditKey(at, hex.EncodeToString(b[:]))), Data: mustJSON(rec)}
}

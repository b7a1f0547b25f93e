package auth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
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

// AuditActorSystem is the actor of events the operator or the cluster
// caused (the admin API, the sweep).
const AuditActorSystem = "system"

// auditTypes holds every audit event type, for validating a filter.
var auditTypes = map[string]bool{
	AuditLogin: true, AuditLoginFailedThreshold: true, AuditLogout: true, AuditRegister: true,
	AuditTOTPEnabled: true, AuditTOTPDisabled: true, AuditPasswordChanged: true, AuditPasswordReset: true,
	AuditEmailVerified: true, AuditEmailChanged: true, AuditRoleChanged: true, AuditAccountDisabled: true,
	AuditAccountEnabled: true, AuditAccountDeleted: true, AuditSessionsRevoked: true, AuditKeyCreated: true,
	AuditKeyDeleted: true, AuditOAuthLinked: true, AuditAnonymousLinked: true, AuditSMTPChanged: true,
}

// AuditEvent is one security event of a project. UserID is the account the
// event is about, ActorID who caused it when that is someone else (an
// owner's uid, AuditActorSystem for the operator or the cluster; empty: the
// user), Address the client's address as the node saw it.
// A zero Time is the service's clock when the op is made.
type AuditEvent struct {
	Type    string
	UserID  string
	ActorID string
	Address string
	Detail  map[string]string
	Time    time.Time
}

// AuditEntry is an audit event as stored, and as ListAudit answers it with
// ID, the document's name (stored without it).
type AuditEntry struct {
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
	rec := AuditEntry{Time: timestamp(at.UTC()), Type: e.Type, UserID: e.UserID, ActorID: e.ActorID, Address: addr, Detail: e.Detail}
	if rec.Detail == nil {
		rec.Detail = map[string]string{}
	}
	if rec.ActorID == "" {
		rec.ActorID = rec.UserID // the user did it
	}
	return raftstore.Op{Kind: raftstore.OpPut, Path: keys.Audit(pid, keys.AuditKey(at, hex.EncodeToString(b[:]))), Data: mustJSON(rec)}
}

// Audit log paging: a page holds 1..MaxAuditLimit events (DefaultAuditLimit
// when none is asked).
const (
	DefaultAuditLimit = 50
	MaxAuditLimit     = 100
)

// AuditPage is one page of a project's audit log, newest first; NextCursor
// continues it ("" when the log holds nothing older that could match).
type AuditPage struct {
	Events     []AuditEntry `json:"events"`
	NextCursor string       `json:"nextCursor"`
}

// auditCursor is the form of an event id, and so of a cursor: the log
// continues strictly before it. The random part may be shorter (a page that
// ends on a time boundary rather than an event).
var auditCursor = regexp.MustCompile(`^[0-9]{20}-[0-9a-f]{0,8}$`)

// Bounds of one ListAudit call's reading. The tree lists in ascending order
// only, so the log is read backwards in time windows, each read forwards:
// a window that holds more than auditWindowCap events is read again a
// quarter as wide, one that holds few is followed by one twice as wide; a
// call that examined auditScanBudget events (or auditMaxWindows windows)
// answers with what it found and a cursor (a filter that matches rarely costs
// bounded work per page, like the query scan limit).
const (
	auditFirstWindow = time.Minute
	auditWindowCap   = 1000
	auditScanBudget  = 10000
	auditListPage    = 256
	auditMaxWindows  = 200
	auditMaxWindow   = 100 * 365 * 24 * time.Hour
)

// ListAudit returns a page of project p.ProjectID's audit log, newest first,
// of events strictly older than cursor ("" for the newest), keeping only
// those of userID and of type typ when given. Owners only; the caller makes
// the read strong.
func (s *Service) ListAudit(ctx context.Context, p *Principal, cursor string, limit int, userID, typ string) (*AuditPage, error) {
	if p == nil || p.Role != RoleOwner {
		return nil, ErrForbidden
	}
	switch {
	case limit == 0:
		limit = DefaultAuditLimit
	case limit < 1 || limit > MaxAuditLimit:
		return nil, &FieldError{Field: "limit", Err: fmt.Errorf("%w: limit must be between 1 and %d", ErrInvalidArgument, MaxAuditLimit)}
	}
	if cursor != "" && !auditCursor.MatchString(cursor) {
		return nil, &FieldError{Field: "cursor", Err: fmt.Errorf("%w: cursor is not one this log returned", ErrInvalidArgument)}
	}
	if typ != "" && !auditTypes[typ] {
		return nil, &FieldError{Field: "type", Err: fmt.Errorf("%w: unknown event type %q", ErrInvalidArgument, typ)}
	}
	if len(userID) > 200 {
		return nil, &FieldError{Field: "userId", Err: fmt.Errorf("%w: userId is too long", ErrInvalidArgument)}
	}
	dir := keys.AuditDir(p.ProjectID)
	first, _, err := s.store.List(dir, "", 1)
	if err != nil {
		return nil, fmt.Errorf("audit log of %s: %w", p.ProjectID, err)
	}
	page := &AuditPage{Events: []AuditEntry{}}
	if len(first) == 0 {
		return page, nil
	}
	oldest := keys.Base(first[0].Path)

	// hi is the exclusive upper bound of the next window ("" none: the
	// newest window reaches any event dated after the clock, too).
	hi := cursor
	hiTime := s.now()
	if cursor != "" {
		ns, _ := strconv.ParseInt(cursor[:20], 10, 64) // 20 digits: the regexp checked them
		hiTime = time.Unix(0, ns)
	}
	width, scanned, windows := auditFirstWindow, 0, 0
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		loTime := hiTime.Add(-width)
		lo := keys.AuditKey(loTime, "")
		// A window too narrow to divide (events proposed in one
		// microsecond, as one txn may) is read whole, however many.
		docs, full, err := s.auditWindow(dir, lo, hi, width > time.Microsecond)
		if err != nil {
			return nil, fmt.Errorf("audit log of %s: %w", p.ProjectID, err)
		}
		if full {
			width /= 4
			continue
		}
		scanned += len(docs)
		for i := len(docs) - 1; i >= 0; i-- {
			var e AuditEntry
			if err := json.Unmarshal(docs[i].Data, &e); err != nil {
				return nil, fmt.Errorf("decode %s: %w", docs[i].Path, err)
			}
			if (userID != "" && e.UserID != userID) || (typ != "" && e.Type != typ) {
				continue
			}
			e.ID = keys.Base(docs[i].Path)
			if e.Detail == nil {
				e.Detail = map[string]string{}
			}
			page.Events = append(page.Events, e)
			if len(page.Events) == limit {
				// An older event may match: the next page starts before
				// this one (an empty last page is possible, never a lost event).
				if e.ID > oldest {
					page.NextCursor = e.ID
				}
				return page, nil
			}
		}
		if lo <= oldest {
			return page, nil // the window reached the oldest event
		}
		if scanned >= auditScanBudget {
			page.NextCursor = lo
			return page, nil
		}
		if windows++; windows >= auditMaxWindows {
			page.NextCursor = lo
			return page, nil
		}
		hi, hiTime = lo, loTime
		if len(docs) < auditWindowCap/4 && width < auditMaxWindow {
			width *= 2 // sparse here: look further back at once
		}
	}
}

// auditWindow returns the events of dir named from lo (inclusive) to hi
// (exclusive; "" none), oldest first; with capped, full reports that there
// were more than auditWindowCap of them (docs is then incomplete).
func (s *Service) auditWindow(dir, lo, hi string, capped bool) (docs []*raftstore.Document, full bool, err error) {
	// List continues after a name: lo ("<ns>-") is never an event's name
	// and sorts before every "<ns>-<hex>" of its nanosecond.
	after := lo
	for {
		batch, next, err := s.store.List(dir, after, auditListPage)
		if err != nil {
			return nil, false, err
		}
		for _, d := range batch {
			if hi != "" && keys.Base(d.Path) >= hi {
				return docs, false, nil
			}
			if capped && len(docs) == auditWindowCap {
				return docs, true, nil
			}
			docs = append(docs, d)
		}
		if next == "" {
			return docs, false, nil
		}
		after = next
	}
}

// sweepAudit removes every project's audit events older than the retention,
// oldest first, in transactions of at most sweepBatch deletes. It stops at a
// project's first event still kept (the names sort by time).
func (s *Service) sweepAudit(ctx context.Context) (int, error) {
	cutoff := keys.AuditKey(s.now().Add(-s.auditRetention), "")
	removed := 0
	after := ""
	for {
		projects, next, err := s.store.List(keys.ProjectsDir(), after, sweepBatch)
		if err != nil {
			return removed, err
		}
		for _, pd := range projects {
			n, err := s.sweepAuditDir(ctx, keys.AuditDir(keys.Base(pd.Path)), cutoff)
			removed += n
			if err != nil {
				return removed, err
			}
		}
		if next == "" {
			return removed, nil
		}
		after = next
	}
}

func (s *Service) sweepAuditDir(ctx context.Context, dir, cutoff string) (int, error) {
	removed := 0
	for {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		docs, _, err := s.store.List(dir, "", sweepBatch)
		if err != nil {
			return removed, err
		}
		txn := &raftstore.Txn{Time: s.now().UnixNano()}
		for _, d := range docs {
			if keys.Base(d.Path) >= cutoff {
				break
			}
			// Events are never rewritten: a plain delete of what was listed.
			txn.Ops = append(txn.Ops, raftstore.Op{Kind: raftstore.OpDelete, Path: d.Path, IfExists: true})
		}
		if len(txn.Ops) == 0 {
			return removed, nil
		}
		res, err := s.store.Txn(ctx, txn)
		if err != nil {
			return removed, err
		}
		if !res.OK() {
			return removed, fmt.Errorf("sweep %s refused: %s", dir, res.Err)
		}
		removed += len(txn.Ops)
		if len(txn.Ops) < len(docs) {
			return removed, nil
		}
	}
}

// thresholdAudit returns the login-failed-threshold event of a failed
// attempt that fills limit bucket rule (ok false for limits that count
// something other than failed sign-in attempts: registrations, emails).
// The account is looked up by email; an unknown email is named in Detail,
// since guessing against addresses without accounts is worth seeing too.
func (s *Service) thresholdAudit(a attempt, rule string) (raftstore.Op, bool) {
	if a.kind != kindPassword && a.kind != kindCode && a.kind != kindReset {
		return raftstore.Op{}, false
	}
	detail := map[string]string{"limit": rule, "action": a.action}
	var idx emailIndex
	if ok, err := s.getJSON(keys.Email(a.pid, a.email), &idx); err != nil || !ok {
		detail["email"] = NormalizeEmail(a.email)
	}
	return s.auditOp(a.pid, AuditEvent{Type: AuditLoginFailedThreshold, UserID: idx.UserID, Address: a.addr, Detail: detail}), true
}

package triggers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
)

// ServiceStore is the replicated tree as the owner API uses it
// (*raftstore.Store satisfies it).
type ServiceStore interface {
	Txn(ctx context.Context, t *raftstore.Txn) (*raftstore.TxnResult, error)
	WaitApplied(ctx context.Context, idx uint64) error
	Get(path string) (*raftstore.Document, error)
	List(parent, after string, limit int) ([]*raftstore.Document, string, error)
	CountPrefix(prefix string) (int, error)
	AppliedIndex() uint64
}

// HostChecker judges the host of a webhook URL (*auth.HostPolicy built
// from --allow-private-webhooks): it refuses private and loopback
// addresses the operator did not allow, with auth.ErrHostNotAllowed.
type HostChecker interface {
	Check(ctx context.Context, host string) error
}

// ServiceConfig wires a Service. Store is required.
type ServiceConfig struct {
	Store ServiceStore
	// Sealer seals webhook secrets at rest (nil: they are stored plain).
	Sealer Sealer
	// Hosts judges webhook hosts (nil: private and loopback addresses are
	// refused, every public one allowed).
	Hosts  HostChecker
	Clock  Clock
	Logger *slog.Logger
}

// Service is the owner API of triggers: declaring, reading and deleting
// them, reading their dead letters and replaying them. Any node serves it;
// callers (httpapi) have checked that the caller is an owner of the
// project.
type Service struct {
	store  ServiceStore
	sealer Sealer
	hosts  HostChecker
	clock  Clock
	logger *slog.Logger
}

// NewService builds a Service.
func NewService(cfg ServiceConfig) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("triggers: ServiceConfig.Store is required")
	}
	if cfg.Hosts == nil {
		p, err := auth.NewHostPolicy(nil)
		if err != nil {
			return nil, fmt.Errorf("triggers: default host policy: %w", err)
		}
		cfg.Hosts = p
	}
	if cfg.Clock == nil {
		cfg.Clock = systemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Service{store: cfg.Store, sealer: cfg.Sealer, hosts: cfg.Hosts, clock: cfg.Clock, logger: cfg.Logger}, nil
}

// Limits of the owner API.
const (
	// MaxDeadPage bounds one page of dead letters (GET .../dead?limit=).
	MaxDeadPage = 1000
	// DefaultDeadPage is a page's size when the request names none.
	DefaultDeadPage = 50
	// MaxReplay bounds the dead letters one replay moves.
	MaxReplay = 1000
	// deletePage is how many records one cleanup txn of a deleted trigger
	// removes.
	deletePage = 500
	// replayBytes bounds the records one replay txn moves, by size.
	replayBytes = 512 << 10
)

// ---- refusals ------------------------------------------------------------

// Refusal is a refusal of the owner API with its HTTP face: status, stable
// code, message and the request field at fault. httpapi renders it as is.
// errors.Is matches refusals of the same status and code.
type Refusal struct {
	status int
	code   string
	msg    string
	field  string
}

func (e *Refusal) Error() string {
	if e.field != "" {
		return e.field + ": " + e.msg
	}
	return e.msg
}

// Status is the HTTP status of the refusal.
func (e *Refusal) Status() int { return e.status }

// Code is the stable machine code.
func (e *Refusal) Code() string { return e.code }

// Message is the text shown to the client.
func (e *Refusal) Message() string { return e.msg }

// Field names the request field at fault ("" for none).
func (e *Refusal) Field() string { return e.field }

// Is matches any refusal of the same status and code, so that the
// sentinels below stand for every refusal of their kind.
func (e *Refusal) Is(target error) bool {
	t, ok := target.(*Refusal)
	return ok && t.status == e.status && t.code == e.code
}

var (
	// ErrTriggerNotFound: the project has no trigger of that name.
	ErrTriggerNotFound = &Refusal{status: http.StatusNotFound, code: "not_found", msg: "no trigger of that name"}
	// ErrTooManyTriggers: a new trigger would exceed MaxTriggers.
	ErrTooManyTriggers = &Refusal{status: http.StatusConflict, code: "too_many_triggers",
		msg: fmt.Sprintf("a project may declare at most %d triggers; delete one first", MaxTriggers)}
	// ErrDefinitionTooLarge: the stored definition would exceed the
	// largest document.
	ErrDefinitionTooLarge = &Refusal{status: http.StatusRequestEntityTooLarge, code: "document_too_large",
		msg: "the trigger's definition is larger than a document may be"}
	// ErrInvalidArgument is what every malformed member is refused with.
	ErrInvalidArgument = &Refusal{status: http.StatusBadRequest, code: "invalid_argument", msg: "invalid argument"}
	// ErrURLNotAllowed: a webhook URL names a host the operator's policy
	// refuses (private, loopback, or not resolving).
	ErrURLNotAllowed = &Refusal{status: http.StatusBadRequest, code: "url_not_allowed", field: "action.webhook.url", msg: "the webhook URL's host is not allowed"}
)

func invalid(field, format string, args ...any) *Refusal {
	return &Refusal{status: http.StatusBadRequest, code: "invalid_argument", field: field, msg: fmt.Sprintf(format, args...)}
}

// ---- views -----------------------------------------------------------------

// View is a trigger as the owner API answers it: its definition (the
// webhook secret hidden, SecretHint shown) and its delivery status.
type View struct {
	Definition
	Status Status `json:"status"`
}

// PutResult is the answer to Put.
type PutResult struct {
	// Trigger carries the webhook secret only when this call generated it
	// or the owner sent it.
	Trigger  View
	Created  bool
	Revision uint64
}

// DeadLetter is one dead letter as the owner API lists it: ID is its key
// (what Replay takes), which hides the payload's own id (the delivery's
// idempotency key).
type DeadLetter struct {
	ID string `json:"id"`
	Dead
}

// DeadPage is one page of a trigger's dead letters, oldest revision first.
type DeadPage struct {
	DeadLetters   []DeadLetter `json:"deadLetters"`
	NextPageToken string       `json:"nextPageToken,omitempty"`
}

// Replayed is the answer to Replay.
type Replayed struct {
	Replayed int    `json:"replayed"`
	Revision uint64 `json:"revision"`
}

// ---- parsing ---------------------------------------------------------------

// members lists the members an object may have; a nil value is a leaf, a
// non-nil one an object with members of its own.
type members map[string]members

var definitionMembers = members{
	"match": nil, "on": nil, "condition": nil, "disabled": nil,
	"action": {
		"webhook": {"url": nil, "secret": nil, "headers": nil},
		"push":    {"to": nil, "userIdFrom": nil, "topic": nil, "title": nil, "body": nil, "data": nil, "category": nil},
		"write": {"op": nil, "collection": nil, "data": nil, "oldKey": nil, "newKey": nil, "value": nil,
			"type": nil, "field": nil, "by": nil, "values": nil},
	},
}

// serverMembers are members of a stored definition the owner does not send.
var serverMembers = map[string]string{
	"name":      "name is the URL's, not a member of the body",
	"createdAt": "createdAt is set by the server",
	"updatedAt": "updatedAt is set by the server",
	"status":    "status is the server's answer, not a member of the body",
}

// ParseDefinition decodes the body of PUT /api/triggers/{name}: a JSON
// object with the members of Definition but name, createdAt and updatedAt
// (and the answer-only secretHint). Unknown members are refused, naming
// the member ("action.webhook.retries").
func ParseDefinition(body []byte) (*Definition, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return nil, invalid("", "the body must be a JSON object")
	}
	if err := checkMembers(body, definitionMembers, ""); err != nil {
		return nil, err
	}
	var d Definition
	if err := json.Unmarshal(body, &d); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, invalid(te.Field, "%s must be %s", te.Field, jsonType(te.Type.Kind().String()))
		}
		return nil, invalid("", "the body is not valid JSON")
	}
	return &d, nil
}

func checkMembers(raw json.RawMessage, allowed members, prefix string) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil // not an object: the typed decoding names it
	}
	names := make([]string, 0, len(obj))
	for k := range obj {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		sub, ok := allowed[k]
		if !ok {
			if why, server := serverMembers[k]; server && prefix == "" {
				return invalid(k, "%s", why)
			}
			return invalid(prefix+k, "unknown member %s", prefix+k)
		}
		if sub != nil {
			if err := checkMembers(obj[k], sub, prefix+k+"."); err != nil {
				return err
			}
		}
	}
	return nil
}

func jsonType(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "map", "struct", "ptr":
		return "an object"
	case "slice", "array":
		return "an array"
	}
	return "a number"
}

// ---- declaring ---------------------------------------------------------------

// Put creates or replaces trigger name of project pid for the owner whose
// session (token hash) is session: the commit checks, where it is applied,
// that the session still holds and is an owner's ("": no caller, tests). A webhook without
// a secret keeps the secret of the trigger it replaces, or gets a new one.
func (s *Service) Put(ctx context.Context, session, pid, name string, in *Definition) (*PutResult, error) {
	if !ValidName(name) {
		return nil, invalid("name", "a trigger's name is 1 to %d letters, digits, '_' or '-', starting with a letter or digit", MaxNameLen)
	}
	d := *in
	d.Name, d.CreatedAt, d.UpdatedAt = name, "", ""
	if d.Action.Webhook != nil {
		wh := *d.Action.Webhook
		wh.SecretHint = ""
		d.Action.Webhook = &wh
	}
	if _, err := Compile(pid, name, &d, 0); err != nil {
		return nil, definitionError(err)
	}
	if d.Action.Webhook != nil {
		if err := s.checkURL(ctx, d.Action.Webhook.URL); err != nil {
			return nil, err
		}
	}
	var (
		sent      string // the secret the owner sent
		generated string // the secret made for this trigger, once
		shown     string // the secret to answer, "" to hide it
		sealed    string // plainOf, sealed
		plainOf   string // the plain secret sealed is of
		created   bool
		stored    Definition
	)
	if d.Action.Webhook != nil {
		sent = d.Action.Webhook.Secret
		if strings.HasPrefix(sent, sealedPrefix) {
			// Validate lets a stored (sealed) secret pass; an owner's may not look like one.
			return nil, invalid("action.webhook.secret", "a secret may not start with %q", sealedPrefix)
		}
	}
	defPath := keys.Trigger(pid, name)
	if err := s.clearLeftovers(ctx, session, pid, name); err != nil {
		return nil, err
	}
	res, _, err := raftstore.Guarded(ctx, s.store, func() (*raftstore.Txn, error) {
		old, err := s.store.Get(defPath)
		if err != nil {
			return nil, fmt.Errorf("triggers: read %s: %w", name, err)
		}
		now := s.clock.Now().UTC()
		stored = d
		stored.UpdatedAt = now.Format(time.RFC3339Nano)
		stored.CreatedAt = stored.UpdatedAt
		var prev *Definition
		cond := raftstore.Cond{Path: defPath, Kind: raftstore.CondNotExists}
		if old != nil {
			if prev, err = decodeDefinition(old); err != nil {
				return nil, err
			}
			if prev.CreatedAt != "" {
				stored.CreatedAt = prev.CreatedAt
			}
			cond = raftstore.Cond{Path: defPath, Kind: raftstore.CondRevision, Revision: old.Revision}
		} else {
			n, err := s.store.CountPrefix(keys.Under(keys.TriggersDir(pid)))
			if err != nil {
				return nil, fmt.Errorf("triggers: count the project's triggers: %w", err)
			}
			if n >= MaxTriggers {
				return nil, ErrTooManyTriggers
			}
		}
		created = old == nil
		shown = ""
		if wh := d.Action.Webhook; wh != nil {
			w := *wh
			if kept := prev.webhook(); sent == "" && kept != nil && kept.Secret != "" {
				// Kept as stored: sealed for this very trigger.
				w.Secret, w.SecretHint = kept.Secret, kept.SecretHint
			} else {
				plain := sent
				if plain == "" {
					if generated == "" {
						if generated, err = newSecret(); err != nil {
							return nil, err
						}
					}
					plain = generated
				}
				if plainOf != plain {
					if sealed, err = SealSecret(s.sealer, pid, name, plain); err != nil {
						return nil, err
					}
					plainOf = plain
				}
				shown = plain
				w.Secret, w.SecretHint = sealed, secretHint(plain)
			}
			stored.Action.Webhook = &w
		}
		data, err := json.Marshal(stored)
		if err != nil {
			return nil, fmt.Errorf("triggers: encode %s: %w", name, err)
		}
		index, err := json.Marshal(map[string]string{"project": pid, "name": name})
		if err != nil {
			return nil, fmt.Errorf("triggers: encode the index entry of %s: %w", name, err)
		}
		return &raftstore.Txn{Time: now.UnixNano(), Caller: session, Conds: []raftstore.Cond{cond}, Ops: []raftstore.Op{
			{Kind: raftstore.OpPut, Path: defPath, Data: data},
			{Kind: raftstore.OpPut, Path: keys.TriggerIndex(pid, name), Data: index},
		}}, nil
	})
	if err != nil {
		return nil, err
	}
	if res.Err == raftstore.ErrCodeTooLarge {
		return nil, ErrDefinitionTooLarge
	}
	if err := auth.DecidedRefusal(res.Err); err != nil {
		return nil, err
	}
	if !res.OK() {
		return nil, fmt.Errorf("triggers: put %s refused: %s", name, res.Err)
	}
	if err := s.store.WaitApplied(ctx, res.Revision); err != nil {
		return nil, fmt.Errorf("triggers: wait for %s: %w", name, err)
	}
	doc, err := s.store.Get(defPath)
	if err != nil {
		return nil, fmt.Errorf("triggers: read %s: %w", name, err)
	}
	if doc == nil {
		// Deleted right after: answer what was written.
		doc = &raftstore.Document{Path: defPath, Revision: res.Revision, CreateRevision: res.Revision}
	}
	v, err := s.view(pid, name, doc, &stored)
	if err != nil {
		return nil, err
	}
	if v.Action.Webhook != nil && shown != "" {
		v.Action.Webhook.Secret = shown
	}
	return &PutResult{Trigger: *v, Created: created, Revision: res.Revision}, nil
}

// webhook is the webhook of a definition (nil: none, or no definition).
func (d *Definition) webhook() *Webhook {
	if d == nil {
		return nil
	}
	return d.Action.Webhook
}

// definitionError turns a validation failure into the refusal naming its
// member.
func definitionError(err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		return invalid(fe.Field, "%s", fe.Message)
	}
	return fmt.Errorf("triggers: compile: %w", err)
}

// checkURL asks the host policy about a webhook URL's host (the URL's
// syntax was checked by Validate).
func (s *Service) checkURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return invalid("action.webhook.url", "the webhook URL must be an absolute http(s) URL with a host")
	}
	host := u.Hostname()
	if err := s.hosts.Check(ctx, host); err != nil {
		if errors.Is(err, auth.ErrHostNotAllowed) {
			return &Refusal{status: http.StatusBadRequest, code: "url_not_allowed", field: "action.webhook.url",
				msg: fmt.Sprintf("the webhook URL's host %s does not resolve, or is a private or loopback address (the operator may allow such addresses with --allow-private-webhooks)", host)}
		}
		return fmt.Errorf("triggers: judge the webhook host %s: %w", host, err)
	}
	return nil
}

func decodeDefinition(doc *raftstore.Document) (*Definition, error) {
	var d Definition
	if err := json.Unmarshal(doc.Data, &d); err != nil {
		return nil, fmt.Errorf("triggers: decode %s: %w", doc.Path, err)
	}
	return &d, nil
}

// ---- reading ---------------------------------------------------------------

// Get returns trigger name of project pid with its status.
func (s *Service) Get(pid, name string) (*View, error) {
	if !ValidName(name) {
		return nil, ErrTriggerNotFound
	}
	doc, err := s.store.Get(keys.Trigger(pid, name))
	if err != nil {
		return nil, fmt.Errorf("triggers: read %s: %w", name, err)
	}
	if doc == nil {
		return nil, ErrTriggerNotFound
	}
	d, err := decodeDefinition(doc)
	if err != nil {
		return nil, err
	}
	return s.view(pid, name, doc, d)
}

// List returns every trigger of project pid, sorted by name.
func (s *Service) List(pid string) ([]View, error) {
	out := []View{}
	after := ""
	for {
		docs, next, err := s.store.List(keys.TriggersDir(pid), after, MaxTriggers)
		if err != nil {
			return nil, fmt.Errorf("triggers: list: %w", err)
		}
		for _, doc := range docs {
			name := keys.Base(doc.Path)
			d, err := decodeDefinition(doc)
			if err != nil {
				return nil, err
			}
			v, err := s.view(pid, name, doc, d)
			if err != nil {
				return nil, err
			}
			out = append(out, *v)
		}
		if next == "" {
			return out, nil
		}
		after = next
	}
}

// view is d (stored at doc) as answers show it, with its status.
func (s *Service) view(pid, name string, doc *raftstore.Document, d *Definition) (*View, error) {
	v := &View{Definition: *d}
	v.Name = name
	if wh := d.Action.Webhook; wh != nil {
		w := *wh
		w.Secret = ""
		v.Action.Webhook = &w
	}
	st, err := s.status(pid, name, doc)
	if err != nil {
		return nil, err
	}
	v.Status = st
	return v, nil
}

// status reads a trigger's progress: the runner's committed state (when it
// is this definition's), the applied revision, and its parked events and
// dead letters.
func (s *Service) status(pid, name string, def *raftstore.Document) (Status, error) {
	out := Status{Cursor: def.CreateRevision}
	doc, err := s.store.Get(keys.TriggerState(pid, name))
	if err != nil {
		return out, fmt.Errorf("triggers: read the state of %s: %w", name, err)
	}
	if doc != nil {
		var st State
		if err := json.Unmarshal(doc.Data, &st); err != nil {
			return out, fmt.Errorf("triggers: decode the state of %s: %w", name, err)
		}
		if st.DefRevision == def.CreateRevision {
			out = Status{Cursor: max(st.Cursor, def.CreateRevision), Delivered: st.Delivered, Failed: st.Failed, Dead: st.Dead,
				LoopStops: st.LoopStops, LastError: st.LastError, LastErrorAt: st.LastErrorAt, LastSuccessAt: st.LastSuccessAt}
		}
	}
	if applied := s.store.AppliedIndex(); applied > out.Cursor {
		out.LagRevisions = applied - out.Cursor
	}
	if out.Pending, err = s.store.CountPrefix(keys.Under(keys.TriggerQueueDir(pid, name))); err != nil {
		return out, fmt.Errorf("triggers: count the parked events of %s: %w", name, err)
	}
	if out.DeadLetters, err = s.store.CountPrefix(keys.Under(keys.TriggerDeadDir(pid, name))); err != nil {
		return out, fmt.Errorf("triggers: count the dead letters of %s: %w", name, err)
	}
	return out, nil
}

// ---- deleting ----------------------------------------------------------------

// Delete removes trigger name of project pid and every record of it: the
// definition and its index entry first (the runner stops), then its state,
// parked events and dead letters, in pages. It returns the revision of the
// last commit.
func (s *Service) Delete(ctx context.Context, session, pid, name string) (uint64, error) {
	if !ValidName(name) {
		return 0, ErrTriggerNotFound
	}
	defPath := keys.Trigger(pid, name)
	t := &raftstore.Txn{Time: s.clock.Now().UnixNano(), Caller: session,
		Conds: []raftstore.Cond{{Path: defPath, Kind: raftstore.CondExists, Name: "absent"}},
		Ops: []raftstore.Op{
			{Kind: raftstore.OpDelete, Path: defPath},
			{Kind: raftstore.OpDelete, Path: keys.TriggerIndex(pid, name), IfExists: true},
			{Kind: raftstore.OpDelete, Path: keys.TriggerState(pid, name), IfExists: true},
		}}
	res, err := s.store.Txn(ctx, t)
	if err != nil {
		return 0, fmt.Errorf("triggers: delete %s: %w", name, err)
	}
	if res.Failed(t) == "absent" {
		return 0, ErrTriggerNotFound
	}
	if err := auth.DecidedRefusal(res.Err); err != nil {
		return 0, err
	}
	if !res.OK() {
		return 0, fmt.Errorf("triggers: delete %s refused: %s", name, res.Err)
	}
	rev := res.Revision
	for _, dir := range []string{keys.TriggerQueueDir(pid, name), keys.TriggerDeadDir(pid, name)} {
		r, err := s.clear(ctx, session, pid, name, dir, rev)
		if err != nil {
			s.logger.Warn("trigger deleted, its records not all removed", "project", pid, "trigger", name, "dir", dir, "err", err)
			return 0, err
		}
		rev = max(rev, r)
	}
	return rev, nil
}

// clearLeftovers removes, before trigger name is created, what a deleted
// trigger of that name left behind (a delete cut short by a crash or by
// this very creation): a new trigger starts with no parked events and no
// dead letters of the old one's.
func (s *Service) clearLeftovers(ctx context.Context, session, pid, name string) error {
	def, err := s.store.Get(keys.Trigger(pid, name))
	if err != nil {
		return fmt.Errorf("triggers: read %s: %w", name, err)
	}
	if def != nil {
		return nil
	}
	for _, dir := range []string{keys.TriggerQueueDir(pid, name), keys.TriggerDeadDir(pid, name)} {
		if _, err := s.clear(ctx, session, pid, name, dir, 0); err != nil {
			return err
		}
	}
	return nil
}

// clear deletes every document directly under dir, a page per txn, after
// waiting for this node to apply rev (so that the pages read are current).
// Each page is deleted only while trigger name does not exist: once it is
// created again, what is under dir is the new trigger's and clear stops.
func (s *Service) clear(ctx context.Context, session, pid, name, dir string, rev uint64) (uint64, error) {
	for {
		if err := s.store.WaitApplied(ctx, rev); err != nil {
			return rev, fmt.Errorf("triggers: wait for revision %d: %w", rev, err)
		}
		docs, _, err := s.store.List(dir, "", deletePage)
		if err != nil {
			return rev, fmt.Errorf("triggers: list %s: %w", dir, err)
		}
		if len(docs) == 0 {
			return rev, nil
		}
		ops := make([]raftstore.Op, 0, len(docs))
		for _, d := range docs {
			ops = append(ops, raftstore.Op{Kind: raftstore.OpDelete, Path: d.Path, IfExists: true})
		}
		t := &raftstore.Txn{Time: s.clock.Now().UnixNano(), Caller: session, Ops: ops,
			Conds: []raftstore.Cond{{Path: keys.Trigger(pid, name), Kind: raftstore.CondNotExists, Name: "recreated"}}}
		res, err := s.store.Txn(ctx, t)
		if err != nil {
			return rev, fmt.Errorf("triggers: clear %s: %w", dir, err)
		}
		if res.Failed(t) == "recreated" {
			return rev, nil
		}
		if err := auth.DecidedRefusal(res.Err); err != nil {
			return rev, err
		}
		if !res.OK() {
			return rev, fmt.Errorf("triggers: clear %s refused: %s", dir, res.Err)
		}
		rev = res.Revision
	}
}

// ---- dead letters ----------------------------------------------------------------

// deadKeyRE is the shape of a keys.TriggerDeadKey.
var deadKeyRE = regexp.MustCompile(`^[0-9]{20}-[0-9a-f]{16}$`)

// DeadLetters returns a page of trigger name's dead letters, oldest
// revision first: at most limit (1..MaxDeadPage; 0: DefaultDeadPage),
// after pageToken (a previous page's NextPageToken).
func (s *Service) DeadLetters(pid, name string, limit int, pageToken string) (*DeadPage, error) {
	switch {
	case limit == 0:
		limit = DefaultDeadPage
	case limit < 0 || limit > MaxDeadPage:
		return nil, invalid("limit", "limit must be 1 to %d", MaxDeadPage)
	}
	if pageToken != "" && !deadKeyRE.MatchString(pageToken) {
		return nil, invalid("pageToken", "pageToken is not one this API answered")
	}
	if _, err := s.definition(pid, name); err != nil {
		return nil, err
	}
	docs, next, err := s.store.List(keys.TriggerDeadDir(pid, name), pageToken, limit)
	if err != nil {
		return nil, fmt.Errorf("triggers: list the dead letters of %s: %w", name, err)
	}
	out := &DeadPage{DeadLetters: make([]DeadLetter, 0, len(docs)), NextPageToken: next}
	for _, doc := range docs {
		var d Dead
		if err := json.Unmarshal(doc.Data, &d); err != nil {
			return nil, fmt.Errorf("triggers: decode %s: %w", doc.Path, err)
		}
		out.DeadLetters = append(out.DeadLetters, DeadLetter{ID: keys.Base(doc.Path), Dead: d})
	}
	return out, nil
}

// definition reads trigger name's stored definition document.
func (s *Service) definition(pid, name string) (*raftstore.Document, error) {
	if !ValidName(name) {
		return nil, ErrTriggerNotFound
	}
	doc, err := s.store.Get(keys.Trigger(pid, name))
	if err != nil {
		return nil, fmt.Errorf("triggers: read %s: %w", name, err)
	}
	if doc == nil {
		return nil, ErrTriggerNotFound
	}
	return doc, nil
}

// Replay moves dead letters of trigger name back to its queue with no
// attempts made, where the runner delivers them again in revision order
// per path. ids are dead letter ids (DeadLetter.ID); none: the oldest
// MaxReplay. An id the trigger has no dead letter of is refused (404,
// naming ids[i]) and nothing is moved.
func (s *Service) Replay(ctx context.Context, session, pid, name string, ids []string) (*Replayed, error) {
	if len(ids) > MaxReplay {
		return nil, invalid("ids", "a replay moves at most %d dead letters; send the ids in several calls", MaxReplay)
	}
	if _, err := s.definition(pid, name); err != nil {
		return nil, err
	}
	dir := keys.TriggerDeadDir(pid, name)
	if len(ids) == 0 {
		docs, _, err := s.store.List(dir, "", MaxReplay)
		if err != nil {
			return nil, fmt.Errorf("triggers: list the dead letters of %s: %w", name, err)
		}
		for _, d := range docs {
			ids = append(ids, keys.Base(d.Path))
		}
	} else {
		for i, id := range ids {
			field := "ids[" + strconv.Itoa(i) + "]"
			if slices.Contains(ids[:i], id) {
				return nil, invalid(field, "the id %s is named twice", id)
			}
			var doc *raftstore.Document
			if deadKeyRE.MatchString(id) {
				var err error
				if doc, err = s.store.Get(keys.Under(dir) + id); err != nil {
					return nil, fmt.Errorf("triggers: read a dead letter of %s: %w", name, err)
				}
			}
			if doc == nil {
				return nil, &Refusal{status: http.StatusNotFound, code: "not_found", field: field, msg: fmt.Sprintf("trigger %s has no dead letter %q", name, id)}
			}
		}
	}
	out := &Replayed{}
	for len(ids) > 0 {
		n, moved, rev, err := s.replayBatch(ctx, session, pid, name, ids)
		if err != nil {
			return nil, err
		}
		ids = ids[n:]
		out.Replayed += moved
		out.Revision = max(out.Revision, rev)
	}
	return out, nil
}

// errNothingToReplay stops a replay txn whose dead letters are all gone.
var errNothingToReplay = errors.New("triggers: nothing to replay")

// replayBatch moves the first dead letters of ids, as many as one txn
// carries, and returns how many ids it took, how many it moved (an id
// gone meanwhile is skipped) and the revision.
func (s *Service) replayBatch(ctx context.Context, session, pid, name string, ids []string) (taken, moved int, rev uint64, err error) {
	dir := keys.TriggerDeadDir(pid, name)
	defPath := keys.Trigger(pid, name)
	res, t, err := raftstore.Guarded(ctx, s.store, func() (*raftstore.Txn, error) {
		t := &raftstore.Txn{Time: s.clock.Now().UnixNano(), Caller: session, Conds: []raftstore.Cond{{Path: defPath, Kind: raftstore.CondExists, Name: "deleted"}}}
		taken, moved = 0, 0
		size := 0
		for _, id := range ids {
			if len(t.Ops)+2 > raftstore.MaxTxnOps || len(t.Conds) >= raftstore.MaxTxnOps || (taken > 0 && size >= replayBytes) {
				break
			}
			taken++
			doc, err := s.store.Get(keys.Under(dir) + id)
			if err != nil {
				return nil, fmt.Errorf("triggers: read a dead letter of %s: %w", name, err)
			}
			if doc == nil {
				continue
			}
			var d Dead
			if err := json.Unmarshal(doc.Data, &d); err != nil {
				return nil, fmt.Errorf("triggers: decode %s: %w", doc.Path, err)
			}
			p := d.Parked
			p.Attempts, p.FirstAttemptAt, p.NextAttemptAt, p.LastError = 0, 0, 0, ""
			data, err := json.Marshal(p)
			if err != nil {
				return nil, fmt.Errorf("triggers: encode a replayed event of %s: %w", name, err)
			}
			size += len(data)
			moved++
			t.Conds = append(t.Conds, raftstore.Cond{Path: doc.Path, Kind: raftstore.CondRevision, Revision: doc.Revision})
			t.Ops = append(t.Ops,
				raftstore.Op{Kind: raftstore.OpPut, Path: keys.Under(keys.TriggerQueueDir(pid, name)) + keys.TriggerQueueKey(p.Path, p.Revision), Data: data},
				raftstore.Op{Kind: raftstore.OpDelete, Path: doc.Path})
		}
		if len(t.Ops) == 0 {
			return nil, errNothingToReplay
		}
		return t, nil
	})
	if errors.Is(err, errNothingToReplay) {
		return taken, 0, 0, nil
	}
	if err != nil {
		return 0, 0, 0, fmt.Errorf("triggers: replay: %w", err)
	}
	if res.Failed(t) == "deleted" {
		return 0, 0, 0, ErrTriggerNotFound
	}
	if err := auth.DecidedRefusal(res.Err); err != nil {
		return 0, 0, 0, err
	}
	if !res.OK() {
		return 0, 0, 0, fmt.Errorf("triggers: replay refused: %s", res.Err)
	}
	return taken, moved, res.Revision, nil
}

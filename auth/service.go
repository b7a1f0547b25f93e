package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
)

// Store is the part of the replicated tree the auth service uses.
type Store interface {
	Txn(ctx context.Context, t *raftstore.Txn) (*raftstore.TxnResult, error)
	Get(path string) (*raftstore.Document, error)
	List(parent, after string, limit int) ([]*raftstore.Document, string, error)
	WaitApplied(ctx context.Context, idx uint64) error
	// AppliedIndex is the revision of this node's applied state.
	AppliedIndex() uint64
}

// Clock tells the time; tests move it instead of sleeping.
type Clock interface{ Now() time.Time }

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Config holds the service's dependencies. Store is required.
type Config struct {
	Store      Store
	Clock      Clock
	Hasher     *Hasher
	SessionTTL time.Duration
	// OnSecurityChange, when set, is told (after the commit) of a change to an
	// account's security: "totp-enrolled", "totp-enabled", "totp-disabled",
	// "password-reset". The node sends the account a security notification.
	OnSecurityChange func(ctx context.Context, pid, uid, what string)
	// RecentLogin is how long after a session proved the password (or a
	// second factor) it may change the second factor without proving it
	// again (DefaultRecentLogin when zero).
	RecentLogin time.Duration
	// Sealer encrypts TOTP secrets; without one the authenticator answers
	// ErrNoSecretKey and everything else works.
	Sealer *Sealer
	// Limits are the brute-force limits (DefaultLimits when zero).
	Limits *Limits
	Logger *slog.Logger
	// Registerer receives the auth metrics (nil: none are kept).
	Registerer prometheus.Registerer

	// ---- accounts issue (email, OAuth, admin, keys, audit) ----

	// HostPolicy judges the hosts a tenant names (SMTP servers, OIDC
	// issuers): private and loopback hosts are refused unless the operator
	// allowed them (--allow-private-hosts). Nil: NewHostPolicy(nil).
	HostPolicy *HostPolicy
	// PublicURL is the base URL browsers reach this cluster at (--public-url):
	// OAuth callbacks and the links in emails are built on it.
	PublicURL string
	// SMTPDefault is the operator's SMTP server, used by projects that set
	// none of their own (--smtp-*). Zero Host: none.
	SMTPDefault SMTPSettings
	// AuditRetention bounds how long audit log entries are kept
	// (--audit-retention; DefaultAuditRetention when zero).
	AuditRetention time.Duration
}

// Service implements projects, API keys, accounts and sessions on the tree.
// It keeps no state of its own beyond caches: compiled rules, the callers
// Caller resolved (see there), and the index of every project's allowed
// origins (AnyProjectAllows). Its mutexes are never held together.
type Service struct {
	store  Store
	clock  Clock
	hasher *Hasher
	ttl    time.Duration
	recent time.Duration
	onSec  func(ctx context.Context, pid, uid, what string)
	sealer *Sealer
	limits Limits
	logger *slog.Logger
	// failGate serialises failure counting on this node: a burst of guesses
	// would otherwise mostly collide on the same counters and retry.
	failGate chan struct{}
	metrics  *authMetrics // nil: off

	rulesMu    sync.Mutex
	rulesCache map[string]cachedRules

	guardMu sync.Mutex
	guards  map[string]Principal // callers resolved, by HashToken

	origins originIndex // every project's allowed origins (AnyProjectAllows)

	touches   *sessionTouches // lastUsedAt writes queued (sessions.go)
	keyHashes keyHashCache    // projects' API key hashes by revision (apikeys.go)

	// The accounts issue's configuration (see Config).
	hostPolicy     *HostPolicy
	publicURL      string
	smtpDefault    SMTPSettings
	auditRetention time.Duration
}

// maxCachedGuards bounds the callers Caller remembers (a few hundred bytes
// each); past it, a quarter of them are dropped.
const maxCachedGuards = 16384

type cachedRules struct {
	revision uint64
	rules    *CompiledRules
}

// DefaultSessionTTL is how long a session lasts unless configured.
const DefaultSessionTTL = 30 * 24 * time.Hour

// DefaultRecentLogin is the default RecentLogin window.
const DefaultRecentLogin = 5 * time.Minute

// NewService builds the service, defaulting the optional parts.
func NewService(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("auth: Store is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.Hasher == nil {
		cfg.Hasher = NewHasher(DefaultHashParams(), 0)
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.RecentLogin <= 0 {
		cfg.RecentLogin = DefaultRecentLogin
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	limits := DefaultLimits()
	if cfg.Limits != nil {
		limits = *cfg.Limits
	}
	m, err := newAuthMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("auth: register metrics: %w", err)
	}
	if cfg.HostPolicy == nil {
		if cfg.HostPolicy, err = NewHostPolicy(nil); err != nil {
			return nil, err
		}
	}
	if cfg.AuditRetention <= 0 {
		cfg.AuditRetention = DefaultAuditRetention
	}
	return &Service{store: cfg.Store, clock: cfg.Clock, hasher: cfg.Hasher, ttl: cfg.SessionTTL, recent: cfg.RecentLogin, onSec: cfg.OnSecurityChange,
		sealer: cfg.Sealer, limits: limits, logger: cfg.Logger, rulesCache: map[string]cachedRules{},
		guards: map[string]Principal{}, failGate: make(chan struct{}, 1), metrics: m,
		hostPolicy: cfg.HostPolicy, publicURL: strings.TrimSuffix(cfg.PublicURL, "/"), smtpDefault: cfg.SMTPDefault,
		auditRetention: cfg.AuditRetention, touches: newSessionTouches()}, nil
}

// Roles.
const (
	RoleOwner = "owner"
	RoleUser  = "user"
)

// Token prefixes make leaked secrets recognisable to scanners.
const (
	apiKeyPrefix  = "ebk_"
	sessionPrefix = "ebt_"
	ticketPrefix  = "ebl_"
	verifyPrefix  = "ebv_"
)

// Lifetimes of the short-lived secrets.
const (
	TicketTTL = 5 * time.Minute
	VerifyTTL = 10 * time.Minute
	// MaxTicketFailures wrong codes void a login ticket.
	MaxTicketFailures = 5
)

// project is the stored record of a project.
type project struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	CreatedAt string   `json:"createdAt"`
	KeyHashes []string `json:"keyHashes"`
	OwnerID   string   `json:"ownerId"`
}

// User is an account as the API shows it.
type User struct {
	ID          string `json:"id"`
	Email       string `json:"email"`
	Name        string `json:"name"`
	Role        string `json:"role"`
	TOTPEnabled bool   `json:"totpEnabled"`
	CreatedAt   string `json:"createdAt"`
	// EmailVerified is set once the user proved the address (a code or link
	// sent to it, or an OAuth provider that vouches for it).
	EmailVerified bool `json:"emailVerified"`
	// Anonymous accounts have no email until one is linked.
	Anonymous bool `json:"anonymous,omitempty"`
	// Disabled accounts cannot sign in; their sessions ended when disabled.
	Disabled bool `json:"disabled,omitempty"`
	// Providers are the OAuth/OIDC providers linked to the account.
	Providers []string `json:"providers,omitempty"`
}

// account is the stored record: the user plus secrets never shown.
type account struct {
	User
	PasswordHash string `json:"passwordHash"`
	// SessionGen is bumped to end every session, ticket and verify token of
	// the account at once (password change or reset); each of those records
	// the generation it was issued under.
	SessionGen int64      `json:"sessionGen,omitempty"`
	TOTP       *totpState `json:"totp,omitempty"`
}

// totpState is the second factor of an account.
type totpState struct {
	// Secret is the sealed base32 seed once confirmed; Pending the sealed seed
	// of an enrollment not yet confirmed.
	Secret  string `json:"secret,omitempty"`
	Pending string `json:"pending,omitempty"`
	// LastStep is the last time step whose code was accepted: codes of that
	// step or earlier are refused (RFC 6238 §5.2), on every node.
	LastStep int64 `json:"lastStep,omitempty"`
	// RecoverySalt and Recovery are the salt and the salted hashes of the
	// unused recovery codes.
	RecoverySalt string   `json:"recoverySalt,omitempty"`
	Recovery     []string `json:"recovery,omitempty"`
}

func (a *account) totpEnabled() bool { return a.TOTP != nil && a.TOTP.Secret != "" }

type emailIndex struct {
	UserID string `json:"userId"`
}

// grant is what sessions, login tickets and verify tokens have in common:
// each is stored under the hash of its token, belongs to one account of one
// project, carries the account generation it was issued under and expires.
type grant struct {
	ProjectID string `json:"projectId"`
	UserID    string `json:"userId"`
	Gen       int64  `json:"gen,omitempty"`
	ExpiresAt int64  `json:"expiresAt"`
}

// session is a signed-in client.
type session struct {
	grant
	CreatedAt int64 `json:"createdAt"`
	// ProvedAt is when the session last proved the password (or a second
	// factor): at its creation, and at each reauthenticate (Unix seconds).
	ProvedAt int64 `json:"provedAt,omitempty"`
	// Index is the session's entry in its account's session index (absent
	// for sessions from before the index).
	Index string `json:"index,omitempty"`
}

// ticket is a login waiting for its second factor. (A verify token, a proven
// code waiting to authorise a password reset, is a plain grant.)
type ticket struct {
	grant
	Failures int `json:"failures,omitempty"`
}

// Principal is who a bearer token speaks for.
type Principal struct {
	ProjectID string
	UserID    string
	Email     string
	Role      string
	// ExpiresAt is when the session ends unless revoked earlier.
	ExpiresAt time.Time
	// Session is the hash of the bearer token: what a write made for this
	// caller carries (raftstore.Txn.Caller), so Apply decides it.
	Session string
	// index is the session's entry in its account's session index, where
	// its lastUsedAt is kept (sessions.go).
	index string
}

// AuthInfo is the caller as access rules see it (the CEL variable auth).
func (p *Principal) AuthInfo() AuthInfo {
	return AuthInfo{UID: p.UserID, Role: p.Role, Email: p.Email}
}

// ProjectCreated is the one-time answer to project creation: the API key is
// only ever shown here.
type ProjectCreated struct {
	ProjectID string `json:"projectId"`
	APIKey    string `json:"apiKey"`
	OwnerID   string `json:"ownerId"`
	// Revision is the commit's revision (sent as X-Revision, not in the body).
	Revision uint64 `json:"-"`
}

func (s *Service) now() time.Time { return s.clock.Now().UTC() }

func timestamp(t time.Time) string { return t.Format(time.RFC3339Nano) }

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		// Only our own plain structs are marshalled here.
		panic(fmt.Sprintf("auth: marshal %T: %v", v, err))
	}
	return b
}

// CreateProject creates a project with its owner account and first API key.
func (s *Service) CreateProject(ctx context.Context, name, ownerEmail, ownerPassword string) (*ProjectCreated, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 200 {
		return nil, &FieldError{Field: "name", Err: fmt.Errorf("%w: name must be 1..200 characters", ErrInvalidArgument)}
	}
	if err := ValidateEmail(ownerEmail); err != nil {
		return nil, err
	}
	if err := ValidatePassword(ownerPassword); err != nil {
		return nil, err
	}
	pid, err := NewID()
	if err != nil {
		return nil, err
	}
	uid, err := NewID()
	if err != nil {
		return nil, err
	}
	key, err := NewToken(apiKeyPrefix)
	if err != nil {
		return nil, err
	}
	hash, err := s.hasher.Hash(ctx, ownerPassword)
	if err != nil {
		return nil, fmt.Errorf("hash owner password: %w", err)
	}
	now := s.now()
	p := project{ID: pid, Name: name, CreatedAt: timestamp(now), KeyHashes: []string{HashToken(key)}, OwnerID: uid}
	acc := account{User: User{ID: uid, Email: NormalizeEmail(ownerEmail), Name: name + " owner", Role: RoleOwner, CreatedAt: timestamp(now)}, PasswordHash: hash}
	res, err := s.store.Txn(ctx, &raftstore.Txn{
		Time:  now.UnixNano(),
		Conds: []raftstore.Cond{{Path: keys.Project(pid), Kind: raftstore.CondNotExists}},
		Ops: []raftstore.Op{
			{Kind: raftstore.OpPut, Path: keys.Project(pid), Data: mustJSON(p)},
			{Kind: raftstore.OpPut, Path: keys.User(pid, uid), Data: mustJSON(acc)},
			{Kind: raftstore.OpPut, Path: keys.Email(pid, ownerEmail), Data: mustJSON(emailIndex{UserID: uid})},
		},
	})
	if err != nil {
		return nil, err
	}
	if !res.OK() {
		return nil, fmt.Errorf("create project refused: %s", res.Err)
	}
	s.logger.Info("project created", "project", pid, "owner", uid)
	return &ProjectCreated{ProjectID: pid, APIKey: key, OwnerID: uid, Revision: res.Revision}, nil
}

func (s *Service) getJSON(path string, v any) (bool, error) {
	doc, err := s.store.Get(path)
	if err != nil || doc == nil {
		return false, err
	}
	return true, decodeJSON(doc, v)
}

// CheckAPIKey verifies that key belongs to project pid. Both must be present.
func (s *Service) CheckAPIKey(pid, key string) error {
	if pid == "" || key == "" {
		return ErrMissingAPIKey
	}
	hashes, err := s.projectKeyHashes(pid)
	if err != nil {
		return err
	}
	h := HashToken(key)
	match := false
	for _, kh := range hashes {
		// Compare every key so timing does not tell which one matched.
		match = EqualHash(kh, h) || match
	}
	if !match {
		return ErrInvalidAPIKey
	}
	return nil
}

// CheckProject reports ErrProjectNotFound when no project pid exists.
func (s *Service) CheckProject(pid string) error {
	doc, err := s.store.Get(keys.Project(pid))
	if err != nil {
		return err
	}
	if doc == nil {
		return ErrProjectNotFound
	}
	return nil
}

// AuthResult is a new session with its user.
type AuthResult struct {
	Token    string `json:"token"`
	User     User   `json:"user"`
	Revision uint64 `json:"-"`
}

// Register creates a user account and its first session.
func (s *Service) Register(ctx context.Context, pid, email, password, name, addr string) (*AuthResult, error) {
	if err := ValidateEmail(email); err != nil {
		return nil, err
	}
	if err := ValidatePassword(password); err != nil {
		return nil, err
	}
	name = strings.TrimSpace(name)
	if len(name) > 200 {
		return nil, &FieldError{Field: "name", Err: fmt.Errorf("%w: name must be at most 200 characters", ErrInvalidArgument)}
	}
	// Registrations count against the address's and the project's windows
	// (they grow state without bound otherwise); a full one costs no hashing.
	at := attempt{kind: kindRegister, action: actionRegister, pid: pid, email: email, addr: addr}
	if err := s.checkLimits(at); err != nil {
		return nil, err
	}
	uid, err := NewID()
	if err != nil {
		return nil, err
	}
	hash, err := s.hasher.Hash(ctx, password)
	if err != nil {
		return nil, fmt.Errorf("hash password: %w", err)
	}
	var token string
	var acc account
	// The counters' conditions are unnamed: another registration counted
	// meanwhile makes this one count again.
	res, txn, err := raftstore.Guarded(ctx, s.store, func() (*raftstore.Txn, error) {
		tok, sessOps, err := s.newSessionFor(pid, uid, 0, clientOf(ctx, addr))
		if err != nil {
			return nil, err
		}
		token = tok
		now := s.now()
		acc = account{User: User{ID: uid, Email: NormalizeEmail(email), Name: name, Role: RoleUser, CreatedAt: timestamp(now)}, PasswordHash: hash}
		txn := &raftstore.Txn{
			Time: now.UnixNano(),
			Conds: []raftstore.Cond{
				{Path: keys.Project(pid), Kind: raftstore.CondExists, Name: "project"},
				{Path: keys.Email(pid, email), Kind: raftstore.CondNotExists, Name: "email"},
			},
			Ops: append([]raftstore.Op{
				{Kind: raftstore.OpPut, Path: keys.User(pid, uid), Data: mustJSON(acc)},
				{Kind: raftstore.OpPut, Path: keys.Email(pid, email), Data: mustJSON(emailIndex{UserID: uid})},
			}, sessOps...),
		}
		txn.Ops = append(txn.Ops, s.auditOp(pid, AuditEvent{Type: AuditRegister, UserID: uid, Address: addr, Time: now}))
		if err := s.addFailure(txn, at); err != nil {
			return nil, err
		}
		return txn, nil
	})
	if err != nil {
		return nil, err
	}
	switch {
	case res.OK():
	case res.Failed(txn) == "email":
		return nil, ErrEmailTaken
	case res.Failed(txn) == "project":
		return nil, fmt.Errorf("%w: project not found", ErrInvalidAPIKey)
	default:
		return nil, fmt.Errorf("register refused: %s", res.Err)
	}
	return &AuthResult{Token: token, User: acc.User, Revision: res.Revision}, nil
}

// MaxSessionsPerAccount is how many live sessions an account keeps: a new
// one beyond it revokes the oldest.
const MaxSessionsPerAccount = 100

// newSessionFor returns a new session token for account uid and the ops
// that store it: the session, its entry in the account's session index
// (with client c, for list-sessions), and the revocation of the account's
// oldest sessions beyond MaxSessionsPerAccount.
func (s *Service) newSessionFor(pid, uid string, gen int64, c Client) (string, []raftstore.Op, error) {
	token, err := NewToken(sessionPrefix)
	if err != nil {
		return "", nil, err
	}
	now := s.now()
	h := HashToken(token)
	index := keys.AccountSession(pid, uid, fmt.Sprintf("%020d-%s", now.UnixNano(), h[:16]))
	// A new session is the proof of a password (and second factor) just
	// given: register, login, login-verify, a password change.
	sess := session{grant: grant{ProjectID: pid, UserID: uid, Gen: gen, ExpiresAt: now.Add(s.ttl).Unix()}, CreatedAt: now.Unix(), ProvedAt: now.Unix(),
		Index: index}
	ops := []raftstore.Op{
		{Kind: raftstore.OpPut, Path: keys.Session(h), Data: mustJSON(sess)},
		{Kind: raftstore.OpPut, Path: index, Data: mustJSON(sessionEntry{Session: h, CreatedAt: now.Unix(), Address: c.Addr, UserAgent: c.UserAgent})},
	}
	old, err := s.oldestSessions(pid, uid)
	if err != nil {
		return "", nil, err
	}
	return token, append(ops, old...), nil
}

// sessionEntry is an entry of an account's session index.
type sessionEntry struct {
	Session string `json:"session"` // the token hash
	// What list-sessions shows (absent in entries from before it): Unix
	// seconds, and the client that opened the session.
	CreatedAt  int64  `json:"createdAt,omitempty"`
	LastUsedAt int64  `json:"lastUsedAt,omitempty"`
	Address    string `json:"address,omitempty"`
	UserAgent  string `json:"userAgent,omitempty"`
}

// oldestSessions returns the ops that revoke the account's oldest indexed
// sessions so that a new one keeps it at MaxSessionsPerAccount. Concurrent
// logins may each trim the same ones (the deletes are IfExists) and may
// leave a few more for a moment; the next login trims them.
func (s *Service) oldestSessions(pid, uid string) ([]raftstore.Op, error) {
	var all []*raftstore.Document
	after := ""
	for {
		docs, next, err := s.store.List(keys.AccountSessionsDir(pid, uid), after, 1000)
		if err != nil {
			return nil, err
		}
		all = append(all, docs...)
		if next == "" {
			break
		}
		after = next
	}
	var ops []raftstore.Op
	for i := 0; i < len(all)-(MaxSessionsPerAccount-1); i++ {
		var e sessionEntry
		if err := decodeJSON(all[i], &e); err == nil && e.Session != "" {
			ops = append(ops, raftstore.Op{Kind: raftstore.OpDelete, Path: keys.Session(e.Session), IfExists: true})
		}
		ops = append(ops, raftstore.Op{Kind: raftstore.OpDelete, Path: all[i].Path, IfExists: true})
	}
	return ops, nil
}

// LoginResult is the answer to a login: a session, or a ticket for the
// second step when the account has TOTP on.
type LoginResult struct {
	RequiresTOTP bool   `json:"requiresTotp"`
	Token        string `json:"token,omitempty"`
	User         *User  `json:"user,omitempty"`
	LoginTicket  string `json:"loginTicket,omitempty"`
	ExpiresIn    int    `json:"expiresIn,omitempty"`
	Revision     uint64 `json:"-"`
}

// Login checks email and password and opens a session, or issues a login
// ticket when the account has a second factor. Unknown email and wrong
// password are the same error and cost the same hashing work. addr is the
// client's address for the brute-force limits.
func (s *Service) Login(ctx context.Context, pid, email, password, addr string) (*LoginResult, error) {
	res, err := s.login(ctx, pid, email, password, addr)
	s.metrics.login(res, err)
	return res, err
}

func (s *Service) login(ctx context.Context, pid, email, password, addr string) (*LoginResult, error) {
	at := attempt{kind: kindPassword, action: actionLogin, pid: pid, email: email, addr: addr}
	if err := s.checkLimits(at); err != nil {
		return nil, err
	}
	acc, _, err := s.accountByEmail(pid, email)
	if err != nil {
		return nil, err
	}
	ok := false
	if acc == nil {
		err = s.hasher.VerifyDummy(ctx, password)
	} else {
		ok, err = s.hasher.Verify(ctx, acc.PasswordHash, password)
	}
	if err != nil {
		return nil, err
	}
	if !ok {
		if err := s.recordFailure(ctx, at); err != nil {
			return nil, err
		}
		return nil, ErrInvalidCredentials
	}
	if err := acc.checkEnabled(); err != nil {
		return nil, err
	}
	out, grantOps, err := s.signInGrant(pid, acc, clientOf(ctx, addr))
	if err != nil {
		return nil, err
	}
	// The commit that reveals the success is conditioned on the limit
	// buckets as judged, so a right guess racing a filling limit is withheld
	// (see limitGate): a bucket that moved makes the limits judged again.
	res, txn, err := raftstore.Guarded(ctx, s.store, func() (*raftstore.Txn, error) {
		gate, err := s.limitGate(at)
		if err != nil {
			return nil, err
		}
		txn := &raftstore.Txn{
			Time:  s.now().UnixNano(),
			Conds: append([]raftstore.Cond{{Path: keys.User(pid, acc.ID), Kind: raftstore.CondExists, Name: "account"}, enabledCond(pid, acc.ID)}, gate...),
			Ops:   append([]raftstore.Op(nil), grantOps...),
		}
		if op := s.clearAccountAddr(at); op != nil {
			txn.Ops = append(txn.Ops, *op)
		}
		if !out.RequiresTOTP { // with a second factor, login-verify records the login
			txn.Ops = append(txn.Ops, s.auditOp(pid, AuditEvent{Type: AuditLogin, UserID: acc.ID, Address: addr, Detail: map[string]string{"method": "password"}}))
		}
		return txn, nil
	})
	if err != nil {
		return nil, err
	}
	switch {
	case res.OK():
		out.Revision = res.Revision
		return out, nil
	case res.Failed(txn) == "account":
		return nil, ErrInvalidCredentials // the account was deleted meanwhile
	case disabledAtCommit(res, txn):
		return nil, ErrAccountDisabled
	default:
		return nil, fmt.Errorf("login refused: %s", res.Err)
	}
}

// signInGrant is what a proof of the account's first factor (a password,
// an email code) gives: a session, or a login ticket for the second step
// when the account has TOTP on; the ops store it, in the caller's commit.
func (s *Service) signInGrant(pid string, acc *account, c Client) (*LoginResult, []raftstore.Op, error) {
	out := &LoginResult{}
	if acc.totpEnabled() {
		tok, err := NewToken(ticketPrefix)
		if err != nil {
			return nil, nil, err
		}
		t := ticket{grant: grant{ProjectID: pid, UserID: acc.ID, Gen: acc.SessionGen, ExpiresAt: s.now().Add(TicketTTL).Unix()}}
		out.RequiresTOTP, out.LoginTicket, out.ExpiresIn = true, tok, int(TicketTTL/time.Second)
		return out, []raftstore.Op{{Kind: raftstore.OpPut, Path: keys.Ticket(HashToken(tok)), Data: mustJSON(t)}}, nil
	}
	token, sessOps, err := s.newSessionFor(pid, acc.ID, acc.SessionGen, c)
	if err != nil {
		return nil, nil, err
	}
	u := acc.User
	out.Token, out.User = token, &u
	return out, sessOps, nil
}

// accountByEmail returns the account of an email and its document revision
// (nil, 0 when there is none).
func (s *Service) accountByEmail(pid, email string) (*account, uint64, error) {
	var idx emailIndex
	ok, err := s.getJSON(keys.Email(pid, email), &idx)
	if err != nil || !ok {
		return nil, 0, err
	}
	return s.accountRev(pid, idx.UserID)
}

func (s *Service) account(pid, uid string) (*account, error) {
	acc, _, err := s.accountRev(pid, uid)
	return acc, err
}

// accountRev returns an account and its document revision, for
// compare-and-set updates.
func (s *Service) accountRev(pid, uid string) (*account, uint64, error) {
	if uid == "" {
		return nil, 0, nil
	}
	doc, err := s.store.Get(keys.User(pid, uid))
	if err != nil || doc == nil {
		return nil, 0, err
	}
	var acc account
	if err := decodeJSON(doc, &acc); err != nil {
		return nil, 0, err
	}
	return &acc, doc.Revision, nil
}

// updateAccount runs a compare-and-set loop on one account: change is given
// the current account and returns the extra ops of the transaction (the
// account itself is written from the mutated value), or an error to stop.
//
// A condition that fails (the account, a token or a limit bucket moved
// meanwhile) makes change judge the new state (raftstore.Guarded).
func (s *Service) updateAccount(ctx context.Context, pid, uid string, change func(acc *account) ([]raftstore.Op, []raftstore.Cond, error)) (*account, uint64, error) {
	var acc *account
	res, _, err := raftstore.Guarded(ctx, s.store, func() (*raftstore.Txn, error) {
		var rev uint64
		var err error
		if acc, rev, err = s.accountRev(pid, uid); err != nil {
			return nil, err
		}
		if acc == nil {
			return nil, ErrInvalidToken
		}
		extra, conds, err := change(acc)
		if err != nil {
			return nil, err
		}
		return &raftstore.Txn{
			Time:  s.now().UnixNano(),
			Conds: append([]raftstore.Cond{{Path: keys.User(pid, uid), Kind: raftstore.CondRevision, Revision: rev}}, conds...),
			Ops:   append([]raftstore.Op{{Kind: raftstore.OpPut, Path: keys.User(pid, uid), Data: mustJSON(acc)}}, extra...),
		}, nil
	})
	if err != nil {
		return nil, 0, err
	}
	if !res.OK() {
		return nil, 0, fmt.Errorf("update account refused: %s", res.Err)
	}
	return acc, res.Revision, nil
}

func decodeJSON(doc *raftstore.Document, v any) error {
	if err := json.Unmarshal(doc.Data, v); err != nil {
		return fmt.Errorf("decode %s: %w", doc.Path, err)
	}
	return nil
}

// Authenticate resolves a bearer token from this node's applied state; the
// caller chooses the state's freshness (a strong sync makes a token issued or
// revoked anywhere count here).
func (s *Service) Authenticate(token string) (*Principal, error) {
	if token == "" {
		return nil, ErrMissingToken
	}
	return s.authenticateRead(HashToken(token))
}

// Caller is Authenticate for a write: the answer may come from memory, the
// caller this node last resolved for the token (by Caller or Authenticate,
// whatever the freshness of that read), without reading the session and the
// account again, as long as the session has not expired by this service's
// clock. A write uses it only to know the caller's project: whether the
// caller may write at all is decided in Apply, against the session, the
// account and the rules as committed at the write (Decider).
func (s *Service) Caller(token string) (*Principal, error) {
	if token == "" {
		return nil, ErrMissingToken
	}
	h := HashToken(token)
	s.guardMu.Lock()
	c, ok := s.guards[h]
	s.guardMu.Unlock()
	if ok && s.now().Before(c.ExpiresAt) {
		s.noteSessionUse(c.index) // a write is a use too
		return &c, nil
	}
	return s.authenticateRead(h)
}

// authenticateRead resolves the token with hash h from this node's applied
// state and remembers the answer for Caller (or forgets the token when it
// is not valid).
func (s *Service) authenticateRead(h string) (*Principal, error) {
	p, err := s.readCaller(h)
	switch {
	case err == nil:
		s.guardMu.Lock()
		if len(s.guards) >= maxCachedGuards {
			n := len(s.guards) / 4
			for k := range s.guards {
				if n == 0 {
					break
				}
				delete(s.guards, k)
				n--
			}
		}
		s.guards[h] = *p
		s.guardMu.Unlock()
	case errors.Is(err, ErrInvalidToken):
		s.forgetGuard(h)
	}
	return p, err
}

// sessionDoc reads the session with token hash h (ErrInvalidToken when
// there is none) and returns its document and decoded record.
func (s *Service) sessionDoc(h string) (*raftstore.Document, *session, error) {
	doc, err := s.store.Get(keys.Session(h))
	if err != nil {
		return nil, nil, err
	}
	if doc == nil {
		return nil, nil, ErrInvalidToken
	}
	var sess session
	if err := decodeJSON(doc, &sess); err != nil {
		return nil, nil, err
	}
	return doc, &sess, nil
}

// readCaller reads the session with token hash h and its account.
func (s *Service) readCaller(h string) (*Principal, error) {
	_, sess, err := s.sessionDoc(h)
	if err != nil {
		return nil, err
	}
	if s.now().Unix() >= sess.ExpiresAt {
		return nil, ErrInvalidToken
	}
	acc, err := s.account(sess.ProjectID, sess.UserID)
	if err != nil {
		return nil, err
	}
	// A disabled account's sessions ended with its generation; the flag is
	// checked too, so that no path that forgot the generation lets one in.
	if acc == nil || acc.SessionGen != sess.Gen || acc.Disabled {
		return nil, ErrInvalidToken
	}
	s.noteSessionUse(sess.Index)
	return &Principal{ProjectID: sess.ProjectID, UserID: acc.ID, Email: acc.Email, Role: acc.Role,
		ExpiresAt: time.Unix(sess.ExpiresAt, 0), Session: h, index: sess.Index}, nil
}

// securityChanged reports a committed change of an account's security.
func (s *Service) securityChanged(ctx context.Context, pid, uid, what string) {
	if s.onSec != nil {
		s.onSec(ctx, pid, uid, what)
	}
}

// commitAs commits ops for the caller p: Apply decides, at the commit,
// whether p's session is still valid and p may write them (Decider). A
// refusal becomes the error its code names.
func (s *Service) commitAs(ctx context.Context, p *Principal, ops ...raftstore.Op) (*raftstore.TxnResult, error) {
	if p == nil || p.Session == "" {
		return nil, ErrInvalidToken
	}
	res, err := s.store.Txn(ctx, &raftstore.Txn{Time: s.now().UnixNano(), Caller: p.Session, Ops: ops})
	if err != nil {
		return nil, err
	}
	if res.OK() {
		return res, nil
	}
	if err := DecidedRefusal(res.Err); err != nil {
		if res.Err == raftstore.ErrCodeUnauthenticated {
			s.forgetGuard(p.Session)
		}
		return nil, err
	}
	return res, fmt.Errorf("%w: %s", errRefused, res.Err)
}

// errRefused wraps a refusal commitAs does not name; callers that expect
// one (a missing document) test res.Err.
var errRefused = errors.New("write refused")

func (s *Service) forgetGuard(h string) {
	s.guardMu.Lock()
	delete(s.guards, h)
	s.guardMu.Unlock()
}

// Rules returns the project's compiled access rules (the defaults when the
// owner set none), compiled once per revision of the rules document.
func (s *Service) Rules(pid string) (*CompiledRules, error) {
	return s.readRules(pid)
}

// readRules reads and (once per revision) compiles the project's rules.
func (s *Service) readRules(pid string) (*CompiledRules, error) {
	doc, err := s.store.Get(keys.Rules(pid))
	if err != nil {
		return nil, err
	}
	var rev uint64
	if doc != nil {
		rev = doc.Revision
	}
	s.rulesMu.Lock()
	c, ok := s.rulesCache[pid]
	s.rulesMu.Unlock()
	if ok && c.revision == rev {
		return c.rules, nil
	}
	rs := DefaultRules()
	if doc != nil {
		if err := json.Unmarshal(doc.Data, &rs); err != nil {
			return nil, fmt.Errorf("decode rules of %s: %w", pid, err)
		}
	}
	compiled, err := CompileRules(rs)
	if err != nil {
		return nil, fmt.Errorf("compile stored rules of %s: %w", pid, err)
	}
	s.rulesMu.Lock()
	s.rulesCache[pid] = cachedRules{revision: rev, rules: compiled}
	s.rulesMu.Unlock()
	return compiled, nil
}

// SetRules validates, compiles and stores the caller's project's rules;
// owners only, as of the commit. Returns the revision.
func (s *Service) SetRules(ctx context.Context, p *Principal, rs RuleSet) (uint64, error) {
	if p.Role != RoleOwner {
		return 0, ErrForbidden
	}
	if _, err := CompileRules(rs); err != nil {
		return 0, err
	}
	res, err := s.commitAs(ctx, p, raftstore.Op{Kind: raftstore.OpPut, Path: keys.Rules(p.ProjectID), Data: mustJSON(rs)})
	if err != nil {
		return 0, err
	}
	return res.Revision, nil
}

// Logout revokes the session of token and returns the commit's revision.
func (s *Service) Logout(ctx context.Context, token string) (uint64, error) {
	h := HashToken(token)
	s.forgetGuard(h)
	ops := []raftstore.Op{{Kind: raftstore.OpDelete, Path: keys.Session(h)}}
	var sess session
	if ok, err := s.getJSON(keys.Session(h), &sess); err == nil && ok {
		if sess.Index != "" {
			ops = append(ops, raftstore.Op{Kind: raftstore.OpDelete, Path: sess.Index, IfExists: true})
		}
		ops = append(ops, s.auditOp(sess.ProjectID, AuditEvent{Type: AuditLogout, UserID: sess.UserID}))
	}
	res, err := s.store.Txn(ctx, &raftstore.Txn{Time: s.now().UnixNano(), Ops: ops})
	if err != nil {
		return 0, err
	}
	if !res.OK() {
		return 0, ErrInvalidToken
	}
	return res.Revision, nil
}

// Me returns the account behind a principal.
func (s *Service) Me(pid, uid string) (*User, error) {
	acc, err := s.account(pid, uid)
	if err != nil {
		return nil, err
	}
	if acc == nil {
		return nil, ErrInvalidToken
	}
	return &acc.User, nil
}

// OriginList is a project's allowed browser origins (CORS and realtime).
type OriginList struct {
	Origins []string `json:"origins"`
}

// maxOrigins bounds a project's origin list.
const maxOrigins = 100

// Origins returns the browser origins allowed to call the project's API
// and open realtime connections to it (besides the node's own origin and the
// operator's).
func (s *Service) Origins(pid string) ([]string, error) {
	var l OriginList
	if _, err := s.getJSON(keys.Origins(pid), &l); err != nil {
		return nil, err
	}
	return l.Origins, nil
}

// SetOrigins replaces the allowed origins; owners only. Each must be a
// scheme://host[:port] origin as browsers send it, without a path.
func (s *Service) SetOrigins(ctx context.Context, p *Principal, origins []string) ([]string, uint64, error) {
	if p.Role != RoleOwner {
		return nil, 0, ErrForbidden
	}
	if len(origins) > maxOrigins {
		return nil, 0, &FieldError{Field: "origins", Err: fmt.Errorf("%w: at most %d origins", ErrInvalidArgument, maxOrigins)}
	}
	clean := make([]string, 0, len(origins))
	for i, o := range origins {
		c, err := CanonicalOrigin(o)
		if err != nil {
			return nil, 0, &FieldError{Field: fmt.Sprintf("origins[%d]", i), Err: err}
		}
		clean = append(clean, c)
	}
	res, err := s.commitAs(ctx, p, raftstore.Op{Kind: raftstore.OpPut, Path: keys.Origins(p.ProjectID), Data: mustJSON(OriginList{Origins: clean})})
	if err != nil {
		return nil, 0, err
	}
	return clean, res.Revision, nil
}

// CanonicalOrigin parses an origin ("https://app.example.com:8443") and
// returns it lowercased, without a default port or trailing slash.
func CanonicalOrigin(o string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(o))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%w: %q is not an origin like https://app.example.com", ErrInvalidArgument, o)
	}
	host := strings.ToLower(u.Host)
	if (u.Scheme == "https" && strings.HasSuffix(host, ":443")) || (u.Scheme == "http" && strings.HasSuffix(host, ":80")) {
		host = host[:strings.LastIndexByte(host, ':')]
	}
	return u.Scheme + "://" + host, nil
}

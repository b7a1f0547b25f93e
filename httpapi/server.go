// Package httpapi serves the public REST API (/api), the operator endpoints
// (/admin, /healthz, /readyz) and maps every error to the one JSON shape. It
// declares the small interfaces it needs; the node wires real parts in.
package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/raftstore"
	"github.com/edgebase/edgebase/realtime"
)

// Store is the replicated tree as the handlers use it.
type Store interface {
	Txn(ctx context.Context, t *raftstore.Txn) (*raftstore.TxnResult, error)
	Get(path string) (*raftstore.Document, error)
	List(parent, after string, limit int) ([]*raftstore.Document, string, error)
	Children(parent, after string, limit int) ([]raftstore.Child, string, error)
	WaitRead(ctx context.Context, c raftstore.Consistency, minRev uint64) error
	WaitApplied(ctx context.Context, idx uint64) error
	Query(ctx context.Context, req raftstore.QueryRequest) (*raftstore.QueryResult, error)
	Indexes(pid string) ([]raftstore.IndexState, error)
	// ProjectStats scans project pid's user documents, at most budget.
	ProjectStats(pid string, budget int) (raftstore.ProjectStats, error)
}

// Cluster is membership and operator access to the store.
type Cluster interface {
	Status(ctx context.Context) (raftstore.ClusterStatus, error)
	RemoveNode(ctx context.Context, id string) error
	// TransferLeadershipTo hands leadership to voter id ("" = any other)
	// and returns the new leader's id.
	TransferLeadershipTo(ctx context.Context, id string) (string, error)
	Backup(ctx context.Context, w io.Writer) (uint64, error)
	LeaderID() string
	ReadIndex(ctx context.Context) (uint64, error)
	AppliedIndex() uint64
}

// Accounts is the identity service.
type Accounts interface {
	CreateProject(ctx context.Context, name, ownerEmail, ownerPassword string) (*auth.ProjectCreated, error)
	CheckAPIKey(pid, key string) error
	Register(ctx context.Context, pid, email, password, name, addr string) (*auth.AuthResult, error)
	Login(ctx context.Context, pid, email, password, addr string) (*auth.LoginResult, error)
	LoginVerify(ctx context.Context, pid, ticket, code, addr string) (*auth.AuthResult, error)
	Logout(ctx context.Context, token string) (uint64, error)
	ChangePassword(ctx context.Context, p *auth.Principal, current, next, addr string) (*auth.AuthResult, error)
	ResetPassword(ctx context.Context, pid, email, verifyToken, next, addr string) (uint64, error)
	SetRole(ctx context.Context, p *auth.Principal, uid, role string) (*auth.User, uint64, error)
	Reauthenticate(ctx context.Context, p *auth.Principal, password, code, addr string) (uint64, error)
	Enroll(ctx context.Context, p *auth.Principal) (*auth.Enrollment, uint64, error)
	Confirm(ctx context.Context, p *auth.Principal, code string) (*auth.Confirmation, error)
	VerifyForReset(ctx context.Context, pid, email, code, addr string) (*auth.VerifyResult, error)
	DisableTOTP(ctx context.Context, p *auth.Principal, code, addr string) (*auth.User, uint64, error)
	Me(pid, uid string) (*auth.User, error)
	Authenticate(token string) (*auth.Principal, error)
	// Caller is Authenticate from what this node remembers of the token
	// (writes: Apply decides whether the caller may write).
	Caller(token string) (*auth.Principal, error)
	Rules(pid string) (*auth.CompiledRules, error)
	SetRules(ctx context.Context, p *auth.Principal, rs auth.RuleSet) (uint64, error)
	SetOwner(ctx context.Context, pid, email string) (*auth.User, uint64, error)
	// CheckProject answers ErrProjectNotFound for a project that does not exist.
	CheckProject(pid string) error
	Origins(pid string) ([]string, error)
	SetOrigins(ctx context.Context, p *auth.Principal, origins []string) ([]string, uint64, error)
	// OriginAllowed and AnyProjectAllows judge a canonical origin against
	// one project's list, or every project's (CORS preflight).
	OriginAllowed(pid, origin string) (bool, error)
	AnyProjectAllows(origin string) (bool, error)

	// ---- accounts issue: email settings and templates (httpapi/mailapi.go) ----
	SetSMTP(ctx context.Context, p *auth.Principal, in auth.SMTPSettings) (*auth.SMTPView, uint64, error)
	SMTP(p *auth.Principal) (*auth.SMTPView, error)
	DeleteSMTP(ctx context.Context, p *auth.Principal) (uint64, error)
	EmailTemplates(p *auth.Principal) (map[auth.EmailKind]auth.TemplateView, error)
	SetEmailTemplate(ctx context.Context, p *auth.Principal, kind auth.EmailKind, t auth.EmailTemplate) (*auth.TemplateView, uint64, error)
	ResetEmailTemplate(ctx context.Context, p *auth.Principal, kind auth.EmailKind) (uint64, error)

	// ---- accounts issue: email codes, anonymous users, deletion (httpapi/auth_email.go) ----
	SendVerification(ctx context.Context, p *auth.Principal, addr string) (already bool, rev uint64, err error)
	VerifyEmail(ctx context.Context, pid, email, code, token, addr string) (*auth.User, uint64, error)
	RequestPasswordReset(ctx context.Context, pid, email, addr string) (uint64, error)
	ResetPasswordWithEmailCode(ctx context.Context, pid, email, code, token, next, addr string) (uint64, error)
	RequestEmailCode(ctx context.Context, pid, email, addr string) (uint64, error)
	LoginEmailCode(ctx context.Context, pid, email, code, token, addr string) (*auth.LoginResult, error)
	RequestEmailChange(ctx context.Context, p *auth.Principal, newEmail, addr string) (uint64, error)
	ConfirmEmailChange(ctx context.Context, p *auth.Principal, newEmail, code, token, addr string) (*auth.User, uint64, error)
	DeleteSelf(ctx context.Context, p *auth.Principal) (uint64, error)
	SignInAnonymously(ctx context.Context, pid, addr string) (*auth.AuthResult, error)
	LinkEmail(ctx context.Context, p *auth.Principal, email, password, addr string) (*auth.AuthResult, error)
	GetAuthSettings(p *auth.Principal) (*auth.AuthSettings, error)
	SetAuthSettings(ctx context.Context, p *auth.Principal, patch auth.AuthSettingsPatch) (*auth.AuthSettings, uint64, error)

	// ---- accounts issue: OAuth / OIDC (httpapi/oauthapi.go) ----
	SetOAuthProvider(ctx context.Context, p *auth.Principal, provider string, in auth.OAuthProviderInput) (*auth.OAuthProviderInfo, uint64, error)
	OAuthProvider(p *auth.Principal, provider string) (*auth.OAuthProviderInfo, error)
	DeleteOAuthProvider(ctx context.Context, p *auth.Principal, provider string) (uint64, error)
	OAuthProviders(pid string) ([]auth.OAuthProviderSummary, error)
	OAuthStart(ctx context.Context, pid, provider, redirect string) (string, error)
	OAuthLink(ctx context.Context, p *auth.Principal, provider, redirect string) (string, error)
	OAuthCallback(ctx context.Context, provider string, in auth.OAuthCallbackParams) (string, error)
	OAuthExchange(ctx context.Context, pid, code, addr string) (*auth.LoginResult, error)

	// ---- accounts issue: users, sessions, API keys (httpapi/usersapi.go, keysapi.go) ----
	ListUsers(p *auth.Principal, query, cursor string, limit int) ([]auth.User, string, error)
	GetUser(p *auth.Principal, uid string) (*auth.User, error)
	DeleteUser(ctx context.Context, p *auth.Principal, uid, addr string) (uint64, error)
	DisableUser(ctx context.Context, p *auth.Principal, uid, addr string) (*auth.User, uint64, error)
	EnableUser(ctx context.Context, p *auth.Principal, uid, addr string) (*auth.User, uint64, error)
	RevokeUserSessions(ctx context.Context, p *auth.Principal, uid, addr string) (uint64, error)
	ListSessions(p *auth.Principal) ([]auth.SessionInfo, error)
	RevokeSession(ctx context.Context, p *auth.Principal, id, addr string) (uint64, error)
	UserSessions(p *auth.Principal, uid string) ([]auth.SessionInfo, error)
	RevokeUserSession(ctx context.Context, p *auth.Principal, uid, sid, addr string) (uint64, error)
	ListProjects(after string, limit int) ([]auth.ProjectInfo, string, error)
	ListAPIKeys(p *auth.Principal) ([]auth.APIKeyInfo, error)
	CreateAPIKey(ctx context.Context, p *auth.Principal, name, addr string) (*auth.CreatedAPIKey, error)
	DeleteAPIKey(ctx context.Context, p *auth.Principal, id, addr string) (uint64, error)

	// ---- accounts issue: audit log (httpapi/auditapi.go) ----
	ListAudit(ctx context.Context, p *auth.Principal, cursor string, limit int, userID, typ string) (*auth.AuditPage, error)
}

// Config wires a Server. Store, Cluster and Accounts are required.
type Config struct {
	Store      Store
	Cluster    Cluster
	Accounts   Accounts
	AdminToken string
	Limits     Limits
	Logger     *slog.Logger
	// WriteTimeout bounds how long a write waits for commit (default 10 s).
	WriteTimeout time.Duration
	// ReadTimeout bounds how long a read waits for consistency (default 5 s).
	ReadTimeout time.Duration
	// Realtime serves /api/realtime (nil: the route answers 404).
	Realtime *realtime.Server
	// Push serves /api/notifications (nil: the routes answer 404).
	Push Push
	// Triggers serves /api/triggers (nil: the routes answer 404).
	Triggers Triggers
	// TrustedProxies are the addresses of reverse proxies whose
	// X-Forwarded-For names the client (for the brute-force limits). Empty:
	// the client is the TCP peer.
	TrustedProxies []netip.Prefix
	// Registerer receives the request metrics (nil: none are kept).
	Registerer prometheus.Registerer
	// Metrics serves GET /metrics, open like /healthz (nil: no route).
	Metrics http.Handler
	// CORSOrigins are the operator's browser origins, allowed on every
	// route and for every project (auth.CanonicalOrigin form; New refuses a
	// bad one).
	CORSOrigins []string
	// QueryScanLimit is how many documents a query may examine without an
	// index that serves it before it is refused with index_required
	// (--query-scan-limit; 0: raftstore.DefaultQueryScanLimit).
	QueryScanLimit int
}

// Server is the HTTP API of one node.
type Server struct {
	store        Store
	cluster      Cluster
	accounts     Accounts
	adminToken   string
	limits       Limits
	logger       *slog.Logger
	writeTimeout time.Duration
	readTimeout  time.Duration
	proxies      []netip.Prefix
	realtime     *realtime.Server
	push         Push
	triggers     Triggers
	mux          *routeMux
	routeLabels  map[string]string // registered pattern → route label
	metrics      *httpMetrics      // nil: off
	metricsPage  http.Handler
	errLog       *logLimiter // 5xx lines: at most errLogBurst a second
	corsOrigins  []string    // the operator's, canonical
	// queryScanLimit bounds the documents a query examines without an index.
	queryScanLimit int
	// projStats caches the operator's project statistics (projectsapi.go).
	projStats *statsCache
}

// errLogBurst is how many 5xx error lines a node writes per second; the
// rest are counted into the next line (suppressed_before).
const errLogBurst = 20

// New builds the API handler.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil || cfg.Cluster == nil || cfg.Accounts == nil {
		return nil, errors.New("httpapi: Store, Cluster and Accounts are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 5 * time.Second
	}
	if cfg.QueryScanLimit <= 0 {
		cfg.QueryScanLimit = raftstore.DefaultQueryScanLimit
	}
	corsOrigins, err := auth.CanonicalOrigins(cfg.CORSOrigins)
	if err != nil {
		return nil, fmt.Errorf("httpapi: CORS origins: %w", err)
	}
	s := &Server{store: cfg.Store, cluster: cfg.Cluster, accounts: cfg.Accounts, adminToken: cfg.AdminToken,
		limits: cfg.Limits.withDefaults(), logger: cfg.Logger, writeTimeout: cfg.WriteTimeout, readTimeout: cfg.ReadTimeout, proxies: cfg.TrustedProxies, realtime: cfg.Realtime, push: cfg.Push, triggers: cfg.Triggers, mux: newRouteMux(),
		metricsPage: cfg.Metrics, errLog: newLogLimiter(errLogBurst, time.Now), corsOrigins: corsOrigins, queryScanLimit: cfg.QueryScanLimit, projStats: newStatsCache()}
	s.routes()
	s.routeLabels = routeLabels(s.mux.patterns)
	if s.metrics, err = newHTTPMetrics(cfg.Registerer, s.routeLabels); err != nil {
		return nil, fmt.Errorf("httpapi: register metrics: %w", err)
	}
	return s, nil
}

func (s *Server) routes() {
	s.mux.HandleFunc("/api/db", s.handleDB)
	s.mux.HandleFunc("/api/db/rules", s.handleRules)
	s.mux.HandleFunc("/api/db/rules/test", s.handleRulesTest)
	s.mux.HandleFunc("/api/db/children", s.handleChildren)
	s.mux.HandleFunc("/api/db/batch", s.handleBatch)
	s.mux.HandleFunc("/api/db/query", s.handleQuery)
	s.mux.HandleFunc("/api/db/indexes", s.handleIndexes)
	s.mux.HandleFunc("/api/auth", s.handleAuth)
	s.mux.HandleFunc("/api/authenticator/{op}", s.handleAuthenticator)
	s.mux.HandleFunc("/api/origins", s.handleOrigins)
	s.accountsRoutes()
	s.userSessionRoutes()
	if s.realtime != nil {
		s.mux.Handle("/api/realtime", s.realtime.Handler(s.writeError))
		s.mux.HandleFunc("/api/realtime/origins", s.handleOrigins) // the older name of /api/origins
		s.mux.HandleFunc("/_/live", s.handleLivePage)
	}
	if s.push != nil {
		s.pushRoutes()
	}
	if s.triggers != nil {
		s.triggerRoutes()
	}
	s.sdkRoutes()
	s.consoleRoutes()
	s.mux.HandleFunc("/admin/projects", s.admin(s.handleProjects))
	s.mux.HandleFunc("/admin/projects/{id}/owner", s.admin(s.handleSetOwner))
	s.mux.HandleFunc("/admin/cluster", s.admin(s.handleClusterStatus))
	s.mux.HandleFunc("/admin/cluster/nodes/{id}", s.admin(s.handleRemoveNode))
	s.mux.HandleFunc("/admin/cluster/leader", s.admin(s.handleTransferLeader))
	s.mux.HandleFunc("/admin/backup", s.admin(s.handleBackup))
	s.mux.HandleFunc("/healthz", s.getOnly(s.handleHealthz))
	s.mux.HandleFunc("/readyz", s.getOnly(s.handleReadyz))
	s.mux.HandleFunc("/api/openapi.json", s.getOnly(s.handleOpenAPI))
	if s.metricsPage != nil {
		s.mux.HandleFunc("/metrics", s.handleMetrics)
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, newError(http.StatusNotFound, "not_found", "no such route"))
	})
}

type ctxKey int

const requestIDKey ctxKey = 0

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// ServeHTTP adds the request id, recovers panics into a 500 and dispatches;
// every answer is counted and timed by route and logged at debug level.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := r.Header.Get("X-Request-Id")
	if !validRequestID(id) {
		var b [12]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	w.Header().Set("X-Request-Id", id)
	r = r.WithContext(context.WithValue(r.Context(), requestIDKey, id))
	sw := &statusWriter{ResponseWriter: w, srv: s, req: r, id: id, start: start}
	w = sw
	if s.metrics != nil {
		s.metrics.inFlight.Inc()
	}
	defer sw.finish()
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.logger.Error("handler panic", "request_id", id, "panic", p)
			s.writeError(w, r, errors.New("panic"))
		}
	}()
	if ae := s.edgeRefusal(r); ae != nil {
		s.writeError(w, r, ae)
		return
	}
	if isPreflight(r) {
		s.preflight(w, r)
		return
	}
	s.corsHeaders(w, r)
	w, r = asGet(w, r)
	s.mux.ServeHTTP(w, r)
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c == '-' || c == '_' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
			return false
		}
	}
	return true
}

// methodNotAllowed lists the allowed methods, comma separated.
func methodNotAllowed(allow ...string) *apiError {
	list := strings.Join(allow, ", ")
	return &apiError{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed", Message: "method not allowed; use " + list, Allow: list}
}

// bearer extracts the token of "Authorization: Bearer <token>".
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// admin guards operator endpoints with the admin token.
func (s *Server) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok := bearer(r)
		if tok == "" {
			s.writeError(w, r, newError(http.StatusUnauthorized, "missing_token", "an admin bearer token is required"))
			return
		}
		if s.adminToken == "" || subtle.ConstantTimeCompare([]byte(tok), []byte(s.adminToken)) != 1 {
			s.writeError(w, r, newError(http.StatusUnauthorized, "invalid_token", "the admin token is not valid"))
			return
		}
		h(w, r)
	}
}

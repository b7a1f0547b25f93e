// Package realtime serves GET /api/realtime: WebSocket sessions that
// subscribe to documents or path prefixes, get a snapshot or a replay from
// the change log, then every change in revision order with no gap and no
// duplicate, on every node. It declares the small interfaces it needs.
package realtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
)

// Store is the replicated tree as realtime uses it.
type Store interface {
	Feed() *raftstore.Feed
	SnapshotRead(path string, prefix bool, pageSize int, fn func(rev uint64, docs []*raftstore.Document) error) (uint64, error)
	ChangesSince(since uint64, max int) ([]raftstore.Event, uint64, error)
	WaitRead(ctx context.Context, c raftstore.Consistency, minRev uint64) error
	// WaitApplied returns once the node has applied idx (or ctx ends).
	WaitApplied(ctx context.Context, idx uint64) error
	AppliedIndex() uint64
	Query(ctx context.Context, req raftstore.QueryRequest) (*raftstore.QueryResult, error)
}

// Accounts is the identity service as realtime uses it.
type Accounts interface {
	CheckAPIKey(pid, key string) error
	Authenticate(token string) (*auth.Principal, error)
	Rules(pid string) (*auth.CompiledRules, error)
	Origins(pid string) ([]string, error)
}

// Config shapes a Server. Store and Accounts are required.
type Config struct {
	Store    Store
	Accounts Accounts
	Logger   *slog.Logger
	// QueueSize is each connection's outgoing queue (default 1024 messages);
	// a client that lets it fill is cut off with close code 4008.
	QueueSize int
	// MaxSubscriptions per connection (default 100).
	MaxSubscriptions int
	// MaxMessageBytes bounds a client message (default 64 KiB).
	MaxMessageBytes int64
	// PingInterval and PingTimeout detect dead peers (default 30 s, 10 s).
	PingInterval time.Duration
	PingTimeout  time.Duration
	// WriteTimeout bounds one message write (default 10 s).
	WriteTimeout time.Duration
	// AuthTimeout bounds the wait for the first auth message (default 10 s).
	AuthTimeout time.Duration
	// Shards of the hub (default GOMAXPROCS).
	Shards int
	// Registerer receives the realtime metrics (nil: none are kept).
	Registerer prometheus.Registerer
	// QueryScanLimit is how many documents a live query's read may examine
	// without a usable index (default raftstore.DefaultQueryScanLimit, as
	// --query-scan-limit for POST /api/db/query).
	QueryScanLimit int
	// ReadTimeout bounds how long a subscription waits for the node to
	// apply its minRevision (or since) before it is refused with
	// unavailable (default 5 s, as the REST API's read timeout).
	ReadTimeout time.Duration
	// Origins are the operator's browser origins, allowed for every project
	// besides those the project lists (each canonical: auth.CanonicalOrigin).
	Origins []string
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.QueueSize <= 0 {
		c.QueueSize = 1024
	}
	if c.MaxSubscriptions <= 0 {
		c.MaxSubscriptions = 100
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 64 << 10
	}
	if c.PingInterval <= 0 {
		c.PingInterval = 30 * time.Second
	}
	if c.PingTimeout <= 0 {
		c.PingTimeout = 10 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.AuthTimeout <= 0 {
		c.AuthTimeout = 10 * time.Second
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = 5 * time.Second
	}
	if c.QueryScanLimit <= 0 {
		c.QueryScanLimit = raftstore.DefaultQueryScanLimit
	}
	if c.Shards <= 0 {
		c.Shards = runtime.GOMAXPROCS(0)
	}
	return c
}

// Server is the realtime endpoint of one node.
type Server struct {
	cfg      Config
	store    Store
	accounts Accounts
	logger   *slog.Logger
	hub      *hub

	ctx    context.Context
	cancel context.CancelFunc
	next   atomic.Uint64

	metrics       *rtMetrics   // nil: off
	subscriptions atomic.Int64 // open subscriptions over all connections
	shutdown      atomic.Bool  // Close or Abort began: closes are not drops

	mu    sync.Mutex
	conns map[*conn]struct{}

	batchBufs sync.Pool // *[]byte: corked writes of the connections
}

// New builds the server and starts its hub; Close stops both.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil || cfg.Accounts == nil {
		return nil, errors.New("realtime: Store and Accounts are required")
	}
	origins, err := auth.CanonicalOrigins(cfg.Origins)
	if err != nil {
		return nil, fmt.Errorf("realtime: operator origins: %w", err)
	}
	cfg.Origins = origins
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, store: cfg.Store, accounts: cfg.Accounts, logger: cfg.Logger,
		ctx: ctx, cancel: cancel, conns: map[*conn]struct{}{}}
	s.batchBufs.New = func() any { b := make([]byte, 0, 4096); return &b }
	if s.metrics, err = newRTMetrics(cfg.Registerer, s); err != nil {
		cancel()
		return nil, fmt.Errorf("realtime: register metrics: %w", err)
	}
	s.hub = newHub(s, cfg.Store, cfg.Shards)
	sub := cfg.Store.Feed().Subscribe(feedBuffer)
	go s.hub.run(ctx, sub)
	return s, nil
}

// Close ends every connection with 1001 (going away) and stops the hub.
func (s *Server) Close() {
	s.shutdown.Store(true)
	for _, c := range s.connections() {
		c.kill(int(websocket.StatusGoingAway), "the node is shutting down")
	}
	s.cancel()
}

// Abort drops every connection without a close frame, as a crash would.
func (s *Server) Abort() {
	s.shutdown.Store(true)
	for _, c := range s.connections() {
		c.kill(int(websocket.StatusGoingAway), "aborted")
		_ = c.ws.CloseNow()
	}
	s.cancel()
}

// Connections is the number of open connections.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *Server) connections() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	return out
}

// httpError is an answer given before the upgrade, in the API's error shape.
type httpError struct {
	status int
	code   string
	msg    string
}

func (e *httpError) Error() string { return e.code + ": " + e.msg }

// ErrorWriter renders an error in the API's one JSON shape; the REST layer
// passes its own so that realtime's refusals look like every other.
type ErrorWriter func(w http.ResponseWriter, r *http.Request, err error)

// Status, Code and Message expose a refusal to the REST error mapping.
func (e *httpError) Status() int     { return e.status }
func (e *httpError) Code() string    { return e.code }
func (e *httpError) Message() string { return e.msg }

// Handler returns the HTTP handler of GET /api/realtime; refusals before the
// upgrade are rendered by writeErr.
func (s *Server) Handler(writeErr ErrorWriter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.serve(w, r); err != nil {
			writeErr(w, r, err)
		}
	})
}

// serve authenticates (by headers, before the upgrade, or by the first
// message, after it), checks the Origin, and runs the connection.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return &httpError{http.StatusMethodNotAllowed, "method_not_allowed", "use GET with a WebSocket upgrade"}
	}
	for name := range r.URL.Query() {
		if credentialParam(name) {
			return &httpError{http.StatusBadRequest, "invalid_argument", "credentials are never accepted in the URL; send headers or an auth message"}
		}
	}
	minRev, err := upgradeMinRevision(r)
	if err != nil {
		return err
	}
	var p *auth.Principal
	token := bearer(r)
	if token != "" || r.Header.Get("X-Project-Id") != "" {
		var err error
		p, err = s.authenticate(r.Context(), token, r.Header.Get("X-Project-Id"), r.Header.Get("X-API-Key"))
		if err != nil {
			return err
		}
		if !s.originAllowed(r.Header.Get("Origin"), r.Host, p.ProjectID) {
			return &httpError{http.StatusForbidden, "origin_not_allowed", "this Origin may not open realtime connections to the project"}
		}
	}
	cw := &corkWriter{ResponseWriter: w, pool: &s.batchBufs}
	ws, err := websocket.Accept(cw, r, &websocket.AcceptOptions{
		// Origin is checked above (header auth) or after the auth message,
		// against the project's own list; the library knows no projects.
		InsecureSkipVerify: true,
		CompressionMode:    websocket.CompressionDisabled,
	})
	if err != nil {
		return nil // Accept has answered the client
	}
	if cw.conn == nil {
		_ = ws.CloseNow() // not hijacked through corkWriter: cannot happen
		return nil
	}
	ws.SetReadLimit(s.cfg.MaxMessageBytes)
	// The connection runs in its own goroutine and the handler returns:
	// the HTTP server's goroutine would otherwise hold, for the
	// connection's life, its deep stack and the request's buffers (some
	// 10 KiB), which the hijack made useless. That is what an idle
	// subscriber costs.
	go s.serveConn(ws, cw.conn, p, token, r.Header.Get("Origin"), r.Host, minRev)
	return nil
}

// upgradeMinRevision reads the connection's session revision: header
// X-Min-Revision, or query minRevision for browsers (which cannot set
// headers on a WebSocket); when both are given the higher one counts.
func upgradeMinRevision(r *http.Request) (uint64, error) {
	var out uint64
	if v := r.Header.Get("X-Min-Revision"); v != "" {
		n, err := parseRevision(v)
		if err != nil {
			return 0, &httpError{http.StatusBadRequest, "invalid_argument", "X-Min-Revision must be a non-negative integer below 2^64"}
		}
		out = n
	}
	if q := r.URL.Query(); q.Has("minRevision") {
		n, err := parseRevision(q.Get("minRevision"))
		if err != nil {
			return 0, &httpError{http.StatusBadRequest, "invalid_argument", "minRevision must be a non-negative integer below 2^64"}
		}
		out = max(out, n)
	}
	return out, nil
}

// serveConn sets up an upgraded connection, authenticating it by its first
// message when the headers did not, and starts its reader.
func (s *Server) serveConn(ws *websocket.Conn, cork *corkConn, p *auth.Principal, token, origin, host string, minRev uint64) {
	if c := s.open(ws, cork, p, token, origin, host, minRev); c != nil {
		// A new goroutine, not this one: setting up (authentication,
		// reads of the store) grew this one's stack to some 8 KiB, which
		// the runtime gives back only by halves, one per GC. The reader
		// starts at the minimum, 2 KiB, and an idle one stays there
		// (readConn).
		go s.readConn(c)
	}
}

// readConn reads the connection's next message; then a new goroutine waits
// for the one after it. Reading and handling a message (and the library's
// Read, which stays in its deep frames until a message arrives) grow a
// goroutine's stack to 4–8 KiB, which the runtime gives back only by halves,
// one per GC; a new goroutine waits for the next message at the minimum,
// 2 KiB, as parking in waitReadable needs no more. One goroutine start per
// client message is cheap: clients send few (subscribe, unsubscribe, ping,
// and pongs every PingInterval).
func (s *Server) readConn(c *conn) {
	if c.readOne() {
		go s.readConn(c)
		return
	}
	s.close(c)
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// authenticate checks the API key and the token after a strong sync, so a
// token issued on any node a moment ago is known here.
func (s *Server) authenticate(ctx context.Context, token, pid, key string) (*auth.Principal, error) {
	if pid == "" || key == "" {
		return nil, auth.ErrMissingAPIKey
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.store.WaitRead(rctx, raftstore.Strong, 0); err != nil {
		return nil, err
	}
	if err := s.accounts.CheckAPIKey(pid, key); err != nil {
		return nil, err
	}
	p, err := s.accounts.Authenticate(token)
	if err != nil {
		return nil, err
	}
	if p.ProjectID != pid {
		return nil, &httpError{http.StatusForbidden, "project_mismatch", "X-Project-Id names another project than the token"}
	}
	return p, nil
}

// authByMessage waits for {"op":"auth",...} as the first message.
func (s *Server) authByMessage(ctx context.Context, ws *websocket.Conn, origin, host string) (*auth.Principal, string, error) {
	fail := func(code int, errCode, msg string) (*auth.Principal, string, error) {
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		_ = ws.Write(wctx, websocket.MessageText, encode(errorMsg{Op: "error", Code: errCode, Message: msg}))
		cancel()
		_ = ws.Close(websocket.StatusCode(code), truncate(msg, 120))
		return nil, "", errors.New(errCode)
	}
	// A Read whose context expires tears the socket down without a close
	// frame, so the deadline closes the connection properly instead.
	timer := time.AfterFunc(s.cfg.AuthTimeout, func() {
		_, _, _ = fail(closeUnauthenticated, "unauthenticated", "no auth message in time")
	})
	typ, b, err := ws.Read(ctx)
	if !timer.Stop() {
		return nil, "", errors.New("unauthenticated")
	}
	if err != nil {
		return nil, "", err
	}
	var m clientMsg
	if typ != websocket.MessageText || json.Unmarshal(b, &m) != nil || m.Op != "auth" {
		return fail(closeUnauthenticated, "unauthenticated", `the first message must be {"op":"auth","token","projectId","apiKey"}`)
	}
	if m.Token == "" {
		return fail(closeUnauthenticated, "missing_token", "the auth message needs a token")
	}
	p, err := s.authenticate(ctx, m.Token, m.ProjectID, m.APIKey)
	if err != nil {
		code, msg := authErrorCode(err)
		return fail(closeUnauthenticated, code, msg)
	}
	if !s.originAllowed(origin, host, p.ProjectID) {
		return fail(closeOrigin, "origin_not_allowed", "this Origin may not open realtime connections to the project")
	}
	return p, m.Token, nil
}

func authErrorCode(err error) (string, string) {
	var he *httpError
	switch {
	case errors.As(err, &he):
		return he.code, he.msg
	case errors.Is(err, auth.ErrMissingAPIKey):
		return "missing_api_key", auth.ErrMissingAPIKey.Error()
	case errors.Is(err, auth.ErrInvalidAPIKey):
		return "invalid_api_key", auth.ErrInvalidAPIKey.Error()
	case errors.Is(err, auth.ErrMissingToken):
		return "missing_token", auth.ErrMissingToken.Error()
	case errors.Is(err, auth.ErrInvalidToken):
		return "invalid_token", auth.ErrInvalidToken.Error()
	}
	return "unavailable", "authentication could not be completed; retry"
}

// originAllowed: no Origin (not a browser), the node's own origin (the
// request's Host), one the operator allowed, or one the project's owners
// listed.
func (s *Server) originAllowed(o, host, pid string) bool {
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil {
		return false
	}
	if strings.EqualFold(u.Host, host) {
		return true
	}
	canon, err := auth.CanonicalOrigin(o)
	if err != nil {
		return false
	}
	if slices.Contains(s.cfg.Origins, canon) {
		return true
	}
	list, err := s.accounts.Origins(pid)
	if err != nil {
		return false
	}
	for _, a := range list {
		if a == canon {
			return true
		}
	}
	return false
}

// open authenticates the connection by its first message if p is nil, and
// registers it: nil when it ended meanwhile.
func (s *Server) open(ws *websocket.Conn, cork *corkConn, p *auth.Principal, token, origin, host string, minRev uint64) *conn {
	cctx, cancel := context.WithCancel(s.ctx)
	if p == nil {
		var err error
		p, token, err = s.authByMessage(cctx, ws, origin, host)
		if err != nil {
			cancel()
			return nil
		}
	}
	sh := s.hub.shards[s.next.Add(1)%uint64(len(s.hub.shards))]
	c := &conn{srv: s, ws: ws, cork: cork, shard: sh, token: token, pid: p.ProjectID, uid: p.UserID, ctx: cctx, cancel: cancel,
		principal: p, subs: map[string]*sub{}, closing: make(chan struct{}), minRev: minRev}
	c.out = newOutQueue(s.cfg.QueueSize, func() { go c.writer() })
	// Watched system documents: those whose change can end the session
	// (access must be judged again), and the notification inbox.
	c.watches = append(keys.SessionEnds(p.ProjectID, p.UserID, auth.HashToken(token)), keys.InboxDir(p.ProjectID, p.UserID))
	if err := sh.do(cctx, func() {
		for _, w := range c.watches {
			add(sh.watch, w, c)
		}
	}); err != nil {
		cancel()
		return nil
	}
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	// The session may have ended between authentication and the watch
	// registration: judge it once more now that changes reach us.
	c.recheck()
	if d := time.Until(p.ExpiresAt); !p.ExpiresAt.IsZero() {
		c.expiry = time.AfterFunc(max(d, 0)+time.Second, c.recheck)
	}
	c.enqueue(encode(readyMsg{Op: "ready", UserID: p.UserID, Revision: s.store.AppliedIndex()}))
	c.schedulePing()
	return c
}

// close forgets an ended connection.
func (s *Server) close(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.release(c.watches)
	c.cancel()
}

// credentialParam reports whether a query parameter name looks like a
// credential (any case, "-" or "_" or none between words): URLs end up in
// logs, proxies and browser history, so such a parameter is refused rather
// than ignored.
func credentialParam(name string) bool {
	n := strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(name))
	switch n {
	case "token", "accesstoken", "apikey", "key", "authorization", "auth", "bearer", "password", "secret":
		return true
	}
	return false
}

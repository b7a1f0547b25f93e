// Package client is a Go client for edgebase's realtime WebSocket API
// (GET /api/realtime): authentication by headers or by a first message,
// subscriptions with paged snapshots, ordered changes, and automatic
// reconnection that resumes every subscription from the last revision it
// delivered, so the Events of a Subscription continue without gap or
// duplicate across a dropped connection.
//
// Memory is bounded: each Subscription buffers at most Config.EventBuffer
// events; when an application stops reading, the connection stops reading
// the socket and the server's slow-consumer protection takes over (close
// 4008, after which the client reconnects and resumes).
package client

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// Config configures Dial. Only URL is required.
type Config struct {
	// URL is the base URL of a node, "http://host:port" or https; the
	// client connects to ws(s)://host:port/api/realtime.
	URL string
	// Token, ProjectID and APIKey are the credentials: sent as
	// Authorization: Bearer, X-Project-Id and X-API-Key headers on the
	// upgrade request, or, with AuthByMessage, as the first message.
	Token     string
	ProjectID string
	APIKey    string
	// AuthByMessage authenticates with a first {"op":"auth"} message, as a
	// browser must, instead of headers.
	AuthByMessage bool
	// Origin, when set, is sent as the Origin header.
	Origin string
	// HTTPClient makes the upgrade request; http.DefaultClient if nil.
	HTTPClient *http.Client
	// Session, when set, makes the connection and the REST helpers given
	// this Config session-consistent: every subscribe carries minRevision
	// = Session.Revision() (the node sends the snapshot or replay only
	// once it has applied it), GetDoc sends X-Min-Revision, and the
	// revisions the client sees (snapshots, changes, documents, the
	// X-Revision of answers) are observed. Share one between Conns, REST
	// helpers and Accounts, across nodes, to read your own writes
	// anywhere.
	Session *SessionRevision
	// Logger receives connection events; discarded if nil.
	Logger *slog.Logger

	// Reconnect reconnects after a dropped connection (network error,
	// close 1001, 4008 slow_consumer, 4009 lagged, 5xx) and resumes every
	// subscription. Refused credentials, 4001, 4003 and 1008 are final.
	Reconnect bool
	// MinBackoff and MaxBackoff bound the exponential backoff between
	// reconnect attempts (defaults 100ms and 5s); each wait is jittered
	// uniformly within [d/2, d].
	MinBackoff time.Duration
	MaxBackoff time.Duration

	// EventBuffer is the capacity of each Subscription's Events channel
	// (default 256; the channel is allocated up front, so keep it small with many subscriptions).
	EventBuffer int
	// NotificationBuffer is the capacity of the Notifications channel
	// (default 256). Notifications that do not fit are dropped (and
	// counted, see DroppedNotifications) rather than stall the connection.
	NotificationBuffer int
	// ReadLimit is the largest message accepted from the server (default
	// 16 MiB).
	ReadLimit int64
	// HandshakeTimeout bounds one connection attempt: upgrade,
	// authentication and ready (default 10s).
	HandshakeTimeout time.Duration
	// WriteTimeout bounds writing one message (default 10s).
	WriteTimeout time.Duration
	// PingInterval is how often the client pings the server to detect a
	// dead connection (default 30s; negative disables). A ping unanswered
	// within WriteTimeout drops the connection, except while the
	// application is not reading events.
	PingInterval time.Duration
}

func (cfg Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.MinBackoff, 100*time.Millisecond)
	def(&cfg.MaxBackoff, 5*time.Second)
	cfg.MaxBackoff = max(cfg.MaxBackoff, cfg.MinBackoff)
	def(&cfg.HandshakeTimeout, 10*time.Second)
	def(&cfg.WriteTimeout, 10*time.Second)
	if cfg.PingInterval == 0 {
		cfg.PingInterval = 30 * time.Second
	}
	if cfg.EventBuffer <= 0 {
		cfg.EventBuffer = 256
	}
	if cfg.NotificationBuffer <= 0 {
		cfg.NotificationBuffer = 256
	}
	if cfg.ReadLimit <= 0 {
		cfg.ReadLimit = 16 << 20
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	return cfg
}

// realtimeURL turns a node's base URL into its realtime endpoint.
func realtimeURL(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("realtime: parse URL %q: %w", base, err)
	}
	switch u.Scheme {
	case "http", "ws":
		u.Scheme = "ws"
	case "https", "wss":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("realtime: URL %q: scheme must be http, https, ws or wss", base)
	}
	if u.Host == "" {
		return "", fmt.Errorf("realtime: URL %q has no host", base)
	}
	if q := u.Query(); q.Has("token") || q.Has("access_token") {
		return "", fmt.Errorf("realtime: URL %q: never put a token in the URL", base)
	}
	if !strings.HasSuffix(u.Path, "/api/realtime") {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/api/realtime"
	}
	u.RawPath = ""
	return u.String(), nil
}

// Conn is a realtime connection: one WebSocket at a time, replaced on
// reconnect. All methods are safe for concurrent use.
type Conn struct {
	cfg   Config
	url   string
	log   *slog.Logger
	ctx   context.Context // cancelled by Close: stops reconnecting
	stop  context.CancelFunc
	done  chan struct{} // closed when the Conn has ended for good
	notes chan Notification

	nextID       atomic.Uint64
	droppedNotes atomic.Int64

	mu         sync.Mutex
	sess       *session // nil while reconnecting and after the end
	gen        uint64   // generation of the latest session
	subs       map[string]*Subscription
	closing    bool
	err        error // why the Conn ended
	reconnects int
	userID     string
	readyRev   uint64
}

// Dial connects to the realtime endpoint of cfg.URL, authenticates and
// waits for the server's ready. ctx bounds the whole handshake; a refused
// upgrade is returned as a *Error with its HTTP status, a refused message
// authentication as a *Error (wrapping the close status, 4001 or 4003).
func Dial(ctx context.Context, cfg Config) (*Conn, error) {
	u, err := realtimeURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Conn{
		cfg:   cfg,
		url:   u,
		log:   log.With("url", u),
		done:  make(chan struct{}),
		notes: make(chan Notification, cfg.NotificationBuffer),
		subs:  make(map[string]*Subscription),
		gen:   1,
	}
	c.ctx, c.stop = context.WithCancel(context.Background())
	s, err := c.connect(ctx, 1)
	if err != nil {
		c.stop()
		return nil, err
	}
	c.sess = s
	s.start()
	go c.run(s)
	return c, nil
}

// connect dials, authenticates and waits for ready: one attempt.
func (c *Conn) connect(ctx context.Context, gen uint64) (*session, error) {
	hctx, cancel := context.WithTimeout(ctx, c.cfg.HandshakeTimeout)
	defer cancel()

	hdr := http.Header{}
	if !c.cfg.AuthByMessage {
		if c.cfg.Token != "" {
			hdr.Set("Authorization", "Bearer "+c.cfg.Token)
		}
		if c.cfg.ProjectID != "" {
			hdr.Set("X-Project-Id", c.cfg.ProjectID)
		}
		if c.cfg.APIKey != "" {
			hdr.Set("X-API-Key", c.cfg.APIKey)
		}
	}
	if c.cfg.Origin != "" {
		hdr.Set("Origin", c.cfg.Origin)
	}
	ws, resp, err := websocket.Dial(hctx, c.url, &websocket.DialOptions{
		HTTPClient: c.cfg.HTTPClient,
		HTTPHeader: hdr,
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, fmt.Errorf("realtime: dial %s: %w", c.url, httpError(resp))
		}
		return nil, fmt.Errorf("realtime: dial %s: %w", c.url, err)
	}
	ws.SetReadLimit(c.cfg.ReadLimit)

	if c.cfg.AuthByMessage {
		b, err := json.Marshal(authMsg{Op: opAuth, Token: c.cfg.Token, ProjectID: c.cfg.ProjectID, APIKey: c.cfg.APIKey})
		if err == nil {
			err = ws.Write(hctx, websocket.MessageText, b)
		}
		if err != nil {
			_ = ws.CloseNow()
			return nil, fmt.Errorf("realtime: send auth to %s: %w", c.url, err)
		}
	}

	_, b, err := ws.Read(hctx)
	if err != nil {
		_ = ws.CloseNow()
		return nil, fmt.Errorf("realtime: wait for ready from %s: %w", c.url, err)
	}
	var f frame
	if err := json.Unmarshal(b, &f); err != nil {
		_ = ws.CloseNow()
		return nil, fmt.Errorf("realtime: wait for ready from %s: %w", c.url, err)
	}
	switch f.Op {
	case opReady:
	case opError:
		e := &Error{Code: f.Code, Message: f.Message}
		// The server closes right after the error: read on to learn the
		// close status (4001, 4003) for the caller.
		_, _, cerr := ws.Read(hctx)
		_ = ws.CloseNow()
		if websocket.CloseStatus(cerr) != -1 {
			return nil, fmt.Errorf("realtime: %w by %s: %w (%w)", errAuthRefused, c.url, e, cerr)
		}
		return nil, fmt.Errorf("realtime: %w by %s: %w", errAuthRefused, c.url, e)
	default:
		_ = ws.CloseNow()
		return nil, fmt.Errorf("realtime: wait for ready from %s: got op %q", c.url, f.Op)
	}

	c.mu.Lock()
	c.userID, c.readyRev = f.UserID, f.Revision
	c.mu.Unlock()
	c.log.Debug("realtime connected", "user", f.UserID, "revision", f.Revision, "generation", gen)
	return newSession(c, ws, gen), nil
}

// run supervises the connection: it waits for each session to end and
// reconnects, or ends the Conn.
func (c *Conn) run(s *session) {
	defer close(c.done)
	for {
		<-s.done
		c.mu.Lock()
		c.sess = nil
		closing := c.closing
		c.mu.Unlock()
		switch {
		case closing:
			c.shutdown(ErrClosed)
			return
		case isFinal(s.err):
			c.log.Info("realtime connection ended", "err", s.err)
			c.shutdown(fmt.Errorf("realtime: connection ended: %w", s.err))
			return
		case !c.cfg.Reconnect:
			c.log.Info("realtime connection lost", "err", s.err)
			c.shutdown(fmt.Errorf("realtime: connection lost: %w", s.err))
			return
		}
		c.log.Warn("realtime connection lost, reconnecting", "err", s.err)
		next, err := c.reconnect()
		if err != nil {
			c.shutdown(err)
			return
		}
		s = next
	}
}

// backoff is the wait before reconnect attempt n (from 0): exponential,
// capped, jittered within [d/2, d].
func (c *Conn) backoff(n int) time.Duration {
	d := c.cfg.MinBackoff
	for i := 0; i < n && d < c.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, c.cfg.MaxBackoff)
	return d/2 + rand.N(d/2+1)
}

// reconnect dials until it succeeds, a final error, or Close; then it
// re-subscribes every live subscription on the new session.
func (c *Conn) reconnect() (*session, error) {
	for attempt := 0; ; attempt++ {
		t := time.NewTimer(c.backoff(attempt))
		select {
		case <-c.ctx.Done():
			t.Stop()
			return nil, ErrClosed
		case <-t.C:
		}
		c.mu.Lock()
		c.gen++
		gen := c.gen
		c.mu.Unlock()
		s, err := c.connect(c.ctx, gen)
		if err != nil {
			if c.ctx.Err() != nil {
				return nil, ErrClosed
			}
			if isFinal(err) {
				return nil, fmt.Errorf("realtime: reconnect: %w", err)
			}
			c.log.Warn("realtime reconnect failed", "attempt", attempt+1, "err", err)
			continue
		}
		c.mu.Lock()
		if c.closing {
			c.mu.Unlock()
			_ = s.ws.CloseNow()
			return nil, ErrClosed
		}
		c.sess = s
		c.reconnects++
		subs := c.liveSubs()
		c.mu.Unlock()
		s.start()
		c.log.Info("realtime reconnected", "attempt", attempt+1, "subscriptions", len(subs))
		for _, sub := range subs {
			if err := sub.sendSubscribe(s.ctx, s); err != nil {
				break // the session died already: run notices and reconnects
			}
		}
		return s, nil
	}
}

// liveSubs lists the subscriptions in creation order. c.mu must be held.
func (c *Conn) liveSubs() []*Subscription {
	subs := make([]*Subscription, 0, len(c.subs))
	for _, s := range c.subs {
		subs = append(subs, s)
	}
	slices.SortFunc(subs, func(a, b *Subscription) int { return cmp.Compare(a.seq, b.seq) })
	return subs
}

// shutdown ends the Conn: every subscription ends with err.
func (c *Conn) shutdown(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	err = c.err
	subs := c.liveSubs()
	clear(c.subs)
	c.mu.Unlock()
	for _, s := range subs {
		s.finish(err)
	}
	c.stop()
	close(c.notes)
}

func (c *Conn) current() *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sess
}

func (c *Conn) lookup(id string) *Subscription {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.subs[id]
}

func (c *Conn) remove(s *Subscription) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.subs[s.id] == s {
		delete(c.subs, s.id)
	}
}

// Close closes the connection with status 1000 and ends every
// subscription with ErrClosed. It waits for the connection's goroutines.
func (c *Conn) Close() error {
	return c.close(false)
}

// CloseNow drops the TCP connection without a close frame, as a crashed
// client would, and ends the Conn like Close.
func (c *Conn) CloseNow() error {
	return c.close(true)
}

func (c *Conn) close(now bool) error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		<-c.done
		return nil
	}
	c.closing = true
	if c.err == nil {
		c.err = ErrClosed
	}
	subs := c.liveSubs()
	clear(c.subs)
	s := c.sess
	c.mu.Unlock()

	// End the subscriptions first: it unblocks a read loop waiting for the
	// application to take events, so the close handshake can complete.
	for _, sub := range subs {
		sub.finish(ErrClosed)
	}
	var err error
	if s != nil {
		if now {
			err = s.ws.CloseNow()
		} else {
			err = s.ws.Close(websocket.StatusNormalClosure, "")
		}
	}
	c.stop()
	<-c.done
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("realtime: close: %w", err)
	}
	return nil
}

// Drop drops the current WebSocket without a close frame, as a network
// failure would, leaving the Conn open: with Config.Reconnect it reconnects
// and resumes. Meant for tests.
func (c *Conn) Drop() {
	if s := c.current(); s != nil {
		_ = s.ws.CloseNow()
	}
}

// Done is closed when the Conn has ended for good (Close, a final error,
// or a lost connection without Config.Reconnect).
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why the Conn ended; nil while it is open or reconnecting.
func (c *Conn) Err() error {
	select {
	case <-c.done:
	default:
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Reconnects is how many times the Conn has reconnected.
func (c *Conn) Reconnects() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reconnects
}

// UserID is the user the server authenticated, from its latest ready.
func (c *Conn) UserID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.userID
}

// ReadyRevision is the server's revision in its latest ready message.
func (c *Conn) ReadyRevision() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readyRev
}

// Notifications delivers push notifications for the connected user. It is
// closed when the Conn ends.
func (c *Conn) Notifications() <-chan Notification { return c.notes }

// DroppedNotifications counts notifications dropped because the
// Notifications channel was full.
func (c *Conn) DroppedNotifications() int64 { return c.droppedNotes.Load() }

// Ping sends an application-level ping and waits for the server's pong:
// one round trip through the server's message handling.
func (c *Conn) Ping(ctx context.Context) error {
	s := c.current()
	if s == nil {
		return fmt.Errorf("realtime: ping: %w", ErrNotConnected)
	}
	pong := make(chan struct{})
	s.mu.Lock()
	s.pongs = append(s.pongs, pong)
	s.mu.Unlock()
	if err := s.send(ctx, idMsg{Op: opPing}); err != nil {
		return fmt.Errorf("realtime: ping: %w", err)
	}
	select {
	case <-pong:
		return nil
	case <-s.done:
		return fmt.Errorf("realtime: ping: %w", ErrNotConnected)
	case <-ctx.Done():
		return fmt.Errorf("realtime: ping: %w", ctx.Err())
	}
}

// SubOption configures a subscription.
type SubOption func(*subOptions)

type subOptions struct {
	since *uint64
}

// Since resumes from rev instead of taking a snapshot: the server replays
// every change with a revision above rev (the first events on Events,
// held in memory until Subscribe returns however many there are), or, if rev is older than its retained log, answers
// with a reset and a snapshot (delivered as KindReset and KindSnapshot
// events, the snapshot also in Documents).
func Since(rev uint64) SubOption {
	return func(o *subOptions) { o.since = &rev }
}

// Subscribe subscribes to a document, or with prefix to it and every
// document under it, and returns once the initial state arrived: the whole
// snapshot (every page; see Documents) or, with Since, the resumed answer.
// An error message for the subscription is returned as a *Error (forbidden,
// invalid_argument, subscription_limit, ...). While the Conn is
// reconnecting Subscribe waits for the new connection, within ctx.
func (c *Conn) Subscribe(ctx context.Context, collection string, prefix bool, opts ...SubOption) (*Subscription, error) {
	var o subOptions
	for _, opt := range opts {
		opt(&o)
	}
	seq := c.nextID.Add(1)
	sub := &Subscription{
		c:          c,
		seq:        seq,
		id:         "s" + strconv.FormatUint(seq, 10),
		collection: collection,
		prefix:     prefix,
		since:      o.since,
		events:     make(chan Event, c.cfg.EventBuffer),
		ready:      make(chan struct{}),
		done:       make(chan struct{}),
	}
	if o.since != nil {
		sub.rev = *o.since
	}

	c.mu.Lock()
	if c.closing || c.err != nil {
		err := cmp.Or(c.err, ErrClosed)
		c.mu.Unlock()
		return nil, fmt.Errorf("realtime: subscribe %s: %w", collection, err)
	}
	c.subs[sub.id] = sub
	s := c.sess
	c.mu.Unlock()

	if s != nil {
		// A failure here means the session died: the reconnect sends the
		// subscription again, unless ctx ended.
		_ = sub.sendSubscribe(ctx, s)
	}
	select {
	case <-sub.ready:
		return sub, nil
	case <-sub.done:
		select {
		case <-sub.ready: // ready, then ended at once: Events tells
			return sub, nil
		default:
		}
		return nil, fmt.Errorf("realtime: subscribe %s: %w", collection, sub.Err())
	case <-ctx.Done():
		sub.abandon(ctx.Err())
		return nil, fmt.Errorf("realtime: subscribe %s: %w", collection, ctx.Err())
	}
}

// Package fcmfake is a local stand-in for Google's Firebase Cloud Messaging
// HTTP v1 API and for the Google OAuth2 token endpoint that the Firebase Admin
// SDK (firebase.google.com/go/v4) talks to.
//
// A Server speaks the real wire protocol: the SDK is pointed at it with
//
//	option.WithCredentialsJSON(s.ServiceAccountJSON(projectID)),
//	option.WithEndpoint(s.Endpoint())
//
// and then exchanges a signed RS256 JWT assertion for an access token at
// token_uri (URL()+"/token"), and POSTs messages to
// Endpoint()+"/projects/{project}/messages:send" with that bearer token.
//
// The server is strict. Everything it receives is checked (JWT signature,
// claims, bearer token, SDK headers, request body shape) and every protocol
// mistake is answered with the error Google would send and recorded as a
// Rejection, so tests can assert that Rejections() is empty.
//
// Per-token behaviours (SetUnregistered, SetInvalid, FailTransient,
// FailAllTransient) make the server answer with the exact error bodies FCM
// uses, so that messaging.IsUnregistered, IsInvalidArgument, IsQuotaExceeded,
// IsUnavailable and IsInternal work on the SDK's errors. Such answers are
// behaviour, not protocol violations: they are not Rejections.
//
// Records are cheap: per-token delivery and attempt counts are always kept;
// the full Delivery list is kept only for the first MaxDeliveries accepted
// messages.
package fcmfake

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// MaxDeliveries is how many Delivery records a Server keeps; Deliveries
	// returns the first MaxDeliveries accepted messages (counts are exact).
	MaxDeliveries = 200_000
	// MaxRejections is how many Rejection records a Server keeps;
	// RejectionCount is exact.
	MaxRejections = 10_000

	// ScopeFirebaseMessaging and ScopeCloudPlatform are the OAuth2 scopes that
	// grant access to the FCM v1 API; a JWT assertion must request one of them.
	ScopeFirebaseMessaging = "https://www.googleapis.com/auth/firebase.messaging"
	ScopeCloudPlatform     = "https://www.googleapis.com/auth/cloud-platform"

	// FCMAudience is the audience a self-signed JWT bearer may carry instead of
	// a scope (the API's own address).
	FCMAudience = "https://fcm.googleapis.com/"

	jwtBearerGrant  = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	tokenLifetime   = 3599 // seconds, as Google answers
	maxJWTLifetime  = 3600 // seconds between iat and exp
	maxClockSkew    = 5 * time.Minute
	maxRequestBytes = 1 << 20
	fcmErrorType    = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
	badRequestType  = "type.googleapis.com/google.rpc.BadRequest"
	sendPathPrefix  = "/v1/projects/"
	sendPathSuffix  = "/messages:send"
	tokenPath       = "/token"
	jsonContentType = "application/json; charset=UTF-8"
)

var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// ErrClosed is returned by WaitTotal when the Server is closed while waiting.
var ErrClosed = errors.New("fcmfake: server closed")

// Options configures a Server.
type Options struct {
	// Latency is added to every messages:send answer (e.g. 5ms for the bench).
	Latency time.Duration
}

// Delivery is a message accepted by the server (answered 200, not validate_only).
// Data and the raw JSON fields are shared with the server's record: treat them
// as read-only.
type Delivery struct {
	Project string
	Token   string
	Title   string
	Body    string
	Image   string
	Data    map[string]string
	Android json.RawMessage
	APNS    json.RawMessage
	Webpush json.RawMessage
	// FCMOptions is the raw message.fcm_options object, if any.
	FCMOptions json.RawMessage
	At         time.Time
	// MessageID is the full resource name returned to the client
	// ("projects/{project}/messages/{id}"), i.e. what the SDK reports as
	// SendResponse.MessageID.
	MessageID string
}

// Rejection is a protocol violation seen by the server.
type Rejection struct {
	Path   string
	Reason string
	At     time.Time
}

// Server is a fake FCM HTTP v1 + OAuth2 token endpoint.
type Server struct {
	opts     Options
	ln       net.Listener
	srv      *http.Server
	url      string
	tokenURI string
	served   chan struct{}
	closed   chan struct{}
	close1   sync.Once
	seq      atomic.Uint64
	idMask   uint64

	keysMu  sync.Mutex
	keys    map[string]*serviceAccount // by project id
	byEmail sync.Map                   // client_email -> *serviceAccount (ready ones only)

	tokMu        sync.RWMutex
	tokens       map[string]issuedToken
	tokensIssued int

	selfSigned atomic.Int64

	mu             sync.Mutex
	maxDeliveries  int
	deliveries     []Delivery
	deliveriesFull atomic.Bool // len(deliveries) >= maxDeliveries
	counts         map[string]int
	attempts       map[string]int
	total          int
	rejections     []Rejection
	rejectionCount int
	behaviour      map[string]int // tokenUnregistered / tokenInvalid
	transient      map[string]*transientFailure
	allTransient   *transientFailure
	waiters        []*waiter
}

type issuedToken struct {
	project    string
	exp        time.Time
	selfSigned bool
}

type transientFailure struct {
	n    int
	fail sendFailure // the answer, shared by the n failures
}

type waiter struct {
	n  int
	ch chan struct{}
}

const (
	tokenUnregistered = iota + 1
	tokenInvalid
)

// New starts a Server listening on 127.0.0.1 on a free port, serving plain
// HTTP in the background.
func New(opts Options) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fcmfake: listen: %w", err)
	}
	var mask [8]byte
	if _, err := rand.Read(mask[:]); err != nil {
		ln.Close()
		return nil, fmt.Errorf("fcmfake: random: %w", err)
	}
	s := &Server{
		opts:          opts,
		ln:            ln,
		url:           "http://" + ln.Addr().String(),
		served:        make(chan struct{}),
		closed:        make(chan struct{}),
		idMask:        binary.BigEndian.Uint64(mask[:]),
		keys:          make(map[string]*serviceAccount),
		tokens:        make(map[string]issuedToken),
		maxDeliveries: MaxDeliveries,
	}
	s.tokenURI = s.url + tokenPath
	s.resetLocked()
	s.srv = &http.Server{
		Handler:           http.HandlerFunc(s.serveHTTP),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          nil,
	}
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// URL is the server's base address, e.g. http://127.0.0.1:41234.
func (s *Server) URL() string { return s.url }

// Endpoint is the value for option.WithEndpoint: URL()+"/v1" (the SDK appends
// /projects/{id}/messages:send).
func (s *Server) Endpoint() string { return s.url + "/v1" }

// TokenURI is the OAuth2 token endpoint written into service-account files.
func (s *Server) TokenURI() string { return s.tokenURI }

// Close stops the server and closes all its connections. Blocked WaitTotal
// calls return ErrClosed.
func (s *Server) Close() {
	s.close1.Do(func() {
		close(s.closed)
		_ = s.srv.Close()
		<-s.served
	})
}

// ---------------------------------------------------------------------------
// Service accounts

type serviceAccount struct {
	once    sync.Once
	project string
	key     *rsa.PrivateKey
	keyID   string
	email   string
	json    []byte
}

type serviceAccountFile struct {
	Type                    string `json:"type"`
	ProjectID               string `json:"project_id"`
	PrivateKeyID            string `json:"private_key_id"`
	PrivateKey              string `json:"private_key"`
	ClientEmail             string `json:"client_email"`
	ClientID                string `json:"client_id"`
	AuthURI                 string `json:"auth_uri"`
	TokenURI                string `json:"token_uri"`
	AuthProviderX509CertURL string `json:"auth_provider_x509_cert_url"`
	ClientX509CertURL       string `json:"client_x509_cert_url"`
	UniverseDomain          string `json:"universe_domain"`
}

// ServiceAccountJSON returns a service-account key file for projectID, laid
// out exactly as the Firebase console gives it, whose token_uri is this
// server's TokenURI(). The RSA-2048 key is generated on the first call for a
// project and cached: later calls return the same document.
func (s *Server) ServiceAccountJSON(projectID string) []byte {
	if projectID == "" {
		panic("fcmfake: ServiceAccountJSON: empty project id")
	}
	s.keysMu.Lock()
	sa := s.keys[projectID]
	if sa == nil {
		sa = &serviceAccount{project: projectID}
		s.keys[projectID] = sa
	}
	s.keysMu.Unlock()
	sa.once.Do(func() { s.initServiceAccount(sa) })
	return append([]byte(nil), sa.json...)
}

// generateKey makes a service account's key. Tests replace it with a pool of
// pre-made keys: generating 2048-bit keys is slow, above all under -race.
var generateKey = func() (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, 2048) }

func (s *Server) initServiceAccount(sa *serviceAccount) {
	key, err := generateKey()
	if err != nil {
		panic("fcmfake: generating RSA key: " + err.Error())
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		panic("fcmfake: marshalling RSA key: " + err.Error())
	}
	var kid [20]byte
	mustRand(kid[:])
	sa.key = key
	sa.keyID = hex.EncodeToString(kid[:])
	sa.email = "firebase-adminsdk-" + randomAlnum(5) + "@" + sa.project + ".iam.gserviceaccount.com"
	f := serviceAccountFile{
		Type:                    "service_account",
		ProjectID:               sa.project,
		PrivateKeyID:            sa.keyID,
		PrivateKey:              string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		ClientEmail:             sa.email,
		ClientID:                randomDigits(21),
		AuthURI:                 "https://accounts.google.com/o/oauth2/auth",
		TokenURI:                s.tokenURI,
		AuthProviderX509CertURL: "https://www.googleapis.com/oauth2/v1/certs",
		ClientX509CertURL:       "https://www.googleapis.com/robot/v1/metadata/x509/" + strings.ReplaceAll(sa.email, "@", "%40"),
		UniverseDomain:          "googleapis.com",
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		panic("fcmfake: marshalling service account: " + err.Error())
	}
	sa.json = append(b, '\n')
	s.byEmail.Store(sa.email, sa)
}

func mustRand(b []byte) {
	if _, err := rand.Read(b); err != nil {
		panic("fcmfake: crypto/rand: " + err.Error())
	}
}

func randomAlnum(n int) string {
	return randomAlnumFrom("abcdefghijklmnopqrstuvwxyz0123456789", n)
}

func randomDigits(n int) string {
	b := []byte(randomAlnumFrom("0123456789", n))
	if b[0] == '0' {
		b[0] = '1'
	}
	return string(b)
}

func randomAlnumFrom(alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		v, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			panic("fcmfake: crypto/rand: " + err.Error())
		}
		b[i] = alphabet[v.Int64()]
	}
	return string(b)
}

// ---------------------------------------------------------------------------
// Behaviours

// SetUnregistered makes every messages:send for token answer 404 NOT_FOUND
// with FcmError UNREGISTERED (messaging.IsUnregistered). It replaces a
// SetInvalid for the same token.
func (s *Server) SetUnregistered(token string) {
	s.mu.Lock()
	s.behaviour[token] = tokenUnregistered
	s.mu.Unlock()
}

// SetInvalid makes every messages:send for token answer 400 INVALID_ARGUMENT
// with FcmError INVALID_ARGUMENT (messaging.IsInvalidArgument). It replaces a
// SetUnregistered for the same token.
func (s *Server) SetInvalid(token string) {
	s.mu.Lock()
	s.behaviour[token] = tokenInvalid
	s.mu.Unlock()
}

// FailTransient makes the next n well-formed messages:send requests for token
// answer status, which must be 503 (UNAVAILABLE), 500 (INTERNAL) or 429
// (RESOURCE_EXHAUSTED / QUOTA_EXCEEDED). When retryAfter > 0 the answer has a
// Retry-After header of retryAfter in whole seconds, rounded up. n <= 0
// removes the behaviour. Transient failures take precedence over
// SetUnregistered/SetInvalid.
func (s *Server) FailTransient(token string, n int, status int, retryAfter time.Duration) {
	tf := newTransient(n, status, retryAfter)
	s.mu.Lock()
	if tf == nil {
		delete(s.transient, token)
	} else {
		s.transient[token] = tf
	}
	s.mu.Unlock()
}

// FailAllTransient is FailTransient for the next n well-formed messages:send
// requests whatever their token. It is consulted before the per-token
// failures.
func (s *Server) FailAllTransient(n int, status int, retryAfter time.Duration) {
	tf := newTransient(n, status, retryAfter)
	s.mu.Lock()
	s.allTransient = tf
	s.mu.Unlock()
}

func newTransient(n, status int, retryAfter time.Duration) *transientFailure {
	switch status {
	case http.StatusServiceUnavailable, http.StatusInternalServerError, http.StatusTooManyRequests:
	default:
		panic(fmt.Sprintf("fcmfake: transient failure status must be 503, 500 or 429, not %d", status))
	}
	if n <= 0 {
		return nil
	}
	tf := &transientFailure{n: n, fail: sendFailure{status: status}}
	switch status {
	case http.StatusServiceUnavailable:
		tf.fail.body = bodyUnavailable
	case http.StatusInternalServerError:
		tf.fail.body = bodyInternal
	default:
		tf.fail.body = bodyQuotaExceeded
	}
	if retryAfter > 0 {
		secs := int64((retryAfter + time.Second - 1) / time.Second)
		tf.fail.retryAfter = strconv.FormatInt(secs, 10)
	}
	return tf
}

// behaviourLocked returns the configured answer for a well-formed request to
// token, or nil to deliver it.
func (s *Server) behaviourLocked(token string) *sendFailure {
	if tf := s.allTransient; tf != nil {
		if tf.n--; tf.n <= 0 {
			s.allTransient = nil
		}
		return &tf.fail
	}
	if tf := s.transient[token]; tf != nil {
		if tf.n--; tf.n <= 0 {
			delete(s.transient, token)
		}
		return &tf.fail
	}
	switch s.behaviour[token] {
	case tokenUnregistered:
		return &failUnregistered
	case tokenInvalid:
		return &failInvalid
	}
	return nil
}

// ---------------------------------------------------------------------------
// Records

// Deliveries returns a copy of the accepted messages, in acceptance order.
// Only the first MaxDeliveries are kept.
func (s *Server) Deliveries() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Delivery(nil), s.deliveries...)
}

// Count is the number of accepted deliveries to token.
func (s *Server) Count(token string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[token]
}

// Attempts is the number of messages:send requests whose body named token,
// whatever the answer (including rejected ones).
func (s *Server) Attempts(token string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts[token]
}

// Total is the number of accepted deliveries, all tokens.
func (s *Server) Total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// Rejections returns a copy of the protocol violations seen (the first
// MaxRejections of them).
func (s *Server) Rejections() []Rejection {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Rejection(nil), s.rejections...)
}

// RejectionCount is the number of protocol violations seen.
func (s *Server) RejectionCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rejectionCount
}

// TokensIssued is the number of OAuth2 access tokens issued by the token
// endpoint since New (Reset does not clear it).
func (s *Server) TokensIssued() int {
	s.tokMu.RLock()
	defer s.tokMu.RUnlock()
	return s.tokensIssued
}

// SelfSignedBearers is the number of messages:send requests authenticated
// with a self-signed service-account JWT used directly as the bearer token
// (the flow google.golang.org/api uses for non-googleapis.com universes or
// when asked to), instead of an access token from the token endpoint.
func (s *Server) SelfSignedBearers() int { return int(s.selfSigned.Load()) }

// WaitTotal blocks until Total() >= n, ctx ends (returning ctx.Err()) or the
// server is closed (returning ErrClosed).
func (s *Server) WaitTotal(ctx context.Context, n int) error {
	s.mu.Lock()
	if s.total >= n {
		s.mu.Unlock()
		return nil
	}
	w := &waiter{n: n, ch: make(chan struct{})}
	s.waiters = append(s.waiters, w)
	s.mu.Unlock()

	var err error
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-s.closed:
		err = ErrClosed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.waiters {
		if x == w {
			s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
			return err
		}
	}
	return nil // woken concurrently: the condition was met
}

// Reset forgets all records (deliveries, counts, attempts, rejections) and
// behaviours. Service-account keys and issued access tokens (and the
// TokensIssued count) are kept, so SDK clients keep working.
func (s *Server) Reset() {
	s.mu.Lock()
	s.resetLocked()
	s.mu.Unlock()
}

func (s *Server) resetLocked() {
	s.deliveries = nil
	s.deliveriesFull.Store(false)
	s.counts = make(map[string]int)
	s.attempts = make(map[string]int)
	s.total = 0
	s.rejections = nil
	s.rejectionCount = 0
	s.behaviour = make(map[string]int)
	s.transient = make(map[string]*transientFailure)
	s.allTransient = nil
}

func (s *Server) rejectLocked(path, reason string, now time.Time) {
	s.rejectionCount++
	if len(s.rejections) < MaxRejections {
		s.rejections = append(s.rejections, Rejection{Path: path, Reason: reason, At: now})
	}
}

func (s *Server) reject(path, reason string) {
	now := time.Now()
	s.mu.Lock()
	s.rejectLocked(path, reason, now)
	s.mu.Unlock()
}

// ---------------------------------------------------------------------------
// HTTP

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if path == tokenPath {
		s.handleToken(w, r)
		return
	}
	if rest, ok := strings.CutPrefix(path, sendPathPrefix); ok {
		if project, ok := strings.CutSuffix(rest, sendPathSuffix); ok && project != "" && !strings.Contains(project, "/") {
			if r.Method != http.MethodPost {
				s.reject(path, "method "+r.Method+" on messages:send (want POST)")
				writeRaw(w, http.StatusNotFound, "", bodyNotFound)
				return
			}
			s.handleSend(w, r, project)
			return
		}
	}
	s.reject(path, "unknown path "+r.Method+" "+path)
	writeRaw(w, http.StatusNotFound, "", bodyNotFound)
}

func writeRaw(w http.ResponseWriter, status int, retryAfter string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", jsonContentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if retryAfter != "" {
		h.Set("Retry-After", retryAfter)
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// ---------------------------------------------------------------------------
// OAuth2 token endpoint

type oauthError struct {
	Error       string `json:"error"`
	Description string `json:"error_description"`
}

type tokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int    `json:"expires_in"`
}

func (s *Server) tokenError(w http.ResponseWriter, r *http.Request, status int, code, desc, reason string) {
	s.reject(r.URL.Path, "token exchange: "+reason)
	b, _ := json.Marshal(oauthError{Error: code, Description: desc})
	writeRaw(w, status, "", b)
}

func (s *Server) handleToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		s.tokenError(w, r, http.StatusMethodNotAllowed, "invalid_request", "Method Not Allowed", "method "+r.Method+" (want POST)")
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		s.tokenError(w, r, http.StatusBadRequest, "invalid_request", "Bad Request",
			"Content-Type "+strconv.Quote(r.Header.Get("Content-Type"))+" (want application/x-www-form-urlencoded)")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxRequestBytes)
	if err := r.ParseForm(); err != nil {
		s.tokenError(w, r, http.StatusBadRequest, "invalid_request", "Bad Request", "unparsable form: "+err.Error())
		return
	}
	if gt := r.PostForm.Get("grant_type"); gt != jwtBearerGrant {
		s.tokenError(w, r, http.StatusBadRequest, "unsupported_grant_type", "Invalid grant_type: "+gt,
			"grant_type "+strconv.Quote(gt)+" (want "+jwtBearerGrant+")")
		return
	}
	assertion := r.PostForm.Get("assertion")
	if assertion == "" {
		s.tokenError(w, r, http.StatusBadRequest, "invalid_request", "Missing required parameter: assertion", "missing assertion")
		return
	}
	now := time.Now()
	sa, claims, jerr := s.verifyJWT(assertion, now)
	if jerr != nil {
		s.tokenError(w, r, http.StatusBadRequest, jerr.code, jerr.desc, jerr.reason)
		return
	}
	if claims.Aud != s.tokenURI {
		s.tokenError(w, r, http.StatusBadRequest, "invalid_grant", "Invalid JWT: Failed audience check.",
			"aud "+strconv.Quote(claims.Aud)+" (want "+s.tokenURI+")")
		return
	}
	if !hasFCMScope(claims.Scope) {
		s.tokenError(w, r, http.StatusBadRequest, "invalid_scope", "Invalid OAuth scope or ID token audience provided.",
			"scope "+strconv.Quote(claims.Scope)+" grants no FCM access (want "+ScopeFirebaseMessaging+" or "+ScopeCloudPlatform+")")
		return
	}
	if claims.Sub != "" && claims.Sub != sa.email {
		s.tokenError(w, r, http.StatusUnauthorized, "unauthorized_client",
			"Client is unauthorized to retrieve access tokens using this method, or client not authorized for any of the scopes requested.",
			"sub "+strconv.Quote(claims.Sub)+": domain-wide delegation is not supported")
		return
	}

	var rb [32]byte
	mustRand(rb[:])
	tok := "ya29." + base64.RawURLEncoding.EncodeToString(rb[:])
	s.tokMu.Lock()
	s.tokens[tok] = issuedToken{project: sa.project, exp: now.Add(tokenLifetime * time.Second)}
	s.tokensIssued++
	s.tokMu.Unlock()

	b, _ := json.Marshal(tokenResponse{AccessToken: tok, TokenType: "Bearer", ExpiresIn: tokenLifetime})
	w.Header().Set("Cache-Control", "no-cache, no-store, max-age=0, must-revalidate")
	writeRaw(w, http.StatusOK, "", b)
}

func hasFCMScope(scope string) bool {
	for _, sc := range strings.Fields(scope) {
		if sc == ScopeFirebaseMessaging || sc == ScopeCloudPlatform {
			return true
		}
	}
	return false
}

type jwtHeader struct {
	Alg string `json:"alg"`
	Typ string `json:"typ"`
	Kid string `json:"kid"`
}

type jwtClaims struct {
	Iss   string `json:"iss"`
	Sub   string `json:"sub"`
	Aud   string `json:"aud"`
	Scope string `json:"scope"`
	Iat   *int64 `json:"iat"`
	Exp   *int64 `json:"exp"`
}

type jwtError struct{ code, desc, reason string }

func invalidGrant(desc, reason string) *jwtError {
	return &jwtError{code: "invalid_grant", desc: desc, reason: reason}
}

const descBadTime = "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."

// verifyJWT checks a service-account JWT: structure, RS256 header with the
// account's key id, signature, issuer, and iat/exp. The audience and scope
// are checked by the caller.
func (s *Server) verifyJWT(token string, now time.Time) (*serviceAccount, *jwtClaims, *jwtError) {
	h64, rest, ok1 := strings.Cut(token, ".")
	p64, sig64, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || strings.Contains(sig64, ".") {
		return nil, nil, invalidGrant("Invalid JWT", "malformed JWT (want header.payload.signature)")
	}
	hb, err1 := base64.RawURLEncoding.DecodeString(h64)
	pb, err2 := base64.RawURLEncoding.DecodeString(p64)
	sig, err3 := base64.RawURLEncoding.DecodeString(sig64)
	if err1 != nil || err2 != nil || err3 != nil {
		return nil, nil, invalidGrant("Invalid JWT", "JWT segments are not unpadded base64url")
	}
	var h jwtHeader
	if err := json.Unmarshal(hb, &h); err != nil {
		return nil, nil, invalidGrant("Invalid JWT", "JWT header: "+err.Error())
	}
	var c jwtClaims
	if err := json.Unmarshal(pb, &c); err != nil {
		return nil, nil, invalidGrant("Invalid JWT", "JWT claims: "+err.Error())
	}
	if h.Alg != "RS256" {
		return nil, nil, invalidGrant("Invalid JWT", "JWT alg "+strconv.Quote(h.Alg)+" (want RS256)")
	}
	if h.Typ != "" && h.Typ != "JWT" {
		return nil, nil, invalidGrant("Invalid JWT", "JWT typ "+strconv.Quote(h.Typ)+" (want JWT)")
	}
	v, ok := s.byEmail.Load(c.Iss)
	if !ok {
		return nil, nil, invalidGrant("Invalid grant: account not found", "unknown issuer "+strconv.Quote(c.Iss))
	}
	sa := v.(*serviceAccount)
	if h.Kid != sa.keyID {
		return nil, nil, invalidGrant("Invalid JWT Signature.", "JWT kid "+strconv.Quote(h.Kid)+" is not the private_key_id of "+sa.email)
	}
	digest := sha256.Sum256([]byte(token[:len(h64)+1+len(p64)]))
	if err := rsa.VerifyPKCS1v15(&sa.key.PublicKey, crypto.SHA256, digest[:], sig); err != nil {
		return nil, nil, invalidGrant("Invalid JWT Signature.", "JWT signature does not verify with the key of "+sa.email)
	}
	if c.Iat == nil || c.Exp == nil {
		return nil, nil, invalidGrant(descBadTime, "JWT lacks iat or exp")
	}
	iat, exp := time.Unix(*c.Iat, 0), time.Unix(*c.Exp, 0)
	switch {
	case !exp.After(now):
		return nil, nil, invalidGrant(descBadTime, "JWT expired at "+exp.UTC().Format(time.RFC3339))
	case !exp.After(iat) || *c.Exp-*c.Iat > maxJWTLifetime:
		return nil, nil, invalidGrant(descBadTime, fmt.Sprintf("JWT lifetime exp-iat = %ds (want 1..%d)", *c.Exp-*c.Iat, maxJWTLifetime))
	case iat.After(now.Add(maxClockSkew)):
		return nil, nil, invalidGrant(descBadTime, "JWT iat is in the future: "+iat.UTC().Format(time.RFC3339))
	}
	return sa, &c, nil
}

// ---------------------------------------------------------------------------
// messages:send

var (
	hdrAPIFormat      = http.CanonicalHeaderKey("X-GOOG-API-FORMAT-VERSION")
	hdrFirebaseClient = http.CanonicalHeaderKey("X-Firebase-Client")
)

// authenticate resolves a bearer credential to its project.
func (s *Server) authenticate(authz string, now time.Time) (project string, reason string) {
	scheme, tok, ok := strings.Cut(authz, " ")
	if authz == "" {
		return "", "missing Authorization header"
	}
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return "", "Authorization header is not a Bearer credential"
	}
	s.tokMu.RLock()
	it, found := s.tokens[tok]
	s.tokMu.RUnlock()
	if !found {
		if strings.Count(tok, ".") != 2 {
			return "", "bearer token was not issued by this server"
		}
		// A self-signed service-account JWT used directly as the bearer.
		sa, c, jerr := s.verifyJWT(tok, now)
		if jerr != nil {
			return "", "self-signed JWT bearer: " + jerr.reason
		}
		if c.Sub != sa.email {
			return "", "self-signed JWT bearer: sub " + strconv.Quote(c.Sub) + " (want " + sa.email + ")"
		}
		switch {
		case c.Aud == "" && hasFCMScope(c.Scope):
		case c.Aud == FCMAudience || c.Aud == strings.TrimSuffix(FCMAudience, "/") || c.Aud == s.url+"/":
		default:
			return "", "self-signed JWT bearer: aud " + strconv.Quote(c.Aud) + " / scope " + strconv.Quote(c.Scope) + " grants no FCM access"
		}
		it = issuedToken{project: sa.project, exp: time.Unix(*c.Exp, 0), selfSigned: true}
		s.tokMu.Lock()
		s.tokens[tok] = it
		s.tokMu.Unlock()
	}
	if !now.Before(it.exp) {
		return "", "bearer token expired"
	}
	if it.selfSigned {
		s.selfSigned.Add(1)
	}
	return it.project, ""
}

type sendFailure struct {
	status     int
	body       []byte
	reason     string // recorded as a Rejection when non-empty
	retryAfter string // Retry-After header value, if any
}

func (s *Server) handleSend(w http.ResponseWriter, r *http.Request, project string) {
	buf := bodyPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= 64<<10 {
			bodyPool.Put(buf)
		}
	}()
	_, readErr := buf.ReadFrom(io.LimitReader(r.Body, maxRequestBytes+1))
	body := buf.Bytes() // only valid until the answer is written
	if s.opts.Latency > 0 {
		t := time.NewTimer(s.opts.Latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	now := time.Now()
	msg, bad := parseSendRequest(body)

	// Checks in the order Google applies them: credentials, then the request.
	var fail *sendFailure
	authProject, authReason := s.authenticate(r.Header.Get("Authorization"), now)
	switch {
	case authReason != "":
		fail = &sendFailure{status: http.StatusUnauthorized, body: bodyUnauthenticated, reason: authReason}
	case authProject != project:
		fail = &sendFailure{status: http.StatusForbidden, body: bodySenderIDMismatch,
			reason: "bearer token belongs to project " + strconv.Quote(authProject) + ", not " + strconv.Quote(project)}
	case r.Header.Get(hdrAPIFormat) != "2":
		fail = invalidArgument("missing or wrong X-GOOG-API-FORMAT-VERSION header: " + strconv.Quote(r.Header.Get(hdrAPIFormat)) + " (want \"2\")")
	case !strings.HasPrefix(r.Header.Get(hdrFirebaseClient), "fire-admin-go/"):
		fail = invalidArgument("missing or wrong X-Firebase-Client header: " + strconv.Quote(r.Header.Get(hdrFirebaseClient)) + " (want fire-admin-go/<version>)")
	case !isJSONContentType(r.Header.Get("Content-Type")):
		fail = invalidArgument("Content-Type " + strconv.Quote(r.Header.Get("Content-Type")) + " (want application/json)")
	case readErr != nil:
		fail = invalidArgument("reading body: " + readErr.Error())
	case len(body) > maxRequestBytes:
		fail = &sendFailure{status: http.StatusRequestEntityTooLarge,
			body:   errorBody(413, "Request payload size exceeds the limit: 1048576 bytes.", "INVALID_ARGUMENT", "", ""),
			reason: "request body larger than 1 MiB"}
	case bad != nil:
		fail = &sendFailure{status: http.StatusBadRequest,
			body:   errorBody(400, bad.message, "INVALID_ARGUMENT", bad.fcmCode, bad.field),
			reason: "bad request body: " + bad.message}
	case msg.token == "":
		fail = invalidArgument("fcmfake delivers only to registration tokens; got a topic/condition target")
	}

	var name string
	if fail == nil {
		if msg.validateOnly {
			name = "projects/" + project + "/messages/fake_message_id"
		} else {
			// Like FCM's "0:1500415314455276%31bd1c9631bd1c96"; the hex part
			// is unique per server (a sequence number XOR a random mask).
			var raw [8]byte
			var hx [16]byte
			binary.BigEndian.PutUint64(raw[:], s.seq.Add(1)^s.idMask)
			hex.Encode(hx[:], raw[:])
			name = "projects/" + project + "/messages/0:" + strconv.FormatInt(now.UnixMicro(), 10) + "%" + string(hx[:])
		}
	}

	// Decode the record outside the lock while the list has room.
	var rec *Delivery
	if fail == nil && !msg.validateOnly && !s.deliveriesFull.Load() {
		d := msg.delivery()
		d.Project, d.At, d.MessageID = project, now, name
		rec = &d
	}

	s.mu.Lock()
	if msg.token != "" {
		s.attempts[msg.token]++
	}
	if fail == nil {
		fail = s.behaviourLocked(msg.token)
	}
	if fail != nil {
		if fail.reason != "" {
			s.rejectLocked(r.URL.Path, fail.reason, now)
		}
		s.mu.Unlock()
		if fail.status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="https://accounts.google.com/", error="invalid_token"`)
		}
		writeRaw(w, fail.status, fail.retryAfter, fail.body)
		return
	}
	if !msg.validateOnly {
		s.total++
		s.counts[msg.token]++
		if rec != nil && len(s.deliveries) < s.maxDeliveries {
			s.deliveries = append(s.deliveries, *rec)
			if len(s.deliveries) >= s.maxDeliveries {
				s.deliveriesFull.Store(true)
			}
		}
		if len(s.waiters) > 0 {
			s.wakeLocked()
		}
	}
	s.mu.Unlock()

	out := make([]byte, 0, len(name)+16)
	out = append(out, `{"name":`...)
	out = appendJSONString(out, name)
	out = append(out, '}')
	writeRaw(w, http.StatusOK, "", out)
}

func (s *Server) wakeLocked() {
	kept := s.waiters[:0]
	for _, w := range s.waiters {
		if s.total >= w.n {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	for i := len(kept); i < len(s.waiters); i++ {
		s.waiters[i] = nil
	}
	s.waiters = kept
}

func isJSONContentType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

func invalidArgument(reason string) *sendFailure {
	return &sendFailure{status: http.StatusBadRequest,
		body:   errorBody(400, "Request contains an invalid argument.", "INVALID_ARGUMENT", "", ""),
		reason: reason}
}

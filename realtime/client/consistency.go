package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
)

// SessionRevision is a client session's consistency state: the highest
// revision the client has seen (X-Revision of REST answers, the revision
// of documents it read, snapshot, resumed and change revisions on the
// socket). Reads made with it carry X-Min-Revision (REST) or minRevision
// (subscribe), so a node answers only once it has applied that revision:
// the client reads its own writes and never goes back in time, on any
// node, also after moving from one node to another (give the new node's
// Config or Accounts the same SessionRevision, or carry Revision() over
// and Observe it in a new one).
//
// One SessionRevision may be shared by any number of Conns, REST helpers
// and goroutines. The zero value is ready to use; a nil *SessionRevision
// is a session that tracks nothing (reads without X-Min-Revision).
type SessionRevision struct {
	rev atomic.Uint64
}

// NewSessionRevision returns a session that has seen rev (0: nothing yet).
func NewSessionRevision(rev uint64) *SessionRevision {
	s := &SessionRevision{}
	s.rev.Store(rev)
	return s
}

// Revision is the highest revision seen; 0 for a nil session.
func (s *SessionRevision) Revision() uint64 {
	if s == nil {
		return 0
	}
	return s.rev.Load()
}

// Observe records a revision the client has seen; the session only moves
// forward. A nil session ignores it.
func (s *SessionRevision) Observe(rev uint64) {
	if s == nil {
		return
	}
	for {
		cur := s.rev.Load()
		if rev <= cur || s.rev.CompareAndSwap(cur, rev) {
			return
		}
	}
}

// observeHeader records an answer's X-Revision.
func (s *SessionRevision) observeHeader(h http.Header) {
	if s == nil {
		return
	}
	if n, err := strconv.ParseUint(h.Get("X-Revision"), 10, 64); err == nil {
		s.Observe(n)
	}
}

// setMinRevision puts X-Min-Revision on a read: the higher of the
// session's revision and explicit (a caller's own minimum).
func (s *SessionRevision) setMinRevision(h http.Header, explicit uint64) {
	if r := max(s.Revision(), explicit); r > 0 {
		h.Set("X-Min-Revision", strconv.FormatUint(r, 10))
	}
}

// ---- documents ----

// Doc is a document as GET /api/db answers it.
type Doc struct {
	Collection string          `json:"collection"`
	Data       json.RawMessage `json:"data"`
	Revision   uint64          `json:"revision"`
	CreateTime string          `json:"createTime"`
	UpdateTime string          `json:"updateTime"`
}

// ReadOption shapes GetDoc.
type ReadOption func(*readOptions)

type readOptions struct {
	local  bool
	minRev uint64
}

// Local reads the node's local state (?consistency=local): no round trip
// to the leader. With a session the node still waits for the session's
// revision, so the client reads its own writes.
func Local() ReadOption { return func(o *readOptions) { o.local = true } }

// MinRevision asks for at least rev besides the session's revision (the
// higher one is sent).
func MinRevision(rev uint64) ReadOption { return func(o *readOptions) { o.minRev = rev } }

// GetDoc reads one document from the node at cfg.URL with cfg's
// credentials and cfg.Session: X-Min-Revision is the session's revision,
// and the document's revision is observed. A missing document is a *Error
// with Status 404.
func GetDoc(ctx context.Context, cfg Config, collection string, opts ...ReadOption) (*Doc, error) {
	var o readOptions
	for _, opt := range opts {
		opt(&o)
	}
	q := url.Values{"collection": {collection}}
	if o.local {
		q.Set("consistency", "local")
	}
	var d Doc
	if err := restCall(ctx, cfg, http.MethodGet, "/api/db?"+q.Encode(), nil, o.minRev, &d); err != nil {
		return nil, err
	}
	cfg.Session.Observe(d.Revision)
	return &d, nil
}

// SetDoc writes a document (POST /api/db, create or replace) and returns
// its new revision, which the session observes.
func SetDoc(ctx context.Context, cfg Config, collection string, data any) (uint64, error) {
	var d struct {
		Revision uint64 `json:"revision"`
	}
	if err := restCall(ctx, cfg, http.MethodPost, "/api/db", map[string]any{"collection": collection, "data": data}, 0, &d); err != nil {
		return 0, err
	}
	cfg.Session.Observe(d.Revision)
	return d.Revision, nil
}

// DeleteDoc deletes a document and returns the revision of the delete.
func DeleteDoc(ctx context.Context, cfg Config, collection string) (uint64, error) {
	var d struct {
		Revision uint64 `json:"revision"`
	}
	if err := restCall(ctx, cfg, http.MethodDelete, "/api/db?"+url.Values{"collection": {collection}}.Encode(), nil, 0, &d); err != nil {
		return 0, err
	}
	cfg.Session.Observe(d.Revision)
	return d.Revision, nil
}

// GetDoc, SetDoc and DeleteDoc on the node the Conn was dialled to, with
// its credentials and session.
func (c *Conn) GetDoc(ctx context.Context, collection string, opts ...ReadOption) (*Doc, error) {
	return GetDoc(ctx, c.cfg, collection, opts...)
}

// SetDoc: see the package function.
func (c *Conn) SetDoc(ctx context.Context, collection string, data any) (uint64, error) {
	return SetDoc(ctx, c.cfg, collection, data)
}

// DeleteDoc: see the package function.
func (c *Conn) DeleteDoc(ctx context.Context, collection string) (uint64, error) {
	return DeleteDoc(ctx, c.cfg, collection)
}

// Session is the Conn's SessionRevision (Config.Session), or nil.
func (c *Conn) Session() *SessionRevision { return c.cfg.Session }

// restCall makes one REST call with cfg's credentials; a GET carries the
// session's X-Min-Revision (or minRev when higher) and every answer's
// X-Revision is observed.
func restCall(ctx context.Context, cfg Config, method, path string, body any, minRev uint64, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("edgebase: encode %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(cfg.URL, "/")+path, rd)
	if err != nil {
		return fmt.Errorf("edgebase: %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.Token)
	}
	if cfg.ProjectID != "" {
		req.Header.Set("X-Project-Id", cfg.ProjectID)
	}
	if cfg.APIKey != "" {
		req.Header.Set("X-API-Key", cfg.APIKey)
	}
	if method == http.MethodGet {
		cfg.Session.setMinRevision(req.Header, minRev)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("edgebase: %s %s: %w", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return httpError(resp)
	}
	cfg.Session.observeHeader(resp.Header)
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("edgebase: %s %s: read answer: %w", method, path, err)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("edgebase: %s %s: decode answer: %w", method, path, err)
		}
	}
	return nil
}

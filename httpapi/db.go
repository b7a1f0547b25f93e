package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/raftstore"
)

// docResponse is a document as the API shows it: the path without the project.
type docResponse struct {
	Collection string          `json:"collection"`
	Data       json.RawMessage `json:"data"`
	Revision   uint64          `json:"revision"`
	CreateTime string          `json:"createTime"`
	UpdateTime string          `json:"updateTime"`
}

func toResponse(pid string, d *raftstore.Document) docResponse {
	return docResponse{
		Collection: strings.TrimPrefix(d.Path, pid+"/"),
		Data:       d.Data,
		Revision:   d.Revision,
		CreateTime: time.Unix(0, d.CreateTime).UTC().Format(time.RFC3339Nano),
		UpdateTime: time.Unix(0, d.UpdateTime).UTC().Format(time.RFC3339Nano),
	}
}

// readOptions parses ?consistency= and X-Min-Revision.
func readOptions(r *http.Request) (raftstore.Consistency, uint64, error) {
	c := raftstore.Strong
	switch v := r.URL.Query().Get("consistency"); v {
	case "", "strong":
	case "local":
		c = raftstore.Local
	default:
		return 0, 0, badField("consistency", "invalid_argument", "consistency must be strong or local")
	}
	var minRev uint64
	if v := r.Header.Get("X-Min-Revision"); v != "" {
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, 0, badField("X-Min-Revision", "invalid_argument", "X-Min-Revision must be a non-negative integer")
		}
		minRev = n
	}
	return c, minRev, nil
}

// principal syncs this node to the wanted consistency and resolves the bearer
// token. A token unknown to stale local state is looked up again after a
// strong sync, so a token just issued anywhere always works here. When the
// client sends X-Project-Id / X-API-Key they must agree with the token.
func (s *Server) principal(ctx context.Context, r *http.Request, c raftstore.Consistency, minRev uint64) (*auth.Principal, error) {
	tok := bearer(r)
	if tok == "" {
		return nil, auth.ErrMissingToken
	}
	if err := s.waitRead(ctx, c, minRev); err != nil {
		return nil, err
	}
	p, err := s.accounts.Authenticate(tok)
	if errors.Is(err, auth.ErrInvalidToken) && c == raftstore.Local {
		if err := s.waitRead(ctx, raftstore.Strong, 0); err != nil {
			return nil, err
		}
		p, err = s.accounts.Authenticate(tok)
	}
	if err != nil {
		return nil, err
	}
	if pid := r.Header.Get("X-Project-Id"); pid != "" && pid != p.ProjectID {
		return nil, newError(http.StatusForbidden, "project_mismatch", "X-Project-Id names another project than the token")
	}
	if key := r.Header.Get("X-API-Key"); key != "" {
		if err := s.accounts.CheckAPIKey(p.ProjectID, key); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// waitRead brings this node to the wanted freshness, bounded by the read
// timeout so that an unreachable X-Min-Revision or a leaderless cluster
// answers 503 instead of hanging.
func (s *Server) waitRead(ctx context.Context, c raftstore.Consistency, minRev uint64) error {
	ctx, cancel := context.WithTimeout(ctx, s.readTimeout)
	defer cancel()
	return s.store.WaitRead(ctx, c, minRev)
}

func authInfo(p *auth.Principal) auth.AuthInfo {
	return auth.AuthInfo{UID: p.UserID, Role: p.Role, Email: p.Email}
}

// allow evaluates the project's rules; a denial or an evaluation error is 403.
func (s *Server) allow(ctx context.Context, p *auth.Principal, op auth.Op, path string, resource, request json.RawMessage) error {
	rules, err := s.accounts.Rules(p.ProjectID)
	if err != nil {
		return err
	}
	return s.allowWith(ctx, rules, p, op, path, resource, request)
}

func (s *Server) allowWith(ctx context.Context, rules *auth.CompiledRules, p *auth.Principal, op auth.Op, path string, resource, request json.RawMessage) error {
	ok, err := rules.Allow(ctx, op, auth.RuleInput{Path: path, Auth: authInfo(p), Resource: resource, Request: request})
	if err != nil {
		s.logger.Debug("rule evaluation failed", "request_id", requestID(ctx), "err", err)
	}
	if !ok {
		return newError(http.StatusForbidden, "forbidden", "the access rules do not allow this "+op.String()+" of "+path)
	}
	return nil
}

func (s *Server) handleDB(w http.ResponseWriter, r *http.Request) {
	var err error
	switch r.Method {
	case http.MethodGet:
		err = s.dbGet(w, r)
	case http.MethodPost:
		err = s.dbPost(w, r)
	case http.MethodPut:
		err = s.dbPut(w, r)
	case http.MethodDelete:
		err = s.dbDelete(w, r)
	default:
		err = methodNotAllowed("GET", "POST", "PUT", "DELETE")
	}
	if err != nil {
		s.writeError(w, r, err)
	}
}

func collectionParam(r *http.Request) (string, error) {
	c := r.URL.Query().Get("collection")
	if err := raftstore.ValidatePath(c); err != nil {
		return "", badField("collection", "invalid_path", err.Error())
	}
	return c, nil
}

func (s *Server) dbGet(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	c, minRev, err := readOptions(r)
	if err != nil {
		return err
	}
	coll, err := collectionParam(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	list := false
	if v := q.Get("list"); v != "" {
		if list, err = strconv.ParseBool(v); err != nil {
			return badField("list", "invalid_argument", "list must be true or false")
		}
	}
	p, err := s.principal(ctx, r, c, minRev)
	if err != nil {
		return err
	}
	full := p.ProjectID + "/" + coll
	if list {
		return s.dbList(w, r, p, coll)
	}
	doc, err := s.store.Get(full)
	if err != nil {
		return err
	}
	var resource json.RawMessage
	if doc != nil {
		resource = doc.Data
	}
	if err := s.allow(ctx, p, auth.OpRead, coll, resource, nil); err != nil {
		return err
	}
	if doc == nil {
		return newError(http.StatusNotFound, "not_found", "no document at "+coll)
	}
	writeJSON(w, http.StatusOK, toResponse(p.ProjectID, doc))
	return nil
}

type listResponse struct {
	Documents     []docResponse `json:"documents"`
	NextPageToken string        `json:"nextPageToken,omitempty"`
}

// dbList returns the direct children of coll, ordered by key. Reading a
// listing needs read access to coll itself.
func (s *Server) dbList(w http.ResponseWriter, r *http.Request, p *auth.Principal, coll string) error {
	q := r.URL.Query()
	limit := 50
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return badField("limit", "invalid_argument", "limit must be an integer from 1 to 1000")
		}
		limit = n
	}
	after := ""
	if v := q.Get("pageToken"); v != "" {
		b, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil || len(b) == 0 || bytes.IndexByte(b, '/') >= 0 {
			return badField("pageToken", "invalid_argument", "pageToken is not one this server issued")
		}
		after = string(b)
	}
	if err := s.allow(r.Context(), p, auth.OpRead, coll, nil, nil); err != nil {
		return err
	}
	docs, next, err := s.store.List(p.ProjectID+"/"+coll, after, limit)
	if err != nil {
		return err
	}
	out := listResponse{Documents: make([]docResponse, 0, len(docs))}
	for _, d := range docs {
		out.Documents = append(out.Documents, toResponse(p.ProjectID, d))
	}
	if next != "" {
		out.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(next))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// ifMatch parses If-Match: a revision number, optionally quoted. 0 means
// "only if the document does not exist".
func ifMatch(r *http.Request) (*uint64, error) {
	v := strings.TrimSpace(r.Header.Get("If-Match"))
	if v == "" {
		return nil, nil
	}
	v = strings.TrimPrefix(v, "W/")
	v = strings.Trim(v, `"`)
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return nil, badField("If-Match", "invalid_argument", "If-Match must be a document revision")
	}
	return &n, nil
}

func preconditionFailed(want, got uint64) *apiError {
	return newError(http.StatusPreconditionFailed, "precondition_failed", fmt.Sprintf("If-Match %d does not match the current revision %d", want, got))
}

// writer is the caller of a write and, when it was resolved from local
// state, the conditions that make that check hold at the write's commit.
type writer struct {
	p     *auth.Principal
	guard []raftstore.Cond // nil: resolved after a strong read
}

// writePrincipal resolves the caller of a write. No strong read (a quorum
// round trip on every write) is needed: the token is checked on this node's
// local state, and the write carries the revisions of the session and
// account documents that check read (auth.AuthenticateGuard), so it commits
// only if the token is still valid, for the same principal, at the write's
// own revision. A write refused on them is checked again after a strong read
// (strong), which answers 401 for a token revoked meanwhile. A request with
// an X-API-Key is checked after a strong read, as reads are.
func (s *Server) writePrincipal(ctx context.Context, r *http.Request, strong bool) (writer, error) {
	if strong || r.Header.Get("X-API-Key") != "" {
		p, err := s.principal(ctx, r, raftstore.Strong, 0)
		return writer{p: p}, err
	}
	tok := bearer(r)
	if tok == "" {
		return writer{}, auth.ErrMissingToken
	}
	if err := s.waitRead(ctx, raftstore.Local, 0); err != nil {
		return writer{}, err
	}
	p, guard, err := s.accounts.AuthenticateGuard(tok)
	if errors.Is(err, auth.ErrInvalidToken) {
		// Maybe issued elsewhere and not applied here yet.
		return s.writePrincipal(ctx, r, true)
	}
	if err != nil {
		return writer{}, err
	}
	if pid := r.Header.Get("X-Project-Id"); pid != "" && pid != p.ProjectID {
		return writer{}, newError(http.StatusForbidden, "project_mismatch", "X-Project-Id names another project than the token")
	}
	return writer{p: p, guard: guard}, nil
}

// writeDoc runs one guarded write: the rules are evaluated against the
// document as read, and the write is conditional on that same revision, so a
// concurrent change can neither slip past the rules nor be overwritten
// unseen. A lost race re-reads and re-evaluates; an If-Match loses with 412.
// When the caller was resolved from local state (w.guard), the write is also
// conditional on the documents that check and the rules read; a change to
// them makes it resolve the caller again after a strong read. It returns the
// principal the write was finally allowed for.
func (s *Server) writeDoc(ctx context.Context, r *http.Request, w writer, coll string, match *uint64,
	build func(cur *raftstore.Document) (raftstore.Op, json.RawMessage, error)) (*auth.Principal, *raftstore.TxnResult, error) {
	ctx, cancel := context.WithTimeout(ctx, s.writeTimeout)
	defer cancel()
	for attempt := 0; attempt < 5; attempt++ {
		cur, err := s.store.Get(w.p.ProjectID + "/" + coll)
		if err != nil {
			return nil, nil, err
		}
		op, conds, refusal, err := s.checkWrite(ctx, w, coll, cur, match, build)
		if err != nil {
			return nil, nil, err
		}
		if refusal != nil {
			if w.guard == nil {
				return nil, nil, refusal
			}
			// The caller, the rules and the document were read from local
			// state, which may lag behind writes acknowledged elsewhere,
			// even the caller's own (forwarded to the leader): a refusal
			// (412, a rule's 403, 404 for a delete) is decided on fresh
			// state only.
			if w, err = s.writePrincipal(ctx, r, true); err != nil {
				return nil, nil, err
			}
			continue
		}
		res, err := s.store.Txn(ctx, &raftstore.Txn{
			Time:  time.Now().UnixNano(),
			Conds: conds,
			Ops:   []raftstore.Op{op},
		})
		if err != nil {
			return nil, nil, err
		}
		if res.Err != raftstore.ErrCodeCondFailed {
			return w.p, res, opError(res, coll)
		}
		if res.Index > 0 {
			// The token, the account or the rules changed since the check:
			// resolve the caller again, on fresh state.
			if w, err = s.writePrincipal(ctx, r, true); err != nil {
				return nil, nil, err
			}
			continue
		}
		if match != nil {
			return nil, nil, newError(http.StatusPreconditionFailed, "precondition_failed", "the document changed; If-Match no longer matches")
		}
		// Someone wrote in between: catch up to that write, then decide again.
		if err := s.store.WaitApplied(ctx, res.Revision); err != nil {
			return nil, nil, err
		}
	}
	return nil, nil, newError(http.StatusConflict, "revision_mismatch", "the document kept changing during the write; retry")
}

// checkWrite decides a write on this node's applied state: the op and the
// conditions that make the decision hold at commit (the document's revision
// and, for a caller resolved from local state, what that check and the rules
// read), or the refusal that ends the write without a proposal: 412 on
// If-Match, the rules' 403, or build's error (404 for a delete, a bad field).
func (s *Server) checkWrite(ctx context.Context, w writer, coll string, cur *raftstore.Document, match *uint64,
	build func(cur *raftstore.Document) (raftstore.Op, json.RawMessage, error)) (op raftstore.Op, conds []raftstore.Cond, refusal, err error) {
	full := w.p.ProjectID + "/" + coll
	var curRev uint64
	var resource json.RawMessage
	if cur != nil {
		curRev, resource = cur.Revision, cur.Data
	}
	if match != nil && *match != curRev {
		return op, nil, preconditionFailed(*match, curRev), nil
	}
	conds = []raftstore.Cond{{Path: full, Kind: raftstore.CondRevision, Revision: curRev}}
	var rules *auth.CompiledRules
	if w.guard != nil {
		var rg raftstore.Cond
		if rules, rg, err = s.accounts.RulesGuard(w.p.ProjectID); err != nil {
			return op, nil, nil, err
		}
		conds = append(append(conds, w.guard...), rg)
	} else if rules, err = s.accounts.Rules(w.p.ProjectID); err != nil {
		return op, nil, nil, err
	}
	op, request, berr := build(cur)
	// Rules first, so that a caller without access cannot probe which
	// documents or fields exist from a 404.
	if err := s.allowWith(ctx, rules, w.p, auth.OpWrite, coll, resource, request); err != nil {
		return op, nil, err, nil
	}
	if berr != nil {
		return op, nil, berr, nil
	}
	op.Path = full
	return op, conds, nil, nil
}

// opError maps a refused op to its API error (nil when the txn committed).
func opError(res *raftstore.TxnResult, coll string) error {
	switch res.Err {
	case raftstore.ErrCodeNone:
		return nil
	case raftstore.ErrCodeNotFound:
		return newError(http.StatusNotFound, "not_found", "no document at "+coll)
	case raftstore.ErrCodeFieldNotFound:
		return &apiError{Status: http.StatusNotFound, Code: "field_not_found", Message: "the document has no such field", Field: "oldKey"}
	case raftstore.ErrCodeFieldExists:
		return &apiError{Status: http.StatusConflict, Code: "field_exists", Message: "the document already has a field named newKey", Field: "newKey"}
	case raftstore.ErrCodeTooLarge:
		return newError(http.StatusRequestEntityTooLarge, "document_too_large", fmt.Sprintf("a document may be at most %d bytes", raftstore.MaxDocumentSize))
	default:
		return newError(http.StatusBadRequest, "invalid_argument", "the write was refused as malformed")
	}
}

type postBody struct {
	Collection *string         `json:"collection"`
	Data       json.RawMessage `json:"data"`
}

func (s *Server) dbPost(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	match, err := ifMatch(r)
	if err != nil {
		return err
	}
	var body postBody
	if err := s.decodeBody(w, r, &body); err != nil {
		return err
	}
	if body.Collection == nil {
		return badField("collection", "invalid_path", "collection is required")
	}
	if err := raftstore.ValidatePath(*body.Collection); err != nil {
		return badField("collection", "invalid_path", err.Error())
	}
	data, err := compactObject(body.Data)
	if err != nil {
		return err
	}
	if len(data) > raftstore.MaxDocumentSize {
		return newError(http.StatusRequestEntityTooLarge, "document_too_large", fmt.Sprintf("a document may be at most %d bytes", raftstore.MaxDocumentSize))
	}
	wr, err := s.writePrincipal(ctx, r, false)
	if err != nil {
		return err
	}
	coll := *body.Collection
	p, res, err := s.writeDoc(ctx, r, wr, coll, match, func(*raftstore.Document) (raftstore.Op, json.RawMessage, error) {
		return raftstore.Op{Kind: raftstore.OpPut, Data: data}, data, nil
	})
	if err != nil {
		return err
	}
	status := http.StatusOK
	if res.Created[0] {
		status = http.StatusCreated
	}
	w.Header().Set("X-Revision", strconv.FormatUint(res.Revision, 10))
	writeJSON(w, status, toResponse(p.ProjectID, res.Docs[0]))
	return nil
}

// compactObject requires a JSON object and returns it compacted.
func compactObject(raw json.RawMessage) (json.RawMessage, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return nil, badField("data", "invalid_argument", "data is required and must be a JSON object")
	}
	if t[0] != '{' {
		return nil, badField("data", "invalid_argument", "data must be a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, t); err != nil {
		return nil, badField("data", "invalid_argument", "data is not valid JSON")
	}
	if err := checkValue(buf.Bytes()); err != nil {
		return nil, badField("data", "invalid_argument", "data "+err.Error())
	}
	return buf.Bytes(), nil
}

type putBody struct {
	OldKey *string         `json:"oldKey"`
	NewKey *string         `json:"newKey"`
	Value  json.RawMessage `json:"value"` // a JSON null arrives as "null"
	Type   *string         `json:"type"`
}

func (s *Server) dbPut(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	match, err := ifMatch(r)
	if err != nil {
		return err
	}
	coll, err := collectionParam(r)
	if err != nil {
		return err
	}
	var body putBody
	if err := s.decodeBody(w, r, &body); err != nil {
		return err
	}
	if body.OldKey == nil || *body.OldKey == "" {
		return badField("oldKey", "invalid_argument", "oldKey is required")
	}
	if body.NewKey == nil || *body.NewKey == "" {
		return badField("newKey", "invalid_argument", "newKey is required")
	}
	if len(*body.OldKey) > raftstore.MaxPathBytes || len(*body.NewKey) > raftstore.MaxPathBytes {
		return badField("newKey", "invalid_argument", "field names are at most 1500 bytes")
	}
	if len(body.Value) == 0 {
		return badField("value", "invalid_argument", "value is required")
	}
	value, err := checkValueType(body.Value, body.Type)
	if err != nil {
		return err
	}
	wr, err := s.writePrincipal(ctx, r, false)
	if err != nil {
		return err
	}
	oldKey, newKey := *body.OldKey, *body.NewKey
	p, res, err := s.writeDoc(ctx, r, wr, coll, match, func(cur *raftstore.Document) (raftstore.Op, json.RawMessage, error) {
		if cur == nil {
			return raftstore.Op{}, nil, newError(http.StatusNotFound, "not_found", "no document at "+coll)
		}
		op := raftstore.Op{Kind: raftstore.OpSetField, Field: oldKey, Data: value}
		if oldKey != newKey {
			op = raftstore.Op{Kind: raftstore.OpRenameField, Field: oldKey, NewField: newKey, Data: value}
		}
		after, code := raftstore.ApplyFieldOp(cur.Data, op)
		if code != raftstore.ErrCodeNone {
			return raftstore.Op{}, nil, opError(&raftstore.TxnResult{Err: code}, coll)
		}
		return op, after, nil
	})
	if err != nil {
		return err
	}
	w.Header().Set("X-Revision", strconv.FormatUint(res.Revision, 10))
	writeJSON(w, http.StatusOK, toResponse(p.ProjectID, res.Docs[0]))
	return nil
}

// checkValueType validates value against the declared type (when given) and
// returns it compacted.
func checkValueType(raw json.RawMessage, typ *string) (json.RawMessage, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, badField("value", "invalid_argument", "value is not valid JSON")
	}
	v := buf.Bytes()
	if err := checkValue(v); err != nil {
		return nil, badField("value", "invalid_argument", "value "+err.Error())
	}
	if typ == nil {
		return v, nil
	}
	mismatch := func() error {
		return badField("value", "invalid_argument", fmt.Sprintf("value is not of type %s", *typ))
	}
	first := v[0]
	switch *typ {
	case "string":
		if first != '"' {
			return nil, mismatch()
		}
	case "number":
		if first != '-' && (first < '0' || first > '9') {
			return nil, mismatch()
		}
	case "integer":
		if first != '-' && (first < '0' || first > '9') {
			return nil, mismatch()
		}
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil || f != float64(int64(f)) || bytes.ContainsAny(v, ".eE") {
			return nil, mismatch()
		}
	case "boolean":
		if string(v) != "true" && string(v) != "false" {
			return nil, mismatch()
		}
	case "object":
		if first != '{' {
			return nil, mismatch()
		}
	case "array":
		if first != '[' {
			return nil, mismatch()
		}
	case "null":
		if string(v) != "null" {
			return nil, mismatch()
		}
	case "timestamp":
		var ts string
		if first != '"' || json.Unmarshal(v, &ts) != nil {
			return nil, mismatch()
		}
		if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
			return nil, badField("value", "invalid_argument", "a timestamp must be an RFC 3339 string")
		}
	default:
		return nil, badField("type", "invalid_argument", "type must be one of string, number, integer, boolean, object, array, null, timestamp")
	}
	return v, nil
}

type deleteResponse struct {
	Deleted  bool   `json:"deleted"`
	Revision uint64 `json:"revision"`
}

func (s *Server) dbDelete(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	match, err := ifMatch(r)
	if err != nil {
		return err
	}
	coll, err := collectionParam(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	field, hasField := q.Get("field"), q.Has("field")
	if hasField && field == "" {
		return badField("field", "invalid_argument", "field must not be empty")
	}
	wr, err := s.writePrincipal(ctx, r, false)
	if err != nil {
		return err
	}
	p, res, err := s.writeDoc(ctx, r, wr, coll, match, func(cur *raftstore.Document) (raftstore.Op, json.RawMessage, error) {
		if cur == nil {
			return raftstore.Op{}, nil, newError(http.StatusNotFound, "not_found", "no document at "+coll)
		}
		if !hasField {
			return raftstore.Op{Kind: raftstore.OpDelete}, nil, nil
		}
		op := raftstore.Op{Kind: raftstore.OpDeleteField, Field: field}
		after, code := raftstore.ApplyFieldOp(cur.Data, op)
		if code == raftstore.ErrCodeFieldNotFound {
			return raftstore.Op{}, nil, &apiError{Status: http.StatusNotFound, Code: "field_not_found", Message: "the document has no field " + strconv.Quote(field), Field: "field"}
		}
		if code != raftstore.ErrCodeNone {
			return raftstore.Op{}, nil, opError(&raftstore.TxnResult{Err: code}, coll)
		}
		return op, after, nil
	})
	if err != nil {
		return err
	}
	w.Header().Set("X-Revision", strconv.FormatUint(res.Revision, 10))
	if !hasField {
		writeJSON(w, http.StatusOK, deleteResponse{Deleted: true, Revision: res.Revision})
		return nil
	}
	writeJSON(w, http.StatusOK, toResponse(p.ProjectID, res.Docs[0]))
	return nil
}

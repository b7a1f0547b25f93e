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
	"github.com/edgebase/edgebase/keys"
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
		Collection: strings.TrimPrefix(d.Path, keys.Doc(pid, "")),
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

// principal resolves the bearer token, then syncs this node to the wanted
// consistency. The token is checked first, on local state and, when it is
// unknown there (maybe issued elsewhere a moment ago), after a strong sync:
// a bogus token is 401 at once, never a wait for X-Min-Revision. After the
// sync the token is resolved again on that state, so a token revoked
// anywhere before a strong read is refused by it. When the client sends
// X-Project-Id / X-API-Key they must agree with the token.
func (s *Server) principal(ctx context.Context, r *http.Request, c raftstore.Consistency, minRev uint64) (*auth.Principal, error) {
	tok := bearer(r)
	if tok == "" {
		return nil, auth.ErrMissingToken
	}
	// The state the token is judged on: whatever is applied after this
	// point (a logout the sync below waits for) makes it judged again.
	seen := s.cluster.AppliedIndex()
	p, err := s.accounts.Authenticate(tok)
	if errors.Is(err, auth.ErrInvalidToken) {
		if err := s.waitRead(ctx, raftstore.Strong, 0); err != nil {
			return nil, err
		}
		p, err = s.accounts.Authenticate(tok)
	}
	if err != nil {
		return nil, err
	}
	if err := s.waitRead(ctx, c, minRev); err != nil {
		return nil, err
	}
	if s.cluster.AppliedIndex() != seen {
		if p, err = s.accounts.Authenticate(tok); err != nil {
			return nil, err
		}
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

// allow evaluates the project's rules; a denial or an evaluation error is 403.
func (s *Server) allow(ctx context.Context, p *auth.Principal, op auth.Op, path string, resource, request json.RawMessage) error {
	rules, err := s.accounts.Rules(p.ProjectID)
	if err != nil {
		return err
	}
	return s.allowWith(ctx, rules, p, op, path, resource, request)
}

func (s *Server) allowWith(ctx context.Context, rules *auth.CompiledRules, p *auth.Principal, op auth.Op, path string, resource, request json.RawMessage) error {
	ok, err := rules.Allow(ctx, op, auth.RuleInput{Path: path, Auth: p.AuthInfo(), Resource: resource, Request: request})
	if err != nil {
		s.logger.Debug("rule evaluation failed", "request_id", requestID(ctx), "err", err)
	}
	if !ok {
		return newError(http.StatusForbidden, "forbidden", "the access rules do not allow this "+op.String()+" of "+path)
	}
	return nil
}

func (s *Server) handleDB(w http.ResponseWriter, r *http.Request) {
	allowed, hint, ok := dbParams(r.Method)
	err := checkParams(r, hint, allowed...)
	switch {
	case !ok:
		err = methodNotAllowed("GET", "POST", "PUT", "DELETE")
	case err != nil:
	case r.Method == http.MethodGet:
		err = s.dbGet(w, r)
	case r.Method == http.MethodPost:
		err = s.dbPost(w, r)
	case r.Method == http.MethodPut:
		err = s.dbPut(w, r)
	case r.Method == http.MethodDelete:
		err = s.dbDelete(w, r)
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
	full := keys.Doc(p.ProjectID, coll)
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

// Listing limits: the bytes of documents a page holds at most (as the store
// does), and how many children one request examines at most in search of
// ones the caller may read.
const (
	listMaxBytes = 8 << 20
	listScanMax  = 10000
)

// dbList returns the direct children of coll that the caller may read,
// ordered by key. Listing needs read access to coll itself, and each child
// is judged by the read rule of its own path and its data; when the rules
// decide every path under coll from the path alone, no child is judged
// one by one. A page is filled with up to limit readable children,
// examining at most listScanMax; nextPageToken continues after the last
// child returned (or, when a page examined listScanMax children without
// finding one to return, after the last one examined).
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
	ctx := r.Context()
	rules, err := s.accounts.Rules(p.ProjectID)
	if err != nil {
		return err
	}
	if err := s.allowWith(ctx, rules, p, auth.OpRead, coll, nil, nil); err != nil {
		return err
	}
	who := p.AuthInfo()
	scope := rules.ReadScope(ctx, coll, true, who)
	parent := keys.Doc(p.ProjectID, coll)
	out := listResponse{Documents: make([]docResponse, 0, min(limit, 64))}
	cur, lastShown, next := after, "", ""
	size, examined := 0, 0
scan:
	for {
		batch := limit - len(out.Documents)
		if examined > 0 {
			batch = max(batch, 100)
		}
		batch = min(batch, listScanMax-examined)
		docs, more, err := s.store.List(parent, cur, batch)
		if err != nil {
			return err
		}
		for i, d := range docs {
			examined++
			cur = d.Path[len(parent)+1:]
			if scope != auth.ReadAll {
				in := auth.RuleInput{Path: coll + "/" + cur, Auth: who, Resource: d.Data}
				if scope == auth.ReadByPath {
					in.Resource = nil // no rule there reads it: not decoded for nothing
				}
				ok, err := rules.Allow(ctx, auth.OpRead, in)
				if err != nil {
					s.logger.Debug("rule evaluation failed", "request_id", requestID(ctx), "err", err)
				}
				if !ok {
					continue
				}
			}
			out.Documents = append(out.Documents, toResponse(p.ProjectID, d))
			lastShown = cur
			size += len(d.Data)
			if len(out.Documents) == limit || size >= listMaxBytes {
				if i < len(docs)-1 || more != "" {
					next = cur
				}
				break scan
			}
		}
		switch {
		case more == "":
			break scan // the end
		case examined >= listScanMax:
			next = cur
			if lastShown != "" {
				next = lastShown
			}
			break scan
		}
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

// writeCaller resolves the caller of a write to its project, from what this
// node remembers of the token or its local state: no strong read (a quorum
// round trip) on the write's path. That answer only places the write in the
// caller's project; whether the caller may write at all (the session, its
// account, the role, the access rules) is decided in Apply, against the
// state at the write's commit (auth.Decider). A token unknown here is looked
// up again after a strong read, since it may have been issued elsewhere.
//
// An X-API-Key is checked on the same local state, as a local read checks
// it, and again after a strong read when it is unknown here (a key created
// elsewhere a moment ago). So a write at an edge costs one round trip to the
// leader, not two; the price is that a key deleted elsewhere is still taken
// here until this node applies the deletion (the replication delay; at most
// raftstore.MaxLocalStaleness, past which waitRead falls back to a strong
// read). The key only names the project: the write itself is still judged
// in Apply by the caller's session, account and the access rules.
func (s *Server) writeCaller(ctx context.Context, r *http.Request) (*auth.Principal, error) {
	tok := bearer(r)
	if tok == "" {
		return nil, auth.ErrMissingToken
	}
	if err := s.waitRead(ctx, raftstore.Local, 0); err != nil {
		return nil, err
	}
	p, err := s.accounts.Caller(tok)
	if errors.Is(err, auth.ErrInvalidToken) {
		// Maybe issued elsewhere and not applied here yet.
		return s.principal(ctx, r, raftstore.Strong, 0)
	}
	if err != nil {
		return nil, err
	}
	if pid := r.Header.Get("X-Project-Id"); pid != "" && pid != p.ProjectID {
		return nil, newError(http.StatusForbidden, "project_mismatch", "X-Project-Id names another project than the token")
	}
	if key := r.Header.Get("X-API-Key"); key != "" {
		if err := s.accounts.CheckAPIKey(p.ProjectID, key); err != nil {
			if !errors.Is(err, auth.ErrInvalidAPIKey) {
				return nil, err
			}
			// Maybe created elsewhere and not applied here yet.
			return s.principal(ctx, r, raftstore.Strong, 0)
		}
	}
	return p, nil
}

// commit proposes ops for the caller p and maps a refusal decided in
// Apply to its API error; field names the request field of op i (nil: none).
func (s *Server) commit(ctx context.Context, p *auth.Principal, ops []raftstore.Op, field func(i int) string) (*raftstore.TxnResult, error) {
	if p.Session == "" {
		// Never propose a caller's write without its caller: that would
		// be a system write, judged by nobody.
		return nil, auth.ErrInvalidToken
	}
	ctx, cancel := context.WithTimeout(ctx, s.writeTimeout)
	defer cancel()
	res, err := s.store.Txn(ctx, &raftstore.Txn{Time: time.Now().UnixNano(), Caller: p.Session, Ops: ops})
	if err != nil {
		return nil, err
	}
	if res.OK() {
		return res, nil
	}
	var where string
	if field != nil {
		where = field(res.Index)
	}
	coll, _ := keys.Rel(p.ProjectID, ops[min(res.Index, len(ops)-1)].Path)
	return nil, opError(res, coll, where)
}

// opError maps a refused txn to its API error: coll is the document of the
// failing op, field the request field to name (empty: the error's own).
func opError(res *raftstore.TxnResult, coll, field string) error {
	var ae *apiError
	switch res.Err {
	case raftstore.ErrCodeNone:
		return nil
	case raftstore.ErrCodeForbidden:
		ae = newError(http.StatusForbidden, "forbidden", "the access rules do not allow this write of "+coll)
	case raftstore.ErrCodeUnauthenticated, raftstore.ErrCodeLastOwner:
		ae = errorFor(auth.DecidedRefusal(res.Err))
	case raftstore.ErrCodeCondFailed:
		ae = newError(http.StatusPreconditionFailed, "precondition_failed", "the revision of "+coll+" does not match If-Match")
	case raftstore.ErrCodeNotFound:
		ae = newError(http.StatusNotFound, "not_found", "no document at "+coll)
	case raftstore.ErrCodeFieldNotFound:
		ae = &apiError{Status: http.StatusNotFound, Code: "field_not_found", Message: "the document has no such field", Field: "oldKey"}
	case raftstore.ErrCodeFieldExists:
		ae = &apiError{Status: http.StatusConflict, Code: "field_exists", Message: "the document already has a field named newKey", Field: "newKey"}
	case raftstore.ErrCodeFieldType:
		ae = &apiError{Status: http.StatusBadRequest, Code: "invalid_argument", Message: "the field of " + coll + " holds a value of another type", Field: "field"}
	case raftstore.ErrCodeInvalidIndexes:
		ae = &apiError{Status: http.StatusBadRequest, Code: "invalid_argument", Message: `the index list was refused where it commits: it is not a valid {"indexes":[...]}`, Field: "indexes"}
	case raftstore.ErrCodeTooLarge:
		ae = newError(http.StatusRequestEntityTooLarge, "document_too_large", fmt.Sprintf("a document may be at most %d bytes", raftstore.MaxDocumentSize))
	case raftstore.ErrCodeIndexEntryTooLarge:
		ae = &apiError{Status: http.StatusBadRequest, Code: "invalid_argument", Message: "the document's values in the fields of a declared index of " + coll + " are longer than an index entry may be (16 KiB)", Field: "data"}
	default:
		ae = newError(http.StatusBadRequest, "invalid_argument", "the write was refused as malformed")
	}
	if field != "" {
		ae.Field = field
	}
	return ae
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
	p, err := s.writeCaller(ctx, r)
	if err != nil {
		return err
	}
	res, err := s.commit(ctx, p, []raftstore.Op{{Kind: raftstore.OpPut, Path: keys.Doc(p.ProjectID, *body.Collection), Data: data, Match: match}}, nil)
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
	p, err := s.writeCaller(ctx, r)
	if err != nil {
		return err
	}
	res, err := s.commit(ctx, p, []raftstore.Op{updateOp(keys.Doc(p.ProjectID, coll), *body.OldKey, *body.NewKey, value, match)}, nil)
	if err != nil {
		return err
	}
	w.Header().Set("X-Revision", strconv.FormatUint(res.Revision, 10))
	writeJSON(w, http.StatusOK, toResponse(p.ProjectID, res.Docs[0]))
	return nil
}

// updateOp is the op of a field update (PUT /api/db): set oldKey to value,
// renaming it to newKey when they differ.
func updateOp(path, oldKey, newKey string, value json.RawMessage, match *uint64) raftstore.Op {
	if oldKey != newKey {
		return raftstore.Op{Kind: raftstore.OpRenameField, Path: path, Field: oldKey, NewField: newKey, Data: value, Match: match}
	}
	return raftstore.Op{Kind: raftstore.OpSetField, Path: path, Field: oldKey, Data: value, Match: match}
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
	p, err := s.writeCaller(ctx, r)
	if err != nil {
		return err
	}
	op := raftstore.Op{Kind: raftstore.OpDelete, Path: keys.Doc(p.ProjectID, coll), Match: match}
	if hasField {
		op = raftstore.Op{Kind: raftstore.OpDeleteField, Path: op.Path, Field: field, Match: match}
	}
	res, err := s.commit(ctx, p, []raftstore.Op{op}, nil)
	if ae, ok := err.(*apiError); ok && ae.Code == "field_not_found" {
		ae.Field, ae.Message = "field", "the document has no field "+strconv.Quote(field)
	}
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

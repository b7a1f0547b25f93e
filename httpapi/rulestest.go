package httpapi

import (
	"bytes"
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

// Testing rules: POST /api/db/rules/test evaluates one read or write of a
// path by a user of the project (or an unauthenticated caller) against the
// rules in force or the rules given, without saving anything, and says
// which rule decided. It decides with auth.CompiledRules.Explain, which is
// Allow's own code, on the input the real paths build: a read as GET
// /api/db judges it (resource.data the stored document, request.time now),
// a write as the Decider judges it at the commit (request.data the
// document as it would be stored, absent for a delete; request.time now).

type rulesTestBody struct {
	Op     *string         `json:"op"`
	Path   *string         `json:"path"`
	UserID *string         `json:"userId"`
	Data   json.RawMessage `json:"data"`
	Rules  *[]auth.Rule    `json:"rules"`
}

type ruleAuthView struct {
	UID   string `json:"uid"`
	Role  string `json:"role"`
	Email string `json:"email"`
}

type rulesTestResponse struct {
	Allowed    bool          `json:"allowed"`
	Rule       int           `json:"rule"`
	Match      string        `json:"match"`
	Expression string        `json:"expression"`
	Auth       *ruleAuthView `json:"auth"`
	Error      string        `json:"error,omitempty"`
}

var errRulesTestOwnerOnly = newError(http.StatusForbidden, "forbidden", "only an owner may test the access rules")

func (s *Server) handleRulesTest(w http.ResponseWriter, r *http.Request) {
	if err := s.rulesTest(w, r); err != nil {
		s.writeError(w, r, err)
	}
}

func (s *Server) rulesTest(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		return methodNotAllowed("POST")
	}
	if err := checkParams(r, "; the test goes in the request body", "consistency"); err != nil {
		return err
	}
	c, minRev, err := readOptions(r)
	if err != nil {
		return err
	}
	raw, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var body rulesTestBody
	if err := decodeStrict(raw, &body); err != nil {
		return err
	}
	var op auth.Op
	switch {
	case body.Op == nil:
		return badField("op", "invalid_argument", `op is required: "read" or "write"`)
	case *body.Op == "read":
		op = auth.OpRead
	case *body.Op == "write":
		op = auth.OpWrite
	default:
		return badField("op", "invalid_argument", `op must be "read" or "write"`)
	}
	if body.Path == nil {
		return badField("path", "invalid_path", "path is required")
	}
	path := *body.Path
	if err := raftstore.ValidatePath(path); err != nil {
		return badField("path", "invalid_path", strings.Replace(err.Error(), "collection", "path", 1))
	}
	var request json.RawMessage
	if t := bytes.TrimSpace(body.Data); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		if op == auth.OpRead {
			return badField("data", "invalid_argument", "data is the written document: only a write has it")
		}
		if request, err = compactObject(t); err != nil {
			return err
		}
		if len(request) > raftstore.MaxDocumentSize {
			return newError(http.StatusRequestEntityTooLarge, "document_too_large", fmt.Sprintf("a document may be at most %d bytes", raftstore.MaxDocumentSize))
		}
	}
	ctx := r.Context()
	p, err := s.principal(ctx, r, c, minRev)
	if err != nil {
		return err
	}
	if p.Role != auth.RoleOwner {
		return errRulesTestOwnerOnly
	}
	var rules *auth.CompiledRules
	if body.Rules != nil {
		if rules, err = auth.CompileRules(auth.RuleSet{Rules: *body.Rules}); err != nil {
			return err
		}
	} else if rules, err = s.accounts.Rules(p.ProjectID); err != nil {
		return err
	}
	in := auth.RuleInput{Path: path}
	out := rulesTestResponse{}
	if body.UserID != nil && *body.UserID != "" {
		u, err := s.accounts.GetUser(p, *body.UserID)
		if errors.Is(err, auth.ErrUserNotFound) {
			return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "the project has no user with id " + strconv.Quote(*body.UserID), Field: "userId"}
		}
		if err != nil {
			return err
		}
		in.Auth = u.AuthInfo()
		out.Auth = &ruleAuthView{UID: in.Auth.UID, Role: in.Auth.Role, Email: in.Auth.Email}
	}
	doc, err := s.store.Get(keys.Doc(p.ProjectID, path))
	if err != nil {
		return err
	}
	if doc != nil {
		in.Resource = doc.Data
	}
	if op == auth.OpWrite {
		in.Request = request
		in.Time = time.Now().UTC()
	}
	ex := rules.Explain(ctx, op, in)
	out.Allowed, out.Rule, out.Match, out.Expression, out.Error = ex.Allowed, ex.Rule, ex.Match, ex.Expression, ex.ErrorText()
	writeJSON(w, http.StatusOK, out)
	return nil
}

// decodeStrict decodes a JSON object into v, refusing a member v does not
// have (400 naming it) and naming the field of a type error.
func decodeStrict(body []byte, v any) error {
	if !json.Valid(body) {
		return errNotJSON
	}
	if t := bytes.TrimSpace(body); t[0] != '{' {
		return newError(http.StatusBadRequest, "invalid_argument", "the request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		return nil
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if n, uerr := strconv.Unquote(name); uerr == nil {
			name = n
		}
		return badField(name, "invalid_argument", fmt.Sprintf("unknown member %q", name))
	}
	if err := decodeJSON(body, v); err != nil {
		return err
	}
	return newError(http.StatusBadRequest, "invalid_argument", "the request body is malformed: "+err.Error())
}

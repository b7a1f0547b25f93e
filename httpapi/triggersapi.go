package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/triggers"
)

// Triggers is the owner API of triggers (triggers.Service).
type Triggers interface {
	Put(ctx context.Context, session, pid, name string, d *triggers.Definition) (*triggers.PutResult, error)
	Get(pid, name string) (*triggers.View, error)
	List(pid string) ([]triggers.View, error)
	Delete(ctx context.Context, session, pid, name string) (uint64, error)
	DeadLetters(pid, name string, limit int, pageToken string) (*triggers.DeadPage, error)
	Replay(ctx context.Context, session, pid, name string, ids []string) (*triggers.Replayed, error)
}

// A project's triggers (owners only): GET /api/triggers, GET, PUT and
// DELETE /api/triggers/{name}, GET /api/triggers/{name}/dead and POST
// /api/triggers/{name}/replay. The caller is checked before any body is
// read: the project key after a strong sync, then an owner's token.
func (s *Server) triggerRoutes() {
	h := func(methods, params []string, fn func(w http.ResponseWriter, r *http.Request, p *auth.Principal) error) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if err := s.triggerCall(w, r, methods, params, fn); err != nil {
				s.writeError(w, r, err)
			}
		}
	}
	s.mux.HandleFunc("/api/triggers", h([]string{http.MethodGet}, nil, s.triggersList))
	s.mux.HandleFunc("/api/triggers/{name}", h([]string{http.MethodGet, http.MethodPut, http.MethodDelete}, nil, s.triggerOne))
	s.mux.HandleFunc("/api/triggers/{name}/dead", h([]string{http.MethodGet}, []string{"limit", "pageToken"}, s.triggerDead))
	s.mux.HandleFunc("/api/triggers/{name}/replay", h([]string{http.MethodPost}, nil, s.triggerReplay))
}

var errTriggersOwnerOnly = newError(http.StatusForbidden, "forbidden", "only an owner may read or change the project's triggers")

func (s *Server) triggerCall(w http.ResponseWriter, r *http.Request, methods, params []string, fn func(http.ResponseWriter, *http.Request, *auth.Principal) error) error {
	if !slices.Contains(methods, r.Method) {
		return methodNotAllowed(methods...)
	}
	if err := checkParams(r, "", params...); err != nil {
		return err
	}
	if name := r.PathValue("name"); name != "" && !triggers.ValidName(name) {
		return badField("name", "invalid_argument", "a trigger's name is 1 to "+strconv.Itoa(triggers.MaxNameLen)+" letters, digits, '_' or '-', starting with a letter or digit")
	}
	ctx, cancel := s.writeCtx(r)
	defer cancel()
	r = r.WithContext(ctx)
	p, err := s.projectCaller(ctx, r)
	if err != nil {
		return err
	}
	if p.Role != auth.RoleOwner {
		return errTriggersOwnerOnly
	}
	return fn(w, r, p)
}

type triggersResponse struct {
	Triggers []triggers.View `json:"triggers"`
}

func (s *Server) triggersList(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	list, err := s.triggers.List(p.ProjectID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, triggersResponse{Triggers: list})
	return nil
}

func (s *Server) triggerOne(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	name := r.PathValue("name")
	switch r.Method {
	case http.MethodGet:
		v, err := s.triggers.Get(p.ProjectID, name)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, v)
		return nil
	case http.MethodDelete:
		rev, err := s.triggers.Delete(r.Context(), p.Session, p.ProjectID, name)
		if err != nil {
			return err
		}
		return writeCommitted(w, http.StatusOK, rev, map[string]any{"deleted": true, "revision": rev})
	}
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	if !json.Valid(body) {
		return errNotJSON
	}
	d, err := triggers.ParseDefinition(body)
	if err != nil {
		return err
	}
	res, err := s.triggers.Put(r.Context(), p.Session, p.ProjectID, name, d)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if res.Created {
		status = http.StatusCreated
	}
	return writeCommitted(w, status, res.Revision, res.Trigger)
}

func (s *Server) triggerDead(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	q := r.URL.Query()
	limit := 0
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > triggers.MaxDeadPage || len(v) > 1 {
			return badField("limit", "invalid_argument", "limit must be a whole number from 1 to "+strconv.Itoa(triggers.MaxDeadPage))
		}
		limit = n
	}
	page, err := s.triggers.DeadLetters(p.ProjectID, r.PathValue("name"), limit, q.Get("pageToken"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) triggerReplay(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	var ids []string
	if r.ContentLength != 0 || r.Header.Get("Content-Type") != "" {
		body, err := s.readBody(w, r)
		if err != nil {
			return err
		}
		if ids, err = replayIDs(body); err != nil {
			return err
		}
	}
	out, err := s.triggers.Replay(r.Context(), p.Session, p.ProjectID, r.PathValue("name"), ids)
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusOK, out.Revision, out)
}

// replayIDs decodes {"ids":[...]} (ids optional), refusing other members.
func replayIDs(body []byte) ([]string, error) {
	if !json.Valid(body) {
		return nil, errNotJSON
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		return nil, newError(http.StatusBadRequest, "invalid_argument", "the request body must be a JSON object")
	}
	for k := range obj {
		if k != "ids" {
			return nil, badField(k, "invalid_argument", "unknown member "+k+" (the body is {\"ids\":[...]})")
		}
	}
	raw, ok := obj["ids"]
	if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	var ids []string
	if err := json.Unmarshal(raw, &ids); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, badField("ids", "invalid_argument", "ids must be an array of dead letter ids (strings)")
		}
		return nil, errNotJSON
	}
	return ids, nil
}

package httpapi

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/query"
	"github.com/edgebase/edgebase/raftstore"
)

// indexView is a declared index as GET and PUT /api/db/indexes show it.
type indexView struct {
	ID              string             `json:"id"`
	Collection      string             `json:"collection"`
	CollectionGroup bool               `json:"collectionGroup,omitempty"`
	Fields          []query.IndexField `json:"fields"`
	State           string             `json:"state"` // "building" | "ready"
}

type indexesResponse struct {
	Indexes []indexView `json:"indexes"`
}

// indexesDoc is the stored document of a project's declared indexes.
type indexesDoc struct {
	Indexes []query.Index `json:"indexes"`
}

// handleIndexes serves GET and PUT /api/db/indexes, for owners only: the
// project's declared indexes and whether each is built on this node, and
// replacing that list.
func (s *Server) handleIndexes(w http.ResponseWriter, r *http.Request) {
	if err := s.indexesAction(w, r); err != nil {
		s.writeError(w, r, err)
	}
}

var errIndexesOwnerOnly = newError(http.StatusForbidden, "forbidden", "only an owner may read or change the indexes")

func (s *Server) indexesAction(w http.ResponseWriter, r *http.Request) error {
	switch r.Method {
	case http.MethodGet:
		return s.indexesGet(w, r)
	case http.MethodPut:
		return s.indexesPut(w, r)
	}
	return methodNotAllowed("GET", "PUT")
}

func (s *Server) indexesGet(w http.ResponseWriter, r *http.Request) error {
	if err := checkParams(r, "", "consistency"); err != nil {
		return err
	}
	c, minRev, err := readOptions(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	p, err := s.principal(ctx, r, c, minRev)
	if err != nil {
		return err
	}
	if p.Role != auth.RoleOwner {
		return errIndexesOwnerOnly
	}
	states, err := s.store.Indexes(p.ProjectID)
	if err != nil {
		return err
	}
	out := indexesResponse{Indexes: make([]indexView, 0, len(states))}
	for _, st := range states {
		out.Indexes = append(out.Indexes, viewOf(st.Index, st.ID, st.State))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// indexesPut replaces the project's declared indexes with the body's
// (validated here and again in Apply) and answers each one's state right
// after the commit: an index new to the project is "building" until this
// node has backfilled it.
func (s *Server) indexesPut(w http.ResponseWriter, r *http.Request) error {
	if err := checkParams(r, ""); err != nil {
		return err
	}
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	if !json.Valid(body) {
		return errNotJSON
	}
	list, err := query.ParseIndexes(body)
	if err != nil {
		return queryError(err)
	}
	if list == nil {
		list = []query.Index{}
	}
	data, err := json.Marshal(indexesDoc{Indexes: list})
	if err != nil {
		return err
	}
	ctx := r.Context()
	p, err := s.principal(ctx, r, raftstore.Strong, 0)
	if err != nil {
		return err
	}
	if p.Role != auth.RoleOwner {
		return errIndexesOwnerOnly
	}
	res, err := s.commit(ctx, p, []raftstore.Op{{Kind: raftstore.OpPut, Path: keys.Indexes(p.ProjectID), Data: data}}, nil)
	if err != nil {
		return err
	}
	states, err := s.indexStatesAt(ctx, p.ProjectID, res.Revision)
	if err != nil {
		return err
	}
	out := indexesResponse{Indexes: make([]indexView, 0, len(list))}
	for _, ix := range list {
		id := ix.ID()
		state := "building"
		if st, ok := states[id]; ok {
			state = st
		}
		out.Indexes = append(out.Indexes, viewOf(ix, id, state))
	}
	return writeCommitted(w, http.StatusOK, res.Revision, out)
}

// indexStatesAt waits until this node has applied rev and returns the
// state of each of the project's declared indexes, by id.
func (s *Server) indexStatesAt(ctx context.Context, pid string, rev uint64) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.readTimeout)
	defer cancel()
	if err := s.store.WaitApplied(ctx, rev); err != nil {
		return nil, err
	}
	states, err := s.store.Indexes(pid)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(states))
	for _, st := range states {
		out[st.ID] = st.State
	}
	return out, nil
}

func viewOf(ix query.Index, id, state string) indexView {
	fields := ix.Fields
	if fields == nil {
		fields = []query.IndexField{}
	}
	return indexView{ID: id, Collection: ix.Collection, CollectionGroup: ix.CollectionGroup, Fields: fields, State: state}
}

package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/query"
	"github.com/edgebase/edgebase/raftstore"
)

// indexBuildingRetry is the Retry-After (seconds) of a query refused
// because the index that would serve it is still being built here.
const indexBuildingRetry = 2

var errNotJSON = newError(http.StatusBadRequest, "invalid_json", "the request body is not valid JSON")

// queryResponse is the answer of POST /api/db/query without count.
type queryResponse struct {
	Documents  []docResponse `json:"documents"`
	NextCursor string        `json:"nextCursor,omitempty"`
}

// countResponse is the answer of POST /api/db/query with "count": true.
type countResponse struct {
	Count int `json:"count"`
}

// handleQuery serves POST /api/db/query: the documents of a collection (or
// of every collection of that name, for a collection group) that match the
// query's filters and that the caller may read, in the query's order, a
// page at a time.
func (s *Server) handleQuery(w http.ResponseWriter, r *http.Request) {
	if err := s.dbQuery(w, r); err != nil {
		s.writeError(w, r, err)
	}
}

func (s *Server) dbQuery(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		return methodNotAllowed("POST")
	}
	if err := checkParams(r, "; the query goes in the request body", "consistency"); err != nil {
		return err
	}
	c, minRev, err := readOptions(r)
	if err != nil {
		return err
	}
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	if !json.Valid(body) {
		return errNotJSON
	}
	cq, err := query.Parse(body)
	if err != nil {
		return queryError(err)
	}
	if err := raftstore.ValidatePath(cq.Q.Collection); err != nil {
		return badField("collection", "invalid_path", err.Error())
	}
	ctx := r.Context()
	p, err := s.principal(ctx, r, c, minRev)
	if err != nil {
		return err
	}
	rules, err := s.accounts.Rules(p.ProjectID)
	if err != nil {
		return err
	}
	allow, none := s.queryAllow(r, rules, p, cq)
	var res *raftstore.QueryResult
	if none {
		// The rules let the caller read nothing there: the answer is
		// empty whatever is stored (the cursor is still checked).
		if _, err := cq.After(); err != nil {
			return queryError(err)
		}
		res = &raftstore.QueryResult{Plan: "none"}
	} else {
		qctx, cancel := context.WithTimeout(ctx, s.readTimeout)
		defer cancel()
		res, err = s.store.Query(qctx, raftstore.QueryRequest{ProjectID: p.ProjectID, Query: cq, ScanLimit: s.queryScanLimit, Allow: allow})
		if err != nil {
			return queryError(err)
		}
	}
	s.logger.Debug("query", "request_id", requestID(ctx), "plan", res.Plan, "documents", len(res.Documents), "count", cq.Q.Count)
	if cq.Q.Count {
		writeJSON(w, http.StatusOK, countResponse{Count: res.Count})
		return nil
	}
	out := queryResponse{Documents: make([]docResponse, 0, len(res.Documents)), NextCursor: res.NextCursor}
	for _, d := range res.Documents {
		dr := toResponse(p.ProjectID, d)
		dr.Data = cq.Project(d.Data)
		out.Documents = append(out.Documents, dr)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// queryAllow is the read-rule filter of a query for caller p: nil when the
// rules let p read every document the query can reach, and none when they
// let p read none of them. A collection query asks the rules once for the
// whole collection and judges documents one by one only when the answer
// depends on the path or the data; a collection group is judged per
// document, with its data.
func (s *Server) queryAllow(r *http.Request, rules *auth.CompiledRules, p *auth.Principal, cq *query.Compiled) (allow func(*raftstore.Document) bool, none bool) {
	ctx := r.Context()
	who := p.AuthInfo()
	byData := true
	if !cq.Q.CollectionGroup {
		switch rules.ReadScope(ctx, cq.Q.Collection, true, who) {
		case auth.ReadAll:
			return nil, false
		case auth.ReadNone:
			return nil, true
		case auth.ReadByPath:
			byData = false // no rule there reads the data: not decoded for nothing
		}
	}
	return func(d *raftstore.Document) bool {
		rel, ok := keys.Rel(p.ProjectID, d.Path)
		if !ok {
			return false
		}
		in := auth.RuleInput{Path: rel, Auth: who}
		if byData {
			in.Resource = d.Data
		}
		ok, err := rules.Allow(ctx, auth.OpRead, in)
		if err != nil {
			s.logger.Debug("rule evaluation failed", "request_id", requestID(ctx), "err", err)
		}
		return ok
	}, false
}

// queryError maps what the query language and the executor refuse to the
// API's errors; anything else goes to errorFor.
func queryError(err error) error {
	var qe *query.Error
	if errors.As(err, &qe) {
		return badField(qe.Field, qe.Code, qe.Message)
	}
	var ire *raftstore.IndexRequiredError
	if errors.As(err, &ire) {
		return indexRequired(ire)
	}
	return err
}

// indexRequired is the answer to a query that no index serves and that
// would examine more than the scan limit: it names the index to declare,
// as the JSON PUT /api/db/indexes takes, or says that no index can serve
// the query as it is.
func indexRequired(e *raftstore.IndexRequiredError) *apiError {
	if len(e.Index.Fields) == 0 {
		return newError(http.StatusBadRequest, "index_required",
			fmt.Sprintf("this query would examine more than %d documents and no index can serve it: it has neither an == filter nor an orderBy (or more of them than an index may have fields); filter with == or order by a field an index can hold", e.ScanLimit))
	}
	ix := e.Index
	ix.Fields = slices.Clone(ix.Fields)
	for i := range ix.Fields {
		if ix.Fields[i].Direction == "asc" {
			ix.Fields[i].Direction = "" // the default, left out as clients write it
		}
	}
	def, err := json.Marshal(ix)
	if err != nil {
		def = []byte(fmt.Sprintf("%+v", ix))
	}
	if e.Building {
		return &apiError{Status: http.StatusServiceUnavailable, Code: "index_building", RetryAfter: indexBuildingRetry,
			Message: fmt.Sprintf("the index %s that serves this query is still being built on this node; retry, or poll GET /api/db/indexes until it is ready", def)}
	}
	return newError(http.StatusBadRequest, "index_required",
		fmt.Sprintf("this query would examine more than %d documents without an index: create the index %s with PUT /api/db/indexes (which replaces the project's list: send it with the indexes you keep)", e.ScanLimit, def))
}

package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgebase/edgebase/raftstore"
)

// The operator's list of projects (GET /admin/projects) with each project's
// documents, their bytes and its last write. The figures come from a scan of
// the project's user documents on this node (raftstore.ProjectStats), bounded
// per request, and are cached by applied index: a list asked again before
// anything was applied costs no scan.

// Paging and bounds of GET /admin/projects.
const (
	defaultProjectPage = 50
	maxProjectPage     = 100
	// projectScanBudget bounds the documents one request scans, over all
	// its projects; projectScanEach bounds one project's share. A project
	// cut short answers "approximate": true (its counts are lower bounds).
	projectScanBudget = 200_000
	projectScanEach   = 20_000
	// maxCachedStats bounds the cache (cleared when full).
	maxCachedStats = 10_000
)

// statsCache remembers project statistics with the applied index they were
// read at.
type statsCache struct {
	mu sync.Mutex
	m  map[string]cachedStats
}

type cachedStats struct {
	st     raftstore.ProjectStats
	budget int // the budget the scan had
}

func newStatsCache() *statsCache { return &statsCache{m: map[string]cachedStats{}} }

// get returns project pid's statistics read at applied index idx with at
// least budget, if cached.
func (c *statsCache) get(pid string, idx uint64, budget int) (raftstore.ProjectStats, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[pid]
	if !ok || e.st.AppliedIndex != idx || (e.st.Approximate && e.budget < budget) {
		return raftstore.ProjectStats{}, false
	}
	return e.st, true
}

func (c *statsCache) put(pid string, st raftstore.ProjectStats, budget int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxCachedStats {
		clear(c.m)
	}
	c.m[pid] = cachedStats{st: st, budget: budget}
}

// projectEntry is one project of the list.
type projectEntry struct {
	ID          string     `json:"id"`
	Name        string     `json:"name"`
	CreatedAt   string     `json:"createdAt"`
	Documents   int        `json:"documents"`
	Bytes       int64      `json:"bytes"`
	LastWrite   *lastWrite `json:"lastWrite"`
	Approximate bool       `json:"approximate"`
}

type lastWrite struct {
	Revision uint64 `json:"revision"`
	Time     string `json:"time"`
}

// handleProjects serves /admin/projects: GET lists, POST creates.
func (s *Server) handleProjects(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		if err := s.listProjects(w, r); err != nil {
			s.writeError(w, r, err)
		}
	case http.MethodPost:
		s.handleCreateProject(w, r)
	default:
		s.writeError(w, r, methodNotAllowed("GET", "POST"))
	}
}

func (s *Server) listProjects(w http.ResponseWriter, r *http.Request) error {
	if err := checkParams(r, "", "limit", "cursor"); err != nil {
		return err
	}
	q := r.URL.Query()
	limit := defaultProjectPage
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 || n > maxProjectPage {
			return badField("limit", "invalid_argument", "limit must be an integer from 1 to "+strconv.Itoa(maxProjectPage))
		}
		limit = n
	}
	cursor := q.Get("cursor")
	if q.Has("cursor") && !validProjectCursor(cursor) {
		return badField("cursor", "invalid_argument", "cursor is not valid: pass back a nextCursor of an earlier page")
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.readTimeout)
	defer cancel()
	if err := s.store.WaitRead(ctx, raftstore.Strong, 0); err != nil {
		return err
	}
	projects, next, err := s.accounts.ListProjects(cursor, limit)
	if err != nil {
		return err
	}
	out := make([]projectEntry, 0, len(projects))
	left := projectScanBudget
	for _, p := range projects {
		e := projectEntry{ID: p.ID, Name: p.Name, CreatedAt: p.CreatedAt}
		budget := min(projectScanEach, left)
		st, ok := s.projStats.get(p.ID, s.cluster.AppliedIndex(), budget)
		if !ok && budget > 0 {
			if st, err = s.store.ProjectStats(p.ID, budget); err != nil {
				return err
			}
			left -= st.Documents
			s.projStats.put(p.ID, st, budget)
		} else if !ok {
			st = raftstore.ProjectStats{Approximate: true} // the request's budget is spent
		}
		e.Documents, e.Bytes, e.Approximate = st.Documents, st.Bytes, st.Approximate
		if st.LastRevision > 0 {
			e.LastWrite = &lastWrite{Revision: st.LastRevision, Time: time.Unix(0, st.LastWriteTime).UTC().Format(time.RFC3339Nano)}
		}
		out = append(out, e)
	}
	writeJSON(w, http.StatusOK, map[string]any{"projects": out, "nextCursor": next})
	return nil
}

// validProjectCursor accepts what a nextCursor can be: a project id (one
// path segment, not reserved).
func validProjectCursor(c string) bool {
	return c != "" && len(c) <= 200 && !strings.ContainsAny(c, "/\x00") && !strings.HasPrefix(c, "_") && raftstore.ValidatePath(c) == nil
}

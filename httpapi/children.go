package httpapi

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
)

// Browsing the tree: GET /api/db/children lists the direct child segments
// of a path (the project's root when collection is absent or ""), whether
// or not a document exists at them, for the console's data browser. Only
// an owner may browse: the listing shows every path, whatever the read
// rules say of the documents there.

const (
	childrenDefaultLimit = 100
	childrenMaxLimit     = 1000
)

type childView struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	Document bool   `json:"document"`
	Children bool   `json:"children"`
}

type childrenResponse struct {
	Children      []childView `json:"children"`
	NextPageToken string      `json:"nextPageToken,omitempty"`
}

var errChildrenOwnerOnly = newError(http.StatusForbidden, "forbidden", "only an owner may browse the tree")

func (s *Server) handleChildren(w http.ResponseWriter, r *http.Request) {
	if err := s.dbChildren(w, r); err != nil {
		s.writeError(w, r, err)
	}
}

func (s *Server) dbChildren(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return methodNotAllowed("GET", "HEAD")
	}
	if err := checkParams(r, "", "collection", "limit", "pageToken", "consistency"); err != nil {
		return err
	}
	c, minRev, err := readOptions(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	coll := q.Get("collection")
	if coll != "" {
		if err := raftstore.ValidatePath(coll); err != nil {
			return badField("collection", "invalid_path", err.Error())
		}
	}
	limit := childrenDefaultLimit
	if v := q.Get("limit"); v != "" || q.Has("limit") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > childrenMaxLimit {
			return badField("limit", "invalid_argument", "limit must be an integer from 1 to 1000")
		}
		limit = n
	}
	after := ""
	if v := q.Get("pageToken"); v != "" || q.Has("pageToken") {
		if after, err = childToken(v); err != nil {
			return err
		}
	}
	ctx := r.Context()
	p, err := s.principal(ctx, r, c, minRev)
	if err != nil {
		return err
	}
	if p.Role != auth.RoleOwner {
		return errChildrenOwnerOnly
	}
	parent := p.ProjectID
	if coll != "" {
		parent = keys.Doc(p.ProjectID, coll)
	}
	kids, next, err := s.store.Children(parent, after, limit)
	if err != nil {
		return err
	}
	out := childrenResponse{Children: make([]childView, 0, len(kids))}
	for _, k := range kids {
		path := k.Name
		if coll != "" {
			path = coll + "/" + k.Name
		}
		out.Children = append(out.Children, childView{Name: k.Name, Path: path, Document: k.Document, Children: k.Children})
	}
	if next != "" {
		out.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(next))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// childToken decodes a pageToken of /api/db/children: the last name of the
// page before, base64url, which must be a valid path segment.
func childToken(v string) (string, error) {
	bad := badField("pageToken", "invalid_argument", "pageToken is not one this server issued")
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(b) == 0 || strings.Contains(string(b), "/") || raftstore.ValidatePath(string(b)) != nil {
		return "", bad
	}
	return string(b), nil
}

package auth

import (
	"fmt"

	"github.com/edgebase/edgebase/keys"
)

// ProjectInfo is a project as the operator's list shows it.
type ProjectInfo struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	CreatedAt string `json:"createdAt"`
}

// ListProjects lists up to limit projects in id order after the project id
// after ("" = from the first), and the id to go on after ("" when done).
// The operator's call: the HTTP layer checks the admin token.
func (s *Service) ListProjects(after string, limit int) ([]ProjectInfo, string, error) {
	if limit < 1 {
		return nil, "", fmt.Errorf("list projects: limit must be positive, got %d", limit)
	}
	docs, next, err := s.store.List(keys.ProjectsDir(), after, limit)
	if err != nil {
		return nil, "", fmt.Errorf("list projects: %w", err)
	}
	out := make([]ProjectInfo, 0, len(docs))
	for _, d := range docs {
		var p project
		if err := decodeJSON(d, &p); err != nil {
			return nil, "", err
		}
		if p.ID == "" {
			p.ID = keys.Base(d.Path)
		}
		out = append(out, ProjectInfo{ID: p.ID, Name: p.Name, CreatedAt: p.CreatedAt})
	}
	return out, next, nil
}

package auth

import (
	"slices"
	"sync"

	"github.com/edgebase/edgebase/keys"
)

// CanonicalOrigins canonicalises an operator's list of origins (see
// CanonicalOrigin), dropping duplicates; the error names the bad one.
func CanonicalOrigins(list []string) ([]string, error) {
	out := make([]string, 0, len(list))
	for _, o := range list {
		c, err := CanonicalOrigin(o)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// OriginAllowed reports whether project pid lists origin (canonical, as
// CanonicalOrigin returns it), as of this node's applied state.
func (s *Service) OriginAllowed(pid, origin string) (bool, error) {
	list, err := s.Origins(pid)
	if err != nil {
		return false, err
	}
	return slices.Contains(list, origin), nil
}

// AnyProjectAllows reports whether some project of the cluster lists origin
// (canonical), as of this node's applied state. A browser's preflight names
// no project, so this is what a node can judge it by.
//
// The answer comes from an index of every project's list, rebuilt when the
// applied index moved since the last build: one listing of the projects, and
// one read per project (decoded only when its list changed). A removed
// origin stops passing as soon as the node applied the removal.
func (s *Service) AnyProjectAllows(origin string) (bool, error) {
	ix := &s.origins
	ix.mu.Lock()
	defer ix.mu.Unlock()
	// The applied index is read before the tree: the index built is at
	// least as new as the number it is remembered under.
	applied := s.store.AppliedIndex()
	if !ix.built || ix.applied != applied {
		if err := s.rebuildOrigins(ix); err != nil {
			return false, err
		}
		ix.applied, ix.built = applied, true
	}
	_, ok := ix.union[origin]
	return ok, nil
}

// originIndex is the union of every project's allowed origins (see
// AnyProjectAllows). mu is held across a rebuild, so that concurrent
// preflights share one.
type originIndex struct {
	mu       sync.Mutex
	built    bool
	applied  uint64
	projects map[string]projectOrigins // by project id
	union    map[string]struct{}
}

// projectOrigins is one project's list and the revision of the document it
// was read from.
type projectOrigins struct {
	revision uint64
	origins  []string
}

// originsPage is how many project records one listing reads.
const originsPage = 1000

func (s *Service) rebuildOrigins(ix *originIndex) error {
	projects := make(map[string]projectOrigins, len(ix.projects))
	union := map[string]struct{}{}
	after := ""
	for {
		docs, next, err := s.store.List(keys.ProjectsDir(), after, originsPage)
		if err != nil {
			return err
		}
		for _, d := range docs {
			pid := keys.Base(d.Path)
			doc, err := s.store.Get(keys.Origins(pid))
			if err != nil {
				return err
			}
			if doc == nil {
				continue
			}
			po, ok := ix.projects[pid]
			if !ok || po.revision != doc.Revision {
				var l OriginList
				if err := decodeJSON(doc, &l); err != nil {
					return err
				}
				po = projectOrigins{revision: doc.Revision, origins: l.Origins}
			}
			projects[pid] = po
			for _, o := range po.origins {
				union[o] = struct{}{}
			}
		}
		if next == "" {
			break
		}
		after = next
	}
	ix.projects, ix.union = projects, union
	return nil
}

package auth

import "github.com/edgebase/edgebase/raftstore"

// EmailOps exposes emailOps to the external tests, which inspect the
// outbox record it writes.
func (s *Service) EmailOps(pid string, kind EmailKind, to string, vars EmailVars) ([]raftstore.Op, error) {
	return s.emailOps(pid, kind, to, vars)
}

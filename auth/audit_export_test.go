package auth

import "github.com/edgebase/edgebase/raftstore"

// AuditOp exposes auditOp to the external tests, which commit events of
// chosen times to test paging and retention.
func (s *Service) AuditOp(pid string, e AuditEvent) raftstore.Op { return s.auditOp(pid, e) }

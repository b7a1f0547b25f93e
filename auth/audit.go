package auth

import "time"

// DefaultAuditRetention is how long audit log entries are kept unless the
// operator says otherwise (--audit-retention).
//
// (Scaffolding of the accounts issue: the audit helper owns this file.)
const DefaultAuditRetention = 90 * 24 * time.Hour

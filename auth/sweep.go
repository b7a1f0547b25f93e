package auth

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
)

// sweepBatch is how many records one sweep transaction removes.
const sweepBatch = 256

// Sweep removes what can no longer be used: expired sessions, tickets and
// verify tokens, those of an older account generation (after a password
// change or reset) or of a deleted account, and ended rate-limit windows.
// It returns how many records it removed. The leader runs it periodically;
// it is safe on any node and against concurrent use of the records (each
// delete is conditioned on the revision it judged).
func (s *Service) Sweep(ctx context.Context) (int, error) {
	total := 0
	for _, dir := range []string{keys.SessionsDir(), keys.TicketsDir(), keys.VerifyDir(), keys.LimitsDir()} {
		n, err := s.sweepDir(ctx, dir)
		total += n
		if err != nil {
			return total, fmt.Errorf("sweep %s: %w", dir, err)
		}
	}
	n, err := s.sweepAudit(ctx) // audit events past --audit-retention
	total += n
	if err != nil {
		return total, fmt.Errorf("sweep audit log: %w", err)
	}
	// Deleted accounts whose purge stopped half-way (deleteaccount.go).
	n, err = s.finishPurges(ctx)
	total += n
	if err != nil {
		return total, fmt.Errorf("sweep: finish account purges: %w", err)
	}
	// Email codes past their time or void (emailcodes.go).
	n, err = s.sweepEmailCodes(ctx)
	total += n
	if err != nil {
		return total, fmt.Errorf("sweep email codes: %w", err)
	}
	// OAuth sign-ins left half-way: states and one-time codes (oauth.go).
	n, err = s.SweepOAuth(ctx)
	total += n
	if err != nil {
		return total, fmt.Errorf("sweep oauth: %w", err)
	}
	if total > 0 {
		s.logger.Info("swept expired auth records", "removed", total)
	}
	return total, nil
}

func (s *Service) sweepDir(ctx context.Context, dir string) (int, error) {
	removed := 0
	after := ""
	for {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		docs, next, err := s.store.List(dir, after, sweepBatch)
		if err != nil {
			return removed, err
		}
		txn := &raftstore.Txn{Time: s.now().UnixNano()}
		for _, d := range docs {
			if s.dead(dir, d) {
				txn.Conds = append(txn.Conds, raftstore.Cond{Path: d.Path, Kind: raftstore.CondRevision, Revision: d.Revision})
				txn.Ops = append(txn.Ops, raftstore.Op{Kind: raftstore.OpDelete, Path: d.Path, IfExists: true})
				// A session's entry in its account's index goes with it.
				var sess session
				if dir == keys.SessionsDir() && json.Unmarshal(d.Data, &sess) == nil && sess.Index != "" {
					txn.Ops = append(txn.Ops, raftstore.Op{Kind: raftstore.OpDelete, Path: sess.Index, IfExists: true})
				}
			}
		}
		if len(txn.Ops) > 0 {
			res, err := s.store.Txn(ctx, txn)
			if err != nil {
				return removed, err
			}
			// A record that changed meanwhile fails the batch; the next
			// sweep looks at it again.
			if res.OK() {
				removed += len(txn.Conds)
			}
		}
		if next == "" {
			return removed, nil
		}
		after = next
	}
}

// dead reports whether a record of dir can be removed.
func (s *Service) dead(dir string, d *raftstore.Document) bool {
	now := s.now().Unix()
	if dir == keys.LimitsDir() {
		var b bucket
		return json.Unmarshal(d.Data, &b) != nil || now >= b.Reset
	}
	var g grant
	if json.Unmarshal(d.Data, &g) != nil {
		return true
	}
	if now >= g.ExpiresAt {
		return true
	}
	acc, err := s.account(g.ProjectID, g.UserID)
	if err != nil {
		return false
	}
	return acc == nil || acc.SessionGen != g.Gen
}

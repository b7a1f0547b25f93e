package auth

import (
	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
)

// Disabled accounts. An owner's disable sets User.Disabled and bumps the
// account's SessionGen in one commit (every session, ticket and verify
// token ends on every node at once), and puts the marker
// keys.AccountDisabled. Every path that opens a session
//
//   - refuses an account it read as disabled (account.checkEnabled), and
//   - conditions its commit on the marker's absence (enabledCond), so that
//     a disable committed between the read and the commit still wins: the
//     check that guards the write happens where the write commits.

// condDisabled names enabledCond's condition in a txn (TxnResult.Failed).
const condDisabled = "account-disabled"

// checkEnabled refuses an account an owner disabled (ErrAccountDisabled).
// Callers check the password or code first, so the answer does not tell a
// stranger that the account exists.
func (a *account) checkEnabled() error {
	if a.Disabled {
		return ErrAccountDisabled
	}
	return nil
}

// enabledCond is the condition a txn that opens a session of account uid
// carries: it fails, by name, when the account was disabled by the commit.
// After the commit, test disabledAtCommit(res, txn).
func enabledCond(pid, uid string) raftstore.Cond {
	return raftstore.Cond{Path: keys.AccountDisabled(pid, uid), Kind: raftstore.CondNotExists, Name: condDisabled}
}

// disabledAtCommit reports whether txn was refused because its account was
// disabled (enabledCond failed).
func disabledAtCommit(res *raftstore.TxnResult, txn *raftstore.Txn) bool {
	return res != nil && txn != nil && !res.OK() && res.Failed(txn) == condDisabled
}

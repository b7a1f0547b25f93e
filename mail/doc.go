// Package mail delivers the emails the services queue (verification codes,
// password resets, sign-in codes, changes of address).
//
// An email is queued as a Record in the replicated outbox
// (keys.MailOutboxDir), committed in the same transaction as the code it
// carries, so an email exists exactly when its code does. The leader's
// Sender reads the outbox, sends each due record through the project's SMTP
// server (or the operator's default) with github.com/wneessen/go-mail,
// deletes it once the server accepted it, and otherwise commits the attempt
// (attempts, nextAttemptAt with exponential backoff and jitter, lastError)
// into the record, so a new leader resumes the schedule. Delivery is
// at-least-once: a leader that dies between the server's acceptance and the
// delete leaves a record the next leader sends again. A record that keeps
// failing for MaxAge is marked failed and kept for operators to see.
//
// mail imports raftstore and keys only: the SMTP settings and the key that
// opens sealed bodies come through the Source interface, which auth
// implements.
package mail

package mail

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
)

// Record is one queued email: a committed document in the outbox
// (keys.MailOutbox), written by the service that queues it in the same
// transaction as the state the email announces (a code, a link), and
// rewritten by the sender with its delivery progress so that the next
// leader continues where the last one stopped.
type Record struct {
	ID        string `json:"id"`
	ProjectID string `json:"projectId"`
	// Kind names the template it was rendered from (verification, ...).
	Kind string `json:"kind"`
	To   string `json:"to"`
	// Content is the message in the clear, or nil when it is Sealed (with
	// the cluster key, AAD SealAAD(ID)): an email often carries a live code.
	Content *Content `json:"content,omitempty"`
	Sealed  string   `json:"sealed,omitempty"`
	// QueuedAt is the proposer's clock at queueing, in Unix nanoseconds; it
	// names the record (keys.MailOutbox) and bounds its retries.
	QueuedAt int64 `json:"queuedAt"`

	// Delivery progress, written by the sender.
	Attempts      int    `json:"attempts,omitempty"`
	NextAttemptAt int64  `json:"nextAttemptAt,omitempty"` // Unix ns; 0: now
	LastError     string `json:"lastError,omitempty"`
	// Failed records are kept (visible to operators) but not retried.
	Failed bool `json:"failed,omitempty"`
}

// Content is an email's subject and bodies, rendered when it was queued.
type Content struct {
	Subject string `json:"subject"`
	Text    string `json:"text"`
	HTML    string `json:"html,omitempty"`
}

// SealAAD binds a sealed Content to its record, so that a sealed body
// copied into another record does not open.
func SealAAD(id string) []byte { return []byte("edgebase mail outbox\x00" + id) }

// Path is the record's key in the tree.
func (r *Record) Path() string { return keys.MailOutbox(time.Unix(0, r.QueuedAt), r.ID) }

// PutOp is the op that writes the record (queues it, or records progress).
func (r *Record) PutOp() (raftstore.Op, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return raftstore.Op{}, fmt.Errorf("mail: encode outbox record: %w", err)
	}
	return raftstore.Op{Kind: raftstore.OpPut, Path: r.Path(), Data: b}, nil
}

// DecodeRecord reads an outbox document.
func DecodeRecord(doc *raftstore.Document) (*Record, error) {
	var r Record
	if err := json.Unmarshal(doc.Data, &r); err != nil {
		return nil, fmt.Errorf("mail: decode outbox record %s: %w", doc.Path, err)
	}
	return &r, nil
}

package raftstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// commandType is the first byte of every log entry we propose. It selects the
// decoder; the second byte is the encoding version of that type.
type commandType byte

const (
	// cmdTxn is a conditional multi-operation transaction over the tree.
	cmdTxn commandType = 1
	// cmdNoop commits nothing but advances the revision (used for barriers and tests).
	cmdNoop commandType = 2
)

// Encoding versions of CmdTxn. Entries are written in the binary encoding
// (txncodec.go); the JSON one is what earlier binaries wrote, and stays
// decodable for as long as such entries may be in a log.
const (
	txnVersion       byte = 1 // JSON
	txnVersionBinary byte = 2
	// txnVersionDecided is the binary encoding with a caller and per-op
	// revision matches: writes decided inside Apply (Decider).
	txnVersionDecided byte = 3
	// txnVersionLatest is the newest encoding this binary reads and writes.
	txnVersionLatest = txnVersionDecided
)

// CondKind says what a Cond compares.
type CondKind string

const (
	// CondExists holds when a document exists at Path.
	CondExists CondKind = "exists"
	// CondNotExists holds when no document exists at Path.
	CondNotExists CondKind = "not_exists"
	// CondRevision holds when the document at Path has exactly Revision
	// (Revision 0 means "does not exist").
	CondRevision CondKind = "revision"
)

// Cond is a precondition checked inside Apply, against committed state, before
// any op of the transaction runs. If one fails, nothing is written.
type Cond struct {
	Path     string   `json:"p"`
	Kind     CondKind `json:"k"`
	Revision uint64   `json:"r,omitempty"`
	// Name, when set, makes a failure of this condition a definite answer
	// the proposer names (TxnResult.Failed), not a sign that the state it
	// read moved (see Guarded). It stays with the proposer: entries do not
	// carry it.
	Name string `json:"-"`
}

// OpKind is the kind of one write in a transaction.
type OpKind string

const (
	// OpPut creates or replaces the document at Path with Data (a JSON object).
	OpPut OpKind = "put"
	// OpDelete removes the document at Path (absent is an error unless IfExists).
	OpDelete OpKind = "delete"
	// OpSetField sets top-level Field of an existing document to Data (any JSON value).
	OpSetField OpKind = "set_field"
	// OpRenameField moves top-level Field to NewField, then sets it to Data.
	OpRenameField OpKind = "rename_field"
	// OpDeleteField removes top-level Field of an existing document.
	OpDeleteField OpKind = "delete_field"
	// OpIncrement adds Data (a JSON number) to the number in top-level Field,
	// creating the field, or the document, at 0 first.
	OpIncrement OpKind = "increment"
	// OpServerTimestamp sets top-level Field to the Txn's Time as an RFC 3339
	// string (UTC, nanoseconds), creating the document when absent.
	OpServerTimestamp OpKind = "server_timestamp"
	// OpArrayUnion appends to the array in top-level Field each element of
	// Data (a JSON array) it does not hold yet, creating the field, or the
	// document, as an empty array first.
	OpArrayUnion OpKind = "array_union"
	// OpArrayRemove removes from the array in top-level Field every element
	// equal to one of Data's; a missing field or document becomes [].
	OpArrayRemove OpKind = "array_remove"
)

// needsDecided reports whether an op kind is one only txnVersionDecided
// entries carry (older binaries would refuse it as invalid).
func (k OpKind) needsDecided() bool {
	switch k {
	case OpIncrement, OpServerTimestamp, OpArrayUnion, OpArrayRemove:
		return true
	}
	return false
}

// Op is one write of a transaction. Ops run in order and see each other's effects.
type Op struct {
	Kind     OpKind          `json:"k"`
	Path     string          `json:"p"`
	Data     json.RawMessage `json:"d,omitempty"`
	Field    string          `json:"f,omitempty"`
	NewField string          `json:"nf,omitempty"`
	// IfExists makes OpDelete a no-op instead of an error on an absent document.
	IfExists bool `json:"ie,omitempty"`
	// Match, when set, is the revision the document must have when the op
	// runs (0: it must not exist), or the txn fails with ErrCodeCondFailed at
	// this op. Unlike a Cond it is judged after the Decider allowed the op,
	// and against the state the txn's earlier ops left.
	Match *uint64 `json:"m,omitempty"`
}

// Txn is the replicated command for every write. Everything non-deterministic
// (the time, ids, hashes) is filled in by the proposer before it is proposed.
type Txn struct {
	// Time is the proposer's wall clock in Unix nanoseconds; Apply uses it for
	// createTime/updateTime and never reads a clock itself.
	Time  int64  `json:"t"`
	Conds []Cond `json:"c,omitempty"`
	Ops   []Op   `json:"o"`
	// Caller, when set, is the credential the writes are made for (opaque
	// here: the session token's hash). Apply hands it to the Config's
	// Decider, which resolves it against committed state and allows or
	// refuses each op; without a Decider such a txn is refused.
	Caller string `json:"u,omitempty"`
}

// needsDecided reports whether t can only be written as a txnVersionDecided
// entry.
func (t *Txn) needsDecided() bool {
	if t.Caller != "" {
		return true
	}
	for i := range t.Ops {
		if t.Ops[i].Match != nil || t.Ops[i].Kind.needsDecided() {
			return true
		}
	}
	return false
}

// OpError is the reason a transaction was refused, decided inside Apply.
type OpError string

const (
	// ErrCodeNone means the transaction committed its writes.
	ErrCodeNone OpError = ""
	// ErrCodeCondFailed means a Cond did not hold.
	ErrCodeCondFailed OpError = "cond_failed"
	// ErrCodeNotFound means an op needed a document that does not exist.
	ErrCodeNotFound OpError = "not_found"
	// ErrCodeFieldNotFound means a field op named a field the document lacks.
	ErrCodeFieldNotFound OpError = "field_not_found"
	// ErrCodeFieldExists means a rename targeted an existing field.
	ErrCodeFieldExists OpError = "field_exists"
	// ErrCodeTooLarge means the resulting document would exceed MaxDocumentSize.
	ErrCodeTooLarge OpError = "document_too_large"
	// ErrCodeInvalid means the command itself was malformed (bad JSON object, etc.).
	ErrCodeInvalid OpError = "invalid"
	// ErrCodeFieldType means a field op found a value of the wrong type
	// (increment of a non-number, array op on a non-array).
	ErrCodeFieldType OpError = "field_type"
	// ErrCodeUnauthenticated means the Decider found no valid caller: the
	// credential is unknown, expired or revoked at the entry's commit.
	ErrCodeUnauthenticated OpError = "unauthenticated"
	// ErrCodeForbidden means the Decider refused an op for this caller (a
	// role or an access rule), at the entry's commit.
	ErrCodeForbidden OpError = "forbidden"
	// ErrCodeLastOwner means the txn would leave a project without an owner.
	ErrCodeLastOwner OpError = "last_owner"
)

// TxnResult is what Apply returns for a Txn. It is deterministic: every node
// computes the same result for the same entry.
type TxnResult struct {
	// Revision is the Raft index of the entry: the cluster-wide revision.
	Revision uint64 `json:"revision"`
	// Err is empty on success; otherwise nothing was written.
	Err OpError `json:"err,omitempty"`
	// Index is the index of the failed Cond (for ErrCodeCondFailed without
	// OpFailed) or Op.
	Index int `json:"index,omitempty"`
	// OpFailed says a failure's Index names an op (always, except for a
	// failed Cond).
	OpFailed bool `json:"opFailed,omitempty"`
	// Docs holds, per op, the document after the op (nil after a delete).
	Docs []*Document `json:"docs,omitempty"`
	// Created holds, per op, whether a put created the document.
	Created []bool `json:"created,omitempty"`
	// Deleted holds, per op, how many documents a delete removed.
	Deleted []int `json:"deleted,omitempty"`
}

// OK reports whether the transaction's writes were committed.
func (r *TxnResult) OK() bool { return r.Err == ErrCodeNone }

// Document is one stored JSON object at a path, with its revisions.
type Document struct {
	Path           string          `json:"collection"`
	Data           json.RawMessage `json:"data"`
	Revision       uint64          `json:"revision"`
	CreateRevision uint64          `json:"createRevision"`
	CreateTime     int64           `json:"createTime"`
	UpdateTime     int64           `json:"updateTime"`
}

// EncodeTxn frames a Txn as a log entry in the newest encoding, which the
// FSM of every binary since its introduction reads. Store.Txn writes it only
// once every member reads it (see Store.txnLevel); before that, an older one.
func EncodeTxn(t *Txn) ([]byte, error) { return encodeTxnDecided(t) }

// encodeTxnJSON frames a Txn in the JSON encoding (version 1), which every
// binary reads: compacted, without HTML escaping (document bytes stay as the
// client sent them; escaping "<" to "\u003c" would also inflate the size
// checks).
func encodeTxnJSON(t *Txn) ([]byte, error) {
	var buf bytes.Buffer
	buf.Write([]byte{byte(cmdTxn), txnVersion})
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(t); err != nil {
		return nil, fmt.Errorf("encode command %d: %w", cmdTxn, err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// errUnknownCommand is returned for a type or version this binary does not know.
// The FSM treats it as fatal: a node must not skip an entry others applied.
var errUnknownCommand = errors.New("unknown command type or version")

// decodeTxn parses a CmdTxn entry body.
func decodeTxn(b []byte) (*Txn, error) {
	if len(b) < 2 || commandType(b[0]) != cmdTxn {
		return nil, errUnknownCommand
	}
	switch b[1] {
	case txnVersionBinary, txnVersionDecided:
		return decodeTxnBinary(b[1], b[2:])
	case txnVersion:
	default:
		return nil, errUnknownCommand
	}
	var t Txn
	if err := json.Unmarshal(b[2:], &t); err != nil {
		return nil, fmt.Errorf("decode txn: %w", err)
	}
	return &t, nil
}

// Failed names the condition of t that refused it (Cond.Name), or "" when
// t committed, failed otherwise, or failed an unnamed condition.
func (r *TxnResult) Failed(t *Txn) string {
	if r.Err != ErrCodeCondFailed || r.OpFailed || r.Index < 0 || r.Index >= len(t.Conds) {
		return ""
	}
	return t.Conds[r.Index].Name
}

// Proposer commits txns and waits for this node to apply a revision: what
// Guarded needs of a Store.
type Proposer interface {
	Txn(ctx context.Context, t *Txn) (*TxnResult, error)
	WaitApplied(ctx context.Context, idx uint64) error
}

// Guarded runs a read–check–commit loop: build reads the state it needs and
// returns the txn to commit, guarded by conditions on what it read. When an
// unnamed condition fails, the state moved under it: Guarded waits until
// this node has applied the commit that moved it and builds again. A named
// condition is a definite answer (res.Failed(t) tells which), and any other
// refusal is returned as is, with the txn it refused. build may stop the
// loop by returning an error.
func Guarded(ctx context.Context, p Proposer, build func() (*Txn, error)) (*TxnResult, *Txn, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrTimeout, err)
		}
		t, err := build()
		if err != nil {
			return nil, nil, err
		}
		res, err := p.Txn(ctx, t)
		if err != nil {
			return nil, t, err
		}
		if res.OK() || res.Err != ErrCodeCondFailed || res.OpFailed || res.Failed(t) != "" {
			return res, t, nil
		}
		if err := p.WaitApplied(ctx, res.Revision); err != nil {
			return nil, t, err
		}
	}
}

package raftstore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// The binary encoding of a Txn (version txnVersionBinary), after the type and
// version bytes:
//
//	varint  Time
//	uvarint number of conds, then per cond:
//	        str Path, str Kind, uvarint Revision
//	uvarint number of ops, then per op:
//	        str Kind, str Path, str Data, str Field, str NewField, byte IfExists (0 or 1)
//
// where str is a uvarint length followed by that many bytes. Version 3
// (txnVersionDecided) adds, after Time, str Caller, and after each op's
// IfExists byte, uvarint Match (0: none; n+1: the op matches revision n). Kinds stay
// strings, so an entry carries exactly what its proposer meant, even a kind
// this binary does not know (Apply refuses it as invalid, deterministically on
// every node). Data is the op's JSON as the proposer compacted it, stored
// verbatim. An entry with anything left over, cut short, or with a length
// beyond the entry is undecodable (and stops the node, like any undecodable
// entry).
//
// Version 1 (txnVersion) is the same Txn as JSON; entries of it written by
// earlier binaries are still decoded.

// errBadTxn is wrapped by every binary decoding failure.
var errBadTxn = errors.New("malformed binary txn")

// encodeTxnBinary frames t in the binary encoding. Op data must be valid JSON;
// it is compacted into the entry (as the JSON encoding does), so documents are
// stored without insignificant whitespace whoever proposed them.
func encodeTxnBinary(t *Txn) ([]byte, error) { return encodeTxnVersion(t, txnVersionBinary) }

// encodeTxnDecided frames t in version 3, which carries Caller and Match.
func encodeTxnDecided(t *Txn) ([]byte, error) { return encodeTxnVersion(t, txnVersionDecided) }

func encodeTxnVersion(t *Txn, version byte) ([]byte, error) {
	if version < txnVersionDecided && t.needsDecided() {
		return nil, fmt.Errorf("encode command %d: a txn with a caller, a match or a computed op needs version %d", cmdTxn, txnVersionDecided)
	}
	n := 2 + binary.MaxVarintLen64*4 + len(t.Caller)
	for _, c := range t.Conds {
		n += 2*binary.MaxVarintLen64 + len(c.Path) + len(c.Kind) + binary.MaxVarintLen64
	}
	for _, op := range t.Ops {
		n += 6*binary.MaxVarintLen64 + 1 + len(op.Kind) + len(op.Path) + len(op.Data) + len(op.Field) + len(op.NewField)
	}
	b := make([]byte, 0, n)
	b = append(b, byte(cmdTxn), version)
	b = binary.AppendVarint(b, t.Time)
	if version >= txnVersionDecided {
		b = appendStr(b, t.Caller)
	}
	b = binary.AppendUvarint(b, uint64(len(t.Conds)))
	for _, c := range t.Conds {
		b = appendStr(b, c.Path)
		b = appendStr(b, string(c.Kind))
		b = binary.AppendUvarint(b, c.Revision)
	}
	b = binary.AppendUvarint(b, uint64(len(t.Ops)))
	var data bytes.Buffer
	for i, op := range t.Ops {
		b = appendStr(b, string(op.Kind))
		b = appendStr(b, op.Path)
		if len(op.Data) == 0 {
			b = binary.AppendUvarint(b, 0)
		} else {
			data.Reset()
			if err := json.Compact(&data, op.Data); err != nil {
				return nil, fmt.Errorf("encode command %d: op %d data: %w", cmdTxn, i, err)
			}
			b = binary.AppendUvarint(b, uint64(data.Len()))
			b = append(b, data.Bytes()...)
		}
		b = appendStr(b, op.Field)
		b = appendStr(b, op.NewField)
		if op.IfExists {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		if version >= txnVersionDecided {
			var m uint64
			if op.Match != nil {
				m = *op.Match + 1
			}
			b = binary.AppendUvarint(b, m)
		}
	}
	return b, nil
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// txnReader decodes the binary encoding; the first error sticks.
type txnReader struct {
	b   []byte
	err error
}

func (r *txnReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s at byte %d from the end", errBadTxn, what, len(r.b))
	}
	r.b = nil
}

func (r *txnReader) uvarint(what string) uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *txnReader) varint(what string) int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// bytes returns the next length-prefixed field, aliasing the input.
func (r *txnReader) bytes(what string) []byte {
	n := r.uvarint(what)
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail(what + " longer than the entry")
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *txnReader) str(what string) string { return string(r.bytes(what)) }

// count reads a number of items each taking at least min bytes, refusing a
// count the rest of the entry cannot hold (so a corrupt count cannot make us
// allocate more than the entry's size).
func (r *txnReader) count(what string, min int) int {
	n := r.uvarint(what)
	if r.err == nil && n > uint64(len(r.b)/min) {
		r.fail(what + " beyond the entry")
		return 0
	}
	return int(n)
}

// decodeTxnBinary parses the body of a binary CmdTxn entry (after the type
// and version bytes). The result shares no memory with b.
func decodeTxnBinary(version byte, b []byte) (*Txn, error) {
	r := &txnReader{b: b}
	t := &Txn{Time: r.varint("time")}
	if version >= txnVersionDecided {
		t.Caller = r.str("caller")
	}
	const minCond, minOp = 3, 6 // the bytes of an item whose strings are all empty
	if n := r.count("cond count", minCond); n > 0 {
		t.Conds = make([]Cond, n)
		for i := range t.Conds {
			c := &t.Conds[i]
			c.Path = r.str("cond path")
			c.Kind = CondKind(r.str("cond kind"))
			c.Revision = r.uvarint("cond revision")
		}
	}
	if n := r.count("op count", minOp); n > 0 {
		t.Ops = make([]Op, n)
		for i := range t.Ops {
			op := &t.Ops[i]
			op.Kind = OpKind(r.str("op kind"))
			op.Path = r.str("op path")
			if d := r.bytes("op data"); len(d) > 0 {
				op.Data = append(json.RawMessage(nil), d...)
			}
			op.Field = r.str("op field")
			op.NewField = r.str("op new field")
			switch flag := r.bytes1("op ifExists"); flag {
			case 0:
			case 1:
				op.IfExists = true
			default:
				r.fail("op ifExists not 0 or 1")
			}
			if version >= txnVersionDecided {
				if m := r.uvarint("op match"); m > 0 {
					m--
					op.Match = &m
				}
			}
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last op", errBadTxn, len(r.b))
	}
	return t, nil
}

func (r *txnReader) bytes1(what string) byte {
	if len(r.b) == 0 {
		r.fail(what)
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
)

// MaxBatchWrites bounds the ops of one POST /api/db/batch.
const MaxBatchWrites = 500

// batchWrite is one op of a batch as the client sends it.
type batchWrite struct {
	Op         string          `json:"op"`
	Collection *string         `json:"collection"`
	Data       json.RawMessage `json:"data"`
	OldKey     *string         `json:"oldKey"`
	NewKey     *string         `json:"newKey"`
	Value      json.RawMessage `json:"value"`
	Type       *string         `json:"type"`
	Field      *string         `json:"field"`
	By         json.RawMessage `json:"by"`
	Values     json.RawMessage `json:"values"`
	IfMatch    *json.Number    `json:"ifMatch"`
}

type batchBody struct {
	Writes []json.RawMessage `json:"writes"`
}

type batchResult struct {
	Collection string `json:"collection"`
	Revision   uint64 `json:"revision"`
	Exists     bool   `json:"exists"`
}

type batchResponse struct {
	Revision uint64        `json:"revision"`
	Results  []batchResult `json:"results"`
}

// handleBatch commits 1..MaxBatchWrites writes as one Raft entry: all of
// them or none. Apply judges each op against the rules as the batch's
// earlier ops left the state; the first refusal is the answer, with field
// writes[i].
func (s *Server) handleBatch(w http.ResponseWriter, r *http.Request) {
	if err := s.dbBatch(w, r); err != nil {
		s.writeError(w, r, err)
	}
}

func (s *Server) dbBatch(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		return methodNotAllowed("POST")
	}
	ctx := r.Context()
	var body batchBody
	if err := s.decodeBody(w, r, &body); err != nil {
		return err
	}
	if len(body.Writes) == 0 {
		return badField("writes", "invalid_argument", "writes must hold 1 to 500 writes")
	}
	if len(body.Writes) > MaxBatchWrites {
		return &apiError{Status: http.StatusRequestEntityTooLarge, Code: "too_many_writes", Message: fmt.Sprintf("a batch holds at most %d writes", MaxBatchWrites), Field: "writes"}
	}
	parsed := make([]batchWrite, len(body.Writes))
	for i, raw := range body.Writes {
		if err := decodeBatchWrite(raw, &parsed[i]); err != nil {
			return inBatch(i, err)
		}
	}
	p, err := s.writeCaller(ctx, r)
	if err != nil {
		return err
	}
	ops := make([]raftstore.Op, len(parsed))
	for i := range parsed {
		op, err := batchOp(&parsed[i], p.ProjectID)
		if err != nil {
			return inBatch(i, err)
		}
		ops[i] = op
	}
	res, err := s.commit(ctx, p, ops, func(i int) string { return fmt.Sprintf("writes[%d]", i) })
	if err != nil {
		return err
	}
	out := batchResponse{Revision: res.Revision, Results: make([]batchResult, len(ops))}
	for i := range ops {
		out.Results[i] = batchResult{Collection: *parsed[i].Collection, Revision: res.Revision, Exists: res.Docs[i] != nil}
	}
	w.Header().Set("X-Revision", strconv.FormatUint(res.Revision, 10))
	writeJSON(w, http.StatusOK, out)
	return nil
}

// decodeBatchWrite parses one write strictly: an unknown member is an
// error, not ignored.
func decodeBatchWrite(raw json.RawMessage, bw *batchWrite) error {
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return badField("", "invalid_argument", "a write must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(bw); err != nil {
		return badField("", "invalid_argument", "a write is malformed: "+err.Error())
	}
	return nil
}

// inBatch names write i of the batch as the field of err.
func inBatch(i int, err error) error {
	ae := errorFor(err)
	out := *ae
	out.Field = fmt.Sprintf("writes[%d]", i)
	if ae.Field != "" {
		out.Message = ae.Field + ": " + ae.Message
	}
	return &out
}

// batchOp validates one write and turns it into its op on the caller's
// project.
func batchOp(bw *batchWrite, pid string) (raftstore.Op, error) {
	var op raftstore.Op
	if bw.Collection == nil {
		return op, badField("collection", "invalid_path", "collection is required")
	}
	if err := raftstore.ValidatePath(*bw.Collection); err != nil {
		return op, badField("collection", "invalid_path", err.Error())
	}
	op.Path = keys.Doc(pid, *bw.Collection)
	if bw.IfMatch != nil {
		n, err := strconv.ParseUint(bw.IfMatch.String(), 10, 64)
		if err != nil {
			return op, badField("ifMatch", "invalid_argument", "ifMatch must be a document revision (0: must not exist)")
		}
		op.Match = &n
	}
	field := func() (string, error) {
		if bw.Field == nil || *bw.Field == "" {
			return "", badField("field", "invalid_argument", "field is required")
		}
		if len(*bw.Field) > raftstore.MaxPathBytes {
			return "", badField("field", "invalid_argument", "field names are at most 1500 bytes")
		}
		return *bw.Field, nil
	}
	var err error
	switch bw.Op {
	case "set":
		op.Kind = raftstore.OpPut
		if op.Data, err = compactObject(bw.Data); err != nil {
			return op, err
		}
		if len(op.Data) > raftstore.MaxDocumentSize {
			return op, newError(http.StatusRequestEntityTooLarge, "document_too_large", fmt.Sprintf("a document may be at most %d bytes", raftstore.MaxDocumentSize))
		}
	case "update":
		if bw.OldKey == nil || *bw.OldKey == "" {
			return op, badField("oldKey", "invalid_argument", "oldKey is required")
		}
		if bw.NewKey == nil || *bw.NewKey == "" {
			return op, badField("newKey", "invalid_argument", "newKey is required")
		}
		if len(*bw.OldKey) > raftstore.MaxPathBytes || len(*bw.NewKey) > raftstore.MaxPathBytes {
			return op, badField("newKey", "invalid_argument", "field names are at most 1500 bytes")
		}
		if len(bw.Value) == 0 {
			return op, badField("value", "invalid_argument", "value is required")
		}
		value, err := checkValueType(bw.Value, bw.Type)
		if err != nil {
			return op, err
		}
		op = updateOp(op.Path, *bw.OldKey, *bw.NewKey, value, op.Match)
	case "delete":
		op.Kind = raftstore.OpDelete
	case "deleteField":
		op.Kind = raftstore.OpDeleteField
		if op.Field, err = field(); err != nil {
			return op, err
		}
	case "increment":
		op.Kind = raftstore.OpIncrement
		if op.Field, err = field(); err != nil {
			return op, err
		}
		var n json.Number
		if t := bytes.TrimSpace(bw.By); len(t) == 0 || (t[0] != '-' && (t[0] < '0' || t[0] > '9')) || json.Unmarshal(t, &n) != nil {
			return op, badField("by", "invalid_argument", "by must be a number")
		}
		if _, err := strconv.ParseFloat(n.String(), 64); err != nil {
			return op, badField("by", "invalid_argument", "by must be a finite number")
		}
		op.Data = json.RawMessage(n.String())
	case "serverTimestamp":
		op.Kind = raftstore.OpServerTimestamp
		if op.Field, err = field(); err != nil {
			return op, err
		}
	case "arrayUnion", "arrayRemove":
		op.Kind = raftstore.OpArrayUnion
		if bw.Op == "arrayRemove" {
			op.Kind = raftstore.OpArrayRemove
		}
		if op.Field, err = field(); err != nil {
			return op, err
		}
		var buf bytes.Buffer
		if t := bytes.TrimSpace(bw.Values); len(t) == 0 || t[0] != '[' || json.Compact(&buf, t) != nil {
			return op, badField("values", "invalid_argument", "values must be a JSON array")
		}
		if err := checkValue(buf.Bytes()); err != nil {
			return op, badField("values", "invalid_argument", "values "+err.Error())
		}
		op.Data = buf.Bytes()
	case "":
		return op, badField("op", "invalid_argument", "op is required")
	default:
		return op, badField("op", "invalid_argument", "op must be one of set, update, delete, deleteField, increment, serverTimestamp, arrayUnion, arrayRemove")
	}
	return op, nil
}

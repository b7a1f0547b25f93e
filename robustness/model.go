package robustness

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// OpKind is the kind of a client operation on one document.
type OpKind uint8

// The operations the fault-injection clients perform.
const (
	OpPut    OpKind = iota + 1 // unconditional put
	OpGet                      // strong (linearizable) get
	OpCAS                      // put with If-Match: <revision>
	OpDelete                   // unconditional delete
	OpGrant                    // access change: writers may write the key (rules or role)
	OpRevoke                   // access change: writers may no longer write the key
)

var opKindNames = map[OpKind]string{OpPut: "put", OpGet: "get", OpCAS: "cas", OpDelete: "delete", OpGrant: "grant", OpRevoke: "revoke"}

// String returns the lower-case name of the kind ("put", "get", "cas",
// "delete", "grant", "revoke").
func (k OpKind) String() string {
	if s, ok := opKindNames[k]; ok {
		return s
	}
	return "OpKind(" + strconv.Itoa(int(k)) + ")"
}

// MarshalText makes history.json readable.
func (k OpKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText accepts what MarshalText produces.
func (k *OpKind) UnmarshalText(b []byte) error {
	v, err := parseEnumText(string(b), "OpKind", opKindNames)
	if err != nil {
		return fmt.Errorf("parse op kind: %w", err)
	}
	*k = v
	return nil
}

// Input is what a client asked for.
//
// Grant and revoke change who may write Key: they stand for an access
// change of the key's project (its rules, or a writer's role), which holds
// nothing but that key, so the key's history alone says whether a write was
// allowed. Batch marks a put or cas sent as a batch (POST /api/db/batch) of
// several ops on Key that leave it holding Value: to the model it is one
// write, since a batch commits as one entry, all or nothing.
type Input struct {
	Kind  OpKind
	Key   string
	Value string // put, cas
	IfRev uint64 // cas: the If-Match revision
	Batch bool   `json:",omitempty"`
}

// Outcome classifies how an operation ended, as far as its client knows.
type Outcome uint8

// Outcomes. Only OutUnknown is ambiguous; every other outcome is a fact.
const (
	OutOK           Outcome = iota + 1 // 200/201
	OutNotFound                        // 404
	OutPrecondition                    // 412
	OutFailed                          // definitely not applied (connection refused, 4xx)
	OutUnknown                         // may or may not have been applied (timeout, 5xx, connection lost after sending)
	OutForbidden                       // 403 forbidden: the access rules refused the write at its commit (not applied)
)

var outcomeNames = map[Outcome]string{
	OutOK: "ok", OutNotFound: "notfound", OutPrecondition: "precondition", OutFailed: "failed", OutUnknown: "unknown",
	OutForbidden: "forbidden",
}

// String returns the lower-case name of the outcome.
func (o Outcome) String() string {
	if s, ok := outcomeNames[o]; ok {
		return s
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// MarshalText makes history.json readable.
func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText accepts what MarshalText produces.
func (o *Outcome) UnmarshalText(b []byte) error {
	v, err := parseEnumText(string(b), "Outcome", outcomeNames)
	if err != nil {
		return fmt.Errorf("parse outcome: %w", err)
	}
	*o = v
	return nil
}

func parseEnumText[T ~uint8](s, typeName string, names map[T]string) (T, error) {
	for v, name := range names {
		if name == s {
			return v, nil
		}
	}
	if inner, ok := strings.CutPrefix(s, typeName+"("); ok {
		if inner, ok = strings.CutSuffix(inner, ")"); ok {
			n, err := strconv.ParseUint(inner, 10, 8)
			if err == nil {
				return T(n), nil
			}
		}
	}
	return 0, fmt.Errorf("unknown %s %q", typeName, s)
}

// Output is what a client got back.
type Output struct {
	Outcome Outcome
	Value   string // get: the document's value
	Rev     uint64 // put/cas/delete/grant/revoke ok: the write's revision; get ok: the document's revision
}

// Record is one operation as a client saw it. Call and Return are
// nanoseconds since the run began.
type Record struct {
	Client       int
	Node         string
	Input        Input
	Output       Output
	Call, Return int64
	Err          string `json:",omitempty"`
}

// kvState is the model state of one key.
//
// Revisions are global and assigned in log order, so a write linearized
// after another has a strictly higher revision. The model tracks:
//   - present/value: whether the document exists and its value;
//   - rev: the revision of the current version, 0 when it is not known
//     (the version was written by a write of unknown outcome and no read
//     has revealed its revision yet). Always 0 when absent: nothing can
//     observe the revision of a deleted document, and normalising it keeps
//     equal states equal;
//   - floor: the highest revision known to be at or before the current
//     state. Any later write must have a revision above it; an unknown
//     revision of the current version is strictly above it;
//   - denied: writers may not write the key (the last access change
//     linearized was a revoke). Every key starts allowed: a key no access
//     change names is always writable, and the workload grants a guarded
//     key's writers before its load starts.
type kvState struct {
	present bool
	value   string
	rev     uint64
	floor   uint64
	denied  bool
}

func absentState(floor uint64) kvState { return kvState{floor: floor} }

// kvStep returns every state the key can be in after the operation, or
// nothing when the operation, applied to state s, cannot have returned out.
// A combination the server never produces (a put answered 412, a get
// answered 412 or 403, an access change answered 403, an unknown outcome
// of kind 0) is illegal.
//
// Writes are judged at their commit, against the access in force there,
// before anything else (a caller without access learns nothing of what
// exists): where writes are denied, a write is answered 403 and does not
// apply, and any other answer is illegal; where they are allowed, a 403 is
// illegal and the write is judged on the document as before.
func kvStep(s kvState, in Input, out Output) []kvState {
	switch in.Kind {
	case OpGrant, OpRevoke:
		return accessStep(s, in, out)
	case OpPut, OpCAS, OpDelete:
		if s.denied {
			switch out.Outcome {
			case OutForbidden:
				return []kvState{s}
			case OutUnknown:
				// Linearized here it was refused; "applied" is linearizing
				// it where writes are allowed.
				return []kvState{s}
			}
			return nil
		}
		if out.Outcome == OutForbidden {
			return nil
		}
	}
	// Allowed (or a read): s.denied is false for writes here, and every
	// state docStep builds for a write keeps it false.
	next := docStep(s, in, out)
	for i := range next {
		next[i].denied = s.denied
	}
	return next
}

// accessStep is a grant or revoke. Its commit has a revision in the same
// log as the key's writes, so one answered OK must be above floor, and
// every write linearized after it must be above its revision: a write that
// commits after a revoke (in log order, whatever the clocks say) is judged
// under it.
func accessStep(s kvState, in Input, out Output) []kvState {
	n := s
	n.denied = in.Kind == OpRevoke
	switch out.Outcome {
	case OutOK:
		if out.Rev <= s.floor {
			return nil
		}
		// The floor moves up to the change's revision, except over a
		// version whose revision is unknown: that one is below the change
		// but must stay "above floor" for the reads that reveal it, so the
		// floor stays (weaker, never wrong).
		if !s.present || s.rev != 0 {
			n.floor = out.Rev
		}
		return []kvState{n}
	case OutUnknown:
		// As for a put: "not applied" is linearizing it last. Its revision
		// is unknown, above floor: the floor stays.
		return []kvState{n}
	}
	return nil
}

// docStep is kvStep for a read, or for a write where writes are allowed.
func docStep(s kvState, in Input, out Output) []kvState {
	switch in.Kind {
	case OpPut:
		switch out.Outcome {
		case OutOK:
			if out.Rev > s.floor {
				return []kvState{{present: true, value: in.Value, rev: out.Rev, floor: out.Rev}}
			}
		case OutUnknown:
			// The operation's return is at the end of the history, so
			// "never applied" is the same as "applied after everything
			// else": the applied state alone is enough.
			return []kvState{{present: true, value: in.Value, floor: s.floor}}
		}
	case OpGet:
		switch out.Outcome {
		case OutOK:
			if !s.present || s.value != out.Value {
				return nil
			}
			if s.rev == out.Rev || (s.rev == 0 && out.Rev > s.floor) {
				return []kvState{{present: true, value: s.value, rev: out.Rev, floor: max(s.floor, out.Rev)}}
			}
		case OutNotFound:
			if !s.present {
				return []kvState{s}
			}
		}
	case OpCAS:
		// The server compares If-Match with the current revision, 0 for
		// a missing document: If-Match 0 means "create only if absent"
		// (httpapi ifMatch), any other value fails with 412 on a
		// missing document.
		//
		// matches: the precondition certainly holds here. maybe: it may
		// hold (the current revision is unknown but could be IfRev: an
		// unknown revision is above floor, so IfRev must be too).
		matches := (s.present && s.rev != 0 && s.rev == in.IfRev) || (!s.present && in.IfRev == 0)
		maybe := s.present && s.rev == 0 && in.IfRev > s.floor
		switch out.Outcome {
		case OutOK:
			if (matches || maybe) && out.Rev > s.floor && out.Rev > in.IfRev {
				return []kvState{{present: true, value: in.Value, rev: out.Rev, floor: out.Rev}}
			}
		case OutPrecondition:
			if !matches {
				return []kvState{s}
			}
		case OutNotFound:
			// Treated like 412, but it must be true.
			if !s.present && !matches {
				return []kvState{s}
			}
		case OutUnknown:
			applied := kvState{present: true, value: in.Value, floor: s.floor}
			switch {
			case matches:
				// Linearized here it must have succeeded; "not
				// applied" is covered by linearizing it last.
				return []kvState{applied}
			case maybe:
				return []kvState{applied, s}
			default:
				return []kvState{s}
			}
		}
	case OpDelete:
		switch out.Outcome {
		case OutOK:
			if s.present && out.Rev > s.floor {
				return []kvState{absentState(out.Rev)}
			}
		case OutNotFound:
			if !s.present {
				return []kvState{s}
			}
		case OutUnknown:
			// As for put: "not applied" is linearizing it last. On an
			// absent key the delete is a no-op; on a present one it
			// wrote a revision we do not know, above floor.
			return []kvState{absentState(s.floor)}
		}
	}
	return nil
}

func (s kvState) hash() uint64 {
	h := fnv.New64a()
	var b [17]byte
	if s.present {
		b[0] = 1
	}
	if s.denied {
		b[0] |= 2
	}
	for i := range 8 {
		b[1+i] = byte(s.rev >> (8 * i))
		b[9+i] = byte(s.floor >> (8 * i))
	}
	_, _ = h.Write(b[:])
	_, _ = h.Write([]byte(s.value))
	return h.Sum64()
}

func (s kvState) String() string {
	denied := ""
	if s.denied {
		denied = ", writes denied"
	}
	if !s.present {
		return fmt.Sprintf("absent (floor %d%s)", s.floor, denied)
	}
	rev := "?"
	if s.rev != 0 {
		rev = strconv.FormatUint(s.rev, 10)
	}
	return fmt.Sprintf("%q@%s (floor %d%s)", s.value, rev, s.floor, denied)
}

// describeOp renders an operation for the visualisation, e.g.
// "put k=v → ok@17", "get k → v@17", "cas k if@12 =v → 412",
// "batch put k=v → 403", "revoke k → ok@20".
func describeOp(in Input, out Output) string {
	var b strings.Builder
	if in.Batch {
		b.WriteString("batch ")
	}
	switch in.Kind {
	case OpPut:
		fmt.Fprintf(&b, "put %s=%s", in.Key, in.Value)
	case OpGet:
		fmt.Fprintf(&b, "get %s", in.Key)
	case OpCAS:
		fmt.Fprintf(&b, "cas %s if@%d =%s", in.Key, in.IfRev, in.Value)
	case OpDelete:
		fmt.Fprintf(&b, "delete %s", in.Key)
	case OpGrant, OpRevoke:
		fmt.Fprintf(&b, "%s %s", in.Kind, in.Key)
	default:
		fmt.Fprintf(&b, "%s %s", in.Kind, in.Key)
	}
	b.WriteString(" → ")
	switch out.Outcome {
	case OutOK:
		if in.Kind == OpGet {
			fmt.Fprintf(&b, "%s@%d", out.Value, out.Rev)
		} else {
			fmt.Fprintf(&b, "ok@%d", out.Rev)
		}
	case OutNotFound:
		b.WriteString("404")
	case OutPrecondition:
		b.WriteString("412")
	case OutForbidden:
		b.WriteString("403")
	case OutUnknown:
		b.WriteString("? (unknown)")
	default:
		b.WriteString(out.Outcome.String())
	}
	return b.String()
}

// opMeta is attached to each porcupine operation for the visualisation.
type opMeta struct {
	Index  int // index in the records
	Client int // Record.Client (the ClientId may be a fresh one)
	Node   string
	Err    string
}

func (m opMeta) String() string {
	s := fmt.Sprintf("record #%d, client %d", m.Index, m.Client)
	if m.Node != "" {
		s += ", node " + m.Node
	}
	if m.Err != "" {
		s += ", error: " + m.Err
	}
	return s
}

func partitionOps(history []porcupine.Operation) [][]porcupine.Operation {
	idx := map[string]int{}
	var parts [][]porcupine.Operation
	for _, op := range history {
		key := op.Input.(Input).Key
		i, ok := idx[key]
		if !ok {
			i = len(parts)
			idx[key] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], op)
	}
	return parts
}

func partitionEvents(history []porcupine.Event) [][]porcupine.Event {
	keyOfID := map[int]string{}
	idx := map[string]int{}
	var parts [][]porcupine.Event
	for _, ev := range history {
		var key string
		if ev.Kind == porcupine.CallEvent {
			key = ev.Value.(Input).Key
			keyOfID[ev.Id] = key
		} else {
			key = keyOfID[ev.Id]
		}
		i, ok := idx[key]
		if !ok {
			i = len(parts)
			idx[key] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], ev)
	}
	return parts
}

// Model is the linearizability model of edgebase documents: a register per
// key with global, log-ordered revisions, writes of unknown outcome,
// conditional puts, and access changes (grant, revoke) that decide whether
// writes to the key are allowed at their commit. It is partitioned per key.
func Model() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition:      partitionOps,
		PartitionEvent: partitionEvents,
		Init: func() []any {
			return []any{absentState(0)}
		},
		Step: func(state, input, output any) []any {
			next := kvStep(state.(kvState), input.(Input), output.(Output))
			res := make([]any, len(next))
			for i, s := range next {
				res[i] = s
			}
			return res
		},
		Equal: func(a, b any) bool { return a.(kvState) == b.(kvState) },
		Hash:  func(s any) uint64 { return s.(kvState).hash() },
		DescribeOperation: func(input, output any) string {
			return describeOp(input.(Input), output.(Output))
		},
		DescribeState: func(state any) string { return state.(kvState).String() },
		DescribeOperationMetadata: func(info any) string {
			if m, ok := info.(opMeta); ok {
				return m.String()
			}
			if info == nil {
				return ""
			}
			return fmt.Sprint(info)
		},
	}
	return nm.ToModel()
}

// Operations turns records into the history that is checked.
//
// Records with OutFailed are dropped (they never took effect), and so are
// reads that did not answer (OutFailed or OutUnknown: they say nothing). A
// write with OutUnknown may take effect at any time after its call: its
// Return is set past every timestamp in the history (one more than the
// largest), which to the checker is the same as infinity. math.MaxInt64
// would check the same, but the visualisation would print it as the
// operation's end. That client continues on a fresh ClientId so its later
// operations do not overlap the pending one in the visualisation.
func Operations(recs []Record) []porcupine.Operation {
	var end int64
	maxClient := -1
	for _, r := range recs {
		end = max(end, r.Call, r.Return)
		maxClient = max(maxClient, r.Client)
	}
	order := make([]int, len(recs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch ca, cb := recs[a].Call, recs[b].Call; {
		case ca < cb:
			return -1
		case ca > cb:
			return 1
		}
		return 0
	})
	clientID := map[int]int{}
	nextID := maxClient + 1
	ops := make([]porcupine.Operation, 0, len(recs))
	for _, i := range order {
		r := recs[i]
		if r.Output.Outcome == OutFailed {
			continue
		}
		if r.Input.Kind == OpGet && r.Output.Outcome == OutUnknown {
			continue
		}
		id, ok := clientID[r.Client]
		if !ok {
			id = r.Client
			clientID[r.Client] = id
		}
		ret := r.Return
		if r.Output.Outcome == OutUnknown {
			ret = end + 1
			clientID[r.Client] = nextID
			nextID++
		}
		ops = append(ops, porcupine.Operation{
			ClientId: id,
			Input:    r.Input,
			Call:     r.Call,
			Output:   r.Output,
			Return:   ret,
			Metadata: opMeta{Index: i, Client: r.Client, Node: r.Node, Err: r.Err},
		})
	}
	return ops
}

// Check checks the records for linearizability with Model. The result is
// porcupine's: Ok, Illegal, or Unknown when the timeout (0: none) expired;
// callers must treat anything but Ok as a failure. The info is for
// WriteReport.
func Check(recs []Record, timeout time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo) {
	return porcupine.CheckOperationsVerbose(Model(), Operations(recs), timeout)
}

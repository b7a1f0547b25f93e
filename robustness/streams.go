package robustness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
)

// StreamEvent is one change a subscription delivered.
type StreamEvent struct {
	Revision   uint64          `json:"revision"`
	Collection string          `json:"collection"`
	Type       string          `json:"type"`
	Data       json.RawMessage `json:"data,omitempty"`
}

// Stream is what one subscription delivered, in arrival order.
type Stream struct {
	Name   string // e.g. "n2/sub1"
	Node   string
	From   uint64 // the revision the stream starts after: its snapshot revision, or the `since` it resumed from
	Events []StreamEvent
	// Resumed is true when the stream was opened with since=From; it must
	// then deliver exactly what followed From. The checks are the same as
	// for a snapshot stream (nothing at or before From, nothing skipped
	// after it); the flag is carried into error messages.
	Resumed bool
}

// StreamCheckKind names the rule a StreamViolation breaks.
type StreamCheckKind string

// The kinds of stream violations CheckStreams reports.
const (
	StreamOrder        StreamCheckKind = "order"         // revisions not strictly increasing within a stream (includes duplicates)
	StreamBeforeFrom   StreamCheckKind = "before-from"   // a revision <= the stream's From
	StreamMismatch     StreamCheckKind = "mismatch"      // two streams disagree about the same revision
	StreamGap          StreamCheckKind = "gap"           // a stream skipped a revision another stream delivered
	StreamMissing      StreamCheckKind = "missing"       // a revision in want that no covering stream delivered
	StreamExtra        StreamCheckKind = "extra"         // a delivered revision absent from a complete want
	StreamWantMismatch StreamCheckKind = "want-mismatch" // a delivered event that disagrees with want
)

// streamKinds fixes the order in which kinds are reported.
func streamKinds() []StreamCheckKind {
	return []StreamCheckKind{StreamOrder, StreamBeforeFrom, StreamMismatch, StreamGap, StreamMissing, StreamExtra, StreamWantMismatch}
}

// maxErrsPerKind bounds how many violations of one kind are reported before
// they are summarised as "and N more".
const maxErrsPerKind = 20

// StreamViolation is one broken promise found by CheckStreams.
type StreamViolation struct {
	Kind     StreamCheckKind
	Stream   string // stream name; empty for union-level findings
	Revision uint64
	Detail   string
	// More is non-zero only for the summary entry that stands in for
	// violations left off once maxErrsPerKind was reached.
	More int
}

func (v *StreamViolation) Error() string {
	if v.More > 0 {
		return fmt.Sprintf("stream check %s: and %d more", v.Kind, v.More)
	}
	if v.Stream == "" {
		return fmt.Sprintf("stream check %s: revision %d: %s", v.Kind, v.Revision, v.Detail)
	}
	return fmt.Sprintf("stream check %s: stream %s: revision %d: %s", v.Kind, v.Stream, v.Revision, v.Detail)
}

// kindLimitedErrs collects errors per kind, keeping at most maxErrsPerKind
// of each and counting the rest.
type kindLimitedErrs[K comparable] struct {
	errs    map[K][]error
	dropped map[K]int
}

func newKindLimitedErrs[K comparable]() *kindLimitedErrs[K] {
	return &kindLimitedErrs[K]{errs: map[K][]error{}, dropped: map[K]int{}}
}

func (c *kindLimitedErrs[K]) add(kind K, err error) {
	if len(c.errs[kind]) >= maxErrsPerKind {
		c.dropped[kind]++
		return
	}
	c.errs[kind] = append(c.errs[kind], err)
}

// collect returns the errors in the given kind order, each kind followed by
// its "and N more" entry built by more when some were dropped; nil when
// nothing was added.
func (c *kindLimitedErrs[K]) collect(order []K, more func(K, int) error) []error {
	var out []error
	for _, k := range order {
		out = append(out, c.errs[k]...)
		if n := c.dropped[k]; n > 0 {
			out = append(out, more(k, n))
		}
	}
	return out
}

// CheckStreams returns every violation found (nil when all is well), each
// error a *StreamViolation naming the stream and revision. The rules:
//
//  1. Within a stream revisions are strictly increasing (this also forbids
//     duplicates) and every revision is > From.
//  2. Two streams that deliver the same revision deliver the same
//     collection, type and data; data is compared as JSON values (key order,
//     whitespace and number spelling such as 1 vs 1.0 do not matter; empty
//     data equals null).
//  3. No gaps: with U the union of all streams' events (all streams watch
//     the same prefix), every revision r in U with From < r <= the highest
//     revision S delivered must be in S. A stream may stop early; it must not
//     skip. A resumed stream that lost the first change after its since is
//     caught here as soon as it delivers anything later.
//  4. When want != nil it is the authoritative list of changes under the
//     prefix. Every revision of want that some stream covered (From < r <=
//     that stream's highest revision, which implies r <= the highest
//     revision any stream reached) must be in U; revisions before every
//     stream's start are not required. Events of U that are also in want
//     must agree with it, comparing only the fields want sets (an empty
//     Collection, Type or Data in want is not compared, so want may be built
//     from acknowledged writes that only know some fields). When
//     wantComplete is true U must not contain revisions absent from want.
//
// At most maxErrsPerKind errors of each kind are returned, followed by one
// "and N more" entry.
func CheckStreams(streams []Stream, want []StreamEvent, wantComplete bool) []error {
	errs := newKindLimitedErrs[StreamCheckKind]()
	report := func(kind StreamCheckKind, s *Stream, rev uint64, format string, args ...any) {
		v := &StreamViolation{Kind: kind, Revision: rev, Detail: fmt.Sprintf(format, args...)}
		if s != nil {
			v.Stream = streamLabel(s)
		}
		errs.add(kind, v)
	}

	// Rule 1, and the per-stream facts later rules need.
	type seenEvent struct {
		stream *Stream
		ev     StreamEvent
	}
	first := map[uint64]seenEvent{} // first delivery of each revision, in stream order
	has := make([]map[uint64]bool, len(streams))
	last := make([]uint64, len(streams))
	for i := range streams {
		s := &streams[i]
		has[i] = make(map[uint64]bool, len(s.Events))
		var prev uint64
		for j, ev := range s.Events {
			switch {
			case ev.Revision <= s.From:
				report(StreamBeforeFrom, s, ev.Revision, "delivered at position %d but the stream starts after revision %d", j, s.From)
			case j > 0 && ev.Revision == prev:
				report(StreamOrder, s, ev.Revision, "duplicate at position %d", j)
			case j > 0 && ev.Revision < prev:
				report(StreamOrder, s, ev.Revision, "out of order at position %d: follows revision %d", j, prev)
			}
			prev = ev.Revision
			has[i][ev.Revision] = true
			last[i] = max(last[i], ev.Revision)

			// Rule 2: compare every later delivery with the first one.
			f, ok := first[ev.Revision]
			if !ok {
				first[ev.Revision] = seenEvent{stream: s, ev: ev}
				continue
			}
			if f.stream == s {
				continue // a repeat within one stream is already an order violation
			}
			if d := eventDiff(f.ev, ev, false); d != "" {
				report(StreamMismatch, s, ev.Revision, "differs from stream %s: %s", streamLabel(f.stream), d)
			}
		}
	}

	union := make([]uint64, 0, len(first))
	for r := range first {
		union = append(union, r)
	}
	slices.Sort(union)

	// Rule 3.
	for i := range streams {
		s := &streams[i]
		if len(s.Events) == 0 {
			continue
		}
		start, _ := slices.BinarySearch(union, s.From+1)
		for _, r := range union[start:] {
			if r > last[i] {
				break
			}
			if !has[i][r] {
				f := first[r]
				report(StreamGap, s, r, "skipped (delivered by stream %s; this stream reached revision %d)", streamLabel(f.stream), last[i])
			}
		}
	}

	// Rule 4.
	if want != nil {
		wantBy := make(map[uint64]StreamEvent, len(want))
		for _, w := range want {
			if _, dup := wantBy[w.Revision]; !dup {
				wantBy[w.Revision] = w
			}
		}
		revs := make([]uint64, 0, len(wantBy))
		for r := range wantBy {
			revs = append(revs, r)
		}
		slices.Sort(revs)
		for _, r := range revs {
			f, inUnion := first[r]
			if inUnion {
				if d := eventDiff(wantBy[r], f.ev, true); d != "" {
					report(StreamWantMismatch, f.stream, r, "differs from want: %s", d)
				}
				continue
			}
			if i := coveringStream(streams, last, r); i >= 0 {
				report(StreamMissing, nil, r, "in want but delivered by no stream (stream %s covered (%d, %d])", streamLabel(&streams[i]), streams[i].From, last[i])
			}
		}
		if wantComplete {
			for _, r := range union {
				if _, ok := wantBy[r]; !ok {
					report(StreamExtra, first[r].stream, r, "delivered but absent from the complete want list")
				}
			}
		}
	}

	return errs.collect(streamKinds(), func(k StreamCheckKind, n int) error {
		return &StreamViolation{Kind: k, More: n}
	})
}

func streamLabel(s *Stream) string {
	name := s.Name
	if name == "" {
		name = "(unnamed)"
	}
	if s.Node != "" {
		name += "@" + s.Node
	}
	if s.Resumed {
		name += fmt.Sprintf(" (resumed since %d)", s.From)
	}
	return name
}

// coveringStream returns the index of the first stream whose range
// (From, highest delivered revision] holds r, or -1.
func coveringStream(streams []Stream, last []uint64, r uint64) int {
	for i := range streams {
		if len(streams[i].Events) > 0 && streams[i].From < r && r <= last[i] {
			return i
		}
	}
	return -1
}

// eventDiff describes how got differs from ref, or returns "" when they
// agree. With onlySet, fields left empty in ref are not compared.
func eventDiff(ref, got StreamEvent, onlySet bool) string {
	var diffs []string
	if (!onlySet || ref.Collection != "") && ref.Collection != got.Collection {
		diffs = append(diffs, fmt.Sprintf("collection %q vs %q", ref.Collection, got.Collection))
	}
	if (!onlySet || ref.Type != "") && ref.Type != got.Type {
		diffs = append(diffs, fmt.Sprintf("type %q vs %q", ref.Type, got.Type))
	}
	if (!onlySet || len(bytes.TrimSpace(ref.Data)) > 0) && !jsonEqual(ref.Data, got.Data) {
		diffs = append(diffs, fmt.Sprintf("data %s vs %s", abbrev(ref.Data), abbrev(got.Data)))
	}
	if len(diffs) == 0 {
		return ""
	}
	out := diffs[0]
	for _, d := range diffs[1:] {
		out += "; " + d
	}
	return out
}

func abbrev(b json.RawMessage) string {
	const maxLen = 120
	s := string(bytes.TrimSpace(b))
	if s == "" {
		return "(none)"
	}
	if len(s) > maxLen {
		return s[:maxLen] + "…"
	}
	return s
}

// jsonEqual reports whether a and b hold the same JSON value. Empty input
// counts as null. Input that is not valid JSON is compared byte for byte
// after trimming whitespace.
func jsonEqual(a, b json.RawMessage) bool {
	va, errA := decodeJSONValue(a)
	vb, errB := decodeJSONValue(b)
	if errA != nil || errB != nil {
		return bytes.Equal(bytes.TrimSpace(a), bytes.TrimSpace(b))
	}
	return jsonValuesEqual(va, vb)
}

func decodeJSONValue(b json.RawMessage) (any, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode event data: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("decode event data: trailing content after the value")
	}
	return v, nil
}

func jsonValuesEqual(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		if x == y {
			return true
		}
		// Parse with big.Float rather than big.Rat: a huge exponent would
		// make big.Rat allocate the whole integer.
		const prec = 256
		fx, _, errX := new(big.Float).SetPrec(prec).Parse(string(x), 10)
		fy, _, errY := new(big.Float).SetPrec(prec).Parse(string(y), 10)
		return errX == nil && errY == nil && fx.Cmp(fy) == 0
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonValuesEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, vx := range x {
			vy, ok := y[k]
			if !ok || !jsonValuesEqual(vx, vy) {
				return false
			}
		}
		return true
	default:
		return false
	}
}

package robustness

import (
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"
)

func sev(rev uint64, coll, typ, data string) StreamEvent {
	e := StreamEvent{Revision: rev, Collection: coll, Type: typ}
	if data != "" {
		e.Data = json.RawMessage(data)
	}
	return e
}

// sevSet is a "set" event in collection "c" with data {"v":rev}.
func sevSet(rev uint64) StreamEvent {
	b, _ := json.Marshal(map[string]uint64{"v": rev})
	return sev(rev, "c", "set", string(b))
}

func sevSets(revs ...uint64) []StreamEvent {
	out := make([]StreamEvent, len(revs))
	for i, r := range revs {
		out[i] = sevSet(r)
	}
	return out
}

func streamKindCounts(t *testing.T, errs []error) map[StreamCheckKind]int {
	t.Helper()
	got := map[StreamCheckKind]int{}
	for _, err := range errs {
		var v *StreamViolation
		if !errors.As(err, &v) {
			t.Fatalf("error %v is not a *StreamViolation", err)
		}
		got[v.Kind]++
	}
	return got
}

func TestCheckStreams(t *testing.T) {
	tests := []struct {
		name         string
		streams      []Stream
		want         []StreamEvent
		wantComplete bool
		kinds        map[StreamCheckKind]int
	}{
		{
			name: "clean streams on several nodes",
			streams: []Stream{
				{Name: "n1/sub1", Node: "n1", From: 3, Events: sevSets(5, 7, 9, 12)},
				{Name: "n2/sub1", Node: "n2", From: 5, Events: sevSets(7, 9)}, // stopped early
				{Name: "n3/sub1", Node: "n3", From: 7, Events: sevSets(9, 12), Resumed: true},
				{Name: "n4/sub1", Node: "n4", From: 12}, // nothing after its snapshot
			},
			want:         sevSets(1, 5, 7, 9, 12, 15), // 1 predates every stream, 15 is beyond them
			wantComplete: true,
		},
		{
			name:    "out of order",
			streams: []Stream{{Name: "n1/sub1", From: 0, Events: sevSets(5, 9, 7)}},
			kinds:   map[StreamCheckKind]int{StreamOrder: 1},
		},
		{
			name:    "duplicate",
			streams: []Stream{{Name: "n1/sub1", From: 0, Events: sevSets(5, 7, 7, 9)}},
			kinds:   map[StreamCheckKind]int{StreamOrder: 1},
		},
		{
			name:    "revision equal to From",
			streams: []Stream{{Name: "n1/sub1", From: 5, Events: sevSets(5, 7)}},
			kinds:   map[StreamCheckKind]int{StreamBeforeFrom: 1},
		},
		{
			name:    "revision below From",
			streams: []Stream{{Name: "n1/sub1", From: 5, Events: sevSets(3, 7)}},
			kinds:   map[StreamCheckKind]int{StreamBeforeFrom: 1},
		},
		{
			name: "gap in the middle",
			streams: []Stream{
				{Name: "n1/sub1", From: 0, Events: sevSets(5, 7, 9)},
				{Name: "n2/sub1", From: 0, Events: sevSets(5, 9)},
			},
			kinds: map[StreamCheckKind]int{StreamGap: 1},
		},
		{
			name: "different data for the same revision on two nodes",
			streams: []Stream{
				{Name: "n1/sub1", From: 0, Events: []StreamEvent{sev(7, "c", "set", `{"a":1}`)}},
				{Name: "n2/sub1", From: 0, Events: []StreamEvent{sev(7, "c", "set", `{"a":2}`)}},
			},
			kinds: map[StreamCheckKind]int{StreamMismatch: 1},
		},
		{
			name: "different type and collection for the same revision",
			streams: []Stream{
				{Name: "n1/sub1", From: 0, Events: []StreamEvent{sev(7, "c/x", "set", `{"a":1}`)}},
				{Name: "n2/sub1", From: 0, Events: []StreamEvent{sev(7, "c/y", "delete", "")}},
			},
			kinds: map[StreamCheckKind]int{StreamMismatch: 1},
		},
		{
			name: "JSON-equal data with different key order and spacing passes",
			streams: []Stream{
				{Name: "n1/sub1", From: 0, Events: []StreamEvent{sev(7, "c", "set", `{"a":1,"b":[1,{"x":null,"y":"s"}]}`)}},
				{Name: "n2/sub1", From: 0, Events: []StreamEvent{sev(7, "c", "set", ` { "b" : [ 1.0, {"y":"s", "x":null} ], "a" : 1 } `)}},
			},
		},
		{
			name: "delete without data equals delete with null data",
			streams: []Stream{
				{Name: "n1/sub1", From: 0, Events: []StreamEvent{sev(7, "c", "delete", "")}},
				{Name: "n2/sub1", From: 0, Events: []StreamEvent{sev(7, "c", "delete", "null")}},
			},
		},
		{
			name: "resumed stream missing the first event after From",
			streams: []Stream{
				{Name: "n1/sub1", From: 0, Events: sevSets(5, 7, 9)},
				{Name: "n2/sub2", From: 5, Events: sevSets(9), Resumed: true},
			},
			kinds: map[StreamCheckKind]int{StreamGap: 1},
		},
		{
			name:    "lone resumed stream missing the first event after From is caught by want",
			streams: []Stream{{Name: "n2/sub2", From: 5, Events: sevSets(9), Resumed: true}},
			want:    sevSets(5, 7, 9),
			kinds:   map[StreamCheckKind]int{StreamMissing: 1},
		},
		{
			name: "union missing an acknowledged write",
			streams: []Stream{
				{Name: "n1/sub1", From: 0, Events: sevSets(5, 9)},
				{Name: "n2/sub1", From: 0, Events: sevSets(5, 9)},
			},
			want:  sevSets(5, 7, 9, 11), // 11 is beyond every stream: not required
			kinds: map[StreamCheckKind]int{StreamMissing: 1},
		},
		{
			name:         "extra revision when want is complete",
			streams:      []Stream{{Name: "n1/sub1", From: 0, Events: sevSets(5, 6, 7)}},
			want:         sevSets(5, 7),
			wantComplete: true,
			kinds:        map[StreamCheckKind]int{StreamExtra: 1},
		},
		{
			name:    "extra revision allowed when want is incomplete",
			streams: []Stream{{Name: "n1/sub1", From: 0, Events: sevSets(5, 6, 7)}},
			want:    sevSets(5, 7),
		},
		{
			name:    "event disagreeing with want",
			streams: []Stream{{Name: "n1/sub1", From: 0, Events: sevSets(5, 7)}},
			want:    []StreamEvent{sevSet(5), sev(7, "c", "delete", "")},
			kinds:   map[StreamCheckKind]int{StreamWantMismatch: 1},
		},
		{
			name:         "want with revisions only compares revisions",
			streams:      []Stream{{Name: "n1/sub1", From: 0, Events: sevSets(5, 7)}},
			want:         []StreamEvent{{Revision: 5}, {Revision: 7}},
			wantComplete: true,
		},
		{
			name:    "errors of one kind are bounded",
			streams: []Stream{{Name: "n1/sub1", From: 0, Events: sevSets(30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1)}},
			kinds:   map[StreamCheckKind]int{StreamOrder: maxErrsPerKind + 1}, // 20 errors and one "and 9 more"
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			errs := CheckStreams(tc.streams, tc.want, tc.wantComplete)
			if len(tc.kinds) == 0 {
				if errs != nil {
					t.Fatalf("CheckStreams = %v, want nil", errs)
				}
				return
			}
			if got := streamKindCounts(t, errs); !maps.Equal(got, tc.kinds) {
				t.Fatalf("violation kinds = %v, want %v; errors: %v", got, tc.kinds, errs)
			}
		})
	}
}

func TestCheckStreamsErrorNamesStreamAndRevision(t *testing.T) {
	errs := CheckStreams([]Stream{
		{Name: "n1/sub1", Node: "n1", From: 0, Events: sevSets(5, 7, 9)},
		{Name: "n2/sub1", Node: "n2", From: 0, Events: sevSets(5, 9)},
	}, nil, false)
	if len(errs) != 1 {
		t.Fatalf("got %d errors, want 1: %v", len(errs), errs)
	}
	var v *StreamViolation
	if !errors.As(errs[0], &v) || v.Stream == "" || v.Revision != 7 || v.Kind != StreamGap {
		t.Fatalf("violation = %+v, want a gap at revision 7 naming the stream", v)
	}
	msg := errs[0].Error()
	for _, s := range []string{"n2/sub1", "revision 7", "n1/sub1"} {
		if !strings.Contains(msg, s) {
			t.Errorf("error %q does not mention %q", msg, s)
		}
	}
}

func TestCheckStreamsBoundedSummary(t *testing.T) {
	var evs []StreamEvent
	for r := uint64(100); r >= 1; r-- {
		evs = append(evs, sevSet(r))
	}
	errs := CheckStreams([]Stream{{Name: "n1/sub1", Events: evs}}, nil, false)
	if len(errs) != maxErrsPerKind+1 {
		t.Fatalf("got %d errors, want %d", len(errs), maxErrsPerKind+1)
	}
	var v *StreamViolation
	if !errors.As(errs[len(errs)-1], &v) || v.More != 99-maxErrsPerKind {
		t.Fatalf("last error = %v, want the summary of %d more", errs[len(errs)-1], 99-maxErrsPerKind)
	}
	if !strings.Contains(v.Error(), "and 79 more") {
		t.Fatalf("summary %q does not say how many were left off", v.Error())
	}
}

func TestJSONEqual(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`, true},
		{`1`, `1.0`, true},
		{`1e2`, `100`, true},
		{`12345678901234567890`, `12345678901234567891`, false},
		{`[1,2]`, `[2,1]`, false},
		{`{"a":1}`, `{"a":1,"b":null}`, false},
		{``, `null`, true},
		{`"1"`, `1`, false},
		{`not json`, `not json`, true},
		{`not json`, `"not json"`, false},
	}
	for _, tc := range tests {
		if got := jsonEqual(json.RawMessage(tc.a), json.RawMessage(tc.b)); got != tc.want {
			t.Errorf("jsonEqual(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

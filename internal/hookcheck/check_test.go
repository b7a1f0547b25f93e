package hookcheck

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

// h builds a history: each step is "path@rev" (accepted) or "path@rev!"
// (answered 503), delivered at t0 + 100ms x its index, of trigger "t".
func h(steps ...string) []Delivery {
	var out []Delivery
	for i, s := range steps {
		status := 200
		if strings.HasSuffix(s, "!") {
			s, status = strings.TrimSuffix(s, "!"), 503
		}
		path, rev, _ := strings.Cut(s, "@")
		var r uint64
		for _, c := range rev {
			r = r*10 + uint64(c-'0')
		}
		p := payloadFor("t", r, path, "update")
		b, _ := json.Marshal(p)
		at := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		out = append(out, Delivery{Seq: i, Payload: p, Body: b, Attempt: 1, Status: status, Received: at, At: at})
	}
	return out
}

func exp(steps ...string) []Expected {
	var out []Expected
	for _, d := range h(steps...) {
		out = append(out, Expected{Trigger: "t", Path: d.Payload.Path, Revision: d.Payload.Revision, Type: "update"})
	}
	return out
}

func kindsOf(errs []error) map[Kind]int {
	out := map[Kind]int{}
	for _, err := range errs {
		var v *Violation
		if errors.As(err, &v) {
			out[v.Kind]++
		}
	}
	return out
}

func TestCheck(t *testing.T) {
	change := func(ms int) LeaderChange { return LeaderChange{At: t0.Add(time.Duration(ms) * time.Millisecond)} }
	cases := []struct {
		name     string
		expected []Expected
		ds       []Delivery
		opts     Options
		want     map[Kind]int // nil: no violation
		check    func(t *testing.T, r Report)
	}{
		{name: "in order, two paths interleaved",
			expected: exp("a@1", "b@2", "a@3", "b@4"),
			ds:       h("a@1", "b@2", "b@4", "a@3"),
			check: func(t *testing.T, r Report) {
				if r.Delivered != 4 || r.Duplicates != 0 || r.Order != 0 {
					t.Errorf("report %+v", r)
				}
			}},
		{name: "retries before acceptance are not duplicates",
			expected: exp("a@1", "a@2"),
			ds:       h("a@1!", "a@1!", "a@1", "a@2"),
			check: func(t *testing.T, r Report) {
				if r.Refused != 2 || r.Duplicates != 0 {
					t.Errorf("report %+v", r)
				}
			}},
		{name: "missing event",
			expected: exp("a@1", "a@2", "b@3"),
			ds:       h("a@1", "b@3"),
			want:     map[Kind]int{Missing: 1},
			check: func(t *testing.T, r Report) {
				if r.Missing != 1 || len(r.MissingList) != 1 || r.MissingList[0] != "t:2:a" {
					t.Errorf("report %+v", r)
				}
			}},
		{name: "only failed attempts: missing",
			expected: exp("a@1"),
			ds:       h("a@1!", "a@1!"),
			want:     map[Kind]int{Missing: 1}},
		{name: "lower revision first accepted after a higher one",
			expected: exp("a@1", "a@2"),
			ds:       h("a@2", "a@1"),
			want:     map[Kind]int{Order: 1}},
		{name: "a failed first attempt overtaken by the next event is out of order",
			expected: exp("a@1", "a@2"),
			ds:       h("a@1!", "a@2", "a@1"),
			want:     map[Kind]int{Order: 1}},
		{name: "order is per path: b may pass a",
			expected: exp("a@1", "b@2"),
			ds:       h("b@2", "a@1"),
		},
		{name: "re-delivery after a leader change is excused and not an order violation",
			expected: exp("a@1", "a@2", "a@3"),
			ds:       h("a@1", "a@2", "a@3", "a@2", "a@3"),
			opts:     Options{Changes: []LeaderChange{change(250)}, Slack: 50 * time.Millisecond},
			check: func(t *testing.T, r Report) {
				if r.Duplicates != 2 || r.DuplicatesOutsideChange != 0 || len(r.PerChange) != 1 || r.PerChange[0] != 2 || len(r.DuplicateTimes) != 2 {
					t.Errorf("report %+v", r)
				}
			}},
		{name: "duplicate without a leader change",
			expected: exp("a@1", "a@2"),
			ds:       h("a@1", "a@1", "a@2"),
			want:     map[Kind]int{Duplicate: 1}},
		{name: "duplicate far from the only leader change",
			expected: exp("a@1", "a@2"),
			ds:       h("a@1", "a@2", "a@1", "a@2", "a@2", "a@2"),
			opts:     Options{Changes: []LeaderChange{change(2000)}, Slack: 100 * time.Millisecond},
			want:     map[Kind]int{Duplicate: 4}},
		{name: "a copy long after the change is not excused by it",
			expected: exp("a@1", "a@2"),
			ds:       h("a@1", "a@2", "a@2", "a@1", "a@1", "a@1", "a@1", "a@1", "a@1", "a@1", "a@1", "a@1", "a@1", "a@2"),
			opts:     Options{Changes: []LeaderChange{change(150)}, Slack: 10 * time.Millisecond, Window: 200 * time.Millisecond},
			want:     map[Kind]int{Duplicate: 10},
			check: func(t *testing.T, r Report) {
				// a@2's copy at 200ms is excused; a@1's copies at 300ms (by
				// the change at 150ms: within the window), then 400ms..1200ms
				// are not, and a@2's at 1300ms is not.
				if r.Duplicates != 12 || r.DuplicatesOutsideChange != 10 {
					t.Errorf("report %+v", r)
				}
			}},
		{name: "one change excuses one copy of an event",
			expected: exp("a@1"),
			ds:       h("a@1", "a@1", "a@1"),
			opts:     Options{Changes: []LeaderChange{change(50)}, Slack: time.Second},
			want:     map[Kind]int{Duplicate: 1}},
		{name: "two changes excuse two copies",
			expected: exp("a@1"),
			ds:       h("a@1", "a@1", "a@1"),
			opts:     Options{Changes: []LeaderChange{change(50), change(150)}, Slack: 10 * time.Millisecond},
		},
		{name: "burst: more duplicates at a change than in flight",
			expected: exp("a@1", "b@2", "c@3"),
			ds:       h("a@1", "b@2", "c@3", "a@1", "b@2", "c@3"),
			opts:     Options{Changes: []LeaderChange{change(250)}, Slack: time.Second, MaxPerChange: 2},
			want:     map[Kind]int{Burst: 1}},
		{name: "unexpected event",
			expected: exp("a@1"),
			ds:       h("a@1", "a@5"),
			want:     map[Kind]int{Unexpected: 1}},
		{name: "maybe events are neither missing nor unexpected, but ordered",
			expected: exp("a@1", "a@3"),
			ds:       h("a@2", "a@1", "a@3"),
			opts:     Options{Maybe: exp("a@2", "a@4")},
			want:     map[Kind]int{Order: 1}},
		{name: "a replayed dead letter may come after later revisions",
			expected: exp("a@1", "a@2", "a@3"),
			ds:       h("a@1!", "a@2", "a@3", "a@1"),
			opts:     Options{Replayed: map[string]bool{"t:1:a": true}},
		},
		{name: "copies that differ",
			expected: exp("a@1"),
			ds: func() []Delivery {
				ds := h("a@1", "a@1")
				ds[1].Body = []byte(`{"different":true}`)
				return ds
			}(),
			opts: Options{Changes: []LeaderChange{change(50)}, Slack: time.Second},
			want: map[Kind]int{Mismatch: 1}},
		{name: "wrong type and data",
			expected: []Expected{{Trigger: "t", Path: "a", Revision: 1, Type: "create", After: json.RawMessage(`{"n": 3}`)}},
			ds:       h("a@1"),
			want:     map[Kind]int{Mismatch: 2}},
		{name: "data compared as JSON values",
			expected: []Expected{{Trigger: "t", Path: "a", Revision: 1, After: json.RawMessage(`{ "n" : 2.0 }`)}},
			ds:       h("a@1"),
		},
		{name: "arrival order is Seq, not the slice's",
			expected: exp("a@1", "a@2"),
			ds: func() []Delivery {
				ds := h("a@1", "a@2")
				ds[0], ds[1] = ds[1], ds[0]
				return ds
			}(),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep, errs := Check(tc.expected, tc.ds, tc.opts)
			got := kindsOf(errs)
			if len(got) != len(tc.want) {
				t.Fatalf("violations %v (%v), want %v", got, errs, tc.want)
			}
			for k, n := range tc.want {
				if got[k] != n {
					t.Fatalf("violations %v (%v), want %v", got, errs, tc.want)
				}
			}
			if tc.check != nil {
				tc.check(t, rep)
			}
		})
	}
}

func TestCheckBoundsErrors(t *testing.T) {
	var steps []string
	for i := range 30 {
		steps = append(steps, "p"+string(rune('a'+i%26))+string(rune('a'+i/26))+"@1")
	}
	rep, errs := Check(exp(steps...), nil, Options{})
	if rep.Missing != 30 || len(errs) != maxPerKind+1 {
		t.Fatalf("missing %d, %d errors, want 30 and %d", rep.Missing, len(errs), maxPerKind+1)
	}
	var v *Violation
	if !errors.As(errs[len(errs)-1], &v) || v.More != 30-maxPerKind {
		t.Fatalf("last error %v, want an 'and %d more'", errs[len(errs)-1], 30-maxPerKind)
	}
}

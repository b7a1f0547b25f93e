package hookcheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Expected is a committed change a trigger matches, which must be
// delivered.
type Expected struct {
	Trigger  string
	Path     string // project-relative
	Revision uint64
	// Type, when set, is the type the delivery must carry.
	Type string
	// After, when set, is the document data the delivery must carry as
	// after (compared as JSON values).
	After json.RawMessage
}

// ID is the event's idempotency key.
func (e Expected) ID() string { return EventID(e.Trigger, e.Revision, e.Path) }

// LeaderChange is when leadership moved, as a test observed it.
type LeaderChange struct {
	At time.Time
}

// Options tune Check.
type Options struct {
	// Changes are the leadership changes seen during the run; Slack widens
	// the window in which one excuses a duplicate (the lag between the real
	// change and the test seeing it).
	Changes []LeaderChange
	Slack   time.Duration
	// Window, when set, bounds how long after the change that excuses it
	// a re-delivery may come (a new leader re-sends at once, an old one
	// finishes what it had in flight when it resumes): a copy an hour
	// later is not excused by a change in between.
	Window time.Duration
	// MaxPerChange bounds the duplicates one change may excuse (0: no
	// bound): a new leader re-sends at most what was in flight.
	MaxPerChange int
	// Maybe are changes that may or may not be delivered (a write of
	// unknown outcome the test could not settle): neither missing nor
	// unexpected, but ordered and de-duplicated like the others.
	Maybe []Expected
	// Replayed are event ids delivered again by an owner's replay of a
	// dead letter: their first acceptance may come after later revisions
	// of the same path (it does not count for order).
	Replayed map[string]bool
}

// Kind names the rule a Violation breaks.
type Kind string

// The kinds of violations Check reports.
const (
	Missing    Kind = "missing"    // an expected change never accepted
	Order      Kind = "order"      // a first acceptance after that of a higher revision of the same path
	Duplicate  Kind = "duplicate"  // a copy no leadership change excuses
	Unexpected Kind = "unexpected" // an accepted event nobody expected
	Mismatch   Kind = "mismatch"   // a delivery's content differs from what was expected or from another copy
	Burst      Kind = "burst"      // one change excused more duplicates than MaxPerChange
)

var kinds = []Kind{Missing, Order, Duplicate, Unexpected, Mismatch, Burst}

// maxPerKind bounds the violations reported of one kind before an "and N
// more" entry.
const maxPerKind = 20

// Violation is one broken promise.
type Violation struct {
	Kind   Kind
	ID     string // the event (trigger:revision:path); "" for a summary
	Detail string
	More   int // non-zero only for the "and N more" entry
}

func (v *Violation) Error() string {
	if v.More > 0 {
		return fmt.Sprintf("hookcheck %s: and %d more", v.Kind, v.More)
	}
	return fmt.Sprintf("hookcheck %s: %s: %s", v.Kind, v.ID, v.Detail)
}

// Report summarises a check.
type Report struct {
	Expected  int // distinct expected events
	Delivered int // expected events accepted at least once
	Missing   int
	Requests  int // deliveries judged (every attempt)
	Refused   int // deliveries the receiver did not accept (scripted failures, canceled)
	// Duplicates counts accepted copies after an event's first acceptance
	// (an event accepted 3 times counts 2); DuplicatesOutsideChange those
	// no leadership change excuses.
	Duplicates              int
	DuplicatesOutsideChange int
	// PerChange is how many duplicates each change (in Options.Changes'
	// order, sorted by time) excused.
	PerChange []int
	// DuplicateTimes are when the excess copies arrived.
	DuplicateTimes []time.Time
	Order          int
	Unexpected     int
	MissingList    []string // the first missing ids, in the order of expected
}

type eventKey struct {
	trigger, path string
	rev           uint64
}

// Check judges deliveries (every request the receiver kept, in arrival
// order) against expected:
//
//   - every expected change is accepted (answered 2xx) at least once, with
//     the expected type and data; every accepted copy of an event carries
//     the same payload;
//   - nothing is accepted that is neither expected nor in Options.Maybe;
//   - order, per (trigger, path): in the sequence of accepted deliveries,
//     each event's first acceptance comes after the first acceptances of
//     every lower revision it follows, so the first acceptances are
//     increasing; a later copy of an event already accepted is a
//     re-delivery (at least once), not an order violation. Failed attempts
//     are not acceptances: an event accepted after a higher one was is out
//     of order however often it was tried before;
//   - each re-delivery is excused only by a leadership change in
//     [previous copy - slack, this copy + slack] not yet used by this
//     event (one move makes one new leader re-send once), at most Window
//     (plus slack) before this copy, and no change excuses more than
//     MaxPerChange of them.
func Check(expected []Expected, deliveries []Delivery, opts Options) (Report, []error) {
	slack := max(opts.Slack, 0)
	counts := map[Kind]int{}
	var errs []error
	report := func(k Kind, id, format string, args ...any) {
		counts[k]++
		if counts[k] <= maxPerKind {
			errs = append(errs, &Violation{Kind: k, ID: id, Detail: fmt.Sprintf(format, args...)})
		}
	}

	want := map[eventKey]Expected{}
	var order []eventKey
	for _, e := range expected {
		k := eventKey{e.Trigger, e.Path, e.Revision}
		if _, ok := want[k]; !ok {
			order = append(order, k)
		}
		want[k] = e
	}
	maybe := map[eventKey]Expected{}
	for _, e := range opts.Maybe {
		maybe[eventKey{e.Trigger, e.Path, e.Revision}] = e
	}

	ds := slices.Clone(deliveries)
	slices.SortStableFunc(ds, func(a, b Delivery) int { return a.Seq - b.Seq })
	rep := Report{Expected: len(order), Requests: len(ds)}

	copies := map[eventKey][]Delivery{}
	type lane struct{ trigger, path string }
	highest := map[lane]uint64{} // highest revision first-accepted so far
	highestID := map[lane]string{}
	for _, d := range ds {
		if !d.Accepted() {
			rep.Refused++
			continue
		}
		p := d.Payload
		k := eventKey{p.Trigger, p.Path, p.Revision}
		e, ok := want[k]
		if !ok {
			e, ok = maybe[k]
		}
		if !ok {
			if len(copies[k]) == 0 {
				rep.Unexpected++
				report(Unexpected, p.ID, "accepted at %s (type %s) but not a change that should fire", d.At.Format(time.RFC3339Nano), p.Type)
			}
			copies[k] = append(copies[k], d)
			continue
		}
		if prev := copies[k]; len(prev) > 0 {
			if !bytes.Equal(prev[0].Body, d.Body) {
				report(Mismatch, p.ID, "copies differ: %s then %s", prev[0].Body, d.Body)
			}
			copies[k] = append(copies[k], d)
			continue
		}
		copies[k] = append(copies[k], d)
		if e.Type != "" && p.Type != e.Type {
			report(Mismatch, p.ID, "type %q, want %q", p.Type, e.Type)
		}
		if e.After != nil && !jsonEqual(e.After, p.After) {
			report(Mismatch, p.ID, "after %s, want %s", p.After, e.After)
		}
		if opts.Replayed[p.ID] {
			continue
		}
		l := lane{p.Trigger, p.Path}
		if h := highest[l]; p.Revision < h {
			rep.Order++
			report(Order, p.ID, "first accepted at %s, after %s was", d.At.Format(time.RFC3339Nano), highestID[l])
		} else {
			highest[l], highestID[l] = p.Revision, p.ID
		}
	}

	for _, k := range order {
		if len(copies[k]) == 0 {
			rep.Missing++
			id := want[k].ID()
			if len(rep.MissingList) < 50 {
				rep.MissingList = append(rep.MissingList, id)
			}
			report(Missing, id, "committed and never accepted")
			continue
		}
		rep.Delivered++
	}

	times := make([]time.Time, len(opts.Changes))
	for i, c := range opts.Changes {
		times[i] = c.At
	}
	slices.SortFunc(times, time.Time.Compare)
	rep.PerChange = make([]int, len(times))
	keys := make([]eventKey, 0, len(copies))
	for k := range copies {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b eventKey) int { return copies[a][0].Seq - copies[b][0].Seq })
	for _, k := range keys {
		cs := copies[k]
		next := 0 // the first change this event has not used
		for i := 1; i < len(cs); i++ {
			prev, cur := cs[i-1], cs[i]
			rep.Duplicates++
			rep.DuplicateTimes = append(rep.DuplicateTimes, cur.At)
			lo, hi := prev.At.Add(-slack), cur.At.Add(slack)
			if opts.Window > 0 {
				if w := cur.At.Add(-opts.Window - slack); w.After(lo) {
					lo = w
				}
			}
			for next < len(times) && times[next].Before(lo) {
				next++
			}
			if next < len(times) && !times[next].After(hi) {
				rep.PerChange[next]++
				next++
				continue
			}
			rep.DuplicatesOutsideChange++
			report(Duplicate, cur.Payload.ID, "copies accepted at %s and %s (attempts %d, %d) with no unused leadership change between them (slack %s, window %s)",
				prev.At.Format(time.RFC3339Nano), cur.At.Format(time.RFC3339Nano), prev.Attempt, cur.Attempt, slack, opts.Window)
		}
	}
	if opts.MaxPerChange > 0 {
		for i, n := range rep.PerChange {
			if n > opts.MaxPerChange {
				report(Burst, fmt.Sprintf("change at %s", times[i].Format(time.RFC3339Nano)), "excused %d duplicates, more than %d", n, opts.MaxPerChange)
			}
		}
	}

	for _, k := range kinds {
		if n := counts[k] - maxPerKind; n > 0 {
			errs = append(errs, &Violation{Kind: k, More: n})
		}
	}
	return rep, errs
}

// jsonEqual compares two JSON texts as values.
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

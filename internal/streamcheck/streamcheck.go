// Package streamcheck is a test oracle for realtime streams, used only by
// tests: a Ledger records what the answers of writes say was committed, a
// Collector gathers what a realtime subscription received, and Check
// compares the two.
package streamcheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgebase/edgebase/realtime/client"
)

// Compact returns JSON compacted, "" for nothing or null, and a marked
// string for invalid JSON.
func Compact(b []byte) string {
	if len(b) == 0 || string(b) == "null" {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return "!invalid:" + string(b)
	}
	return buf.String()
}

// ---- the ledger: what the writes' answers say was committed ----

// Event is one change: as acknowledged by a write, or as received.
type Event struct {
	Rev        uint64
	Coll       string
	Type       string // client.TypeSet or client.TypeDelete
	Data       string // compacted JSON; "" for a delete
	UpdateTime string
	// Marker, for writes of unknown outcome whose resulting document is
	// not known exactly: a string the document's data must contain.
	Marker string
}

func (e Event) String() string {
	return fmt.Sprintf("{rev %d %s %s %s}", e.Rev, e.Type, e.Coll, e.Data)
}

func key(rev uint64, coll string) string { return strconv.FormatUint(rev, 10) + " " + coll }

// Ledger records acknowledged changes, and writes whose outcome the writer
// could not know (a dropped connection, a 5xx during an election), which
// may land at most once. It is safe for concurrent use.
type Ledger struct {
	mu      sync.Mutex
	acked   []Event         // acknowledged writes
	maybe   []Event         // writes of unknown outcome (Rev 0)
	txnRevs map[uint64]bool // revisions of multi-document transactions
	paths   map[string]bool // every path written
	nAcks   int             // acknowledged operations
	max     uint64          // highest acknowledged revision
	retries map[string]int  // why writes were retried
	lastErr map[string]string
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{txnRevs: map[uint64]bool{}, paths: map[string]bool{}, retries: map[string]int{}, lastErr: map[string]string{}}
}

// Ack records one acknowledged operation and its changes: several changes
// with txn for a multi-document transaction (they share a revision), none
// for an operation that changed nothing observable (a delete an earlier
// attempt of unknown outcome already made).
func (l *Ledger) Ack(txn bool, evs ...Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range evs {
		l.acked = append(l.acked, e)
		l.paths[e.Coll] = true
		l.max = max(l.max, e.Rev)
		if txn {
			l.txnRevs[e.Rev] = true
		}
	}
	l.nAcks++
}

// Unknown records the possible changes of a write of unknown outcome, and
// why it is retried.
func (l *Ledger) Unknown(why, detail string, evs ...Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range evs {
		l.maybe = append(l.maybe, e)
		l.paths[e.Coll] = true
	}
	l.retries[why]++
	l.lastErr[why] = detail
}

// Retried records that a write was retried, and why.
func (l *Ledger) Retried(why, detail string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.retries[why]++
	l.lastErr[why] = detail
}

// Acks is the number of acknowledged operations.
func (l *Ledger) Acks() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nAcks
}

// Max is the highest acknowledged revision.
func (l *Ledger) Max() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.max
}

// Expected is every acknowledged change above rev, in (revision, path) order.
func (l *Ledger) Expected(above uint64) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Event
	for _, e := range l.acked {
		if e.Rev > above {
			out = append(out, e)
		}
	}
	SortEvents(out)
	return out
}

// Summary describes the ledger for a log.
func (l *Ledger) Summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := fmt.Sprintf("%d acknowledged operations (%d changes, %d transactions), %d changes of unknown outcome, max rev %d",
		l.nAcks, len(l.acked), len(l.txnRevs), len(l.maybe), l.max)
	for why, n := range l.retries {
		s += fmt.Sprintf("; retried %dx after %s (last: %s)", n, why, l.lastErr[why])
	}
	return s
}

// Paths is every path written (or possibly written), sorted.
func (l *Ledger) Paths() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.paths))
	for p := range l.paths {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// SortEvents orders by revision, then path (the order of the changes of
// one transaction is not specified).
func SortEvents(evs []Event) {
	sort.SliceStable(evs, func(i, j int) bool {
		if evs[i].Rev != evs[j].Rev {
			return evs[i].Rev < evs[j].Rev
		}
		return evs[i].Coll < evs[j].Coll
	})
}

// ---- subscribers ----

// Fataler is the part of testing.T the waits use.
type Fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Collector gathers a subscription's events until it ends.
type Collector struct {
	Name  string
	Sub   *client.Subscription
	Start uint64            // the subscription's revision when collection began: the snapshot's, or since
	Docs  []client.Document // the snapshot

	closed chan struct{} // Events closed

	mu      sync.Mutex
	events  []Event
	other   []string // events other than changes (kind revision)
	last    uint64
	wake    chan struct{}
	endErr  error
	endTime time.Time
}

// NewCollector starts collecting sub's events. Start is exact only while
// no change of the subscribed prefix is in flight.
func NewCollector(name string, sub *client.Subscription) *Collector {
	col := &Collector{Name: name, Sub: sub, Start: sub.Revision(), Docs: sub.Documents(), closed: make(chan struct{}), wake: make(chan struct{})}
	go col.run()
	return col
}

func (col *Collector) run() {
	defer close(col.closed)
	for ev := range col.Sub.Events() {
		col.mu.Lock()
		if ev.Kind == client.KindChange {
			col.events = append(col.events, Event{Rev: ev.Revision, Coll: ev.Collection, Type: ev.Type, Data: Compact(ev.Data), UpdateTime: ev.UpdateTime})
			col.last = ev.Revision
		} else {
			col.other = append(col.other, fmt.Sprintf("%s %d", ev.Kind, ev.Revision))
		}
		close(col.wake)
		col.wake = make(chan struct{})
		col.mu.Unlock()
	}
	col.mu.Lock()
	col.endErr, col.endTime = col.Sub.Err(), time.Now()
	close(col.wake)
	col.wake = make(chan struct{})
	col.mu.Unlock()
}

// Closed is closed once the subscription's Events channel is.
func (col *Collector) Closed() <-chan struct{} { return col.closed }

// WaitFor waits until cond holds on the changes and the other events
// received so far (checked at every event) or total passed; cond must not
// keep or change the slices.
func (col *Collector) WaitFor(t Fataler, what string, total time.Duration, cond func(events []Event, other []string) bool) {
	t.Helper()
	deadline := time.NewTimer(total)
	defer deadline.Stop()
	for {
		col.mu.Lock()
		ok := cond(col.events, col.other)
		wake := col.wake
		n, last := len(col.events), col.last
		col.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-wake:
		case <-deadline.C:
			t.Fatalf("%s: %s not reached within %v (%d changes received, last revision %d, ended: %v)", col.Name, what, total, n, last, col.Sub.Err())
		}
	}
}

// WaitRev waits until a change at revision rev or above arrived.
func (col *Collector) WaitRev(t Fataler, rev uint64, total time.Duration) {
	t.Helper()
	col.WaitFor(t, fmt.Sprintf("revision %d", rev), total, func([]Event, []string) bool { return col.last >= rev })
}

// WaitCount waits until n changes arrived.
func (col *Collector) WaitCount(t Fataler, n int, total time.Duration) {
	t.Helper()
	col.WaitFor(t, fmt.Sprintf("%d changes", n), total, func(evs []Event, _ []string) bool { return len(evs) >= n })
}

// Snapshot returns the changes and the other events received so far.
func (col *Collector) Snapshot() ([]Event, []string) {
	col.mu.Lock()
	defer col.mu.Unlock()
	return slices.Clone(col.events), slices.Clone(col.other)
}

// Count is the number of changes received so far.
func (col *Collector) Count() int {
	col.mu.Lock()
	defer col.mu.Unlock()
	return len(col.events)
}

// Last is the revision of the last change received.
func (col *Collector) Last() uint64 {
	col.mu.Lock()
	defer col.mu.Unlock()
	return col.last
}

// End reports when the subscription's events ended and its error (zero
// while it runs).
func (col *Collector) End() (time.Time, error) {
	col.mu.Lock()
	defer col.mu.Unlock()
	return col.endTime, col.endErr
}

// ---- the check ----

// Reporter is the part of testing.T Check uses.
type Reporter interface {
	Helper()
	Errorf(format string, args ...any)
}

// Check compares what a subscriber received after revision above with the
// acknowledged writes: revisions never go down, a revision repeats only
// within one transaction and never for the same document, every
// acknowledged change is there exactly once with its data and update time,
// and anything else is the one possible landing of a write whose outcome
// the writer could not know.
func Check(t Reporter, name string, got []Event, above uint64, l *Ledger) {
	t.Helper()
	want := l.Expected(above)
	l.mu.Lock()
	maybe := slices.Clone(l.maybe)
	txnRevs := l.txnRevs
	l.mu.Unlock()
	wantRevs := map[uint64]bool{}
	for _, e := range want {
		wantRevs[e.Rev] = true
	}
	errs := 0
	report := func(format string, args ...any) {
		if errs++; errs <= 12 {
			t.Errorf("%s: "+format, append([]any{name}, args...)...)
		}
	}
	var prev Event
	inRev := map[string]bool{}
	var core []Event
	for i, e := range got {
		if e.Rev <= above {
			report("change %d %v at or below the starting revision %d", i, e, above)
		}
		if i > 0 && e.Rev < prev.Rev {
			report("change %d %v after %v: revision went down", i, e, prev)
		}
		if i == 0 || e.Rev != prev.Rev {
			clear(inRev)
		} else if !txnRevs[e.Rev] && !strings.Contains(e.Coll, "/txn") {
			report("change %d %v shares revision %d with %v, which is no transaction of several documents", i, e, e.Rev, prev)
		}
		if inRev[e.Coll] {
			report("change %d %v: document changed twice at one revision (duplicate)", i, e)
		}
		inRev[e.Coll] = true
		prev = e
		if wantRevs[e.Rev] {
			core = append(core, e)
			continue
		}
		matched := -1
		for k, m := range maybe {
			if m.Coll == e.Coll && m.Type == e.Type && (m.Data == "" || m.Data == e.Data) && (m.Marker == "" || strings.Contains(e.Data, m.Marker)) {
				matched = k
				break
			}
		}
		if matched < 0 {
			report("change %d %v matches no acknowledged write and no write of unknown outcome", i, e)
			continue
		}
		maybe = slices.Delete(maybe, matched, matched+1)
	}
	SortEvents(core)
	have := map[string]int{}
	for _, e := range core {
		have[key(e.Rev, e.Coll)]++
	}
	for k, n := range have {
		if n > 1 {
			report("change %s received %d times", k, n)
		}
	}
	wantIdx := map[string]Event{}
	for _, e := range want {
		wantIdx[key(e.Rev, e.Coll)] = e
		if have[key(e.Rev, e.Coll)] == 0 {
			report("acknowledged change %v never received (gap)", e)
		}
	}
	for _, e := range core {
		w, ok := wantIdx[key(e.Rev, e.Coll)]
		if !ok {
			report("change %v at the revision of an acknowledged write, but not that write", e)
			continue
		}
		if e.Type != w.Type || e.Data != w.Data || (w.Type == client.TypeSet && e.UpdateTime != w.UpdateTime) {
			report("change %v (updateTime %q) differs from the acknowledged write %v (updateTime %q)", e, e.UpdateTime, w, w.UpdateTime)
		}
	}
	if errs > 12 {
		t.Errorf("%s: ... %d problems in all", name, errs)
	}
	if errs == 0 && len(core) != len(want) {
		t.Errorf("%s: %d changes matched %d acknowledged ones", name, len(core), len(want))
	}
}

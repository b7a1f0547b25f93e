package robustness

import (
	"fmt"
	"slices"
	"time"
)

// Due is a notification that was due (accepted with 202 and due before the
// end of the run) and the devices it targets.
type Due struct {
	NotificationID string
	Devices        []string // FCM registration tokens
}

// Delivery is one message the stand-in FCM received.
type Delivery struct {
	NotificationID string
	Device         string
	At             time.Time
	LeaderTerm     uint64 // 0 if unknown
}

// LeaderChange is when leadership moved (from the test's observations).
type LeaderChange struct {
	At time.Time
}

// PushReport summarises a push delivery check.
type PushReport struct {
	Expected                int      // distinct (notification, device) pairs that were due
	Delivered               int      // due pairs delivered at least once
	Missing                 int      // due pairs never delivered
	Duplicates              int      // extra copies of due pairs (a pair delivered 3 times counts 2)
	DuplicatesOutsideChange int      // extra copies no leader change excuses
	MissingList             []string // "notif→device", in the order of due
}

// PushCheckKind names the rule a PushViolation breaks.
type PushCheckKind string

// The kinds of push violations CheckPush reports.
const (
	PushMissing    PushCheckKind = "missing"    // a due pair was never delivered
	PushDuplicate  PushCheckKind = "duplicate"  // an extra copy no leader change excuses
	PushUnexpected PushCheckKind = "unexpected" // a delivery for a pair that was not due
)

func pushKinds() []PushCheckKind {
	return []PushCheckKind{PushMissing, PushDuplicate, PushUnexpected}
}

// PushViolation is one broken promise found by CheckPush.
type PushViolation struct {
	Kind           PushCheckKind
	NotificationID string
	Device         string
	Detail         string
	// More is non-zero only for the summary entry that stands in for
	// violations left off once maxErrsPerKind was reached.
	More int
}

func (v *PushViolation) Error() string {
	if v.More > 0 {
		return fmt.Sprintf("push check %s: and %d more", v.Kind, v.More)
	}
	return fmt.Sprintf("push check %s: %s→%s: %s", v.Kind, v.NotificationID, v.Device, v.Detail)
}

type pushPair struct{ notification, device string }

// CheckPush checks push delivery across leader changes.
//
// Every (notification, device) pair of due must be delivered at least once;
// pairs that never were are counted in Missing, listed in MissingList and
// reported as errors. Deliveries for pairs not in due (a message nobody
// asked for) are reported as errors too.
//
// Duplicates. The leader sends a batch to FCM and then commits its outcome
// through Raft; a new leader resends the batches whose outcome was not
// committed. So a duplicate is legitimate only for a batch that was in
// flight when leadership moved: the first copy comes from the old leader
// shortly before (or while) it lost leadership, the next from the new leader
// shortly after. The rule, applied to the copies of a pair sorted by time,
// each copy against the one before it (prev, cur):
//
//   - the copy is excused only if an observed LeaderChange.At lies in
//     [prev.At - slack, cur.At + slack] (slack absorbs the lag between the
//     real change and the test observing it);
//   - if both copies carry a known LeaderTerm and the terms are equal, the
//     copy is never excused: one leader sent the pair twice, which no
//     leadership move explains;
//   - if the terms are unknown, each observed change excuses at most one
//     copy of a given pair: one move makes one new leader resend once, so
//     three copies around a single change are one copy too many;
//   - if both terms are known and differ, the terms themselves prove the
//     copies came from different leaders, so any change in the window
//     suffices (the test may observe several quick elections as one move).
//
// Copies not excused are counted in DuplicatesOutsideChange and reported as
// errors. A negative slack is treated as zero. At most maxErrsPerKind errors
// of each kind are returned, followed by one "and N more" entry.
func CheckPush(due []Due, deliveries []Delivery, changes []LeaderChange, slack time.Duration) (PushReport, []error) {
	slack = max(slack, 0)
	errs := newKindLimitedErrs[PushCheckKind]()
	report := func(kind PushCheckKind, p pushPair, format string, args ...any) {
		errs.add(kind, &PushViolation{Kind: kind, NotificationID: p.notification, Device: p.device, Detail: fmt.Sprintf(format, args...)})
	}

	var pairs []pushPair
	isDue := map[pushPair]bool{}
	for _, d := range due {
		for _, dev := range d.Devices {
			p := pushPair{d.NotificationID, dev}
			if !isDue[p] {
				isDue[p] = true
				pairs = append(pairs, p)
			}
		}
	}

	byPair := map[pushPair][]Delivery{}
	for _, d := range deliveries {
		p := pushPair{d.NotificationID, d.Device}
		if !isDue[p] {
			report(PushUnexpected, p, "delivered at %s but not due", d.At.Format(time.RFC3339Nano))
			continue
		}
		byPair[p] = append(byPair[p], d)
	}

	times := make([]time.Time, len(changes))
	for i, c := range changes {
		times[i] = c.At
	}
	slices.SortFunc(times, time.Time.Compare)

	rep := PushReport{Expected: len(pairs)}
	for _, p := range pairs {
		ds := byPair[p]
		if len(ds) == 0 {
			rep.Missing++
			rep.MissingList = append(rep.MissingList, p.notification+"→"+p.device)
			report(PushMissing, p, "due but never delivered")
			continue
		}
		rep.Delivered++
		if len(ds) == 1 {
			continue
		}
		slices.SortStableFunc(ds, func(a, b Delivery) int { return a.At.Compare(b.At) })
		rep.Duplicates += len(ds) - 1
		next := 0 // first change not yet used to excuse a copy of this pair
		for k := 1; k < len(ds); k++ {
			prev, cur := ds[k-1], ds[k]
			lo, hi := prev.At.Add(-slack), cur.At.Add(slack)
			termsKnown := prev.LeaderTerm != 0 && cur.LeaderTerm != 0
			excused := false
			switch {
			case termsKnown && prev.LeaderTerm == cur.LeaderTerm:
				report(PushDuplicate, p, "copies at %s and %s both sent in term %d",
					prev.At.Format(time.RFC3339Nano), cur.At.Format(time.RFC3339Nano), cur.LeaderTerm)
				rep.DuplicatesOutsideChange++
				continue
			case termsKnown:
				i, _ := slices.BinarySearchFunc(times, lo, time.Time.Compare)
				excused = i < len(times) && !times[i].After(hi)
			default:
				// lo never decreases from one copy to the next, so changes
				// before it are of no use to later copies either.
				for next < len(times) && times[next].Before(lo) {
					next++
				}
				if next < len(times) && !times[next].After(hi) {
					excused = true
					next++
				}
			}
			if !excused {
				rep.DuplicatesOutsideChange++
				report(PushDuplicate, p, "copies at %s and %s with no unused leader change within %s of them",
					prev.At.Format(time.RFC3339Nano), cur.At.Format(time.RFC3339Nano), slack)
			}
		}
	}

	return rep, errs.collect(pushKinds(), func(k PushCheckKind, n int) error {
		return &PushViolation{Kind: k, More: n}
	})
}

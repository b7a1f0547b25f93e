package robustness

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"
)

func pushKindCounts(t *testing.T, errs []error) map[PushCheckKind]int {
	t.Helper()
	got := map[PushCheckKind]int{}
	for _, err := range errs {
		var v *PushViolation
		if !errors.As(err, &v) {
			t.Fatalf("error %v is not a *PushViolation", err)
		}
		got[v.Kind]++
	}
	return got
}

func TestCheckPush(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	dl := func(n, dev string, d time.Duration, term uint64) Delivery {
		return Delivery{NotificationID: n, Device: dev, At: at(d), LeaderTerm: term}
	}
	change := func(d time.Duration) LeaderChange { return LeaderChange{At: at(d)} }
	due := []Due{
		{NotificationID: "n1", Devices: []string{"d1", "d2"}},
		{NotificationID: "n2", Devices: []string{"d3"}},
	}
	once := []Delivery{dl("n1", "d1", 0, 0), dl("n1", "d2", 0, 0), dl("n2", "d3", 0, 0)}
	const slack = 500 * time.Millisecond

	tests := []struct {
		name       string
		due        []Due
		deliveries []Delivery
		changes    []LeaderChange
		report     PushReport
		kinds      map[PushCheckKind]int
	}{
		{
			name:       "all delivered once",
			due:        due,
			deliveries: once,
			report:     PushReport{Expected: 3, Delivered: 3},
		},
		{
			name:       "device listed twice counts once",
			due:        []Due{{NotificationID: "n1", Devices: []string{"d1", "d1"}}},
			deliveries: []Delivery{dl("n1", "d1", 0, 0)},
			report:     PushReport{Expected: 1, Delivered: 1},
		},
		{
			name:       "one device missing",
			due:        due,
			deliveries: []Delivery{dl("n1", "d1", 0, 0), dl("n2", "d3", 0, 0)},
			report:     PushReport{Expected: 3, Delivered: 2, Missing: 1, MissingList: []string{"n1→d2"}},
			kinds:      map[PushCheckKind]int{PushMissing: 1},
		},
		{
			name:       "duplicate straddling a leader change is excused",
			due:        due,
			deliveries: append(slices.Clone(once), dl("n1", "d1", 2*time.Second, 0)),
			changes:    []LeaderChange{change(time.Second)},
			report:     PushReport{Expected: 3, Delivered: 3, Duplicates: 1},
		},
		{
			name:       "leader change observed just before the first copy, within slack",
			due:        due,
			deliveries: append(slices.Clone(once), dl("n1", "d1", 2*time.Second, 0)),
			changes:    []LeaderChange{change(-300 * time.Millisecond)},
			report:     PushReport{Expected: 3, Delivered: 3, Duplicates: 1},
		},
		{
			name:       "copies given out of time order are still excused",
			due:        []Due{{NotificationID: "n1", Devices: []string{"d1"}}},
			deliveries: []Delivery{dl("n1", "d1", 2*time.Second, 0), dl("n1", "d1", 0, 0)},
			changes:    []LeaderChange{change(time.Second)},
			report:     PushReport{Expected: 1, Delivered: 1, Duplicates: 1},
		},
		{
			name:       "duplicate far from any leader change is counted",
			due:        due,
			deliveries: append(slices.Clone(once), dl("n1", "d1", time.Second, 0)),
			changes:    []LeaderChange{change(time.Minute)},
			report:     PushReport{Expected: 3, Delivered: 3, Duplicates: 1, DuplicatesOutsideChange: 1},
			kinds:      map[PushCheckKind]int{PushDuplicate: 1},
		},
		{
			name:       "duplicate with no leader change at all is counted",
			due:        due,
			deliveries: append(slices.Clone(once), dl("n2", "d3", time.Second, 0)),
			report:     PushReport{Expected: 3, Delivered: 3, Duplicates: 1, DuplicatesOutsideChange: 1},
			kinds:      map[PushCheckKind]int{PushDuplicate: 1},
		},
		{
			name:       "one leader change excuses only one extra copy",
			due:        []Due{{NotificationID: "n1", Devices: []string{"d1"}}},
			deliveries: []Delivery{dl("n1", "d1", 0, 0), dl("n1", "d1", time.Second, 0), dl("n1", "d1", 2*time.Second, 0)},
			changes:    []LeaderChange{change(time.Second)},
			report:     PushReport{Expected: 1, Delivered: 1, Duplicates: 2, DuplicatesOutsideChange: 1},
			kinds:      map[PushCheckKind]int{PushDuplicate: 1},
		},
		{
			name:       "two leader changes excuse two extra copies",
			due:        []Due{{NotificationID: "n1", Devices: []string{"d1"}}},
			deliveries: []Delivery{dl("n1", "d1", 0, 0), dl("n1", "d1", 2*time.Second, 0), dl("n1", "d1", 4*time.Second, 0)},
			changes:    []LeaderChange{change(time.Second), change(3 * time.Second)},
			report:     PushReport{Expected: 1, Delivered: 1, Duplicates: 2},
		},
		{
			name:       "copies from the same known term are not excused by a change",
			due:        []Due{{NotificationID: "n1", Devices: []string{"d1"}}},
			deliveries: []Delivery{dl("n1", "d1", 0, 4), dl("n1", "d1", 2*time.Second, 4)},
			changes:    []LeaderChange{change(time.Second)},
			report:     PushReport{Expected: 1, Delivered: 1, Duplicates: 1, DuplicatesOutsideChange: 1},
			kinds:      map[PushCheckKind]int{PushDuplicate: 1},
		},
		{
			name:       "copies from different known terms share one observed change",
			due:        []Due{{NotificationID: "n1", Devices: []string{"d1"}}},
			deliveries: []Delivery{dl("n1", "d1", 0, 4), dl("n1", "d1", 1*time.Second, 5), dl("n1", "d1", 2*time.Second, 6)},
			changes:    []LeaderChange{change(1500 * time.Millisecond)},
			report:     PushReport{Expected: 1, Delivered: 1, Duplicates: 2},
		},
		{
			name:       "copies from different known terms still need a change nearby",
			due:        []Due{{NotificationID: "n1", Devices: []string{"d1"}}},
			deliveries: []Delivery{dl("n1", "d1", 0, 4), dl("n1", "d1", time.Second, 5)},
			changes:    []LeaderChange{change(time.Minute)},
			report:     PushReport{Expected: 1, Delivered: 1, Duplicates: 1, DuplicatesOutsideChange: 1},
			kinds:      map[PushCheckKind]int{PushDuplicate: 1},
		},
		{
			name:       "delivery for an unknown pair is reported",
			due:        due,
			deliveries: append(slices.Clone(once), dl("n9", "d1", 0, 0), dl("n1", "d3", 0, 0)),
			report:     PushReport{Expected: 3, Delivered: 3},
			kinds:      map[PushCheckKind]int{PushUnexpected: 2},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep, errs := CheckPush(tc.due, tc.deliveries, tc.changes, slack)
			if !reflect.DeepEqual(rep, tc.report) {
				t.Errorf("report = %+v, want %+v", rep, tc.report)
			}
			if len(tc.kinds) == 0 {
				if errs != nil {
					t.Fatalf("errors = %v, want nil", errs)
				}
				return
			}
			if got := pushKindCounts(t, errs); !maps.Equal(got, tc.kinds) {
				t.Fatalf("violation kinds = %v, want %v; errors: %v", got, tc.kinds, errs)
			}
		})
	}
}

func TestCheckPushErrorsBounded(t *testing.T) {
	devs := make([]string, 50)
	for i := range devs {
		devs[i] = "d" + string(rune('A'+i))
	}
	rep, errs := CheckPush([]Due{{NotificationID: "n1", Devices: devs}}, nil, nil, 0)
	if rep.Missing != 50 || len(rep.MissingList) != 50 {
		t.Fatalf("report = %+v, want 50 missing", rep)
	}
	if len(errs) != maxErrsPerKind+1 {
		t.Fatalf("got %d errors, want %d", len(errs), maxErrsPerKind+1)
	}
	var v *PushViolation
	if !errors.As(errs[len(errs)-1], &v) || v.More != 50-maxErrsPerKind {
		t.Fatalf("last error = %v, want a summary of %d more", errs[len(errs)-1], 50-maxErrsPerKind)
	}
}

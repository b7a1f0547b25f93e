package push

import (
	"errors"
	"testing"
	"time"
)

func utcAt(y int, mo time.Month, d, h, m, s int) time.Time {
	return time.Date(y, mo, d, h, m, s, 0, time.UTC)
}

func TestParseClock(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int // -1: refused
	}{
		{"00:00", 0},
		{"07:00", 420},
		{"12:34", 754},
		{"23:59", 1439},
		{"24:00", -1},
		{"23:60", -1},
		{"99:99", -1},
		{"7:00", -1},
		{"07:0", -1},
		{"7:5", -1},
		{"0700", -1},
		{"07-00", -1},
		{"07:00 ", -1},
		{" 7:00", -1},
		{"+7:00", -1},
		{"-1:00", -1},
		{"07:+5", -1},
		{"07:-5", -1},
		{"0x:00", -1},
		{"aa:bb", -1},
		{"07:00:00", -1},
		{"", -1},
		{"０7:00", -1}, // a full-width digit
	} {
		got, err := parseClock(c.in)
		if c.want < 0 {
			if err == nil {
				t.Errorf("parseClock(%q) = %d, want refused", c.in, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("parseClock(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}

func TestValidateTimezone(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"UTC", true},
		{"Europe/Paris", true},
		{"America/Argentina/Buenos_Aires", true},
		{"Pacific/Chatham", true},
		{"Asia/Kathmandu", true},
		{"Etc/GMT+5", true},
		{"", false},
		{"Local", false},
		{"Mars/Olympus_Mons", false},
		{"Europe", false}, // a directory, not a zone
		{"../../../etc/passwd", false},
		{"Europe/Paris\x00", false},
		{"/usr/share/zoneinfo/UTC", false},
		{"UTC ", false},
		{"Europe/" + string(make([]byte, 64)), false},
	} {
		err := ValidateTimezone(c.name)
		if (err == nil) != c.ok {
			t.Errorf("ValidateTimezone(%q) = %v, want ok=%v", c.name, err, c.ok)
			continue
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status() != 400 || e.Field() != "timezone" || e.Code() != "invalid_argument" {
				t.Errorf("ValidateTimezone(%q): %#v, want a 400 invalid_argument on timezone", c.name, err)
			}
		}
	}
}

func TestDefaultPrefs(t *testing.T) {
	want := Prefs{PushEnabled: true, EmailEnabled: true, SecurityEnabled: true, QuietHoursStart: "22:00", QuietHoursEnd: "07:00", Timezone: "UTC"}
	if got := DefaultPrefs(); got != want {
		t.Fatalf("DefaultPrefs() = %+v, want %+v", got, want)
	}
	// A stored document missing fields keeps the defaults of those fields.
	if got := decodePrefs([]byte(`{"marketingEnabled":true}`)); !got.PushEnabled || !got.SecurityEnabled || !got.MarketingEnabled || got.Timezone != "UTC" {
		t.Fatalf("decodePrefs of a partial document: %+v", got)
	}
	if got := decodePrefs([]byte(`not json`)); got != DefaultPrefs() {
		t.Fatalf("decodePrefs of garbage: %+v, want the defaults", got)
	}
}

func TestPrefsUpdateApply(t *testing.T) {
	s := func(v string) *string { return &v }
	b := func(v bool) *bool { return &v }
	for _, c := range []struct {
		name  string
		u     PrefsUpdate
		field string // "": accepted
		want  func(p Prefs) bool
	}{
		{"quiet hours", PrefsUpdate{QuietHoursEnabled: b(true), QuietHoursStart: s("13:00"), QuietHoursEnd: s("14:00"), Timezone: s("Asia/Tokyo")}, "",
			func(p Prefs) bool {
				return p.QuietHoursEnabled && p.QuietHoursStart == "13:00" && p.QuietHoursEnd == "14:00" && p.Timezone == "Asia/Tokyo" && p.PushEnabled
			}},
		{"flags only", PrefsUpdate{PushEnabled: b(false), MarketingEnabled: b(true)}, "",
			func(p Prefs) bool {
				return !p.PushEnabled && p.MarketingEnabled && p.SecurityEnabled && p.QuietHoursStart == "22:00"
			}},
		{"bad start", PrefsUpdate{QuietHoursStart: s("7:00"), PushEnabled: b(false)}, "quietHoursStart", nil},
		{"bad end", PrefsUpdate{QuietHoursEnd: s("24:00")}, "quietHoursEnd", nil},
		{"bad zone", PrefsUpdate{Timezone: s("Local"), MarketingEnabled: b(true)}, "timezone", nil},
	} {
		p := DefaultPrefs()
		err := c.u.apply(&p)
		if c.field != "" {
			var e *Error
			if !errors.As(err, &e) || e.Field() != c.field {
				t.Errorf("%s: %v, want a refusal on %s", c.name, err, c.field)
			}
			continue
		}
		if err != nil || !c.want(p) {
			t.Errorf("%s: %v, %+v", c.name, err, p)
		}
	}
	if !(&PrefsUpdate{}).Empty() || (&PrefsUpdate{Timezone: s("UTC")}).Empty() {
		t.Errorf("Empty is wrong")
	}
}

func TestQuietUntil(t *testing.T) {
	q := func(start, end, zone string) Prefs {
		p := DefaultPrefs()
		p.QuietHoursEnabled, p.QuietHoursStart, p.QuietHoursEnd, p.Timezone = true, start, end, zone
		return p
	}
	off := q("00:00", "23:59", "UTC")
	off.QuietHoursEnabled = false
	for _, c := range []struct {
		name string
		p    Prefs
		now  time.Time
		end  time.Time // zero: not quiet
	}{
		{"off", off, utcAt(2026, 3, 10, 12, 0, 0), time.Time{}},
		{"exactly at the start", q("22:00", "07:00", "UTC"), utcAt(2026, 3, 10, 22, 0, 0), utcAt(2026, 3, 11, 7, 0, 0)},
		{"a second before the start", q("22:00", "07:00", "UTC"), utcAt(2026, 3, 10, 21, 59, 59), time.Time{}},
		{"exactly at the end", q("22:00", "07:00", "UTC"), utcAt(2026, 3, 11, 7, 0, 0), time.Time{}},
		{"a second before the end", q("22:00", "07:00", "UTC"), utcAt(2026, 3, 11, 6, 59, 59), utcAt(2026, 3, 11, 7, 0, 0)},
		{"span, before midnight", q("22:00", "07:00", "UTC"), utcAt(2026, 3, 10, 23, 59, 59), utcAt(2026, 3, 11, 7, 0, 0)},
		{"span, exactly midnight", q("22:00", "07:00", "UTC"), utcAt(2026, 3, 11, 0, 0, 0), utcAt(2026, 3, 11, 7, 0, 0)},
		{"span, midday", q("22:00", "07:00", "UTC"), utcAt(2026, 3, 10, 12, 0, 0), time.Time{}},
		{"span, end of the month", q("22:00", "07:00", "UTC"), utcAt(2026, 2, 28, 23, 0, 0), utcAt(2026, 3, 1, 7, 0, 0)},
		{"span, end of the year", q("22:00", "07:00", "UTC"), utcAt(2026, 12, 31, 23, 0, 0), utcAt(2027, 1, 1, 7, 0, 0)},
		{"daytime", q("13:00", "14:00", "UTC"), utcAt(2026, 3, 10, 13, 30, 0), utcAt(2026, 3, 10, 14, 0, 0)},
		{"daytime, before", q("13:00", "14:00", "UTC"), utcAt(2026, 3, 10, 12, 59, 59), time.Time{}},
		{"daytime, after", q("13:00", "14:00", "UTC"), utcAt(2026, 3, 10, 14, 0, 0), time.Time{}},
		{"start == end", q("13:00", "13:00", "UTC"), utcAt(2026, 3, 10, 13, 0, 0), time.Time{}},
		{"whole day but a minute, at its last minute", q("00:00", "23:59", "UTC"), utcAt(2026, 3, 10, 23, 59, 30), time.Time{}},
		{"from midnight", q("00:00", "06:00", "UTC"), utcAt(2026, 3, 10, 0, 0, 0), utcAt(2026, 3, 10, 6, 0, 0)},
		{"until midnight", q("20:00", "00:00", "UTC"), utcAt(2026, 3, 10, 23, 0, 0), utcAt(2026, 3, 11, 0, 0, 0)},
		{"until midnight, at midnight", q("20:00", "00:00", "UTC"), utcAt(2026, 3, 11, 0, 0, 0), time.Time{}},
		// In the recipient's zone, not the server's.
		{"New York EDT", q("17:00", "18:30", "America/New_York"), utcAt(2026, 3, 10, 21, 30, 0), utcAt(2026, 3, 10, 22, 30, 0)},
		{"New York EST", q("17:00", "18:30", "America/New_York"), utcAt(2026, 3, 5, 22, 30, 0), utcAt(2026, 3, 5, 23, 30, 0)},
		{"Tokyo, past its midnight", q("22:00", "07:00", "Asia/Tokyo"), utcAt(2026, 3, 10, 21, 30, 0), utcAt(2026, 3, 10, 22, 0, 0)},
		{"Tokyo, daytime window, not in it", q("13:00", "14:00", "Asia/Tokyo"), utcAt(2026, 3, 10, 21, 30, 0), time.Time{}},
		{"Chatham +13:45", q("11:00", "12:00", "Pacific/Chatham"), utcAt(2026, 3, 10, 21, 30, 0), utcAt(2026, 3, 10, 22, 15, 0)},
		{"Kathmandu +05:45", q("22:00", "07:00", "Asia/Kathmandu"), utcAt(2026, 3, 10, 17, 0, 0), utcAt(2026, 3, 11, 1, 15, 0)},
		{"Kiritimati +14, crossing the date line", q("08:00", "10:00", "Pacific/Kiritimati"), utcAt(2026, 3, 10, 19, 0, 0), utcAt(2026, 3, 10, 20, 0, 0)},
		{"Pago Pago -11", q("22:00", "07:00", "Pacific/Pago_Pago"), utcAt(2026, 3, 10, 10, 0, 0), utcAt(2026, 3, 10, 18, 0, 0)},
		{"an unknown stored zone is UTC", q("22:00", "07:00", "Nowhere/Nothing"), utcAt(2026, 3, 10, 23, 0, 0), utcAt(2026, 3, 11, 7, 0, 0)},
		{"a malformed stored time is no quiet time", q("22:00", "7:00", "UTC"), utcAt(2026, 3, 10, 23, 0, 0), time.Time{}},
		// Berlin springs forward on 2026-03-29 at 01:00 UTC: 02:00 CET
		// becomes 03:00 CEST.
		{"spring forward, 01:00-03:00 at 01:30 CET", q("01:00", "03:00", "Europe/Berlin"), utcAt(2026, 3, 29, 0, 30, 0), utcAt(2026, 3, 29, 1, 0, 0)},
		{"spring forward, at 03:00 CEST", q("01:00", "03:00", "Europe/Berlin"), utcAt(2026, 3, 29, 1, 0, 0), time.Time{}},
		{"spring forward, 22:00-07:00 overnight", q("22:00", "07:00", "Europe/Berlin"), utcAt(2026, 3, 28, 22, 0, 0), utcAt(2026, 3, 29, 5, 0, 0)},
		// Berlin falls back on 2026-10-25 at 01:00 UTC: 03:00 CEST becomes
		// 02:00 CET; 03:00 comes once, at 02:00 UTC.
		{"fall back, 01:00-03:00 at 02:30 CEST", q("01:00", "03:00", "Europe/Berlin"), utcAt(2026, 10, 25, 0, 30, 0), utcAt(2026, 10, 25, 2, 0, 0)},
		{"fall back, 22:00-07:00 overnight", q("22:00", "07:00", "Europe/Berlin"), utcAt(2026, 10, 24, 21, 0, 0), utcAt(2026, 10, 25, 6, 0, 0)},
		// Quiet hours ending at 02:30, a time that does not exist on the
		// spring-forward night: the wall clock leaves [01:00, 02:30) at
		// 01:00 UTC, when it jumps from 02:00 CET to 03:00 CEST. At 00:45
		// UTC (01:45 CET) the quiet hours therefore end at 01:00 UTC, as
		// quietUntil itself judges a moment later (see the next row).
		{"spring forward, end in the gap", q("01:00", "02:30", "Europe/Berlin"), utcAt(2026, 3, 29, 0, 45, 0), utcAt(2026, 3, 29, 1, 0, 0)},
		{"spring forward, just after the gap", q("01:00", "02:30", "Europe/Berlin"), utcAt(2026, 3, 29, 1, 0, 0), time.Time{}},
	} {
		end, quiet := c.p.quietUntil(c.now)
		if quiet != !c.end.IsZero() || !end.Equal(c.end) {
			t.Errorf("%s: quietUntil(%v) = %v, %v; want %v, %v", c.name, c.now, end, quiet, c.end, !c.end.IsZero())
		}
		if quiet && end.Location() != time.UTC {
			t.Errorf("%s: end %v is not in UTC", c.name, end)
		}
		if quiet && !end.After(c.now) {
			t.Errorf("%s: end %v is not after now %v", c.name, end, c.now)
		}
	}
}

// TestQuietUntilEndIsNotQuiet checks, every half hour over the two
// days around each 2026 DST change of zones that move by an hour (Berlin,
// New York, Chatham) or by half an hour (Lord Howe), that whenever
// quietUntil defers, the moment it defers to is out of the quiet hours (the
// deferred job does not wake into them) and is the first such moment (it
// does not sleep past their end). When the wall clock goes back and the
// quiet hours come round again before the end (a repeated hour), deferring
// past the repetition is accepted.
func TestQuietUntilEndIsNotQuiet(t *testing.T) {
	t.Parallel()
	windows := [][2]string{{"22:00", "07:00"}, {"01:00", "03:00"}, {"02:00", "04:00"}, {"13:00", "14:00"}, {"23:30", "00:30"}}
	zones := []string{"Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Pacific/Chatham"}
	quietAt := func(p Prefs, at time.Time) bool { _, q := p.quietUntil(at); return q }
	bad := 0
	for _, z := range zones {
		loc, err := time.LoadLocation(z)
		if err != nil {
			t.Fatal(err)
		}
		var changes []time.Time // days whose offset differs from the next day's
		for d := utcAt(2026, 1, 1, 0, 0, 0); d.Year() == 2026; d = d.Add(24 * time.Hour) {
			_, a := d.In(loc).Zone()
			_, b := d.Add(24 * time.Hour).In(loc).Zone()
			if a != b {
				changes = append(changes, d)
			}
		}
		if len(changes) != 2 {
			t.Fatalf("%s: %d offset changes in 2026, want 2", z, len(changes))
		}
		for _, w := range windows {
			p := DefaultPrefs()
			p.QuietHoursEnabled, p.QuietHoursStart, p.QuietHoursEnd, p.Timezone = true, w[0], w[1], z
			for _, day := range changes {
				for now := day.Add(-12 * time.Hour); now.Before(day.Add(36 * time.Hour)); now = now.Add(30 * time.Minute) {
					end, quiet := p.quietUntil(now)
					if !quiet {
						continue
					}
					if quietAt(p, end) {
						bad++
						t.Errorf("%s %s-%s: at %v deferred to %v, which is quiet too", z, w[0], w[1], now, end)
						continue
					}
					// The first moment out of the quiet hours (quiet hours
					// are whole minutes), unless they come round again.
					var out time.Time
					again := false
					for m := now.Add(10 * time.Minute); m.Before(end); m = m.Add(10 * time.Minute) {
						q := quietAt(p, m)
						if !q && out.IsZero() {
							out = m
						}
						if q && !out.IsZero() {
							again = true
							break
						}
					}
					if !out.IsZero() && !again {
						bad++
						t.Errorf("%s %s-%s: at %v deferred to %v, but the quiet hours were over by %v", z, w[0], w[1], now, end, out)
					}
				}
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d deferrals wrong", bad)
	}
}

func TestDecide(t *testing.T) {
	now := utcAt(2026, 3, 10, 23, 0, 0)
	quietEnd := utcAt(2026, 3, 11, 7, 0, 0)
	for _, c := range []struct {
		name                             string
		push, marketing, security, quiet bool
		category                         string
		want                             decision
	}{
		{"defaults, general", true, false, true, false, CategoryGeneral, deliver},
		{"defaults, marketing", true, false, true, false, CategoryMarketing, skip},
		{"defaults, security", true, false, true, false, CategorySecurity, deliver},
		{"push off, general", false, true, true, false, CategoryGeneral, skip},
		{"push off, marketing", false, true, true, false, CategoryMarketing, skip},
		{"push off, security", false, true, true, false, CategorySecurity, skip},
		{"marketing on", true, true, false, false, CategoryMarketing, deliver},
		{"security off", true, true, false, false, CategorySecurity, skip},
		{"quiet, general", true, false, true, true, CategoryGeneral, defer_},
		{"quiet, marketing on", true, true, true, true, CategoryMarketing, defer_},
		{"quiet, marketing off: skipped, not deferred", true, false, true, true, CategoryMarketing, skip},
		{"quiet, security: exempt", true, false, true, true, CategorySecurity, deliver},
		{"quiet, security off", true, true, false, true, CategorySecurity, skip},
		{"quiet, push off", false, true, true, true, CategoryGeneral, skip},
		{"quiet, push off, security", false, true, true, true, CategorySecurity, skip},
	} {
		p := Prefs{PushEnabled: c.push, MarketingEnabled: c.marketing, SecurityEnabled: c.security,
			QuietHoursEnabled: c.quiet, QuietHoursStart: "22:00", QuietHoursEnd: "07:00", Timezone: "UTC"}
		got, until := p.decide(c.category, now)
		if got != c.want {
			t.Errorf("%s: decide = %v, want %v", c.name, got, c.want)
		}
		wantUntil := time.Time{}
		if c.want == defer_ {
			wantUntil = quietEnd
		}
		if !until.Equal(wantUntil) {
			t.Errorf("%s: until %v, want %v", c.name, until, wantUntil)
		}
	}
}

package push

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	_ "time/tzdata" // IANA zones inside the binary: the image is FROM scratch
)

// Prefs are one user's notification preferences.
type Prefs struct {
	PushEnabled       bool   `json:"pushEnabled"`
	EmailEnabled      bool   `json:"emailEnabled"`
	MarketingEnabled  bool   `json:"marketingEnabled"`
	SecurityEnabled   bool   `json:"securityEnabled"`
	QuietHoursEnabled bool   `json:"quietHoursEnabled"`
	QuietHoursStart   string `json:"quietHoursStart"`
	QuietHoursEnd     string `json:"quietHoursEnd"`
	Timezone          string `json:"timezone"`

	// loc is Timezone loaded, when the caller has it cached.
	loc *time.Location
}

// DefaultPrefs are what a user who never set any has: push, email and
// security on, marketing off, quiet hours off (22:00–07:00 UTC once on).
func DefaultPrefs() Prefs {
	return Prefs{PushEnabled: true, EmailEnabled: true, SecurityEnabled: true,
		QuietHoursStart: "22:00", QuietHoursEnd: "07:00", Timezone: "UTC"}
}

// PrefsUpdate is a PUT body: any subset of the fields.
type PrefsUpdate struct {
	PushEnabled       *bool   `json:"pushEnabled"`
	EmailEnabled      *bool   `json:"emailEnabled"`
	MarketingEnabled  *bool   `json:"marketingEnabled"`
	SecurityEnabled   *bool   `json:"securityEnabled"`
	QuietHoursEnabled *bool   `json:"quietHoursEnabled"`
	QuietHoursStart   *string `json:"quietHoursStart"`
	QuietHoursEnd     *string `json:"quietHoursEnd"`
	Timezone          *string `json:"timezone"`
}

// Empty reports whether the update names no field.
func (u *PrefsUpdate) Empty() bool {
	return u.PushEnabled == nil && u.EmailEnabled == nil && u.MarketingEnabled == nil && u.SecurityEnabled == nil &&
		u.QuietHoursEnabled == nil && u.QuietHoursStart == nil && u.QuietHoursEnd == nil && u.Timezone == nil
}

// apply validates u and writes it over p.
func (u *PrefsUpdate) apply(p *Prefs) error {
	if u.QuietHoursStart != nil {
		if _, err := parseClock(*u.QuietHoursStart); err != nil {
			return fieldErr("quietHoursStart", "quietHoursStart must be a time of day HH:MM (00:00 to 23:59)")
		}
		p.QuietHoursStart = *u.QuietHoursStart
	}
	if u.QuietHoursEnd != nil {
		if _, err := parseClock(*u.QuietHoursEnd); err != nil {
			return fieldErr("quietHoursEnd", "quietHoursEnd must be a time of day HH:MM (00:00 to 23:59)")
		}
		p.QuietHoursEnd = *u.QuietHoursEnd
	}
	if u.Timezone != nil {
		if err := ValidateTimezone(*u.Timezone); err != nil {
			return err
		}
		p.Timezone = *u.Timezone
	}
	set := func(dst *bool, src *bool) {
		if src != nil {
			*dst = *src
		}
	}
	set(&p.PushEnabled, u.PushEnabled)
	set(&p.EmailEnabled, u.EmailEnabled)
	set(&p.MarketingEnabled, u.MarketingEnabled)
	set(&p.SecurityEnabled, u.SecurityEnabled)
	set(&p.QuietHoursEnabled, u.QuietHoursEnabled)
	return nil
}

// ValidateTimezone accepts IANA zone names ("Europe/Paris", "UTC"). "Local"
// and the empty name, which time.LoadLocation also takes, are refused: they
// would mean the server's zone.
func ValidateTimezone(name string) error {
	if name == "" || name == "Local" || len(name) > 64 {
		return fieldErr("timezone", "timezone must be an IANA time zone name such as Europe/Paris")
	}
	if _, err := time.LoadLocation(name); err != nil {
		return fieldErr("timezone", fmt.Sprintf("unknown time zone %q; use an IANA name such as Europe/Paris", name))
	}
	return nil
}

// parseClock reads "HH:MM" into minutes after midnight. Exactly two digits
// each: "7:00" and "07:0" are refused so that stored values are canonical.
func parseClock(s string) (int, error) {
	if len(s) != 5 || s[2] != ':' {
		return 0, fmt.Errorf("not HH:MM")
	}
	h, err1 := strconv.Atoi(s[:2])
	m, err2 := strconv.Atoi(s[3:])
	if err1 != nil || err2 != nil || h < 0 || h > 23 || m < 0 || m > 59 || s[0] == '+' || s[3] == '+' || s[0] == '-' || s[3] == '-' {
		return 0, fmt.Errorf("not HH:MM")
	}
	return h*60 + m, nil
}

func decodePrefs(raw json.RawMessage) Prefs {
	p := DefaultPrefs()
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &p)
	}
	return p
}

// decision is what delivery does for one recipient.
type decision int

const (
	deliver decision = iota
	skip
	defer_
)

// decide applies a recipient's preferences to a notification of category at
// now: deliver, skip, or defer until the returned time (the end of quiet
// hours in the recipient's zone).
func (p Prefs) decide(category string, now time.Time) (decision, time.Time) {
	if !p.PushEnabled {
		return skip, time.Time{}
	}
	switch category {
	case CategoryMarketing:
		if !p.MarketingEnabled {
			return skip, time.Time{}
		}
	case CategorySecurity:
		if !p.SecurityEnabled {
			return skip, time.Time{}
		}
		return deliver, time.Time{} // exempt from quiet hours
	}
	if end, quiet := p.quietUntil(now); quiet {
		return defer_, end
	}
	return deliver, time.Time{}
}

// quietUntil reports whether now falls in the quiet period [start, end) of
// the recipient's zone, and when that period ends. A period whose start is
// after its end spans midnight; start == end means no quiet time.
func (p Prefs) quietUntil(now time.Time) (time.Time, bool) {
	if !p.QuietHoursEnabled {
		return time.Time{}, false
	}
	start, err1 := parseClock(p.QuietHoursStart)
	end, err2 := parseClock(p.QuietHoursEnd)
	if err1 != nil || err2 != nil || start == end {
		return time.Time{}, false
	}
	loc := p.loc
	if loc == nil {
		var err error
		if loc, err = time.LoadLocation(p.Timezone); err != nil {
			loc = time.UTC
		}
	}
	local := now.In(loc)
	mins := local.Hour()*60 + local.Minute()
	var inQuiet bool
	if start < end {
		inQuiet = mins >= start && mins < end
	} else {
		inQuiet = mins >= start || mins < end
	}
	if !inQuiet {
		return time.Time{}, false
	}
	// The end is today at end, or tomorrow when the period spans midnight and
	// we are before it. Built from the date so DST shifts are honoured.
	y, mo, d := local.Date()
	endAt := wallTime(y, mo, d, end, loc)
	if !endAt.After(local) {
		endAt = wallTime(y, mo, d+1, end, loc)
	}
	return endAt.UTC(), true
}

// wallTime is the moment the clock of loc shows mins after midnight on the
// given day. When the clocks spring forward over that time it does not
// exist; the quiet period then ends at the jump itself (time.Date would
// answer a moment past it).
func wallTime(y int, mo time.Month, d, mins int, loc *time.Location) time.Time {
	t := time.Date(y, mo, d, mins/60, mins%60, 0, 0, loc)
	if l := t.In(loc); l.Hour()*60+l.Minute() != mins {
		t, _ = t.ZoneBounds() // the start of the zone in effect: the jump
	}
	return t
}

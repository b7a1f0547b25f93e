package push_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/push"
	"github.com/edgebase/edgebase/realtime/client"
)

// These tests drive push end to end through a real node (Badger, Raft, the
// HTTP API, the leader's scheduler and dispatcher, the realtime hub) with a
// test clock that they move instead of sleeping. No FCM credentials are set,
// so every device a notification reaches counts as failed: the owner's
// "failed" count is thereby the number of devices of the recipients that
// were reached (every registered user has exactly one device; the owner
// has none).

// wait bounds how long a committed change may take to show.
const wait = 15 * time.Second

// t0 is a Tuesday evening in UTC: 17:30 in New York (EDT), 22:30 in Berlin
// (CET), 03:00 in Kolkata, 06:30 in Tokyo and 11:15 on the Chatham Islands
// (+13:45, their summer time) on the next day.
var t0 = time.Date(2026, 3, 10, 21, 30, 0, 0, time.UTC)

type harness struct {
	t   *testing.T
	c   *nodetest.Cluster
	clk *nodetest.Clock
	seq *atomic.Int64
}

func newHarness(t *testing.T, start time.Time) *harness {
	t.Helper()
	clk := nodetest.NewClock(start)
	c := nodetest.Start(t, nodetest.Options{Voters: 1, Clock: clk})
	return &harness{t: t, c: c, clk: clk, seq: new(atomic.Int64)}
}

// with is h reporting to t (a subtest).
func (h *harness) with(t *testing.T) *harness {
	return &harness{t: t, c: h.c, clk: h.clk, seq: h.seq}
}

func (h *harness) base() string { return h.c.Nodes[0].URL() }

// set moves the clock to at (forward only).
func (h *harness) set(at time.Time) {
	h.t.Helper()
	now := h.clk.Now()
	if at.Before(now) {
		h.t.Fatalf("clock: cannot go back from %v to %v", now, at)
	}
	h.clk.Advance(at.Sub(now))
}

type user struct {
	Name, ID, Token string
}

// call is one request to the node as token (owner or user) of project p;
// it returns the status and the raw answer.
func (h *harness) call(p nodetest.Project, token, method, path string, body any) (int, []byte) {
	h.t.Helper()
	hdr := map[string]string{"X-Project-Id": p.ID, "X-API-Key": p.APIKey}
	if token != "" {
		hdr["Authorization"] = "Bearer " + token
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, b, err := nodetest.DoJSON(ctx, h.base(), method, path, hdr, body)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	return st, b
}

// must is call expecting status want, decoding the answer into out.
func (h *harness) must(p nodetest.Project, token, method, path string, body any, want int, out any) {
	h.t.Helper()
	st, b := h.call(p, token, method, path, body)
	if st != want {
		h.t.Fatalf("%s %s: status %d, want %d: %s", method, path, st, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			h.t.Fatalf("%s %s: decode %q: %v", method, path, b, err)
		}
	}
}

// mustFail is call expecting status and error code.
func (h *harness) mustFail(p nodetest.Project, token, method, path string, body any, status int, code string) {
	h.t.Helper()
	st, b := h.call(p, token, method, path, body)
	var e struct{ Error struct{ Code string } }
	_ = json.Unmarshal(b, &e)
	if st != status || e.Error.Code != code {
		h.t.Fatalf("%s %s: got %d %s, want %d %s", method, path, st, b, status, code)
	}
}

// register creates an account with one (web) device and the given
// preferences (nil: defaults).
func (h *harness) register(p nodetest.Project, name string, prefs map[string]any) user {
	h.t.Helper()
	email := fmt.Sprintf("user%d@example.com", h.seq.Add(1))
	var out struct {
		Token string
		User  struct{ ID string }
	}
	h.must(p, "", http.MethodPost, "/api/auth",
		map[string]string{"action": "register", "email": email, "password": "correct horse battery", "name": name},
		http.StatusCreated, &out)
	if out.Token == "" || out.User.ID == "" {
		h.t.Fatalf("register %s: no token or id", name)
	}
	u := user{Name: name, ID: out.User.ID, Token: out.Token}
	h.must(p, u.Token, http.MethodPost, "/api/notifications/register",
		map[string]any{"token": "device-of-" + u.ID, "deviceInfo": map[string]string{"platform": "web"}}, http.StatusCreated, nil)
	if prefs != nil {
		h.setPrefs(p, u, prefs)
	}
	return u
}

func (h *harness) setPrefs(p nodetest.Project, u user, prefs map[string]any) {
	h.t.Helper()
	var got map[string]any
	h.must(p, u.Token, http.MethodPut, "/api/notifications/preferences", prefs, http.StatusOK, &got)
	for k, v := range prefs {
		if !reflect.DeepEqual(got[k], v) {
			h.t.Fatalf("preferences of %s: %s is %v after setting %v", u.Name, k, got[k], v)
		}
	}
}

// quiet are preferences with quiet hours on.
func quiet(start, end, zone string) map[string]any {
	return map[string]any{"quietHoursEnabled": true, "quietHoursStart": start, "quietHoursEnd": end, "timezone": zone}
}

// send posts a notification (path is the send route) and returns its id.
func (h *harness) send(p nodetest.Project, path string, body map[string]any) string {
	h.t.Helper()
	var out struct {
		NotificationID string
		Status         string
	}
	h.must(p, p.OwnerToken, http.MethodPost, path, body, http.StatusAccepted, &out)
	if out.NotificationID == "" || out.Status != push.StatusQueued {
		h.t.Fatalf("send %s: got id %q status %q, want an id and queued", path, out.NotificationID, out.Status)
	}
	return out.NotificationID
}

func (h *harness) sendProject(p nodetest.Project, title, category string) string {
	return h.send(p, "/api/notifications/send-to-project/"+p.ID,
		map[string]any{"title": title, "body": "body of " + title, "category": category, "data": map[string]string{"t": title}})
}

func (h *harness) sendUser(p nodetest.Project, u user, title, category string) string {
	return h.send(p, "/api/notifications/send-to-user/"+u.ID,
		map[string]any{"title": title, "body": "body of " + title, "category": category})
}

// history is the caller's notification history (one page of 100).
func (h *harness) history(p nodetest.Project, token string) []push.HistoryItem {
	h.t.Helper()
	var out struct{ Notifications []push.HistoryItem }
	h.must(p, token, http.MethodGet, "/api/notifications/history?limit=100", nil, http.StatusOK, &out)
	return out.Notifications
}

func find(items []push.HistoryItem, id string) *push.HistoryItem {
	for i := range items {
		if items[i].ID == id {
			return &items[i]
		}
	}
	return nil
}

func findTitle(items []push.HistoryItem, title string) *push.HistoryItem {
	for i := range items {
		if items[i].Title == title {
			return &items[i]
		}
	}
	return nil
}

// note is the owner's record of notification nid.
func (h *harness) note(p nodetest.Project, nid string) push.HistoryItem {
	h.t.Helper()
	it := find(h.history(p, p.OwnerToken), nid)
	if it == nil {
		h.t.Fatalf("notification %s is not in the owner's history", nid)
	}
	return *it
}

// waitSent waits until notification nid's main job has ended (status sent):
// every recipient judged, every inbox entry committed.
func (h *harness) waitSent(p nodetest.Project, nid string) push.HistoryItem {
	h.t.Helper()
	var it push.HistoryItem
	nodetest.CheckFor(h.t, wait, 20*time.Millisecond, func() error {
		n := find(h.history(p, p.OwnerToken), nid)
		if n == nil {
			return fmt.Errorf("notification %s not in the owner's history", nid)
		}
		if n.Status != push.StatusSent {
			return fmt.Errorf("notification %s is %s", nid, n.Status)
		}
		it = *n
		return nil
	})
	return it
}

// waitHas waits until every user of us has notification nid in their history.
func (h *harness) waitHas(p nodetest.Project, nid string, us ...user) {
	h.t.Helper()
	nodetest.CheckFor(h.t, wait, 20*time.Millisecond, func() error {
		for _, u := range us {
			if find(h.history(p, u.Token), nid) == nil {
				return fmt.Errorf("%s has not received %s", u.Name, nid)
			}
		}
		return nil
	})
}

// counts are the owner's outcome counts of a notification.
type counts struct {
	Targets, Delivered, Failed, Pruned, Skipped, Deferred int
}

func countsOf(it push.HistoryItem) counts {
	return counts{it.Targets, it.Delivered, it.Failed, it.Pruned, it.Skipped, it.Deferred}
}

// barrier sends a notification to u (who must not be quiet) and waits for
// it: the dispatcher has since gone over every job due at the current clock.
func (h *harness) barrier(p nodetest.Project, u user) {
	h.t.Helper()
	nid := h.sendUser(p, u, fmt.Sprintf("barrier %d", h.seq.Add(1)), push.CategorySecurity)
	h.waitHas(p, nid, u)
	h.waitSent(p, nid)
}

// ---- 1. preferences × categories ---------------------------------------------

func TestPreferencesByCategory(t *testing.T) {
	h := newHarness(t, t0)
	p := h.c.CreateProject(0)

	// want holds the outcome for general, marketing and security in that
	// order: D delivered now, S skipped, Q deferred by quiet hours.
	rows := []struct {
		push, marketing, security, quiet bool
		want                             string
	}{
		{false, false, false, false, "SSS"},
		{false, true, false, false, "SSS"},
		{false, false, true, false, "SSS"},
		{false, true, true, false, "SSS"},
		{false, false, false, true, "SSS"},
		{false, true, false, true, "SSS"},
		{false, false, true, true, "SSS"},
		{false, true, true, true, "SSS"},
		{true, false, false, false, "DSS"},
		{true, true, false, false, "DDS"},
		{true, false, true, false, "DSD"},
		{true, true, true, false, "DDD"},
		{true, false, false, true, "QSS"},
		{true, true, false, true, "QQS"},
		{true, false, true, true, "QSD"}, // security is exempt from quiet hours
		{true, true, true, true, "QQD"},
	}
	// The owner is an account of the project too, with the defaults: push
	// and security on, marketing off, no quiet hours.
	const ownerWant = "DSD"
	users := make([]user, len(rows))
	for i, r := range rows {
		prefs := map[string]any{"pushEnabled": r.push, "marketingEnabled": r.marketing, "securityEnabled": r.security}
		if r.quiet {
			// Quiet all day but the last minute, in UTC.
			for k, v := range quiet("00:00", "23:59", "UTC") {
				prefs[k] = v
			}
		}
		name := fmt.Sprintf("push=%v,marketing=%v,security=%v,quiet=%v", r.push, r.marketing, r.security, r.quiet)
		users[i] = h.register(p, name, prefs)
	}

	categories := []string{push.CategoryGeneral, push.CategoryMarketing, push.CategorySecurity}
	nids := make([]string, len(categories))
	for k, cat := range categories {
		nids[k] = h.sendProject(p, "to all, "+cat, cat)
	}
	for k, cat := range categories {
		t.Run(cat, func(t *testing.T) {
			h := h.with(t)
			got := h.waitSent(p, nids[k])
			var want counts
			want.Targets = len(users) // one device each, counted when sent
			switch ownerWant[k] {
			case 'S':
				want.Skipped++
			case 'Q':
				want.Deferred++
			}
			for i, r := range rows {
				switch r.want[k] {
				case 'D':
					want.Failed++ // reached: its one device fails without FCM credentials
				case 'S':
					want.Skipped++
				case 'Q':
					want.Deferred++
				}
				it := find(h.history(p, users[i].Token), nids[k])
				if (r.want[k] == 'D') != (it != nil) {
					t.Errorf("%s: delivered=%v, want outcome %c", users[i].Name, it != nil, r.want[k])
					continue
				}
				if it != nil {
					if it.Title != "to all, "+cat || it.Body != "body of to all, "+cat || it.Category != cat ||
						it.Status != push.StatusDelivered || !reflect.DeepEqual(it.Target, push.Target{Project: true}) || it.Targets != 1 ||
						!reflect.DeepEqual(it.Data, map[string]string{"t": "to all, " + cat}) || it.SentAt == nil || *it.SentAt != t0.Format(time.RFC3339Nano) {
						t.Errorf("%s: inbox entry %+v", users[i].Name, *it)
					}
				}
			}
			if c := countsOf(got); c != want {
				t.Errorf("owner's counts %+v, want %+v", c, want)
			}
			if got.Category != cat || got.SentAt == nil {
				t.Errorf("owner's record: category %q sentAt %v", got.Category, got.SentAt)
			}
		})
	}

	// At the end of the quiet hours the deferred users get what they would
	// have had, in its category, and nobody else gets anything more.
	end := time.Date(2026, 3, 10, 23, 59, 0, 0, time.UTC)
	h.set(end)
	for k := range categories {
		var waiting []user
		for i, r := range rows {
			if r.want[k] == 'Q' {
				waiting = append(waiting, users[i])
			}
		}
		h.waitHas(p, nids[k], waiting...)
	}
	h.barrier(p, users[11]) // push, marketing and security on, never quiet
	for k, cat := range categories {
		want := 0
		for i, r := range rows {
			it := find(h.history(p, users[i].Token), nids[k])
			switch r.want[k] {
			case 'S':
				if it != nil {
					t.Errorf("%s: %s delivered after the quiet hours to a user who skips it", users[i].Name, cat)
				}
				continue
			case 'Q':
				if it == nil || it.Category != cat || it.SentAt == nil || *it.SentAt != end.Format(time.RFC3339Nano) || !reflect.DeepEqual(it.Target, push.Target{Project: true}) {
					t.Errorf("%s: deferred %s entry %+v, want it sent at %v to the project", users[i].Name, cat, it, end)
				}
			}
			want++
		}
		// Every reached user's device is now counted.
		if got := h.note(p, nids[k]); got.Failed != want || got.Delivered != 0 {
			t.Errorf("%s after the quiet hours: failed %d delivered %d, want failed %d", cat, got.Failed, got.Delivered, want)
		} else if want > 0 && !strings.Contains(got.LastError, "credentials") {
			// The owner's history says why the devices failed.
			t.Errorf("%s: lastError %q, want the missing credentials named", cat, got.LastError)
		}
	}
}

// ---- 2. quiet hours ----------------------------------------------------------

func TestQuietHours(t *testing.T) {
	h := newHarness(t, t0)
	p := h.c.CreateProject(0)
	marker := h.register(p, "marker", nil)
	utc := func(d, hh, mm int) time.Time { return time.Date(2026, 3, d, hh, mm, 0, 0, time.UTC) }
	rows := []struct {
		name  string
		prefs map[string]any
		until time.Time // end of the quiet hours t0 falls in; zero: not quiet at t0
	}{
		{"UTC 22:00-07:00, not yet", quiet("22:00", "07:00", "UTC"), time.Time{}},
		{"UTC from 21:31, a minute ahead", quiet("21:31", "22:00", "UTC"), time.Time{}},
		{"UTC until 21:30, exactly its end", quiet("20:00", "21:30", "UTC"), time.Time{}},
		{"UTC from 21:30, exactly its start", quiet("21:30", "21:45", "UTC"), utc(10, 21, 45)},
		{"UTC start == end, never quiet", quiet("21:30", "21:30", "UTC"), time.Time{}},
		{"quiet hours off", map[string]any{"quietHoursEnabled": false, "quietHoursStart": "21:00", "quietHoursEnd": "22:00"}, time.Time{}},
		{"Tokyo 13:00-14:00, it is 06:30", quiet("13:00", "14:00", "Asia/Tokyo"), time.Time{}},
		{"Tokyo 22:00-07:00, past midnight", quiet("22:00", "07:00", "Asia/Tokyo"), utc(10, 22, 0)},
		{"Chatham +13:45 11:00-12:00", quiet("11:00", "12:00", "Pacific/Chatham"), utc(10, 22, 15)},
		{"New York EDT 17:00-18:30", quiet("17:00", "18:30", "America/New_York"), utc(10, 22, 30)},
		{"Kolkata +05:30 22:00-07:00, past midnight", quiet("22:00", "07:00", "Asia/Kolkata"), utc(11, 1, 30)},
		{"Berlin CET 22:00-07:00, before midnight", quiet("22:00", "07:00", "Europe/Berlin"), utc(11, 6, 0)},
		{"Berlin 01:00-03:00", quiet("01:00", "03:00", "Europe/Berlin"), time.Time{}},
		{"Berlin 01:00-02:30", quiet("01:00", "02:30", "Europe/Berlin"), time.Time{}},
	}
	users := make([]user, len(rows))
	byName := map[string]user{}
	deferred := 0
	for i, r := range rows {
		users[i] = h.register(p, r.name, r.prefs)
		byName[r.name] = users[i]
		if !r.until.IsZero() {
			deferred++
		}
	}
	all := append([]user{marker}, users...)

	general := h.sendProject(p, "good evening", push.CategoryGeneral)
	security := h.sendProject(p, "new sign-in", push.CategorySecurity)

	t.Run("security is delivered at once, quiet or not", func(t *testing.T) {
		h := h.with(t)
		h.waitHas(p, security, all...)
		got := h.waitSent(p, security)
		// The owner (defaults) is reached too, without a device.
		if c, want := countsOf(got), (counts{Targets: len(all), Failed: len(all)}); c != want {
			t.Errorf("counts %+v, want %+v", c, want)
		}
	})

	// check verifies, at the current clock, who has the general notification:
	// exactly the users not quiet at t0 and those whose quiet hours have
	// ended, each deferred one sent at the end of its quiet hours.
	check := func(t *testing.T) {
		h := h.with(t)
		now := h.clk.Now()
		due := []user{marker}
		for i, r := range rows {
			if !r.until.After(now) {
				due = append(due, users[i])
			}
		}
		h.waitHas(p, general, due...)
		h.barrier(p, marker)
		reached := 1 // the marker
		for i, r := range rows {
			it := find(h.history(p, users[i].Token), general)
			if want := !r.until.After(now); want != (it != nil) {
				t.Errorf("at %v %s: delivered=%v, want %v (quiet until %v)", now, r.name, it != nil, want, r.until)
				continue
			}
			if it == nil {
				continue
			}
			reached++
			sent := t0
			if !r.until.IsZero() {
				sent = r.until
			}
			if it.SentAt == nil || *it.SentAt != sent.Format(time.RFC3339Nano) || !reflect.DeepEqual(it.Target, push.Target{Project: true}) || it.Title != "good evening" {
				t.Errorf("%s: entry %+v, want sent at %v to the project", r.name, *it, sent)
			}
		}
		if c, want := countsOf(h.note(p, general)), (counts{Targets: len(all), Failed: reached, Deferred: deferred}); c != want {
			t.Errorf("at %v: owner's counts %+v, want %+v", now, c, want)
		}
	}

	t.Run("at the send", func(t *testing.T) {
		got := h.with(t).waitSent(p, general)
		if got.Deferred != deferred || got.Status != push.StatusSent {
			t.Errorf("deferred %d status %s, want %d deferred and sent", got.Deferred, got.Status, deferred)
		}
		check(t)
	})
	ends := map[time.Time]bool{}
	for _, r := range rows {
		if !r.until.IsZero() {
			ends[r.until] = true
		}
	}
	var steps []time.Time
	for e := range ends {
		steps = append(steps, e.Add(-time.Second), e)
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i].Before(steps[j]) })
	for _, at := range steps {
		t.Run("at "+at.Format("02 15:04:05"), func(t *testing.T) {
			h.set(at)
			check(t)
		})
	}

	t.Run("spring forward in Berlin", func(t *testing.T) {
		h := h.with(t)
		// Berlin springs forward on 2026-03-29 at 01:00 UTC: the wall clock
		// jumps from 02:00 CET to 03:00 CEST. With quiet hours 01:00-03:00,
		// at 00:30 UTC (01:30 CET) they end half an hour later, not an hour
		// and a half.
		dst := byName["Berlin 01:00-03:00"]
		h.set(time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC))
		nid := h.sendUser(p, dst, "spring forward", push.CategoryGeneral)
		if got := h.waitSent(p, nid); got.Deferred != 1 || got.Skipped != 0 {
			t.Fatalf("counts %+v, want the user deferred", countsOf(got))
		}
		// With quiet hours 01:00-02:30 (02:30 does not exist that night),
		// at 00:45 UTC (01:45 CET) they end at the jump too.
		gap := byName["Berlin 01:00-02:30"]
		h.set(time.Date(2026, 3, 29, 0, 45, 0, 0, time.UTC))
		gapNote := h.sendUser(p, gap, "before the jump", push.CategoryGeneral)
		if got := h.waitSent(p, gapNote); got.Deferred != 1 {
			t.Fatalf("counts %+v, want the user deferred", countsOf(got))
		}

		end := time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC)
		h.set(end.Add(-time.Second))
		h.barrier(p, marker)
		if find(h.history(p, dst.Token), nid) != nil || find(h.history(p, gap.Token), gapNote) != nil {
			t.Fatalf("delivered at %v, inside the quiet hours", h.clk.Now())
		}
		h.set(end)
		h.waitHas(p, nid, dst)
		if it := find(h.history(p, dst.Token), nid); *it.SentAt != end.Format(time.RFC3339Nano) {
			t.Errorf("sent at %s, want %v", *it.SentAt, end)
		}

		t.Run("quiet hours ending in the skipped hour", func(t *testing.T) {
			h := h.with(t)
			// A notification sent now is delivered at once: the quiet
			// hours are over...
			h.waitHas(p, h.sendUser(p, gap, "after the jump", push.CategoryGeneral), gap)
			// ...so the one deferred until their end is due too.
			nodetest.CheckFor(t, 3*time.Second, 20*time.Millisecond, func() error {
				if find(h.history(p, gap.Token), gapNote) == nil {
					return fmt.Errorf("at %v (03:00 CEST, quiet hours 01:00-02:30 over) the notification deferred at 01:45 CET "+
						"is still held, though one sent at this time was delivered at once", end)
				}
				return nil
			})
		})
	})
}

// ---- 3. the project switch ------------------------------------------------------

func TestProjectSwitch(t *testing.T) {
	h := newHarness(t, t0)
	// p is switched off and on; q, always on, shows what the dispatcher
	// does meanwhile.
	p, q := h.c.CreateProject(0), h.c.CreateProject(0)
	pu, pq := h.register(p, "p user", nil), h.register(p, "p quiet", quiet("21:00", "22:00", "UTC"))
	qu, qq := h.register(q, "q user", nil), h.register(q, "q quiet", quiet("21:00", "22:00", "UTC"))
	toggle := func(pr nodetest.Project, on bool) {
		t.Helper()
		var out struct {
			ProjectID   string
			PushEnabled bool
		}
		h.must(pr, pr.OwnerToken, http.MethodPost, "/api/notifications/toggle-push", map[string]any{"projectId": pr.ID, "enabled": on}, http.StatusOK, &out)
		if out.ProjectID != pr.ID || out.PushEnabled != on {
			t.Fatalf("toggle-push: %+v, want %v", out, on)
		}
	}
	schedule := func(pr nodetest.Project, title string, at time.Time) push.Schedule {
		t.Helper()
		var sc push.Schedule
		h.must(pr, pr.OwnerToken, http.MethodPost, "/api/notifications/schedule",
			map[string]any{"title": title, "sendAt": at.Format(time.RFC3339)}, http.StatusCreated, &sc)
		if sc.ID == "" || sc.Status != push.StatusScheduled {
			t.Fatalf("schedule: %+v", sc)
		}
		return sc
	}

	// A queued job: deferred by quiet hours until 22:00, in both projects.
	pDeferred := h.sendUser(p, pq, "p deferred", push.CategoryGeneral)
	qDeferred := h.sendUser(q, qq, "q deferred", push.CategoryGeneral)
	for _, c := range []struct {
		pr  nodetest.Project
		nid string
	}{{p, pDeferred}, {q, qDeferred}} {
		if got := h.waitSent(c.pr, c.nid); got.Deferred != 1 {
			t.Fatalf("deferred %d, want 1", got.Deferred)
		}
	}

	h.mustFail(p, pu.Token, http.MethodPost, "/api/notifications/toggle-push", map[string]any{"projectId": p.ID, "enabled": false}, http.StatusForbidden, "forbidden")
	h.mustFail(p, p.OwnerToken, http.MethodPost, "/api/notifications/toggle-push", map[string]any{"projectId": q.ID, "enabled": false}, http.StatusForbidden, "project_mismatch")
	toggle(p, false)

	t.Run("sends are refused while off", func(t *testing.T) {
		h := h.with(t)
		body := map[string]any{"title": "refused", "topic": "news"}
		h.mustFail(p, p.OwnerToken, http.MethodPost, "/api/notifications/send-to-project/"+p.ID, body, http.StatusForbidden, "push_disabled")
		h.mustFail(p, p.OwnerToken, http.MethodPost, "/api/notifications/send-to-user/"+pu.ID, body, http.StatusForbidden, "push_disabled")
		h.mustFail(p, p.OwnerToken, http.MethodPost, "/api/notifications/send-to-topic", body, http.StatusForbidden, "push_disabled")
		if findTitle(h.history(p, p.OwnerToken), "refused") != nil {
			t.Errorf("a refused send is in the history")
		}
		// The other project is unaffected.
		h.waitHas(q, h.sendUser(q, qu, "q still on", push.CategoryGeneral), qu)
	})

	// Schedules due while off; q's is due a second later, so that when the
	// scheduler has fired q's it has gone past p's.
	pSc := schedule(p, "p scheduled", t0.Add(10*time.Minute))
	qSc := schedule(q, "q scheduled", t0.Add(10*time.Minute+time.Second))
	h.set(t0.Add(35 * time.Minute)) // past both schedules and the end of the quiet hours

	t.Run("held while off", func(t *testing.T) {
		h := h.with(t)
		var qFired push.Schedule
		nodetest.CheckFor(t, wait, 20*time.Millisecond, func() error {
			qFired = h.scheduleByID(q, q.OwnerToken, qSc.ID)
			if qFired.Status != push.StatusSent {
				return fmt.Errorf("q's schedule is %s", qFired.Status)
			}
			return nil
		})
		h.waitHas(q, qFired.NotificationID, qu, qq)
		h.waitHas(q, qDeferred, qq)
		h.waitSent(q, qFired.NotificationID)
		h.barrier(q, qu)

		if sc := h.scheduleByID(p, p.OwnerToken, pSc.ID); sc.Status != push.StatusScheduled || sc.NotificationID != "" || sc.FiredAt != "" {
			t.Errorf("p's schedule fired while push was off: %+v", sc)
		}
		if it := findTitle(h.history(p, p.OwnerToken), "p scheduled"); it != nil {
			t.Errorf("p's schedule produced a notification while off: %+v", *it)
		}
		if got := h.history(p, pq.Token); len(got) != 0 {
			t.Errorf("p's deferred notification was delivered while off: %+v", got)
		}
		if got := h.history(p, pu.Token); len(got) != 0 {
			t.Errorf("p's user received %+v while off", got)
		}
	})

	toggle(p, true)
	fireAt := h.clk.Now()

	t.Run("resumed when on", func(t *testing.T) {
		h := h.with(t)
		var fired push.Schedule
		nodetest.CheckFor(t, wait, 20*time.Millisecond, func() error {
			fired = h.scheduleByID(p, p.OwnerToken, pSc.ID)
			if fired.Status != push.StatusSent {
				return fmt.Errorf("p's schedule is %s", fired.Status)
			}
			return nil
		})
		if fired.NotificationID == "" || fired.FiredAt != fireAt.Format(time.RFC3339Nano) {
			t.Errorf("fired schedule %+v, want a notification and firedAt %v", fired, fireAt)
		}
		h.waitHas(p, fired.NotificationID, pu, pq)
		h.waitHas(p, pDeferred, pq)
		if it := find(h.history(p, pq.Token), pDeferred); *it.SentAt != fireAt.Format(time.RFC3339Nano) {
			t.Errorf("deferred notification sent at %s, want %v", *it.SentAt, fireAt)
		}
		got := h.waitSent(p, fired.NotificationID)
		// Three accounts: two users with a device each, and the owner.
		if c, want := countsOf(got), (counts{Targets: 2, Failed: 2}); c != want || got.Title != "p scheduled" {
			t.Errorf("fired notification %+v, want counts %+v", got, want)
		}
		if c, want := countsOf(h.note(p, pDeferred)), (counts{Targets: 1, Failed: 1, Deferred: 1}); c != want {
			t.Errorf("deferred notification: counts %+v, want %+v", c, want)
		}
		h.waitHas(p, h.sendUser(p, pu, "on again", push.CategoryGeneral), pu)
	})
}

// scheduleByID finds a schedule in the caller's list.
func (h *harness) scheduleByID(p nodetest.Project, token, id string) push.Schedule {
	h.t.Helper()
	for _, sc := range h.schedules(p, token) {
		if sc.ID == id {
			return sc
		}
	}
	h.t.Fatalf("schedule %s is not listed", id)
	return push.Schedule{}
}

func (h *harness) schedules(p nodetest.Project, token string) []push.Schedule {
	h.t.Helper()
	var out struct{ Scheduled []push.Schedule }
	h.must(p, token, http.MethodGet, "/api/notifications/scheduled?limit=100", nil, http.StatusOK, &out)
	return out.Scheduled
}

// ---- 4. the scheduler ---------------------------------------------------------

func TestScheduler(t *testing.T) {
	h := newHarness(t, t0)
	p := h.c.CreateProject(0)
	u1, u2, u3 := h.register(p, "u1", nil), h.register(p, "u2", nil), h.register(p, "u3", nil)
	for _, s := range []struct {
		u     user
		topic string
	}{{u1, "news"}, {u2, "news"}, {u3, "sports"}} {
		h.must(p, s.u.Token, http.MethodPost, "/api/notifications/subscribe", map[string]string{"topic": s.topic}, http.StatusOK, nil)
	}
	schedule := func(token, title string, at time.Time, target any, want int) push.Schedule {
		t.Helper()
		body := map[string]any{"title": title, "body": "b", "sendAt": at.Format(time.RFC3339)}
		if target != nil {
			body["target"] = target
		}
		var sc push.Schedule
		h.must(p, token, http.MethodPost, "/api/notifications/schedule", body, want, &sc)
		return sc
	}
	at10 := t0.Add(10 * time.Minute)
	// The guard is due two seconds earlier: once it has fired, the
	// scheduler has looked at everything due at the clock.
	guard := schedule(p.OwnerToken, "guard", at10.Add(-2*time.Second), map[string]string{"userId": u3.ID}, http.StatusCreated)
	all := schedule(p.OwnerToken, "to all", at10, nil, http.StatusCreated)
	cancelled := schedule(p.OwnerToken, "cancelled", t0.Add(20*time.Minute), nil, http.StatusCreated)
	mine := schedule(u1.Token, "u1's reminder", t0.Add(30*time.Minute), nil, http.StatusCreated)
	news := schedule(p.OwnerToken, "news", t0.Add(30*time.Minute), map[string]string{"topic": "news"}, http.StatusCreated)
	if !reflect.DeepEqual(all.Target, push.Target{Project: true}) || !reflect.DeepEqual(mine.Target, push.Target{UserID: u1.ID}) {
		t.Fatalf("targets: owner's default %+v, user's %+v", all.Target, mine.Target)
	}
	t.Run("a user schedules only their own reminders", func(t *testing.T) {
		h := h.with(t)
		h.mustFail(p, u2.Token, http.MethodPost, "/api/notifications/schedule",
			map[string]any{"title": "x", "sendAt": at10.Format(time.RFC3339), "target": map[string]any{"project": true}}, http.StatusForbidden, "forbidden")
		h.mustFail(p, u2.Token, http.MethodPost, "/api/notifications/schedule",
			map[string]any{"title": "x", "sendAt": at10.Format(time.RFC3339), "category": "marketing"}, http.StatusForbidden, "forbidden")
		if got := h.schedules(p, u1.Token); len(got) != 1 || got[0].ID != mine.ID {
			t.Errorf("u1's schedules: %+v, want only their reminder", got)
		}
		if got := h.schedules(p, u2.Token); len(got) != 0 {
			t.Errorf("u2's schedules: %+v, want none", got)
		}
		if got := h.schedules(p, p.OwnerToken); len(got) != 5 {
			t.Errorf("owner's schedules: %d, want all 5", len(got))
		}
	})

	fired := func(h *harness, sc push.Schedule) push.Schedule {
		h.t.Helper()
		var got push.Schedule
		nodetest.CheckFor(h.t, wait, 20*time.Millisecond, func() error {
			got = h.scheduleByID(p, p.OwnerToken, sc.ID)
			if got.Status != push.StatusSent || got.NotificationID == "" {
				return fmt.Errorf("schedule %q is %s", sc.Title, got.Status)
			}
			return nil
		})
		h.waitSent(p, got.NotificationID)
		return got
	}
	// only checks that exactly the users of want have notification nid.
	only := func(h *harness, nid string, want ...user) {
		h.t.Helper()
		for _, u := range []user{u1, u2, u3} {
			if has, w := find(h.history(p, u.Token), nid) != nil, contains(want, u); has != w {
				h.t.Errorf("%s has %s: %v, want %v", u.Name, nid, has, w)
			}
		}
	}

	t.Run("not a second early", func(t *testing.T) {
		h := h.with(t)
		h.set(at10.Add(-time.Second))
		g := fired(h, guard)
		only(h, g.NotificationID, u3)
		if sc := h.scheduleByID(p, p.OwnerToken, all.ID); sc.Status != push.StatusScheduled || sc.NotificationID != "" {
			t.Errorf("fired a second early: %+v", sc)
		}
		for _, u := range []user{u1, u2, u3} {
			if it := findTitle(h.history(p, u.Token), "to all"); it != nil {
				t.Errorf("%s received it a second early", u.Name)
			}
		}
	})
	t.Run("at sendAt", func(t *testing.T) {
		h := h.with(t)
		h.set(at10)
		sc := fired(h, all)
		if sc.FiredAt != at10.Format(time.RFC3339Nano) {
			t.Errorf("fired at %s, want %v", sc.FiredAt, at10)
		}
		only(h, sc.NotificationID, u1, u2, u3)
		n := h.note(p, sc.NotificationID)
		if n.Title != "to all" || n.Body != "b" || !reflect.DeepEqual(n.Target, push.Target{Project: true}) || n.Targets != 3 || n.Failed != 3 {
			t.Errorf("owner's record %+v", n)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		h := h.with(t)
		var out push.Schedule
		h.must(p, u1.Token, http.MethodDelete, "/api/notifications/scheduled/"+cancelled.ID, nil, http.StatusNotFound, nil)
		h.must(p, p.OwnerToken, http.MethodDelete, "/api/notifications/scheduled/"+cancelled.ID, nil, http.StatusOK, &out)
		if out.Status != push.StatusCancelled {
			t.Errorf("cancelled: %+v", out)
		}
		h.mustFail(p, p.OwnerToken, http.MethodDelete, "/api/notifications/scheduled/"+cancelled.ID, nil, http.StatusConflict, "not_cancellable")
		h.mustFail(p, p.OwnerToken, http.MethodDelete, "/api/notifications/scheduled/"+all.ID, nil, http.StatusConflict, "not_cancellable")
	})
	t.Run("a user's reminder and a topic", func(t *testing.T) {
		h := h.with(t)
		h.set(t0.Add(30 * time.Minute))
		m := fired(h, mine)
		nw := fired(h, news)
		only(h, m.NotificationID, u1)
		only(h, nw.NotificationID, u1, u2)
		if n := h.note(p, m.NotificationID); !reflect.DeepEqual(n.Target, push.Target{UserID: u1.ID}) || n.Targets != 1 {
			t.Errorf("reminder's record %+v", n)
		}
		if n := h.note(p, nw.NotificationID); !reflect.DeepEqual(n.Target, push.Target{Topic: "news"}) || n.Targets != 2 || n.Failed != 2 {
			t.Errorf("topic's record %+v", n)
		}
		if it := find(h.history(p, u1.Token), m.NotificationID); it == nil || it.Title != "u1's reminder" || !reflect.DeepEqual(it.Target, push.Target{UserID: u1.ID}) {
			t.Errorf("u1's reminder entry %+v", it)
		}
		// The cancelled schedule, due ten minutes ago, never fired.
		if sc := h.scheduleByID(p, p.OwnerToken, cancelled.ID); sc.Status != push.StatusCancelled || sc.NotificationID != "" {
			t.Errorf("cancelled schedule: %+v", sc)
		}
		for _, tok := range []string{p.OwnerToken, u1.Token, u2.Token, u3.Token} {
			if it := findTitle(h.history(p, tok), "cancelled"); it != nil {
				t.Errorf("the cancelled schedule was sent: %+v", *it)
			}
		}
	})
}

func contains(us []user, u user) bool {
	for _, v := range us {
		if v.ID == u.ID {
			return true
		}
	}
	return false
}

// ---- 5. the socket channel ------------------------------------------------------

// socket is a raw realtime connection: every message it reads.
type socket struct {
	t    *testing.T
	ws   *websocket.Conn
	msgs chan map[string]any
}

func (h *harness) dialSocket(p nodetest.Project, u user) *socket {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	url := "ws" + strings.TrimPrefix(h.base(), "http") + "/api/realtime"
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{
		"Authorization": {"Bearer " + u.Token}, "X-Project-Id": {p.ID}, "X-Api-Key": {p.APIKey}}})
	if err != nil {
		h.t.Fatalf("dial realtime: %v", err)
	}
	s := &socket{t: h.t, ws: ws, msgs: make(chan map[string]any, 64)}
	go func() {
		defer close(s.msgs)
		for {
			_, b, err := ws.Read(context.Background())
			if err != nil {
				return
			}
			var m map[string]any
			if json.Unmarshal(b, &m) == nil {
				s.msgs <- m
			}
		}
	}()
	h.t.Cleanup(func() { _ = ws.CloseNow() })
	if m := s.next(); m["op"] != "ready" || m["userId"] != u.ID {
		h.t.Fatalf("first message %v, want ready for %s", m, u.ID)
	}
	return s
}

func (s *socket) next() map[string]any {
	s.t.Helper()
	select {
	case m, ok := <-s.msgs:
		if !ok {
			s.t.Fatalf("the realtime connection ended")
		}
		return m
	case <-time.After(wait):
		s.t.Fatalf("no message within %v", wait)
		return nil
	}
}

// notification reads the next message and checks it is notification nid.
func (s *socket) notification(nid, title string) map[string]any {
	s.t.Helper()
	m := s.next()
	if m["op"] != "notification" || m["id"] != nid || m["title"] != title {
		s.t.Fatalf("got %v, want notification %s %q", m, nid, title)
	}
	return m
}

func TestSocketChannel(t *testing.T) {
	h := newHarness(t, t0)
	p := h.c.CreateProject(0)
	u1, u2 := h.register(p, "u1", nil), h.register(p, "u2", nil)
	h.must(p, u1.Token, http.MethodPost, "/api/notifications/subscribe", map[string]string{"topic": "a"}, http.StatusOK, nil)
	h.must(p, u2.Token, http.MethodPost, "/api/notifications/subscribe", map[string]string{"topic": "b"}, http.StatusOK, nil)
	s1 := h.dialSocket(p, u1)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c2, err := client.Dial(ctx, client.Config{URL: h.base(), Token: u2.Token, ProjectID: p.ID, APIKey: p.APIKey})
	if err != nil {
		t.Fatalf("client dial: %v", err)
	}
	defer func() { _ = c2.CloseNow() }()
	next2 := func() client.Notification {
		t.Helper()
		select {
		case n := <-c2.Notifications():
			return n
		case <-time.After(wait):
			t.Fatalf("u2 received no notification within %v", wait)
			return client.Notification{}
		}
	}

	t.Run("send to user", func(t *testing.T) {
		s1.t = t
		nid := h.send(p, "/api/notifications/send-to-user/"+u1.ID,
			map[string]any{"title": "hello", "body": "there", "data": map[string]string{"k": "v"}, "category": "security"})
		m := s1.notification(nid, "hello")
		want := map[string]any{"body": "there", "data": map[string]any{"k": "v"}, "category": "security",
			"target": map[string]any{"userId": u1.ID}, "status": "delivered", "devices": float64(1),
			"sentAt": t0.Format(time.RFC3339Nano), "createdAt": t0.Format(time.RFC3339Nano)}
		for k, v := range want {
			if !reflect.DeepEqual(m[k], v) {
				t.Errorf("%s: %v, want %v (message %v)", k, m[k], v, m)
			}
		}
		if rev, ok := m["revision"].(float64); !ok || rev <= 0 {
			t.Errorf("revision %v", m["revision"])
		}
	})
	t.Run("topics followed and not", func(t *testing.T) {
		s1.t = t
		b := h.send(p, "/api/notifications/send-to-topic", map[string]any{"title": "on b", "topic": "b", "data": map[string]string{"x": "y"}})
		h.waitSent(p, b)
		a := h.send(p, "/api/notifications/send-to-topic", map[string]any{"title": "on a", "topic": "a"})
		// u1 follows a, not b: what comes next is a's.
		if m := s1.notification(a, "on a"); !reflect.DeepEqual(m["target"], map[string]any{"topic": "a"}) {
			t.Errorf("target %v", m["target"])
		}
		// u2, over the Go client, got b (and not u1's notifications).
		if n := next2(); n.ID != b || n.Title != "on b" || string(n.Data) != `{"x":"y"}` {
			t.Errorf("u2 got %+v, want %s on b", n, b)
		}
	})
	t.Run("deferred by quiet hours until their end", func(t *testing.T) {
		s1.t = t
		h.setPrefs(p, u1, quiet("21:00", "22:00", "UTC"))
		d := h.sendUser(p, u1, "later", push.CategoryGeneral)
		if got := h.waitSent(p, d); got.Deferred != 1 {
			t.Fatalf("deferred %d, want 1", got.Deferred)
		}
		now := h.sendUser(p, u1, "urgent", push.CategorySecurity)
		s1.notification(now, "urgent") // and not "later" before it
		end := time.Date(2026, 3, 10, 22, 0, 0, 0, time.UTC)
		h.set(end.Add(-time.Second))
		h.barrier(p, u1)
		if m := s1.next(); m["op"] != "notification" || !strings.HasPrefix(m["title"].(string), "barrier") {
			t.Fatalf("got %v before the end of the quiet hours, want the barrier", m)
		}
		h.set(end)
		m := s1.notification(d, "later")
		if m["sentAt"] != end.Format(time.RFC3339Nano) || !reflect.DeepEqual(m["target"], map[string]any{"userId": u1.ID}) {
			t.Errorf("deferred message %v, want sent at %v to u1", m, end)
		}
		// u2 got nothing of u1's: its next is its own.
		mine := h.sendUser(p, u2, "for u2", push.CategoryGeneral)
		if n := next2(); n.ID != mine {
			t.Errorf("u2 got %+v, want %s", n, mine)
		}
	})
}

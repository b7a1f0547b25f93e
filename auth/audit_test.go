package auth_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/raftstore"
)

// owner logs the project's owner in and returns its principal.
func (f *fixture) owner() *auth.Principal {
	f.t.Helper()
	return f.authenticate(f.login(ownerEmail, testPassword))
}

// audit lists the whole audit log (all pages of limit) with the filters.
func (f *fixture) audit(p *auth.Principal, limit int, userID, typ string) []auth.AuditEntry {
	f.t.Helper()
	var all []auth.AuditEntry
	cursor := ""
	for range 10000 {
		page, err := f.svc.ListAudit(bg, p, cursor, limit, userID, typ)
		if err != nil {
			f.t.Fatalf("list audit (cursor %q): %v", cursor, err)
		}
		if len(page.Events) > max(limit, 0) && limit > 0 {
			f.t.Fatalf("page of %d events, limit %d", len(page.Events), limit)
		}
		all = append(all, page.Events...)
		if page.NextCursor == "" {
			return all
		}
		if page.NextCursor >= cursor && cursor != "" {
			f.t.Fatalf("cursor went from %q to %q: not backwards", cursor, page.NextCursor)
		}
		cursor = page.NextCursor
	}
	f.t.Fatal("audit paging does not end")
	return nil
}

func types(es []auth.AuditEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Type
	}
	return out
}

// TestAuditRecordsEvents drives the existing flows and checks each left its
// event, in its own commit, newest first, about the right account, from the
// right address: register, failed logins up to the limit (one
// login-failed-threshold per window), login, change-password, TOTP on,
// login-verify, TOTP off, set-role (by the owner), logout. A refused flow
// records nothing.
func TestAuditRecordsEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Limits{PasswordPerAccountAddr: auth.LimitRule{Max: 3, Window: 15 * time.Minute}})
	own := f.owner()
	// Events of one instant have no order among them: the clock moves a
	// second after each.
	tick := func() { f.clk.Advance(time.Second) }
	tick()

	u := f.register("au") // Register's addr is "" in the fixture
	uid := u.p.UserID
	tick()
	for range 3 { // the third fills the bucket: the threshold event
		f.failLogin(u.email, addr2)
		tick()
	}
	wantLimited(t, "4th", f.tryLogin(u.email, wrongPassword, addr2), 15*time.Minute-3*time.Second)
	tok := f.login(u.email, u.password)
	u.p = f.authenticate(tok)
	tick()
	if _, err := f.svc.ChangePassword(bg, u.p, u.password, newPassword, addr); err != nil {
		t.Fatal(err)
	}
	u.password = newPassword
	tick()
	res, err := f.svc.Login(bg, f.pid, u.email, u.password, addr)
	if err != nil {
		t.Fatal(err)
	}
	u.p = f.authenticate(res.Token)
	tick()
	// A refused change (wrong current password) records nothing but the failure.
	if _, err := f.svc.ChangePassword(bg, u.p, "wrong current password", "yet another passphrase 1", addr); err == nil {
		t.Fatal("change-password with a wrong current password succeeded")
	}
	f.enableTOTP(u)
	tk := f.ticket(u)
	tick()
	ar, err := f.svc.LoginVerify(bg, f.pid, tk, f.code(u.secret, 0), addr)
	if err != nil {
		t.Fatal(err)
	}
	u.p = f.authenticate(ar.Token)
	f.clk.Advance(30 * time.Second)
	if _, _, err := f.svc.DisableTOTP(bg, u.p, f.code(u.secret, 0), addr); err != nil {
		t.Fatal(err)
	}
	tick()
	if _, _, err := f.svc.SetRole(bg, own, uid, auth.RoleOwner); err != nil {
		t.Fatal(err)
	}
	tick()
	if _, err := f.svc.Logout(bg, ar.Token); err != nil {
		t.Fatal(err)
	}

	got := f.audit(own, 100, "", "")
	if n := len(got); n == 0 || got[n-1].UserID != own.UserID || got[n-1].Type != "login" {
		t.Fatalf("the oldest event is not the owner's login: %+v", got)
	}
	got = got[:len(got)-1]
	want := []string{"logout", "role-changed", "totp-disabled", "login", "totp-enabled", "login", "password-changed", "login", "login-failed-threshold", "register"}
	if !slices.Equal(types(got), want) {
		t.Fatalf("events %v, want %v", types(got), want)
	}
	for i, e := range got {
		if e.UserID != uid {
			t.Errorf("event %d (%s) is about %q, want %q", i, e.Type, e.UserID, uid)
		}
		if e.Type != "role-changed" && e.ActorID != uid {
			t.Errorf("event %d (%s) has actor %q, want the user %q", i, e.Type, e.ActorID, uid)
		}
		if !strings.HasPrefix(e.ID, fmt.Sprintf("%020d-", mustTime(t, e.Time).UnixNano())) {
			t.Errorf("event %d id %q does not start with its time %s", i, e.ID, e.Time)
		}
		if i > 0 && e.ID >= got[i-1].ID {
			t.Errorf("events not newest first: %q after %q", e.ID, got[i-1].ID)
		}
	}
	byType := map[string]auth.AuditEntry{}
	for _, e := range got {
		if _, ok := byType[e.Type]; !ok {
			byType[e.Type] = e
		}
	}
	if e := byType["login-failed-threshold"]; e.Address != addr2 || e.Detail["limit"] != "password+addr" || e.Detail["action"] != "login" {
		t.Errorf("threshold event %+v", e)
	}
	if e := byType["login"]; e.Address != addr || e.Detail["method"] != "password+totp" {
		t.Errorf("login-verify's event %+v", e)
	}
	if e := byType["role-changed"]; e.ActorID != own.UserID || e.Detail["role"] != "owner" {
		t.Errorf("role-changed event %+v", e)
	}
	if e := byType["password-changed"]; e.Address != addr {
		t.Errorf("password-changed event %+v", e)
	}

	// Filters: by type, by user, both; the owner's own login is not u's.
	if got := f.audit(own, 2, uid, "login"); len(got) != 3 || got[0].Detail["method"] != "password+totp" {
		t.Errorf("u's logins: %+v", got)
	}
	if got := f.audit(own, 100, own.UserID, ""); !slices.Equal(types(got), []string{"login"}) {
		t.Errorf("owner's events %v, want [login]", types(got))
	}
	if got := f.audit(own, 1, "", "logout"); len(got) != 1 || got[0].UserID != uid {
		t.Errorf("logouts %+v", got)
	}

	// Only owners read the log (u is an owner now: use another account).
	v := f.register("av")
	if _, err := f.svc.ListAudit(bg, v.p, "", 10, "", ""); !errors.Is(err, auth.ErrForbidden) {
		t.Fatalf("a user's ListAudit: %v, want ErrForbidden", err)
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("event time %q: %v", s, err)
	}
	return at
}

// TestAuditThresholdOncePerWindow: the threshold event is written by the
// failure that fills a bucket, once per window; a new window that fills
// writes another.
func TestAuditThresholdOncePerWindow(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Limits{PasswordPerAccountAddr: auth.LimitRule{Max: 2, Window: 10 * time.Minute}})
	own := f.owner()
	u := f.register("th")
	for range 2 {
		f.failLogin(u.email, addr2)
	}
	for range 3 {
		wantLimited(t, "full", f.tryLogin(u.email, wrongPassword, addr2), 10*time.Minute)
	}
	if got := f.audit(own, 10, "", "login-failed-threshold"); len(got) != 1 {
		t.Fatalf("after one window: %d threshold events, want 1", len(got))
	}
	f.clk.Advance(10 * time.Minute)
	f.failLogin(u.email, addr2)
	if got := f.audit(own, 10, "", "login-failed-threshold"); len(got) != 1 {
		t.Fatalf("one failure into the next window: %d threshold events, want 1", len(got))
	}
	f.failLogin(u.email, addr2)
	got := f.audit(own, 10, "", "login-failed-threshold")
	if len(got) != 2 || got[0].UserID != u.p.UserID {
		t.Fatalf("after the second window filled: %+v, want 2 events about %s", got, u.p.UserID)
	}
	// An unknown email is limited like a known one, and named in the event.
	f.clk.Advance(time.Second) // events of one instant have no order among them
	for range 2 {
		f.failLogin("nobody@example.com", addr2)
	}
	got = f.audit(own, 1, "", "login-failed-threshold")
	if len(got) != 3 || got[0].UserID != "" || got[0].Detail["email"] != "nobody@example.com" {
		t.Fatalf("unknown email's threshold event %+v", got)
	}
}

// commitEvents commits one event per time in ats (in batches) and returns
// their ids, newest first.
func (f *fixture) commitEvents(ats []time.Time, typ func(i int) string, user func(i int) string) []auth.AuditEntry {
	f.t.Helper()
	var out []auth.AuditEntry
	for lo := 0; lo < len(ats); lo += 200 {
		txn := &raftstore.Txn{Time: f.clk.Now().UnixNano()}
		for i := lo; i < min(lo+200, len(ats)); i++ {
			op := f.svc.AuditOp(f.pid, auth.AuditEvent{Type: typ(i), UserID: user(i), Time: ats[i]})
			txn.Ops = append(txn.Ops, op)
			out = append(out, auth.AuditEntry{ID: keys.Base(op.Path), Type: typ(i), UserID: user(i)})
		}
		res, err := f.store.Txn(bg, txn)
		if err != nil || !res.OK() {
			f.t.Fatalf("commit events: %v %v", res, err)
		}
	}
	slices.SortFunc(out, func(a, b auth.AuditEntry) int { return strings.Compare(b.ID, a.ID) })
	return out
}

// TestAuditPaging commits events spread over a year (bursts of many in one
// minute, many in one nanosecond, some dated after the clock) and checks
// that every page size and filter walks exactly the expected events, newest
// first, each once.
func TestAuditPaging(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	own := f.owner()
	// Start from an empty log: the owner's login is the only event so far.
	before := f.audit(own, 100, "", "")
	rng := rand.New(rand.NewPCG(1, 2))
	now := f.clk.Now()
	var ats []time.Time
	for range 8000 { // scattered over the past year: with the rest, past the scan budget
		ats = append(ats, now.Add(-time.Duration(rng.Int64N(int64(365*24*time.Hour)))))
	}
	burst := now.Add(-3 * time.Hour)
	for i := range 2500 { // more than one window's cap within one minute
		ats = append(ats, burst.Add(time.Duration(i)*20*time.Millisecond))
	}
	for range 20 { // one nanosecond
		ats = append(ats, now.Add(-time.Hour))
	}
	for range 1500 { // more than a window's cap in one nanosecond: read whole
		ats = append(ats, now.Add(-2*time.Hour))
	}
	for range 5 { // after the clock (another node's clock ahead)
		ats = append(ats, now.Add(time.Duration(1+rng.IntN(60))*time.Second))
	}
	typs := []string{auth.AuditLogin, auth.AuditLogout, auth.AuditRegister}
	users := []string{"u1", "u2", "u3", "u4", "u5", "u6", "u7"}
	want := f.commitEvents(ats, func(i int) string { return typs[i%3] }, func(i int) string { return users[i%7] })
	// The owner's login is older than every event committed here but the
	// scattered ones: merge it in order.
	want = append(want, before...)
	slices.SortFunc(want, func(a, b auth.AuditEntry) int { return strings.Compare(b.ID, a.ID) })

	for _, c := range []struct {
		limit     int
		user, typ string
	}{{100, "", ""}, {1, "u3", "logout"}, {37, "", "register"}, {7, "u6", ""}, {0, "", ""}, {100, "nobody", ""}} {
		var exp []string
		for _, e := range want {
			if (c.user == "" || e.UserID == c.user) && (c.typ == "" || e.Type == c.typ) {
				exp = append(exp, e.ID)
			}
		}
		got := f.audit(own, c.limit, c.user, c.typ)
		ids := make([]string, len(got))
		for i, e := range got {
			ids[i] = e.ID
		}
		if !slices.Equal(ids, exp) {
			t.Errorf("limit %d user %q type %q: %d events, want %d (first difference at %d)", c.limit, c.user, c.typ, len(ids), len(exp), firstDiff(ids, exp))
		}
	}
	// A full page answers with a cursor that continues exactly after it.
	p1, err := f.svc.ListAudit(bg, own, "", 50, "", "")
	if err != nil || len(p1.Events) != 50 || p1.NextCursor != p1.Events[49].ID {
		t.Fatalf("first page: %d events, cursor %q, %v", len(p1.Events), p1.NextCursor, err)
	}
	p2, err := f.svc.ListAudit(bg, own, p1.NextCursor, 50, "", "")
	if err != nil || p2.Events[0].ID != want[50].ID {
		t.Fatalf("second page starts at %v, want %s (%v)", p2.Events[0].ID, want[50].ID, err)
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestAuditListRefusals: a bad limit, cursor or type is refused naming the
// field, and a refusal changes nothing.
func TestAuditListRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	own := f.owner()
	for _, c := range []struct {
		cursor    string
		limit     int
		user, typ string
		field     string
	}{
		{limit: -1, field: "limit"},
		{limit: 101, field: "limit"},
		{cursor: "abc", limit: 10, field: "cursor"},
		{cursor: "0000000000000000001-ab", limit: 10, field: "cursor"},
		{cursor: "00000000000000000001-ABCDEF01", limit: 10, field: "cursor"},
		{cursor: "00000000000000000001-abcdef012", limit: 10, field: "cursor"},
		{limit: 10, typ: "login-failed", field: "type"},
		{limit: 10, user: strings.Repeat("u", 201), field: "userId"},
	} {
		_, err := f.svc.ListAudit(bg, own, c.cursor, c.limit, c.user, c.typ)
		wantField(t, fmt.Sprintf("%+v", c), err, c.field, auth.ErrInvalidArgument)
	}
	if got := f.audit(own, 10, "", ""); len(got) != 1 || got[0].Type != "login" {
		t.Fatalf("log after refusals: %+v", got)
	}
}

// TestAuditRetention: the sweep removes exactly the events older than the
// retention, of every project, in batches, and keeps the rest.
func TestAuditRetention(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	own := f.owner()
	other := f.newProject("beta")
	now := f.clk.Now()
	var ats []time.Time
	for i := range 700 { // 600 older than 90 days (more than one batch), 100 younger
		ats = append(ats, now.Add(-auth.DefaultAuditRetention-time.Duration(600-i)*time.Minute+time.Second))
	}
	typ := func(int) string { return auth.AuditLogin }
	user := func(int) string { return "x" }
	evs := f.commitEvents(ats, typ, user)
	pid := f.pid
	f.pid = other
	f.commitEvents(ats[:300], typ, user)
	f.pid = pid
	n, err := f.svc.Sweep(bg)
	if err != nil {
		t.Fatal(err)
	}
	// ats[i] is older than the cutoff for i < 600 (600-i minutes minus a second past it).
	if n != 600+300 {
		t.Fatalf("sweep removed %d, want %d", n, 900)
	}
	got := f.audit(own, 100, "x", "")
	if len(got) != 100 || got[0].ID != evs[0].ID || got[99].ID != evs[99].ID {
		t.Fatalf("kept %d events, want the newest 100", len(got))
	}
	if c := f.count(keys.AuditDir(other)); c != 0 {
		t.Fatalf("project beta keeps %d old events", c)
	}
	// Time passes: the rest go when they pass the retention, nothing sooner.
	f.clk.Advance(time.Minute)
	if n, err := f.svc.Sweep(bg); err != nil || n != 1 {
		t.Fatalf("a minute later the sweep removed %d (%v), want 1", n, err)
	}
}

// BenchmarkListAudit measures a page of 50 from a log of 20,000 events over
// 90 days: the newest page, a page deep in the log, and a filter that
// matches one event in 100 (read until the page fills or the scan budget
// ends the call).
func BenchmarkListAudit(b *testing.B) {
	clk := nodetest.NewClock(epoch)
	c := nodetest.Start(b, nodetest.Options{Clock: clk})
	n := c.Nodes[0].Node
	svc := n.Accounts
	pr, err := svc.CreateProject(bg, "bench", ownerEmail, testPassword)
	if err != nil {
		b.Fatal(err)
	}
	lr, err := svc.Login(bg, pr.ProjectID, ownerEmail, testPassword, "")
	if err != nil {
		b.Fatal(err)
	}
	own, err := svc.Authenticate(lr.Token)
	if err != nil {
		b.Fatal(err)
	}
	const events = 20000
	span := auth.DefaultAuditRetention
	for lo := 0; lo < events; lo += 500 {
		txn := &raftstore.Txn{Time: clk.Now().UnixNano()}
		for i := lo; i < lo+500; i++ {
			at := epoch.Add(-span + time.Duration(i)*(span/events))
			txn.Ops = append(txn.Ops, svc.AuditOp(pr.ProjectID, auth.AuditEvent{Type: auth.AuditLogin, UserID: fmt.Sprintf("u%d", i%100), Time: at}))
		}
		if res, err := n.Store.Txn(bg, txn); err != nil || !res.OK() {
			b.Fatalf("commit: %v %v", res, err)
		}
	}
	mid, err := svc.ListAudit(bg, own, "", 100, "", "")
	if err != nil {
		b.Fatal(err)
	}
	deep := keys.AuditKey(epoch.Add(-span/2), "")
	for _, c := range []struct{ name, cursor, user string }{
		{"newest", "", ""}, {"middle", deep, ""}, {"one-in-100", "", "u7"}, {"after-a-page", mid.NextCursor, ""},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				page, err := svc.ListAudit(bg, own, c.cursor, 50, c.user, "")
				if err != nil || len(page.Events) != 50 {
					b.Fatalf("page: %d events, %v", len(page.Events), err)
				}
			}
		})
	}
}

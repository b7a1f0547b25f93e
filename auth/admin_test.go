package auth_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/raftstore"
)

// ownerSession logs the project's owner in.
func (f *fixture) ownerSession() *auth.Principal {
	f.t.Helper()
	return f.authenticate(f.login(ownerEmail, testPassword))
}

func TestDisableUser(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	own := f.ownerSession()
	u := f.register("dis")
	s2 := f.login(u.email, u.password)
	other := f.register("bystander")

	// Refusals first: nothing is written by any of them.
	_, _, err := f.svc.DisableUser(bg, other.p, u.p.UserID, addr)
	wantErr(t, "a user disables", err, auth.ErrForbidden)
	_, _, err = f.svc.DisableUser(bg, own, own.UserID, addr)
	wantErr(t, "the owner disables themselves", err, auth.ErrOwnAccount)
	_, _, err = f.svc.DisableUser(bg, own, "nosuchuser", addr)
	wantField(t, "unknown id", err, "id", auth.ErrUserNotFound)
	_, _, err = f.svc.DisableUser(bg, own, "_users", addr)
	wantField(t, "reserved id", err, "id", auth.ErrUserNotFound)
	if _, err := f.svc.Authenticate(u.token); err != nil {
		t.Fatalf("a refused disable ended a session: %v", err)
	}

	du, rev, err := f.svc.DisableUser(bg, own, u.p.UserID, addr)
	if err != nil || !du.Disabled || du.ID != u.p.UserID || rev == 0 {
		t.Fatalf("disable = %+v %d %v", du, rev, err)
	}
	f.wantDead("after disable", u.token, s2)
	if _, err := f.svc.Authenticate(other.token); err != nil {
		t.Fatalf("another account's session ended: %v", err)
	}
	_, err = f.svc.Login(bg, f.pid, u.email, u.password, addr)
	wantErr(t, "login of a disabled account", err, auth.ErrAccountDisabled)
	// A wrong password does not learn that the account is disabled.
	_, err = f.svc.Login(bg, f.pid, u.email, "not the password 123", addr)
	wantErr(t, "wrong password of a disabled account", err, auth.ErrInvalidCredentials)
	if g, err := f.svc.GetUser(own, u.p.UserID); err != nil || !g.Disabled {
		t.Fatalf("get disabled user = %+v %v", g, err)
	}

	eu, _, err := f.svc.EnableUser(bg, own, u.p.UserID, addr)
	if err != nil || eu.Disabled {
		t.Fatalf("enable = %+v %v", eu, err)
	}
	f.wantDead("old sessions after enable", u.token, s2)
	s3 := f.login(u.email, u.password)
	if _, err := f.svc.Authenticate(s3); err != nil {
		t.Fatalf("session after enable: %v", err)
	}
	if doc, err := f.store.Get(keys.AccountDisabled(f.pid, u.p.UserID)); err != nil || doc != nil {
		t.Fatalf("disabled marker after enable: %v %v", doc, err)
	}
}

// TestDisabledAtCommit shows the commit-time half of the check: a disable
// committed after login read the account (here: the marker alone, as if
// the account was read just before) refuses the session's commit.
func TestDisabledAtCommit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u := f.register("race")
	res, err := f.store.Txn(bg, &raftstore.Txn{Time: f.clk.Now().UnixNano(), Ops: []raftstore.Op{
		{Kind: raftstore.OpPut, Path: keys.AccountDisabled(f.pid, u.p.UserID), Data: json.RawMessage(`{"by":"test"}`)}}})
	if err != nil || !res.OK() {
		t.Fatalf("put marker: %+v %v", res, err)
	}
	before := f.sessionCount(u)
	_, err = f.svc.Login(bg, f.pid, u.email, u.password, addr)
	wantErr(t, "login committed after a disable", err, auth.ErrAccountDisabled)
	if after := f.sessionCount(u); after != before {
		t.Fatalf("sessions %d -> %d: the refused login stored one", before, after)
	}
}

// sessionCount counts the entries of u's session index.
func (f *fixture) sessionCount(u *user) int {
	f.t.Helper()
	docs, _, err := f.store.List(keys.AccountSessionsDir(f.pid, u.p.UserID), "", 1000)
	if err != nil {
		f.t.Fatal(err)
	}
	return len(docs)
}

func TestDisableEndsLoginTicket(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	own := f.ownerSession()
	u := f.register("tkt")
	f.enableTOTP(u)
	tk := f.ticket(u)
	if _, _, err := f.svc.DisableUser(bg, own, u.p.UserID, addr); err != nil {
		t.Fatal(err)
	}
	_, err := f.svc.LoginVerify(bg, f.pid, tk, f.code(u.secret, 0), addr)
	wantErr(t, "login-verify of a disabled account", err, auth.ErrAccountDisabled)
}

func TestRevokeUserSessions(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	own := f.ownerSession()
	u := f.register("rev")
	s2 := f.login(u.email, u.password)
	_, err := f.svc.RevokeUserSessions(bg, u.p, u.p.UserID, addr)
	wantErr(t, "a user revokes", err, auth.ErrForbidden)
	rev, err := f.svc.RevokeUserSessions(bg, own, u.p.UserID, addr)
	if err != nil || rev == 0 {
		t.Fatalf("revoke sessions: %d %v", rev, err)
	}
	f.wantDead("after revoke-sessions", u.token, s2)
	f.login(u.email, u.password) // not disabled: signs in again
	if _, err := f.svc.Authenticate(f.login(ownerEmail, testPassword)); err != nil {
		t.Fatal(err)
	}
}

// putAccounts writes n bare accounts named <prefix><i> straight into the
// tree (no password hashing), for listing tests.
func (f *fixture) putAccounts(prefix string, n int) {
	f.t.Helper()
	for start := 0; start < n; start += 200 {
		var ops []raftstore.Op
		for i := start; i < min(n, start+200); i++ {
			id := fmt.Sprintf("%s%05d", prefix, i)
			u := auth.User{ID: id, Email: fmt.Sprintf("%s%05d@bulk.example", prefix, i), Name: "Bulk " + id, Role: auth.RoleUser}
			b, _ := json.Marshal(u)
			ops = append(ops, raftstore.Op{Kind: raftstore.OpPut, Path: keys.User(f.pid, id), Data: b})
		}
		res, err := f.store.Txn(bg, &raftstore.Txn{Time: f.clk.Now().UnixNano(), Ops: ops})
		if err != nil || !res.OK() {
			f.t.Fatalf("put accounts: %+v %v", res, err)
		}
	}
}

func TestListUsers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	own := f.ownerSession()
	ada := f.register("ada")
	f.register("bob")
	f.putAccounts("m", 30)

	// Every account once, in pages of 7, in id order.
	var all []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		us, next, err := f.svc.ListUsers(own, "", cursor, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(us) > 7 || (next != "" && len(us) != 7) {
			t.Fatalf("page of %d users, next %q", len(us), next)
		}
		for _, u := range us {
			all = append(all, u.ID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if len(all) != 33 || !slices.IsSorted(all) || len(slices.Compact(slices.Clone(all))) != 33 {
		t.Fatalf("listed %d users (sorted %v): %v", len(all), slices.IsSorted(all), all)
	}

	for _, c := range []struct {
		query string
		want  []string
	}{
		{strings.ToUpper(ada.email[:4]), []string{ada.p.UserID}}, // email prefix, any case
		{ada.p.UserID, []string{ada.p.UserID}},                   // exact id
		{"ULK m0001", []string{"m00010", "m00011", "m00012", "m00013", "m00014", "m00015", "m00016", "m00017", "m00018", "m00019"}}, // name substring
		{"m0002", []string{"m00020", "m00021", "m00022", "m00023", "m00024", "m00025", "m00026", "m00027", "m00028", "m00029"}},
		{"nobody-has-this", nil},
	} {
		us, next, err := f.svc.ListUsers(own, c.query, "", 100)
		if err != nil || next != "" {
			t.Fatalf("query %q: next %q, %v", c.query, next, err)
		}
		var got []string
		for _, u := range us {
			got = append(got, u.ID)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("query %q = %v, want %v", c.query, got, c.want)
		}
	}

	_, _, err := f.svc.ListUsers(ada.p, "", "", 10)
	wantErr(t, "a user lists", err, auth.ErrForbidden)
	for _, bad := range []int{-1, 101} {
		_, _, err := f.svc.ListUsers(own, "", "", bad)
		wantField(t, fmt.Sprintf("limit %d", bad), err, "limit", auth.ErrInvalidArgument)
	}
	for _, bad := range []string{"!!", "dTE6", "eHg6YWJj", "dTE6X3VzZXJz"} { // not base64, empty id, wrong version, reserved id
		_, _, err := f.svc.ListUsers(own, "", bad, 10)
		wantErr(t, "cursor "+bad, err, auth.ErrInvalidCursor)
	}
	if _, err := f.svc.GetUser(own, "nosuchuser"); !errors.Is(err, auth.ErrUserNotFound) {
		t.Fatalf("get unknown user: %v", err)
	}
	if _, err := f.svc.GetUser(ada.p, ada.p.UserID); !errors.Is(err, auth.ErrForbidden) {
		t.Fatalf("a user gets a user: %v", err)
	}
}

// TestListUsersScanBudget: a query matching only accounts far down the list
// answers short pages with a cursor rather than reading every account in
// one call.
func TestListUsersScanBudget(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	own := f.ownerSession()
	f.putAccounts("a", 2500)
	us, next, err := f.svc.ListUsers(own, "a02499@", "", 10)
	if err != nil || len(us) != 0 || next == "" {
		t.Fatalf("first call = %d users, next %q, %v; want an empty page with a cursor", len(us), next, err)
	}
	var got []string
	calls := 1
	for next != "" {
		if calls++; calls > 5 {
			t.Fatal("the scan does not end")
		}
		us, next, err = f.svc.ListUsers(own, "a02499@", next, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range us {
			got = append(got, u.ID)
		}
	}
	if !slices.Equal(got, []string{"a02499"}) || calls != 3 {
		t.Fatalf("found %v in %d calls, want [a02499] in 3 (1000 accounts a call)", got, calls)
	}
}

func TestSessionsListAndRevoke(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u := f.register("ses")
	other := f.register("oth")
	ctx := auth.WithUserAgent(context.Background(), "TestAgent/1.0 \x01(bell)")
	res, err := f.svc.Login(ctx, f.pid, u.email, u.password, "198.51.100.7")
	if err != nil {
		t.Fatal(err)
	}
	p2 := f.authenticate(res.Token)

	list, err := f.svc.ListSessions(p2)
	if err != nil || len(list) != 2 {
		t.Fatalf("list = %+v %v, want 2 sessions", list, err)
	}
	var mine auth.SessionInfo
	for _, s := range list {
		if s.Current {
			mine = s
		}
		if strings.Contains(s.ID, auth.HashToken(u.token)) || strings.Contains(s.ID, auth.HashToken(res.Token)) {
			t.Fatalf("session id %q is a token hash", s.ID)
		}
		if _, err := time.Parse(time.RFC3339Nano, s.LastUsedAt); err != nil {
			t.Fatalf("lastUsedAt %q: %v", s.LastUsedAt, err)
		}
	}
	if mine.Address != "198.51.100.7" || mine.UserAgent != "TestAgent/1.0 (bell)" || mine.CreatedAt != f.clk.Now().UTC().Format(time.RFC3339Nano) {
		t.Fatalf("current session = %+v", mine)
	}

	// Another user's session id is not found, and stays alive.
	olist, err := f.svc.ListSessions(other.p)
	if err != nil || len(olist) != 1 {
		t.Fatalf("other's sessions: %+v %v", olist, err)
	}
	_, err = f.svc.RevokeSession(bg, p2, olist[0].ID, addr)
	wantErr(t, "revoke another user's session", err, auth.ErrSessionNotFound)
	for _, bad := range []string{"", "nope", "../x", "_x"} {
		_, err = f.svc.RevokeSession(bg, p2, bad, addr)
		wantErr(t, "revoke "+bad, err, auth.ErrSessionNotFound)
	}
	if _, err := f.svc.Authenticate(other.token); err != nil {
		t.Fatal(err)
	}

	// Revoking the first session ends only it.
	var first string
	for _, s := range list {
		if !s.Current {
			first = s.ID
		}
	}
	if _, err := f.svc.RevokeSession(bg, p2, first, addr); err != nil {
		t.Fatal(err)
	}
	f.wantDead("revoked session", u.token)
	if _, err := f.svc.Authenticate(res.Token); err != nil {
		t.Fatalf("the other session ended: %v", err)
	}
	_, err = f.svc.RevokeSession(bg, p2, first, addr)
	wantErr(t, "revoke twice", err, auth.ErrSessionNotFound)
	if list, _ := f.svc.ListSessions(p2); len(list) != 1 || !list[0].Current {
		t.Fatalf("after revoke: %+v", list)
	}
}

// TestSessionLastUsed: a session used an hour or more after its last
// recorded use gets lastUsedAt committed by the node's writer; a use
// within the hour does not.
func TestSessionLastUsed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	a := f.register("lu1")
	b := f.register("lu2")
	created := f.clk.Now()
	lastUsed := func(u *user) string {
		t.Helper()
		list, err := f.svc.ListSessions(u.p)
		if err != nil || len(list) != 1 {
			t.Fatalf("sessions: %+v %v", list, err)
		}
		return list[0].LastUsedAt
	}
	ts := func(at time.Time) string { return at.UTC().Format(time.RFC3339Nano) }
	if got := lastUsed(a); got != ts(created) {
		t.Fatalf("lastUsedAt at creation = %s, want %s", got, ts(created))
	}

	f.clk.Advance(90 * time.Minute)
	t1 := f.clk.Now()
	f.authenticate(a.token)
	nodetest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if got := lastUsed(a); got != ts(t1.Truncate(time.Second)) {
			return fmt.Errorf("lastUsedAt %s, want %s", got, ts(t1))
		}
		return nil
	})

	// Within the hour: a's use is not queued; b's (due) is, after it in
	// the one writer's queue, so once b's is committed a's would be too.
	f.clk.Advance(10 * time.Minute)
	f.authenticate(a.token)
	f.authenticate(b.token)
	t2 := f.clk.Now()
	nodetest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if got := lastUsed(b); got != ts(t2.Truncate(time.Second)) {
			return fmt.Errorf("b lastUsedAt %s, want %s", got, ts(t2))
		}
		return nil
	})
	if got := lastUsed(a); got != ts(t1.Truncate(time.Second)) {
		t.Fatalf("a used within the hour: lastUsedAt %s, want still %s", got, ts(t1))
	}

	// A write's caller, answered from memory, is a use too.
	f.clk.Advance(2 * time.Hour)
	t3 := f.clk.Now()
	if _, err := f.svc.Caller(b.token); err != nil {
		t.Fatal(err)
	}
	nodetest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if got := lastUsed(b); got != ts(t3.Truncate(time.Second)) {
			return fmt.Errorf("b lastUsedAt %s after a write, want %s", got, ts(t3))
		}
		return nil
	})
}

func TestAPIKeys(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	own := f.ownerSession()
	u := f.register("key")

	list, err := f.svc.ListAPIKeys(own)
	if err != nil || len(list) != 1 || list[0].ID != auth.DefaultKeyID {
		t.Fatalf("keys of a new project = %+v %v, want only default", list, err)
	}
	_, err = f.svc.CreateAPIKey(bg, u.p, "mine", addr)
	wantErr(t, "a user creates a key", err, auth.ErrForbidden)
	_, err = f.svc.ListAPIKeys(u.p)
	wantErr(t, "a user lists keys", err, auth.ErrForbidden)
	for _, bad := range []string{"", "   ", strings.Repeat("n", 101)} {
		_, err = f.svc.CreateAPIKey(bg, own, bad, addr)
		wantField(t, fmt.Sprintf("name %q", bad), err, "name", auth.ErrInvalidArgument)
	}

	k1, err := f.svc.CreateAPIKey(bg, own, " ci ", addr)
	if err != nil || k1.Name != "ci" || !strings.HasPrefix(k1.Key, "ebk_") || !strings.HasPrefix(k1.Key, k1.Prefix) || len(k1.Prefix) != 12 || k1.Revision == 0 {
		t.Fatalf("create = %+v %v", k1, err)
	}
	if err := f.svc.CheckAPIKey(f.pid, k1.Key); err != nil {
		t.Fatalf("new key: %v", err)
	}
	doc, err := f.store.Get(keys.APIKey(f.pid, k1.ID))
	if err != nil || doc == nil || strings.Contains(string(doc.Data), k1.Key) {
		t.Fatalf("stored key record %v %v: missing, or holds the key", doc, err)
	}
	list, _ = f.svc.ListAPIKeys(own)
	if len(list) != 2 || list[1].ID != k1.ID || list[1].Prefix != k1.Prefix || list[1].Name != "ci" {
		t.Fatalf("list = %+v", list)
	}

	// Deleting default leaves the named key; the old key stops working.
	if _, err := f.svc.DeleteAPIKey(bg, own, auth.DefaultKeyID, addr); err != nil {
		t.Fatal(err)
	}
	if list, _ = f.svc.ListAPIKeys(own); len(list) != 1 || list[0].ID != k1.ID {
		t.Fatalf("after deleting default: %+v", list)
	}
	_, err = f.svc.DeleteAPIKey(bg, own, auth.DefaultKeyID, addr)
	wantErr(t, "delete default twice", err, auth.ErrKeyNotFound)
	_, err = f.svc.DeleteAPIKey(bg, own, k1.ID, addr)
	wantErr(t, "delete the last key", err, auth.ErrLastKey)
	_, err = f.svc.DeleteAPIKey(bg, own, "nosuchkey", addr)
	wantErr(t, "delete unknown", err, auth.ErrKeyNotFound)
	_, err = f.svc.DeleteAPIKey(bg, u.p, k1.ID, addr)
	wantErr(t, "a user deletes", err, auth.ErrForbidden)
	if err := f.svc.CheckAPIKey(f.pid, k1.Key); err != nil {
		t.Fatalf("refused deletes broke the key: %v", err)
	}

	// Up to MaxAPIKeys, then too_many_keys; a deleted key fails at once.
	var made []*auth.CreatedAPIKey
	for i := 1; i < auth.MaxAPIKeys; i++ {
		k, err := f.svc.CreateAPIKey(bg, own, fmt.Sprintf("k%d", i), addr)
		if err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
		made = append(made, k)
	}
	_, err = f.svc.CreateAPIKey(bg, own, "one too many", addr)
	wantErr(t, "key 51", err, auth.ErrTooManyKeys)
	if _, err := f.svc.DeleteAPIKey(bg, own, made[3].ID, addr); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "deleted key", f.svc.CheckAPIKey(f.pid, made[3].Key), auth.ErrInvalidAPIKey)
	for _, k := range []*auth.CreatedAPIKey{k1, made[0], made[48]} {
		if err := f.svc.CheckAPIKey(f.pid, k.Key); err != nil {
			t.Fatalf("key %s after another's delete: %v", k.Name, err)
		}
	}
	if list, _ = f.svc.ListAPIKeys(own); len(list) != auth.MaxAPIKeys-1 {
		t.Fatalf("listed %d keys, want %d", len(list), auth.MaxAPIKeys-1)
	}
}

// TestAPIKeyOwnerJudgedAtCommit: an owner demoted after their principal was
// resolved cannot create a key with it.
func TestAPIKeyOwnerJudgedAtCommit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	own := f.ownerSession()
	u := f.register("promo")
	if _, _, err := f.svc.SetRole(bg, own, u.p.UserID, auth.RoleOwner); err != nil {
		t.Fatal(err)
	}
	u.p = f.authenticate(u.token) // an owner now
	if _, _, err := f.svc.SetRole(bg, own, u.p.UserID, auth.RoleUser); err != nil {
		t.Fatal(err)
	}
	// u.p still says owner: the state at the commit says otherwise.
	_, err := f.svc.CreateAPIKey(bg, u.p, "stale", addr)
	wantErr(t, "demoted owner creates a key", err, auth.ErrForbidden)
	_, _, err = f.svc.DisableUser(bg, u.p, own.UserID, addr)
	wantErr(t, "demoted owner disables", err, auth.ErrForbidden)
	victim := f.register("victim")
	_, err = f.svc.DeleteUser(bg, u.p, victim.p.UserID, addr)
	wantErr(t, "demoted owner deletes a user", err, auth.ErrForbidden)
	if _, err := f.svc.Authenticate(victim.token); err != nil {
		t.Fatalf("the user a demoted owner tried to delete lost its session: %v", err)
	}
}

// BenchmarkAdmin measures, on a project of 5,000 accounts and 50 API keys:
// a first page of 50 users; a search that matches nothing (one call reads
// the scan budget of 1,000 accounts); the API key check every request
// makes (1 key, then 50 hashes compared); and Authenticate, which also queues the
// session's lastUsedAt touch (at most once an hour, so this is the cost of
// the check that it is not due).
func BenchmarkAdmin(b *testing.B) {
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
	for lo := 0; lo < 5000; lo += 500 {
		txn := &raftstore.Txn{Time: clk.Now().UnixNano()}
		for i := lo; i < lo+500; i++ {
			id := fmt.Sprintf("b%05d", i)
			u, _ := json.Marshal(auth.User{ID: id, Email: id + "@bench.example", Name: "Bench " + id, Role: auth.RoleUser})
			txn.Ops = append(txn.Ops, raftstore.Op{Kind: raftstore.OpPut, Path: keys.User(pr.ProjectID, id), Data: u})
		}
		if res, err := n.Store.Txn(bg, txn); err != nil || !res.OK() {
			b.Fatalf("commit: %v %v", res, err)
		}
	}
	b.Run("check-api-key-1-key", func(b *testing.B) {
		for b.Loop() {
			if err := svc.CheckAPIKey(pr.ProjectID, pr.APIKey); err != nil {
				b.Fatal(err)
			}
		}
	})
	var last string
	for i := 1; i < auth.MaxAPIKeys; i++ {
		k, err := svc.CreateAPIKey(bg, own, fmt.Sprintf("k%d", i), "")
		if err != nil {
			b.Fatal(err)
		}
		last = k.Key
	}
	b.Run("list-page-50", func(b *testing.B) {
		for b.Loop() {
			if us, next, err := svc.ListUsers(own, "", "", 50); err != nil || len(us) != 50 || next == "" {
				b.Fatalf("page: %d users, next %q, %v", len(us), next, err)
			}
		}
	})
	b.Run("search-no-match-1000-read", func(b *testing.B) {
		for b.Loop() {
			if us, next, err := svc.ListUsers(own, "zzz", "", 50); err != nil || len(us) != 0 || next == "" {
				b.Fatalf("search: %d users, next %q, %v", len(us), next, err)
			}
		}
	})
	b.Run("check-api-key-50-keys", func(b *testing.B) {
		for b.Loop() {
			if err := svc.CheckAPIKey(pr.ProjectID, last); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("authenticate", func(b *testing.B) {
		for b.Loop() {
			if _, err := svc.Authenticate(lr.Token); err != nil {
				b.Fatal(err)
			}
		}
	})
}

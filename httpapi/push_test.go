package httpapi_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgebase/edgebase/node/nodetest"
)

// The push area (/api/notifications/...) through real HTTP against a real
// node: one table per route, the role checks of the owner-only routes, and
// the authentication matrix of every route.

// ---- plumbing ---------------------------------------------------------------

type pushSetup = func(t *testing.T, e *env, v vars)
type pushCheck = func(t *testing.T, e *env, v vars, r reply)

// pushRows fills in what push scenarios share: the project headers (which a
// row may override, or remove with "") and the time placeholders.
func pushRows(rows []scenario) []scenario {
	for i := range rows {
		r := &rows[i]
		h := map[string]string{"X-Project-Id": "{pid}", "X-API-Key": "{key}"}
		for k, val := range r.headers {
			h[k] = val
		}
		r.headers = h
		prev := r.setup
		r.setup = func(t *testing.T, e *env, v vars) {
			pushTimeVars(v)
			if prev != nil {
				prev(t, e, v)
			}
		}
	}
	return rows
}

// pushTimeVars adds sendAt values relative to now: {in1h}, {in2h}, {in3h},
// {past2m}, {past10m}, {in365d}, {in367d}, {in1hParis} (the {in1h} instant
// written with a +02:00 offset) and {in1hOffset0} (with +00:00).
func pushTimeVars(v vars) {
	now := time.Now().UTC().Truncate(time.Second)
	f := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	v["in1h"] = f(time.Hour)
	v["in2h"] = f(2 * time.Hour)
	v["in3h"] = f(3 * time.Hour)
	v["past2m"] = f(-2 * time.Minute)
	v["past10m"] = f(-10 * time.Minute)
	v["in365d"] = f(365 * 24 * time.Hour)
	v["in367d"] = f(367 * 24 * time.Hour)
	v["in1hParis"] = now.Add(time.Hour).In(time.FixedZone("", 2*3600)).Format(time.RFC3339)
	v["in1hOffset0"] = strings.TrimSuffix(f(time.Hour), "Z") + "+00:00"
}

// runSeq runs scenarios one after the other, in order (for rows that change
// project-wide state).
func (e *env) runSeq(t *testing.T, scs []scenario) {
	t.Helper()
	for _, sc := range scs {
		t.Run(sc.name, func(t *testing.T) { e.runOne(t, sc) })
	}
}

// call sends one request to project e.p with the bearer token tok ("": none).
func (e *env) call(t testing.TB, tok, method, target, body string) reply {
	t.Helper()
	h := map[string]string{"X-Project-Id": e.p.ID, "X-API-Key": e.p.APIKey}
	if tok != "" {
		h["Authorization"] = "Bearer " + tok
	}
	return e.mustSend(t, method, target, h, body)
}

// tryCall is call for other goroutines than the test's: a transport error
// is a reply with status 0 and the error as body.
func (e *env) tryCall(tok, method, target, body string) reply {
	h := map[string]string{"X-Project-Id": e.p.ID, "X-API-Key": e.p.APIKey, "Authorization": "Bearer " + tok}
	r, err := e.send(context.Background(), method, target, h, body)
	if err != nil {
		return reply{Body: []byte(err.Error())}
	}
	return r
}

func (e *env) mustCall(t testing.TB, tok, method, target, body string, status int) reply {
	t.Helper()
	r := e.call(t, tok, method, target, body)
	if r.Status != status {
		t.Fatalf("%s %s: status %d, want %d: %.500s", method, target, r.Status, status, r.Body)
	}
	return r
}

// pushThen runs setups in order.
func pushThen(fs ...pushSetup) pushSetup {
	return func(t *testing.T, e *env, v vars) {
		t.Helper()
		for _, f := range fs {
			f(t, e, v)
		}
	}
}

// pushChecks runs checks in order.
func pushChecks(fs ...pushCheck) pushCheck {
	return func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		for _, f := range fs {
			f(t, e, v, r)
		}
	}
}

// accounts registers fresh accounts of e.p: for each name, {name} is its
// token and {nameUid} its id.
func accounts(names ...string) pushSetup {
	return func(t *testing.T, e *env, v vars) {
		t.Helper()
		for _, n := range names {
			a := e.mustRegister(t, e.p, "")
			v[n], v[n+"Uid"] = a.Token, a.ID
		}
	}
}

// as returns the Authorization header of the token in {who}.
func as(who string) map[string]string {
	return map[string]string{"Authorization": "Bearer {" + who + "}"}
}

// withHeaders merges header maps (later wins).
func withHeaders(hs ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, h := range hs {
		for k, val := range h {
			out[k] = val
		}
	}
	return out
}

// ---- typed reads ------------------------------------------------------------

type pushDevice struct {
	Token, Platform, UserID, RegisteredAt string
}

func (e *env) pushDevices(t testing.TB, tok string) []pushDevice {
	t.Helper()
	r := e.mustCall(t, tok, http.MethodGet, "/api/notifications/devices", "", http.StatusOK)
	var out struct{ Devices []pushDevice }
	mustDecode(t, r.Body, &out)
	return out.Devices
}

func (e *env) pushTopics(t testing.TB, tok string) []string {
	t.Helper()
	r := e.mustCall(t, tok, http.MethodGet, "/api/notifications/topics", "", http.StatusOK)
	var out struct{ Topics []string }
	mustDecode(t, r.Body, &out)
	return out.Topics
}

func (e *env) pushPrefs(t testing.TB, tok string) []byte {
	t.Helper()
	return e.mustCall(t, tok, http.MethodGet, "/api/notifications/preferences", "", http.StatusOK).Body
}

// pushList follows nextCursor through a listing (scheduled or history) and
// returns every item, in order.
func (e *env) pushList(t testing.TB, tok, route, member string, limit int) []map[string]any {
	t.Helper()
	var all []map[string]any
	cursor := ""
	for page := 0; ; page++ {
		if page > 1000 {
			t.Fatalf("%s: more than 1000 pages", route)
		}
		u := fmt.Sprintf("%s?limit=%d", route, limit)
		if cursor != "" {
			u += "&cursor=" + cursor
		}
		r := e.mustCall(t, tok, http.MethodGet, u, "", http.StatusOK)
		var top map[string]json.RawMessage
		mustDecode(t, r.Body, &top)
		var items []map[string]any
		mustDecode(t, top[member], &items)
		var next string
		if raw, ok := top["nextCursor"]; !ok {
			t.Fatalf("%s: no nextCursor: %.300s", route, r.Body)
		} else if string(raw) != "null" {
			mustDecode(t, raw, &next)
		}
		if len(items) > limit {
			t.Fatalf("%s: %d items on a page of limit %d", route, len(items), limit)
		}
		all = append(all, items...)
		if next == "" {
			return all
		}
		if next == cursor {
			t.Fatalf("%s: nextCursor %q does not advance", route, next)
		}
		cursor = next
	}
}

func (e *env) pushSchedules(t testing.TB, tok string) []map[string]any {
	t.Helper()
	return e.pushList(t, tok, "/api/notifications/scheduled", "scheduled", 100)
}

func (e *env) pushHistory(t testing.TB, tok string) []map[string]any {
	t.Helper()
	return e.pushList(t, tok, "/api/notifications/history", "notifications", 100)
}

func findBy(items []map[string]any, key, val string) map[string]any {
	for _, it := range items {
		if s, _ := it[key].(string); s == val {
			return it
		}
	}
	return nil
}

// ---- setups -------------------------------------------------------------------

// reg registers token (expanded) for the account whose token is in {who}.
func reg(who, token, platform string) pushSetup {
	return func(t *testing.T, e *env, v vars) {
		t.Helper()
		r := e.mustCall(t, v[who], http.MethodPost, "/api/notifications/register",
			fmt.Sprintf(`{"token":%s,"deviceInfo":{"platform":%q}}`, jsonStr(v.expand(token)), platform), http.StatusCreated)
		var out struct{ RegisteredAt string }
		mustDecode(t, r.Body, &out)
		v["regAt"] = out.RegisteredAt
	}
}

// regMany registers n tokens tok-{rand}-i for {who}, a few at a time.
func regMany(who string, n int) pushSetup {
	return func(t *testing.T, e *env, v vars) {
		t.Helper()
		statuses := concurrently(n, 8, func(i int) reply {
			return e.tryCall(v[who], http.MethodPost, "/api/notifications/register",
				registerBodyFor(v.expand(fmt.Sprintf("tok-{rand}-%d", i)), "android"))
		})
		for i, st := range statuses {
			if st.Status != http.StatusCreated {
				t.Fatalf("register %d: status %d: %s", i, st.Status, st.Body)
			}
		}
	}
}

// concurrently runs f(0..n-1) with at most width at once and returns the
// replies in order. f must not call t.Fatal.
func concurrently(n, width int, f func(i int) reply) []reply {
	out := make([]reply, n)
	sem := make(chan struct{}, width)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i] = f(i)
		}()
	}
	wg.Wait()
	return out
}

func unreg(who, token string) pushSetup {
	return func(t *testing.T, e *env, v vars) {
		t.Helper()
		e.mustCall(t, v[who], http.MethodPost, "/api/notifications/unregister", fmt.Sprintf(`{"token":%s}`, jsonStr(v.expand(token))), http.StatusOK)
	}
}

func subscribe(who, topic string) pushSetup {
	return func(t *testing.T, e *env, v vars) {
		t.Helper()
		e.mustCall(t, v[who], http.MethodPost, "/api/notifications/subscribe", fmt.Sprintf(`{"topic":%s}`, jsonStr(v.expand(topic))), http.StatusOK)
	}
}

// subscribeMany subscribes {who} to n topics t-{rand}-i, a few at a time.
func subscribeMany(who string, n int) pushSetup {
	return func(t *testing.T, e *env, v vars) {
		t.Helper()
		statuses := concurrently(n, 8, func(i int) reply {
			return e.tryCall(v[who], http.MethodPost, "/api/notifications/subscribe", topicBody(v.expand(fmt.Sprintf("t-{rand}-%d", i))))
		})
		for i, st := range statuses {
			if st.Status != http.StatusOK {
				t.Fatalf("subscribe %d: status %d: %s", i, st.Status, st.Body)
			}
		}
	}
}

// sched schedules body (expanded) as {who} and keeps the id in {key}.
func sched(who, key, body string) pushSetup {
	return func(t *testing.T, e *env, v vars) {
		t.Helper()
		r := e.mustCall(t, v[who], http.MethodPost, "/api/notifications/schedule", v.expand(body), http.StatusCreated)
		v[key] = pushMember(t, r.Body, "id")
	}
}

func cancelSched(who, key string) pushSetup {
	return func(t *testing.T, e *env, v vars) {
		t.Helper()
		e.mustCall(t, v[who], http.MethodDelete, "/api/notifications/scheduled/"+v[key], "", http.StatusOK)
	}
}

// ownerSend sends body (expanded) to route (expanded) as the owner and keeps
// the notification id in {key}.
func ownerSend(route, key, body string) pushSetup {
	return func(t *testing.T, e *env, v vars) {
		t.Helper()
		r := e.mustCall(t, e.p.OwnerToken, http.MethodPost, v.expand(route), v.expand(body), http.StatusAccepted)
		v[key] = pushMember(t, r.Body, "notificationId")
	}
}

func putPrefs(who, body string) pushSetup {
	return func(t *testing.T, e *env, v vars) {
		t.Helper()
		e.mustCall(t, v[who], http.MethodPut, "/api/notifications/preferences", v.expand(body), http.StatusOK)
	}
}

// ---- checks -------------------------------------------------------------------

// devicesAre requires {who}'s devices to be exactly tokens (expanded).
func devicesAre(who string, tokens ...string) pushCheck {
	return func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		var got, want []string
		for _, d := range e.pushDevices(t, v[who]) {
			got = append(got, d.Token)
		}
		for _, tok := range tokens {
			want = append(want, v.expand(tok))
		}
		sort.Strings(got)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("devices of %s = %.200q, want %.200q", who, got, want)
		}
	}
}

func deviceCount(who string, n int) pushCheck {
	return func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		if got := len(e.pushDevices(t, v[who])); got != n {
			t.Errorf("%s has %d devices, want %d", who, got, n)
		}
	}
}

// hasDevice requires token (expanded) to be, or not be, among {who}'s devices.
func hasDevice(who, token string, want bool) pushCheck {
	return func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		tok := v.expand(token)
		found := false
		for _, d := range e.pushDevices(t, v[who]) {
			found = found || d.Token == tok
		}
		if found != want {
			t.Errorf("device %.40q among %s's devices: %v, want %v", tok, who, found, want)
		}
	}
}

// topicsAre requires {who}'s topics to be exactly topics (expanded), in any order.
func topicsAre(who string, topics ...string) pushCheck {
	return func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		got := e.pushTopics(t, v[who])
		if got == nil {
			got = []string{}
		}
		want := []string{}
		for _, tp := range topics {
			want = append(want, v.expand(tp))
		}
		sort.Strings(got)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("topics of %s = %.300q, want %.300q", who, got, want)
		}
	}
}

func topicCount(who string, n int) pushCheck {
	return func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		if got := len(e.pushTopics(t, v[who])); got != n {
			t.Errorf("%s follows %d topics, want %d", who, got, n)
		}
	}
}

// prefsAre requires {who}'s stored preferences to be exactly want (expanded).
func prefsAre(who, want string) pushCheck {
	return func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		if got := e.pushPrefs(t, v[who]); !jsonEqual(got, []byte(v.expand(want))) {
			t.Errorf("preferences of %s = %s, want %s", who, got, v.expand(want))
		}
	}
}

// scheduleCount requires {who} to see n schedules.
func scheduleCount(who string, n int) pushCheck {
	return func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		if got := e.pushSchedules(t, v[who]); len(got) != n {
			t.Errorf("%s sees %d schedules, want %d: %v", who, len(got), n, got)
		}
	}
}

// scheduleStatus requires the schedule {key}, as the owner lists it, to have status.
func scheduleStatus(key, status string) pushCheck {
	return func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		sc := findBy(e.pushSchedules(t, e.p.OwnerToken), "id", v[key])
		if sc == nil {
			t.Fatalf("schedule %s is gone", v[key])
		}
		if sc["status"] != status {
			t.Errorf("schedule %s status = %v, want %s", v[key], sc["status"], status)
		}
	}
}

// noOwnerSchedule requires no schedule titled title (expanded) in the project.
func noOwnerSchedule(title string) pushCheck {
	return func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		if sc := findBy(e.pushSchedules(t, e.p.OwnerToken), "title", v.expand(title)); sc != nil {
			t.Errorf("refused schedule was stored: %v", sc)
		}
	}
}

// noSend requires that no notification titled T-{rand} or with body B-{rand}
// is in the owner's history: a refused send queued nothing.
func noSend(t *testing.T, e *env, v vars, r reply) {
	t.Helper()
	hist := e.pushHistory(t, e.p.OwnerToken)
	if n := findBy(hist, "title", v.expand("T-{rand}")); n != nil {
		t.Errorf("refused send was queued: %v", n)
	}
	if n := findBy(hist, "body", v.expand("B-{rand}")); n != nil {
		t.Errorf("refused send was queued: %v", n)
	}
}

// hasRevision requires an X-Revision header on a mutating answer.
func hasRevision(t *testing.T, e *env, v vars, r reply) {
	t.Helper()
	if r.Header.Get("X-Revision") == "" {
		t.Errorf("mutating answer without X-Revision")
	}
}

// isTime requires member key of the answer to be an RFC 3339 time.
func isTime(key string) pushCheck {
	return func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		var m map[string]any
		mustDecode(t, r.Body, &m)
		s, _ := m[key].(string)
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			t.Errorf("%s = %v, not RFC 3339: %s", key, m[key], r.Body)
		}
	}
}

// keep stores member key of the answer in {name}.
func keep(key, name string) pushCheck {
	return func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		v[name] = pushMember(t, r.Body, key)
	}
}

// memberIs requires the answer's member key to equal {name} (expanded).
func memberIs(key, want string) pushCheck {
	return func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		if got := pushMember(t, r.Body, key); got != v.expand(want) {
			t.Errorf("%s = %q, want %q", key, got, v.expand(want))
		}
	}
}

func pushMember(t testing.TB, body []byte, key string) string {
	t.Helper()
	var m map[string]any
	mustDecode(t, body, &m)
	s, _ := m[key].(string)
	if s == "" {
		t.Fatalf("answer has no string %q: %.300s", key, body)
	}
	return s
}

func jsonStr(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// ---- keys -----------------------------------------------------------------------

var (
	pushKeysOnce sync.Once
	pushRSAPEM   string
	pushECPEM    string
	pushPKCS1PEM string
)

// pushKeys generates, once per package, an RSA key in PKCS#8 and PKCS#1 and
// an EC key in PKCS#8, PEM-encoded.
func pushKeys(t testing.TB) {
	t.Helper()
	pushKeysOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			panic(err)
		}
		pushRSAPEM = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
		pushPKCS1PEM = string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
		ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		der, err = x509.MarshalPKCS8PrivateKey(ek)
		if err != nil {
			panic(err)
		}
		pushECPEM = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	})
}

// deleted marks a member to leave out of serviceAccount.
var deleted = struct{ deleted bool }{true}

// serviceAccount returns a Firebase service-account JSON file with the RSA
// key, changed by mods (deleted removes a member).
func serviceAccount(t testing.TB, mods map[string]any) string {
	t.Helper()
	pushKeys(t)
	sa := map[string]any{
		"type":                        "service_account",
		"project_id":                  "edgebase-test",
		"private_key_id":              "0123456789abcdef",
		"private_key":                 pushRSAPEM,
		"client_email":                "firebase-adminsdk@edgebase-test.iam.gserviceaccount.com",
		"client_id":                   "1234567890",
		"auth_uri":                    "https://accounts.google.com/o/oauth2/auth",
		"token_uri":                   "https://oauth2.googleapis.com/token",
		"auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
	}
	for k, val := range mods {
		if val == deleted {
			delete(sa, k)
			continue
		}
		sa[k] = val
	}
	return mustJSON(t, sa)
}

// ---- tests ----------------------------------------------------------------------

// TestPush runs the tables of every push route against one node; rows run in
// parallel, each on its own accounts, tokens, topics and titles.
func TestPush(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p2 := e.c.CreateProject(0)
	u2 := e.mustRegister(t, p2, "")
	e.extra = vars{"pid2": p2.ID, "key2": p2.APIKey, "owner2": p2.OwnerToken, "uid2": u2.ID}

	t.Run("register", func(t *testing.T) { t.Parallel(); e.run(t, pushRows(registerPushScenarios())) })
	t.Run("unregister", func(t *testing.T) { t.Parallel(); e.run(t, pushRows(unregisterScenarios())) })
	t.Run("devices", func(t *testing.T) { t.Parallel(); e.run(t, pushRows(devicesScenarios())) })
	t.Run("subscribe", func(t *testing.T) { t.Parallel(); e.run(t, pushRows(subscribeScenarios())) })
	t.Run("unsubscribe", func(t *testing.T) { t.Parallel(); e.run(t, pushRows(unsubscribeScenarios())) })
	t.Run("topics", func(t *testing.T) { t.Parallel(); e.run(t, pushRows(topicsScenarios())) })
	t.Run("send-to-user", func(t *testing.T) { t.Parallel(); e.run(t, pushRows(sendUserScenarios())) })
	t.Run("send-to-topic", func(t *testing.T) { t.Parallel(); e.run(t, pushRows(sendTopicScenarios())) })
	t.Run("schedule", func(t *testing.T) { t.Parallel(); e.run(t, pushRows(scheduleScenarios())) })
	t.Run("scheduled", func(t *testing.T) { t.Parallel(); e.run(t, pushRows(scheduledScenarios())) })
	t.Run("cancel", func(t *testing.T) { t.Parallel(); e.run(t, pushRows(cancelScenarios())) })
	t.Run("history", func(t *testing.T) { t.Parallel(); e.run(t, pushRows(historyScenarios())) })
	t.Run("preferences", func(t *testing.T) { t.Parallel(); e.run(t, pushRows(prefsScenarios())) })
}

func registerBodyFor(token, platform string) string {
	return fmt.Sprintf(`{"token":%s,"deviceInfo":{"platform":%s}}`, jsonStr(token), jsonStr(platform))
}

func registerPushScenarios() []scenario {
	const url = "/api/notifications/register"
	tok := "tok-{rand}"
	ok := func(name, platform string) scenario {
		return scenario{name: name, as: "none", headers: as("a"), setup: accounts("a"), method: "POST", url: url,
			body: registerBodyFor(tok, platform), status: 201,
			json: fmt.Sprintf(`{"token":%q,"platform":%q}`, tok, platform),
			check: pushChecks(hasRevision, isTime("registeredAt"), devicesAre("a", tok),
				func(t *testing.T, e *env, v vars, r reply) {
					d := e.pushDevices(t, v["a"])
					if len(d) == 1 && (d[0].Platform != platform || d[0].UserID != v["aUid"]) {
						t.Errorf("stored device = %+v, want platform %s of %s", d[0], platform, v["aUid"])
					}
				})}
	}
	bad := func(name, body, field string) scenario {
		return scenario{name: name, as: "none", headers: as("a"), setup: accounts("a"), method: "POST", url: url,
			body: body, status: 400, code: "invalid_argument", field: field, check: deviceCount("a", 0)}
	}
	return []scenario{
		ok("android", "android"),
		ok("ios", "ios"),
		ok("web", "web"),
		{name: "twice is idempotent", as: "none", headers: as("a"), setup: pushThen(accounts("a"), reg("a", tok, "ios")),
			method: "POST", url: url, body: registerBodyFor(tok, "ios"), status: 201, json: `{"token":"tok-{rand}","platform":"ios"}`,
			check: pushChecks(memberIs("registeredAt", "{regAt}"), devicesAre("a", tok))},
		{name: "again with another platform keeps one device", as: "none", headers: as("a"), setup: pushThen(accounts("a"), reg("a", tok, "android")),
			method: "POST", url: url, body: registerBodyFor(tok, "web"), status: 201, json: `{"platform":"web"}`,
			check: pushChecks(devicesAre("a", tok), func(t *testing.T, e *env, v vars, r reply) {
				if d := e.pushDevices(t, v["a"]); len(d) != 1 || d[0].Platform != "web" {
					t.Errorf("devices = %+v, want one web device", d)
				}
			})},
		{name: "a token of another account moves to the caller", as: "none", headers: as("b"),
			setup:  pushThen(accounts("a", "b"), reg("a", tok, "android"), reg("a", "keep-{rand}", "ios")),
			method: "POST", url: url, body: registerBodyFor(tok, "android"), status: 201,
			check: pushChecks(devicesAre("b", tok), devicesAre("a", "keep-{rand}"))},
		{name: "a moved token moves back", as: "none", headers: as("a"),
			setup:  pushThen(accounts("a", "b"), reg("a", tok, "android"), reg("b", tok, "android")),
			method: "POST", url: url, body: registerBodyFor(tok, "android"), status: 201,
			check: pushChecks(devicesAre("a", tok), devicesAre("b"))},
		{name: "the owner may register a device", method: "POST", url: url, body: registerBodyFor(tok, "web"), status: 201,
			check: hasDevice("owner", tok, true)},
		{name: "a token of 4096 bytes", as: "none", headers: as("a"), setup: accounts("a"), method: "POST", url: url,
			body: registerBodyFor(strings.Repeat("k", 4096), "android"), status: 201, check: deviceCount("a", 1)},
		{name: "unknown fields are ignored", as: "none", headers: as("a"), setup: accounts("a"), method: "POST", url: url,
			body: `{"token":"tok-{rand}","deviceInfo":{"platform":"ios","model":"x"},"userId":"{otherUid}"}`, status: 201,
			check: pushChecks(devicesAre("a", tok), hasDevice("other", tok, false))},
		{name: "101st device is 409", as: "none", headers: as("a"), setup: pushThen(accounts("a"), regMany("a", 100)),
			method: "POST", url: url, body: registerBodyFor("extra-{rand}", "android"), status: 409, code: "limit_exceeded", field: "token",
			check: pushChecks(deviceCount("a", 100), hasDevice("a", "extra-{rand}", false),
				func(t *testing.T, e *env, v vars, r reply) {
					// Registering a device already held is not a new one.
					e.mustCall(t, v["a"], http.MethodPost, url, registerBodyFor(v.expand("tok-{rand}-7"), "android"), http.StatusCreated)
				})},
		{name: "concurrent registers never pass 100 devices", as: "none", headers: as("a"), setup: pushThen(accounts("a"), regMany("a", 95)),
			method: "POST", url: url, body: registerBodyFor("extra-{rand}", "android"), status: 201,
			check: func(t *testing.T, e *env, v vars, r reply) {
				// 96 held: 4 places left, 16 concurrent new tokens.
				got := concurrently(16, 16, func(i int) reply {
					return e.tryCall(v["a"], http.MethodPost, url, registerBodyFor(v.expand(fmt.Sprintf("race-{rand}-%d", i)), "ios"))
				})
				created := 0
				for _, g := range got {
					switch g.Status {
					case http.StatusCreated:
						created++
					case http.StatusConflict:
					default:
						t.Errorf("concurrent register: status %d: %s", g.Status, g.Body)
					}
				}
				n, err := e.c.Nodes[0].Node.Store.CountPrefix(e.p.ID + "/_devices/" + v["aUid"] + "/")
				if err != nil {
					t.Fatal(err)
				}
				if created > 4 || n > 100 {
					t.Errorf("BUG: %d concurrent registers were accepted with 4 places left; the account now holds %d devices (limit 100)", created, n)
				}
			}},
		bad("no token", `{"deviceInfo":{"platform":"android"}}`, "token"),
		bad("empty token", registerBodyFor("", "android"), "token"),
		bad("token with a space", registerBodyFor("a b", "android"), "token"),
		bad("token with a control character", registerBodyFor("a\x01b", "android"), "token"),
		bad("token with non-ASCII", registerBodyFor("tök", "android"), "token"),
		bad("token of 4097 bytes", registerBodyFor(strings.Repeat("k", 4097), "android"), "token"),
		bad("token is a number", `{"token":123,"deviceInfo":{"platform":"android"}}`, "token"),
		bad("token is an object", `{"token":{},"deviceInfo":{"platform":"android"}}`, "token"),
		bad("no deviceInfo", `{"token":"tok-{rand}"}`, "deviceInfo"),
		bad("deviceInfo null", `{"token":"tok-{rand}","deviceInfo":null}`, "deviceInfo"),
		bad("deviceInfo is a string", `{"token":"tok-{rand}","deviceInfo":"android"}`, "deviceInfo"),
		bad("no platform", `{"token":"tok-{rand}","deviceInfo":{}}`, "deviceInfo.platform"),
		bad("platform windows", registerBodyFor(tok, "windows"), "deviceInfo.platform"),
		bad("platform in capitals", registerBodyFor(tok, "Android"), "deviceInfo.platform"),
		bad("empty platform", registerBodyFor(tok, ""), "deviceInfo.platform"),
		bad("platform is a number", `{"token":"tok-{rand}","deviceInfo":{"platform":1}}`, "deviceInfo.platform"),
		bad("empty object", `{}`, "token"),
		bad("null body", `null`, "token"),
		bad("array body", `[]`, ""),
		bad("string body", `"tok"`, ""),
		{name: "malformed JSON", as: "none", headers: as("a"), setup: accounts("a"), method: "POST", url: url,
			body: `{"token":"tok-{rand}",`, status: 400, code: "invalid_json", check: deviceCount("a", 0)},
		{name: "no Content-Type is 415", as: "none", headers: withHeaders(as("a"), map[string]string{"Content-Type": ""}), setup: accounts("a"),
			method: "POST", url: url, body: registerBodyFor(tok, "ios"), status: 415, code: "unsupported_media_type", check: deviceCount("a", 0)},
		{name: "text/plain is 415", as: "none", headers: withHeaders(as("a"), map[string]string{"Content-Type": "text/plain"}), setup: accounts("a"),
			method: "POST", url: url, body: registerBodyFor(tok, "ios"), status: 415, code: "unsupported_media_type", check: deviceCount("a", 0)},
		{name: "no body", as: "none", headers: withHeaders(as("a"), map[string]string{"Content-Type": "application/json"}), setup: accounts("a"),
			method: "POST", url: url, status: 400, code: "invalid_argument", check: deviceCount("a", 0)},
	}
}

func unregisterScenarios() []scenario {
	const url = "/api/notifications/unregister"
	tok := "tok-{rand}"
	body := `{"token":"tok-{rand}"}`
	return []scenario{
		{name: "own token", as: "none", headers: as("a"), setup: pushThen(accounts("a"), reg("a", tok, "ios"), reg("a", "keep-{rand}", "web")),
			method: "POST", url: url, body: body, status: 200, json: `{"ok":true}`,
			check: pushChecks(hasRevision, devicesAre("a", "keep-{rand}"))},
		{name: "then it can be registered again", as: "none", headers: as("a"), setup: pushThen(accounts("a"), reg("a", tok, "ios"), unreg("a", tok)),
			method: "POST", url: "/api/notifications/register", body: registerBodyFor(tok, "ios"), status: 201, check: devicesAre("a", tok)},
		{name: "another account's token is 404", as: "none", headers: as("b"), setup: pushThen(accounts("a", "b"), reg("a", tok, "ios")),
			method: "POST", url: url, body: body, status: 404, code: "not_found", field: "token",
			check: pushChecks(devicesAre("a", tok), devicesAre("b"))},
		{name: "the owner cannot unregister a user's token", setup: pushThen(accounts("a"), reg("a", tok, "ios")),
			method: "POST", url: url, body: body, status: 404, code: "not_found", field: "token", check: devicesAre("a", tok)},
		{name: "a token that moved away is 404", as: "none", headers: as("a"), setup: pushThen(accounts("a", "b"), reg("a", tok, "ios"), reg("b", tok, "ios")),
			method: "POST", url: url, body: body, status: 404, code: "not_found", field: "token",
			check: pushChecks(devicesAre("a"), devicesAre("b", tok))},
		{name: "never registered is 404", as: "none", headers: as("a"), setup: accounts("a"),
			method: "POST", url: url, body: body, status: 404, code: "not_found", field: "token"},
		{name: "twice is 404", as: "none", headers: as("a"), setup: pushThen(accounts("a"), reg("a", tok, "ios"), unreg("a", tok)),
			method: "POST", url: url, body: body, status: 404, code: "not_found", field: "token", check: devicesAre("a")},
		{name: "no token", as: "none", headers: as("a"), setup: pushThen(accounts("a"), reg("a", tok, "ios")),
			method: "POST", url: url, body: `{}`, status: 400, code: "invalid_argument", field: "token", check: devicesAre("a", tok)},
		{name: "token is a number", as: "none", headers: as("a"), setup: pushThen(accounts("a"), reg("a", tok, "ios")),
			method: "POST", url: url, body: `{"token":1}`, status: 400, code: "invalid_argument", field: "token", check: devicesAre("a", tok)},
		{name: "token with a space", as: "none", headers: as("a"), setup: pushThen(accounts("a"), reg("a", tok, "ios")),
			method: "POST", url: url, body: `{"token":"a b"}`, status: 400, code: "invalid_argument", field: "token", check: devicesAre("a", tok)},
		{name: "array body", as: "none", headers: as("a"), setup: pushThen(accounts("a"), reg("a", tok, "ios")),
			method: "POST", url: url, body: `["tok-{rand}"]`, status: 400, code: "invalid_argument", check: devicesAre("a", tok)},
		{name: "malformed JSON", as: "none", headers: as("a"), setup: pushThen(accounts("a"), reg("a", tok, "ios")),
			method: "POST", url: url, body: `{"token":`, status: 400, code: "invalid_json", check: devicesAre("a", tok)},
		{name: "no Content-Type is 415", as: "none", headers: withHeaders(as("a"), map[string]string{"Content-Type": ""}),
			setup: pushThen(accounts("a"), reg("a", tok, "ios")), method: "POST", url: url, body: body, status: 415,
			code: "unsupported_media_type", check: devicesAre("a", tok)},
	}
}

func devicesScenarios() []scenario {
	const url = "/api/notifications/devices"
	return []scenario{
		{name: "none yet", as: "none", headers: as("a"), setup: accounts("a"), url: url, status: 200, json: `{"devices":[]}`},
		{name: "two devices", as: "none", headers: as("a"), setup: pushThen(accounts("a"), reg("a", "x-{rand}", "ios"), reg("a", "y-{rand}", "web")),
			url: url, status: 200, check: func(t *testing.T, e *env, v vars, r reply) {
				var out struct{ Devices []map[string]any }
				mustDecode(t, r.Body, &out)
				if len(out.Devices) != 2 {
					t.Fatalf("devices = %s, want 2", r.Body)
				}
				for _, d := range out.Devices {
					for _, k := range []string{"token", "platform", "userId", "registeredAt"} {
						if _, ok := d[k]; !ok {
							t.Errorf("device lacks %q: %v", k, d)
						}
					}
					if d["userId"] != v["aUid"] {
						t.Errorf("device userId = %v, want %s", d["userId"], v["aUid"])
					}
				}
			}},
		{name: "another account's devices are not listed", as: "none", headers: as("b"), setup: pushThen(accounts("a", "b"), reg("a", "x-{rand}", "ios")),
			url: url, status: 200, json: `{"devices":[]}`},
		{name: "POST is 405", as: "none", headers: as("a"), setup: accounts("a"), method: "POST", url: url, body: `{}`,
			status: 405, code: "method_not_allowed", check: allowIs("GET")},
		{name: "a trailing slash is 404", url: url + "/", status: 404, code: "not_found"},
		{name: "an unknown push route is 404", url: "/api/notifications/nope", status: 404, code: "not_found"},
	}
}

// allowIs requires the Allow header of a 405.
func allowIs(want string) pushCheck {
	return func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		if got := r.Header.Get("Allow"); got != want {
			t.Errorf("Allow = %q, want %q", got, want)
		}
	}
}

func topicBody(topic string) string { return fmt.Sprintf(`{"topic":%s}`, jsonStr(topic)) }

func subscribeScenarios() []scenario {
	const url = "/api/notifications/subscribe"
	topic := "news-{rand}"
	bad := func(name, body string) scenario {
		return scenario{name: name, as: "none", headers: as("a"), setup: accounts("a"), method: "POST", url: url,
			body: body, status: 400, code: "invalid_argument", field: "topic", check: topicsAre("a")}
	}
	long := strings.Repeat("t", 128)
	return []scenario{
		{name: "subscribe", as: "none", headers: as("a"), setup: accounts("a"), method: "POST", url: url, body: topicBody(topic),
			status: 200, json: `{"topic":"news-{rand}","subscribed":true}`, check: pushChecks(hasRevision, topicsAre("a", topic))},
		{name: "twice is idempotent", as: "none", headers: as("a"), setup: pushThen(accounts("a"), subscribe("a", topic)), method: "POST", url: url,
			body: topicBody(topic), status: 200, json: `{"topic":"news-{rand}","subscribed":true}`, check: topicsAre("a", topic)},
		{name: "a second topic", as: "none", headers: as("a"), setup: pushThen(accounts("a"), subscribe("a", topic)), method: "POST", url: url,
			body: topicBody("sport-{rand}"), status: 200, check: topicsAre("a", topic, "sport-{rand}")},
		{name: "topic of 128 characters", as: "none", headers: as("a"), setup: accounts("a"), method: "POST", url: url,
			body: topicBody(long), status: 200, check: topicsAre("a", long)},
		{name: "every allowed character", as: "none", headers: as("a"), setup: accounts("a"), method: "POST", url: url,
			body: topicBody("A9-_.~%{rand}"), status: 200, check: topicsAre("a", "A9-_.~%{rand}")},
		{name: "does not subscribe another account", as: "none", headers: as("a"), setup: accounts("a", "b"), method: "POST", url: url,
			body: topicBody(topic), status: 200, check: topicsAre("b")},
		{name: "101st topic is 409", as: "none", headers: as("a"), setup: pushThen(accounts("a"), subscribeMany("a", 100)), method: "POST", url: url,
			body: topicBody(topic), status: 409, code: "limit_exceeded", field: "topic",
			check: pushChecks(topicCount("a", 100), func(t *testing.T, e *env, v vars, r reply) {
				// A topic already followed is not a new one.
				e.mustCall(t, v["a"], http.MethodPost, url, topicBody(v.expand("t-{rand}-3")), http.StatusOK)
			})},
		{name: "concurrent subscribes never pass 100 topics", as: "none", headers: as("a"), setup: pushThen(accounts("a"), subscribeMany("a", 95)),
			method: "POST", url: url, body: topicBody(topic), status: 200,
			check: func(t *testing.T, e *env, v vars, r reply) {
				// 96 followed: 4 places left, 16 concurrent new topics.
				got := concurrently(16, 16, func(i int) reply {
					return e.tryCall(v["a"], http.MethodPost, url, topicBody(v.expand(fmt.Sprintf("race-{rand}-%d", i))))
				})
				ok := 0
				for _, g := range got {
					switch g.Status {
					case http.StatusOK:
						ok++
					case http.StatusConflict:
					default:
						t.Errorf("concurrent subscribe: status %d: %s", g.Status, g.Body)
					}
				}
				n, err := e.c.Nodes[0].Node.Store.CountPrefix(e.p.ID + "/_usertopics/" + v["aUid"] + "/")
				if err != nil {
					t.Fatal(err)
				}
				if ok > 4 || n > 100 {
					t.Errorf("BUG: %d concurrent subscribes were accepted with 4 places left; the account now follows %d topics (limit 100)", ok, n)
				}
			}},
		bad("no topic", `{}`),
		bad("empty topic", topicBody("")),
		bad("topic starting with _", topicBody("_x")),
		bad("topic starting with .", topicBody(".x")),
		bad("topic starting with -", topicBody("-x")),
		bad("topic with a space", topicBody("a b")),
		bad("topic with a slash", topicBody("a/b")),
		bad("topic of two dots", topicBody("..")),
		bad("topic with non-ASCII", topicBody("nöws")),
		bad("topic of 129 characters", topicBody(strings.Repeat("t", 129))),
		bad("topic is a number", `{"topic":1}`),
		bad("topic is null", `{"topic":null}`),
		bad("null body", `null`),
		{name: "array body", as: "none", headers: as("a"), setup: accounts("a"), method: "POST", url: url, body: `["news"]`,
			status: 400, code: "invalid_argument", check: topicsAre("a")},
		{name: "malformed JSON", as: "none", headers: as("a"), setup: accounts("a"), method: "POST", url: url, body: `{"topic":"news"`,
			status: 400, code: "invalid_json", check: topicsAre("a")},
		{name: "no Content-Type is 415", as: "none", headers: withHeaders(as("a"), map[string]string{"Content-Type": ""}), setup: accounts("a"),
			method: "POST", url: url, body: topicBody(topic), status: 415, code: "unsupported_media_type", check: topicsAre("a")},
	}
}

func unsubscribeScenarios() []scenario {
	const url = "/api/notifications/unsubscribe"
	topic := "news-{rand}"
	bad := func(name, body string) scenario {
		return scenario{name: name, as: "none", headers: as("a"), setup: pushThen(accounts("a"), subscribe("a", topic)), method: "POST", url: url,
			body: body, status: 400, code: "invalid_argument", field: "topic", check: topicsAre("a", topic)}
	}
	return []scenario{
		{name: "unsubscribe", as: "none", headers: as("a"), setup: pushThen(accounts("a"), subscribe("a", topic), subscribe("a", "keep-{rand}")),
			method: "POST", url: url, body: topicBody(topic), status: 200, json: `{"topic":"news-{rand}","subscribed":false}`,
			check: pushChecks(hasRevision, topicsAre("a", "keep-{rand}"))},
		{name: "not subscribed is fine", as: "none", headers: as("a"), setup: accounts("a"), method: "POST", url: url, body: topicBody(topic),
			status: 200, json: `{"topic":"news-{rand}","subscribed":false}`, check: topicsAre("a")},
		{name: "leaves other followers", as: "none", headers: as("a"), setup: pushThen(accounts("a", "b"), subscribe("a", topic), subscribe("b", topic)),
			method: "POST", url: url, body: topicBody(topic), status: 200, check: pushChecks(topicsAre("a"), topicsAre("b", topic))},
		{name: "then a send to the topic reaches only the followers left", as: "none", headers: as("a"),
			setup:  pushThen(accounts("a", "b"), subscribe("a", topic), subscribe("b", topic), reg("a", "ta-{rand}", "ios"), reg("b", "tb-{rand}", "ios")),
			method: "POST", url: url, body: topicBody(topic), status: 200,
			check: func(t *testing.T, e *env, v vars, r reply) {
				sr := e.mustCall(t, e.p.OwnerToken, http.MethodPost, "/api/notifications/send-to-topic",
					v.expand(`{"topic":"news-{rand}","title":"T-{rand}"}`), http.StatusAccepted)
				if !jsonSubset(map[string]any{"targets": 1.0}, decodeAny(t, sr.Body)) {
					t.Errorf("send-to-topic after unsubscribe: %s, want targets 1", sr.Body)
				}
			}},
		bad("no topic", `{}`),
		bad("empty topic", topicBody("")),
		bad("topic starting with _", topicBody("_x")),
		bad("topic with a space", topicBody("a b")),
		bad("topic of 129 characters", topicBody(strings.Repeat("t", 129))),
		bad("topic is a number", `{"topic":7}`),
		{name: "malformed JSON", as: "none", headers: as("a"), setup: pushThen(accounts("a"), subscribe("a", topic)), method: "POST", url: url,
			body: `{"topic"`, status: 400, code: "invalid_json", check: topicsAre("a", topic)},
		{name: "array body", as: "none", headers: as("a"), setup: pushThen(accounts("a"), subscribe("a", topic)), method: "POST", url: url,
			body: `[]`, status: 400, code: "invalid_argument", check: topicsAre("a", topic)},
		{name: "no Content-Type is 415", as: "none", headers: withHeaders(as("a"), map[string]string{"Content-Type": ""}),
			setup: pushThen(accounts("a"), subscribe("a", topic)), method: "POST", url: url, body: topicBody(topic), status: 415,
			code: "unsupported_media_type", check: topicsAre("a", topic)},
	}
}

func decodeAny(t testing.TB, b []byte) any {
	t.Helper()
	var v any
	mustDecode(t, b, &v)
	return v
}

func topicsScenarios() []scenario {
	const url = "/api/notifications/topics"
	return []scenario{
		{name: "none yet", as: "none", headers: as("a"), setup: accounts("a"), url: url, status: 200, json: `{"topics":[]}`},
		{name: "two topics", as: "none", headers: as("a"), setup: pushThen(accounts("a"), subscribe("a", "b-{rand}"), subscribe("a", "a-{rand}")),
			url: url, status: 200, check: topicsAre("a", "a-{rand}", "b-{rand}")},
		{name: "another account's topics are not listed", as: "none", headers: as("b"), setup: pushThen(accounts("a", "b"), subscribe("a", "x-{rand}")),
			url: url, status: 200, json: `{"topics":[]}`},
		{name: "PUT is 405", as: "none", headers: as("a"), setup: accounts("a"), method: "PUT", url: url, body: `{}`,
			status: 405, code: "method_not_allowed", check: allowIs("GET")},
	}
}

// sendBodyFor is a valid send body titled T-{rand} with body B-{rand}, with
// extra members (a JSON object's inside, may be "").
func sendBodyFor(extra string) string {
	if extra != "" {
		extra = "," + extra
	}
	return `{"title":"T-{rand}","body":"B-{rand}"` + extra + `}`
}

// queued checks a 202 answer {notificationId, status:"queued", targets:n}
// (n < 0: any count) and that the owner's history shows the notification with
// target (JSON) and the body's content.
func queued(n int, target, category, data string) pushCheck {
	return func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		hasRevision(t, e, v, r)
		var out struct {
			NotificationID string
			Status         string
			Targets        *int
		}
		mustDecode(t, r.Body, &out)
		if out.NotificationID == "" || out.Status != "queued" || out.Targets == nil {
			t.Fatalf("answer = %s, want notificationId, status queued and targets", r.Body)
		}
		if n >= 0 && *out.Targets != n {
			t.Errorf("targets = %d, want %d", *out.Targets, n)
		}
		it := findBy(e.pushHistory(t, e.p.OwnerToken), "id", out.NotificationID)
		if it == nil {
			t.Fatalf("notification %s is not in the owner's history", out.NotificationID)
		}
		want := fmt.Sprintf(`{"title":"T-{rand}","body":"B-{rand}","target":%s,"category":%q,"data":%s}`, target, category, data)
		if !jsonSubset(decodeAny(t, []byte(v.expand(want))), it) {
			t.Errorf("history item = %v, want %s", it, v.expand(want))
		}
		for _, k := range []string{"id", "title", "body", "data", "category", "target", "status", "createdAt", "sentAt", "delivered", "failed"} {
			if _, ok := it[k]; !ok {
				t.Errorf("history item lacks %q: %v", k, it)
			}
		}
	}
}

// contentScenarios are the refusals of a notification's content, shared by
// the send routes and schedule; mk builds a row from a body.
func contentScenarios(mk func(name, body string, status int, code, field string) scenario) []scenario {
	long := func(n int) string { return strings.Repeat("é", n) }
	bad := func(name, body, field string) scenario { return mk(name, body, 400, "invalid_argument", field) }
	return []scenario{
		bad("no title", `{"body":"B-{rand}"}`, "title"),
		bad("title null", `{"title":null,"body":"B-{rand}"}`, "title"),
		bad("empty title", `{"title":"","body":"B-{rand}"}`, "title"),
		bad("blank title", `{"title":"   ","body":"B-{rand}"}`, "title"),
		bad("title of 257 characters", `{"title":"`+long(257)+`","body":"B-{rand}"}`, "title"),
		bad("title is a number", `{"title":1,"body":"B-{rand}"}`, "title"),
		bad("body of 2049 characters", `{"title":"T-{rand}","body":"`+long(2049)+`"}`, "body"),
		bad("body is a number", `{"title":"T-{rand}","body":5}`, "body"),
		bad("category spam", sendBodyFor(`"category":"spam"`), "category"),
		bad("category in capitals", sendBodyFor(`"category":"General"`), "category"),
		bad("category is a number", sendBodyFor(`"category":1`), "category"),
		bad("data value is a number", sendBodyFor(`"data":{"k":1}`), "data.k"),
		bad("data value is a boolean", sendBodyFor(`"data":{"ok":"x","k":true}`), "data.k"),
		bad("data value is an object", sendBodyFor(`"data":{"k":{"a":"b"}}`), "data.k"),
		bad("data value is null", sendBodyFor(`"data":{"k":null}`), "data.k"),
		bad("data is a string", sendBodyFor(`"data":"x"`), "data"),
		bad("data is an array", sendBodyFor(`"data":["x"]`), "data"),
		bad("data is a number", sendBodyFor(`"data":1`), "data"),
		bad("data key from", sendBodyFor(`"data":{"from":"x"}`), "data.from"),
		bad("data key From", sendBodyFor(`"data":{"From":"x"}`), "data.From"),
		bad("data key message_type", sendBodyFor(`"data":{"message_type":"x"}`), "data.message_type"),
		bad("data key collapse_key", sendBodyFor(`"data":{"collapse_key":"x"}`), "data.collapse_key"),
		bad("data key notification", sendBodyFor(`"data":{"notification":"x"}`), "data.notification"),
		bad("data key google.x", sendBodyFor(`"data":{"google.x":"x"}`), "data.google.x"),
		bad("data key gcm.x", sendBodyFor(`"data":{"gcm.x":"x"}`), "data.gcm.x"),
		bad("payload over 4000 bytes", sendBodyFor(`"data":{"k":"`+strings.Repeat("a", 4000)+`"}`), "data"),
		mk("malformed JSON", `{"title":"T-{rand}",`, 400, "invalid_json", ""),
		mk("array body", `[{"title":"T-{rand}"}]`, 400, "invalid_argument", ""),
		mk("string body", `"T-{rand}"`, 400, "invalid_argument", ""),
	}
}

// TestPushSendToProject runs the send-to-project table on a node of its own:
// a project-wide send reaches every device of the project, and the other
// tables register hundreds.
func TestPushSendToProject(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p2 := e.c.CreateProject(0)
	e.extra = vars{"pid2": p2.ID}
	e.run(t, pushRows(sendProjectScenarios()))
}

func sendProjectScenarios() []scenario {
	url := "/api/notifications/send-to-project/{pid}"
	ok := func(name, extra string, target, category, data string) scenario {
		return scenario{name: name, method: "POST", url: url, body: sendBodyFor(extra), status: 202,
			json: `{"status":"queued"}`, check: queued(-1, target, category, data)}
	}
	rows := []scenario{
		ok("send", `"data":{"k":"v","deep":"link"},"category":"general"`, `{"project":true}`, "general", `{"k":"v","deep":"link"}`),
		ok("category defaults to general", ``, `{"project":true}`, "general", `{}`),
		ok("empty category is general", `"category":""`, `{"project":true}`, "general", `{}`),
		ok("marketing", `"category":"marketing"`, `{"project":true}`, "marketing", `{}`),
		ok("security", `"category":"security"`, `{"project":true}`, "security", `{}`),
		ok("data null", `"data":null`, `{"project":true}`, "general", `{}`),
		ok("data empty", `"data":{}`, `{"project":true}`, "general", `{}`),
		ok("unknown fields are ignored", `"topic":"x","userId":"y","sound":"ding"`, `{"project":true}`, "general", `{}`),
		{name: "title of 256 characters", method: "POST", url: url, body: `{"title":"` + strings.Repeat("é", 256) + `","body":"B-{rand}"}`,
			status: 202, json: `{"status":"queued"}`},
		{name: "targets counts the project's devices", method: "POST", url: url, body: sendBodyFor(""), status: 202,
			setup: pushThen(accounts("a"), reg("a", "x-{rand}", "ios")),
			check: func(t *testing.T, e *env, v vars, r reply) {
				var out struct{ Targets int }
				mustDecode(t, r.Body, &out)
				if out.Targets < 1 {
					t.Errorf("targets = %d with at least one device registered", out.Targets)
				}
			}},
		{name: "another project's id is 403", method: "POST", url: "/api/notifications/send-to-project/{pid2}", body: sendBodyFor(""),
			status: 403, code: "project_mismatch", check: noSend},
		{name: "an unknown project id is 403", method: "POST", url: "/api/notifications/send-to-project/nosuchproject", body: sendBodyFor(""),
			status: 403, code: "project_mismatch", check: noSend},
		{name: "no project id is 404", method: "POST", url: "/api/notifications/send-to-project/", body: sendBodyFor(""),
			status: 404, code: "not_found", check: noSend},
		{name: "no Content-Type is 415", method: "POST", url: url, headers: map[string]string{"Content-Type": ""}, body: sendBodyFor(""),
			status: 415, code: "unsupported_media_type", check: noSend},
		{name: "GET is 405", url: url, status: 405, code: "method_not_allowed", check: allowIs("POST")},
	}
	return append(rows, contentScenarios(func(name, body string, status int, code, field string) scenario {
		return scenario{name: name, method: "POST", url: url, body: body, status: status, code: code, field: field, check: noSend}
	})...)
}

func sendUserScenarios() []scenario {
	url := "/api/notifications/send-to-user/{aUid}"
	rows := []scenario{
		{name: "send", method: "POST", url: url, body: sendBodyFor(`"data":{"k":"v"}`), status: 202,
			setup: pushThen(accounts("a"), reg("a", "x-{rand}", "ios"), reg("a", "y-{rand}", "android")),
			json:  `{"status":"queued","targets":2}`, check: queued(2, `{"userId":"{aUid}"}`, "general", `{"k":"v"}`)},
		{name: "the user's history shows it once delivered", method: "POST", url: url, body: sendBodyFor(`"category":"security"`), status: 202,
			setup: pushThen(accounts("a", "b"), reg("a", "x-{rand}", "ios")),
			check: pushChecks(keep("notificationId", "nid"), func(t *testing.T, e *env, v vars, r reply) {
				var it map[string]any
				nodetest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
					if it = findBy(e.pushHistory(t, v["a"]), "id", v["nid"]); it == nil {
						return fmt.Errorf("notification %s not in the user's history", v["nid"])
					}
					return nil
				})
				want := v.expand(`{"title":"T-{rand}","body":"B-{rand}","category":"security","target":{"userId":"{aUid}"},"data":{}}`)
				if !jsonSubset(decodeAny(t, []byte(want)), it) {
					t.Errorf("user's history item = %v, want %s", it, want)
				}
				if s, _ := it["sentAt"].(string); s == "" {
					t.Errorf("delivered item without sentAt: %v", it)
				}
				if h := e.pushHistory(t, v["b"]); len(h) != 0 {
					t.Errorf("another user's history shows %v", h)
				}
			})},
		{name: "a user without devices", method: "POST", url: url, body: sendBodyFor(""), status: 202, setup: accounts("a"),
			json: `{"status":"queued","targets":0}`, check: queued(0, `{"userId":"{aUid}"}`, "general", `{}`)},
		{name: "to the owner", method: "POST", url: "/api/notifications/send-to-user/{ownerUid}", body: sendBodyFor(""), status: 202,
			json: `{"status":"queued"}`},
		{name: "an unknown user is 404", method: "POST", url: "/api/notifications/send-to-user/nosuchuser", body: sendBodyFor(""),
			status: 404, code: "not_found", field: "userId", check: noSend},
		{name: "a user of another project is 404", method: "POST", url: "/api/notifications/send-to-user/{uid2}", body: sendBodyFor(""),
			status: 404, code: "not_found", field: "userId", check: noSend},
		{name: "a user id with an encoded slash is 404", method: "POST", url: "/api/notifications/send-to-user/{uid}%2Fx", body: sendBodyFor(""),
			status: 404, code: "not_found", field: "userId", check: noSend},
		{name: "a user id climbing out is 404", method: "POST", url: "/api/notifications/send-to-user/..%2F..%2F{pid2}%2F_users%2F{uid2}", body: sendBodyFor(""),
			status: 404, code: "not_found", field: "userId", check: noSend},
		{name: "no user id is 404", method: "POST", url: "/api/notifications/send-to-user/", body: sendBodyFor(""),
			status: 404, code: "not_found", check: noSend},
		{name: "no Content-Type is 415", method: "POST", url: url, setup: accounts("a"), headers: map[string]string{"Content-Type": ""},
			body: sendBodyFor(""), status: 415, code: "unsupported_media_type", check: noSend},
		{name: "PUT is 405", method: "PUT", url: url, setup: accounts("a"), body: sendBodyFor(""), status: 405, code: "method_not_allowed",
			check: pushChecks(allowIs("POST"), noSend)},
	}
	return append(rows, contentScenarios(func(name, body string, status int, code, field string) scenario {
		return scenario{name: name, method: "POST", url: url, setup: accounts("a"), body: body, status: status, code: code, field: field, check: noSend}
	})...)
}

func sendTopicScenarios() []scenario {
	const url = "/api/notifications/send-to-topic"
	topic := `"topic":"news-{rand}"`
	bad := func(name, body string) scenario {
		return scenario{name: name, method: "POST", url: url, body: body, status: 400, code: "invalid_argument", field: "topic", check: noSend}
	}
	rows := []scenario{
		{name: "send", method: "POST", url: url, body: sendBodyFor(topic + `,"category":"marketing","data":{"a":"b"}`), status: 202,
			setup: pushThen(accounts("a", "b", "c"), subscribe("a", "news-{rand}"), subscribe("b", "news-{rand}"),
				reg("a", "x-{rand}", "ios"), reg("b", "y-{rand}", "web"), reg("b", "z-{rand}", "web"), reg("c", "w-{rand}", "web")),
			json: `{"status":"queued","targets":3}`, check: queued(3, `{"topic":"news-{rand}"}`, "marketing", `{"a":"b"}`)},
		{name: "no followers", method: "POST", url: url, body: sendBodyFor(topic), status: 202,
			json: `{"status":"queued","targets":0}`, check: queued(0, `{"topic":"news-{rand}"}`, "general", `{}`)},
		bad("no topic", sendBodyFor("")),
		bad("empty topic", sendBodyFor(`"topic":""`)),
		bad("topic starting with _", sendBodyFor(`"topic":"_x"`)),
		bad("topic with a space", sendBodyFor(`"topic":"a b"`)),
		bad("topic with a slash", sendBodyFor(`"topic":"a/b"`)),
		bad("topic of 129 characters", sendBodyFor(`"topic":"`+strings.Repeat("t", 129)+`"`)),
		bad("topic is a number", sendBodyFor(`"topic":3`)),
		{name: "no Content-Type is 415", method: "POST", url: url, headers: map[string]string{"Content-Type": ""}, body: sendBodyFor(topic),
			status: 415, code: "unsupported_media_type", check: noSend},
		{name: "DELETE is 405", method: "DELETE", url: url, status: 405, code: "method_not_allowed", check: allowIs("POST")},
	}
	return append(rows, contentScenarios(func(name, body string, status int, code, field string) scenario {
		if strings.HasPrefix(body, "{") {
			body = `{"topic":"news-{rand}",` + body[1:]
		}
		return scenario{name: name, method: "POST", url: url, body: body, status: status, code: code, field: field, check: noSend}
	})...)
}

// schedBody is a schedule body titled T-{rand} with extra members.
func schedBody(extra string) string { return sendBodyFor(extra) }

// scheduled checks a 201 schedule answer: {id, sendAt, status:"scheduled",
// target}, and that it is listed for the owner and for {who} (when not "").
func scheduled(who, sendAt, target string) pushCheck {
	return func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		hasRevision(t, e, v, r)
		want := v.expand(fmt.Sprintf(`{"sendAt":%q,"status":"scheduled","target":%s,"title":"T-{rand}","body":"B-{rand}"}`, sendAt, target))
		got := decodeAny(t, r.Body)
		if !jsonSubset(decodeAny(t, []byte(want)), got) {
			t.Errorf("schedule = %s, want %s", r.Body, want)
		}
		id := pushMember(t, r.Body, "id")
		if findBy(e.pushSchedules(t, e.p.OwnerToken), "id", id) == nil {
			t.Errorf("schedule %s is not listed for the owner", id)
		}
		if who != "" {
			if findBy(e.pushSchedules(t, v[who]), "id", id) == nil {
				t.Errorf("schedule %s is not listed for %s", id, who)
			}
		}
	}
}

func scheduleScenarios() []scenario {
	const url = "/api/notifications/schedule"
	user := func(name, body string, status int, code, field string, check pushCheck) scenario {
		if check == nil && status >= 400 {
			check = scheduleCount("a", 0)
		}
		return scenario{name: "user: " + name, as: "none", headers: as("a"), setup: accounts("a"), method: "POST", url: url,
			body: body, status: status, code: code, field: field, check: check}
	}
	owner := func(name, body string, status int, code, field string, check pushCheck) scenario {
		if check == nil && status >= 400 {
			check = noOwnerSchedule("T-{rand}")
		}
		return scenario{name: "owner: " + name, setup: accounts("a"), method: "POST", url: url,
			body: body, status: status, code: code, field: field, check: check}
	}
	at := `"sendAt":"{in1h}"`
	rows := []scenario{
		user("a reminder to oneself", schedBody(at+`,"data":{"k":"v"}`), 201, "", "",
			pushChecks(scheduled("a", "{in1h}", `{"userId":"{aUid}"}`), isTime("createdAt"))),
		user("security", schedBody(at+`,"category":"security"`), 201, "", "", scheduled("a", "{in1h}", `{"userId":"{aUid}"}`)),
		user("target null is no target", schedBody(at+`,"target":null`), 201, "", "", scheduled("a", "{in1h}", `{"userId":"{aUid}"}`)),
		user("marketing is 403", schedBody(at+`,"category":"marketing"`), 403, "forbidden", "category", nil),
		user("a target is 403", schedBody(at+`,"target":{"userId":"{otherUid}"}`), 403, "forbidden", "target", nil),
		user("the project as target is 403", schedBody(at+`,"target":{"project":true}`), 403, "forbidden", "target", nil),
		user("no sendAt", schedBody(""), 400, "invalid_argument", "sendAt", nil),
		user("empty sendAt", schedBody(`"sendAt":""`), 400, "invalid_argument", "sendAt", nil),
		user("sendAt with +02:00", schedBody(`"sendAt":"{in1hParis}"`), 400, "invalid_argument", "sendAt", nil),
		user("sendAt not a time", schedBody(`"sendAt":"tomorrow"`), 400, "invalid_argument", "sendAt", nil),
		user("sendAt a date only", schedBody(`"sendAt":"2030-01-01"`), 400, "invalid_argument", "sendAt", nil),
		user("sendAt a number", schedBody(`"sendAt":1893456000`), 400, "invalid_argument", "sendAt", nil),
		user("sendAt 10 minutes ago", schedBody(`"sendAt":"{past10m}"`), 400, "invalid_argument", "sendAt", nil),
		user("sendAt 2 minutes ago fires at once", schedBody(`"sendAt":"{past2m}"`), 201, "", "", nil),
		user("sendAt 365 days ahead", schedBody(`"sendAt":"{in365d}"`), 201, "", "", scheduled("a", "{in365d}", `{"userId":"{aUid}"}`)),
		user("sendAt 367 days ahead", schedBody(`"sendAt":"{in367d}"`), 400, "invalid_argument", "sendAt", nil),
		owner("default target is the project", schedBody(at), 201, "", "", scheduled("", "{in1h}", `{"project":true}`)),
		owner("the project", schedBody(at+`,"target":{"project":true}`), 201, "", "", scheduled("", "{in1h}", `{"project":true}`)),
		owner("a user", schedBody(at+`,"target":{"userId":"{aUid}"}`), 201, "", "", scheduled("", "{in1h}", `{"userId":"{aUid}"}`)),
		owner("a topic", schedBody(at+`,"target":{"topic":"news-{rand}"}`), 201, "", "", scheduled("", "{in1h}", `{"topic":"news-{rand}"}`)),
		owner("marketing", schedBody(at+`,"category":"marketing"`), 201, "", "", nil),
		owner("an unknown user is 404", schedBody(at+`,"target":{"userId":"nosuchuser"}`), 404, "not_found", "userId", nil),
		owner("a user of another project is 404", schedBody(at+`,"target":{"userId":"{uid2}"}`), 404, "not_found", "userId", nil),
		owner("a user id climbing out is 404", schedBody(at+`,"target":{"userId":"../../{pid2}/_users/{uid2}"}`), 404, "not_found", "userId", nil),
		owner("two kinds of target is 400", schedBody(at+`,"target":{"project":true,"topic":"news"}`), 400, "invalid_argument", "target", nil),
		owner("user and topic is 400", schedBody(at+`,"target":{"userId":"{aUid}","topic":"news"}`), 400, "invalid_argument", "target", nil),
		owner("an empty target is 400", schedBody(at+`,"target":{}`), 400, "invalid_argument", "target", nil),
		owner("project false is 400", schedBody(at+`,"target":{"project":false}`), 400, "invalid_argument", "target", nil),
		owner("a users list is 400", schedBody(at+`,"target":{"users":["{aUid}"]}`), 400, "invalid_argument", "target", nil),
		owner("a bad topic is 400", schedBody(at+`,"target":{"topic":"_x"}`), 400, "invalid_argument", "topic", nil),
		owner("target a string is 400", schedBody(at+`,"target":"project"`), 400, "invalid_argument", "target", nil),
		owner("sendAt with +00:00", schedBody(`"sendAt":"{in1hOffset0}"`), 201, "", "", scheduled("", "{in1h}", `{"project":true}`)),
		owner("sendAt 367 days ahead", schedBody(`"sendAt":"{in367d}"`), 400, "invalid_argument", "sendAt", nil),
		owner("sendAt 10 minutes ago", schedBody(`"sendAt":"{past10m}"`), 400, "invalid_argument", "sendAt", nil),
		{name: "no Content-Type is 415", as: "none", headers: withHeaders(as("a"), map[string]string{"Content-Type": ""}), setup: accounts("a"),
			method: "POST", url: url, body: schedBody(at), status: 415, code: "unsupported_media_type", check: scheduleCount("a", 0)},
		{name: "GET is 405", as: "none", headers: as("a"), setup: accounts("a"), url: url, status: 405, code: "method_not_allowed", check: allowIs("POST")},
	}
	return append(rows, contentScenarios(func(name, body string, status int, code, field string) scenario {
		if strings.HasPrefix(body, "{") {
			body = `{"sendAt":"{in1h}",` + body[1:]
		}
		return user(name, body, status, code, field, nil)
	})...)
}

func scheduledScenarios() []scenario {
	const url = "/api/notifications/scheduled"
	bad := func(name, query, field string) scenario {
		return scenario{name: name, as: "none", headers: as("a"), setup: accounts("a"), url: url + query, status: 400, code: "invalid_argument", field: field}
	}
	three := pushThen(accounts("a"), sched("a", "s1", schedBody(`"sendAt":"{in1h}"`)), sched("a", "s2", schedBody(`"sendAt":"{in2h}"`)),
		sched("a", "s3", schedBody(`"sendAt":"{in3h}"`)))
	return []scenario{
		{name: "none yet", as: "none", headers: as("a"), setup: accounts("a"), url: url, status: 200, json: `{"scheduled":[]}`,
			check: func(t *testing.T, e *env, v vars, r reply) {
				if top := decodeAny(t, r.Body).(map[string]any); top["nextCursor"] != "" && top["nextCursor"] != nil {
					t.Errorf("nextCursor of an empty listing = %v", top["nextCursor"])
				}
			}},
		{name: "pages of one, newest first", as: "none", headers: as("a"), setup: three, url: url + "?limit=1", status: 200,
			check: func(t *testing.T, e *env, v vars, r reply) {
				var page struct {
					Scheduled  []map[string]any
					NextCursor string
				}
				mustDecode(t, r.Body, &page)
				if len(page.Scheduled) != 1 || page.NextCursor == "" {
					t.Fatalf("first page = %s, want one item and a nextCursor", r.Body)
				}
				if page.Scheduled[0]["id"] != v["s3"] {
					t.Errorf("first item = %v, want the newest schedule %s", page.Scheduled[0]["id"], v["s3"])
				}
				all := e.pushList(t, v["a"], url, "scheduled", 1)
				var ids []string
				for _, it := range all {
					ids = append(ids, it["id"].(string))
				}
				if want := []string{v["s3"], v["s2"], v["s1"]}; !slices.Equal(ids, want) {
					t.Errorf("paged ids = %v, want %v", ids, want)
				}
			}},
		{name: "a user sees only their own", as: "none", headers: as("b"), setup: pushThen(three, accounts("b")), url: url, status: 200,
			json: `{"scheduled":[]}`},
		{name: "the owner sees users' schedules", setup: three, url: url + "?limit=100", status: 200,
			check: func(t *testing.T, e *env, v vars, r reply) {
				all := e.pushSchedules(t, e.p.OwnerToken)
				for _, k := range []string{"s1", "s2", "s3"} {
					if findBy(all, "id", v[k]) == nil {
						t.Errorf("owner does not see %s", v[k])
					}
				}
			}},
		{name: "limit 100", as: "none", headers: as("a"), setup: accounts("a"), url: url + "?limit=100", status: 200},
		bad("limit 0", "?limit=0", "limit"),
		bad("limit 101", "?limit=101", "limit"),
		bad("limit -1", "?limit=-1", "limit"),
		bad("limit abc", "?limit=abc", "limit"),
		bad("limit 1.5", "?limit=1.5", "limit"),
		bad("limit empty", "?limit=", "limit"),
		bad("cursor not hex", "?cursor=zz", "cursor"),
		bad("cursor with a slash", "?cursor=ab%2Fcd", "cursor"),
		bad("cursor too long", "?cursor="+strings.Repeat("a", 129), "cursor"),
		{name: "POST is 405", as: "none", headers: as("a"), setup: accounts("a"), method: "POST", url: url, body: `{}`,
			status: 405, code: "method_not_allowed", check: allowIs("GET")},
	}
}

func cancelScenarios() []scenario {
	const url = "/api/notifications/scheduled/{s1}"
	one := pushThen(accounts("a", "b"), sched("a", "s1", schedBody(`"sendAt":"{in1h}"`)))
	return []scenario{
		{name: "own schedule", as: "none", headers: as("a"), setup: one, method: "DELETE", url: url, status: 200,
			json: `{"id":"{s1}","status":"cancelled","title":"T-{rand}"}`, check: pushChecks(hasRevision, scheduleStatus("s1", "cancelled"),
				func(t *testing.T, e *env, v vars, r reply) {
					if sc := findBy(e.pushSchedules(t, v["a"]), "id", v["s1"]); sc == nil || sc["status"] != "cancelled" {
						t.Errorf("the user's listing shows %v, want it cancelled", sc)
					}
				})},
		{name: "another user's is 404", as: "none", headers: as("b"), setup: one, method: "DELETE", url: url, status: 404,
			code: "not_found", field: "id", check: scheduleStatus("s1", "scheduled")},
		{name: "the owner's is 404 for a user", as: "none", headers: as("b"),
			setup:  pushThen(accounts("b"), ownerSchedule("s1", schedBody(`"sendAt":"{in1h}"`))),
			method: "DELETE", url: url, status: 404, code: "not_found", field: "id", check: scheduleStatus("s1", "scheduled")},
		{name: "the owner cancels a user's", setup: one, method: "DELETE", url: url, status: 200, json: `{"status":"cancelled"}`,
			check: scheduleStatus("s1", "cancelled")},
		{name: "the owner cancels their own", setup: ownerSchedule("s1", schedBody(`"sendAt":"{in1h}"`)), method: "DELETE", url: url,
			status: 200, json: `{"status":"cancelled"}`, check: scheduleStatus("s1", "cancelled")},
		{name: "twice is 409", as: "none", headers: as("a"), setup: pushThen(one, cancelSched("a", "s1")), method: "DELETE", url: url,
			status: 409, code: "not_cancellable", field: "id", check: scheduleStatus("s1", "cancelled")},
		{name: "an unknown id is 404", url: "/api/notifications/scheduled/00ff00ff00ff00ff00ff00ff", method: "DELETE", status: 404, code: "not_found"},
		{name: "a non-hex id is 404", url: "/api/notifications/scheduled/zz", method: "DELETE", status: 404, code: "not_found"},
		{name: "an id with an encoded slash is 404", setup: one, url: "/api/notifications/scheduled/{s1}%2Fx", method: "DELETE", status: 404,
			code: "not_found", check: scheduleStatus("s1", "scheduled")},
		{name: "an id of 200 characters is 404", url: "/api/notifications/scheduled/" + strings.Repeat("a", 200), method: "DELETE",
			status: 404, code: "not_found"},
		{name: "no id is 404", url: "/api/notifications/scheduled/", method: "DELETE", status: 404, code: "not_found"},
		{name: "GET is 405", as: "none", headers: as("a"), setup: one, url: url, status: 405, code: "method_not_allowed",
			check: pushChecks(allowIs("DELETE"), scheduleStatus("s1", "scheduled"))},
		{name: "POST is 405", as: "none", headers: as("a"), setup: one, method: "POST", url: url, body: `{}`, status: 405,
			code: "method_not_allowed", check: pushChecks(allowIs("DELETE"), scheduleStatus("s1", "scheduled"))},
	}
}

// ownerSchedule schedules body as the owner and keeps the id in {key}.
func ownerSchedule(key, body string) pushSetup {
	return func(t *testing.T, e *env, v vars) {
		t.Helper()
		r := e.mustCall(t, e.p.OwnerToken, http.MethodPost, "/api/notifications/schedule", v.expand(body), http.StatusCreated)
		v[key] = pushMember(t, r.Body, "id")
	}
}

func historyScenarios() []scenario {
	const url = "/api/notifications/history"
	bad := func(name, query, field string) scenario {
		return scenario{name: name, url: url + query, status: 400, code: "invalid_argument", field: field}
	}
	send := func(key string) pushSetup {
		return ownerSend("/api/notifications/send-to-user/{aUid}", key, sendBodyFor(""))
	}
	return []scenario{
		{name: "a user's is empty at first", as: "none", headers: as("a"), setup: accounts("a"), url: url, status: 200,
			json: `{"notifications":[]}`},
		{name: "pages of one", setup: pushThen(accounts("a"), send("n1"), send("n2")), url: url + "?limit=1", status: 200,
			check: func(t *testing.T, e *env, v vars, r reply) {
				var p1, p2 struct {
					Notifications []map[string]any
					NextCursor    string
				}
				mustDecode(t, r.Body, &p1)
				if len(p1.Notifications) != 1 || p1.NextCursor == "" {
					t.Fatalf("first page = %s, want one item and a nextCursor", r.Body)
				}
				r2 := e.mustCall(t, e.p.OwnerToken, http.MethodGet, url+"?limit=1&cursor="+p1.NextCursor, "", http.StatusOK)
				mustDecode(t, r2.Body, &p2)
				if len(p2.Notifications) != 1 {
					t.Fatalf("second page = %s, want one item", r2.Body)
				}
				a, b := p1.Notifications[0], p2.Notifications[0]
				if a["id"] == b["id"] {
					t.Errorf("both pages hold %v", a["id"])
				}
				ta, _ := time.Parse(time.RFC3339Nano, a["createdAt"].(string))
				tb, _ := time.Parse(time.RFC3339Nano, b["createdAt"].(string))
				if tb.After(ta) {
					t.Errorf("second page (%v) is newer than the first (%v)", tb, ta)
				}
			}},
		{name: "newest first", setup: pushThen(accounts("a"), send("n1"), send("n2")), url: url + "?limit=100", status: 200,
			check: func(t *testing.T, e *env, v vars, r reply) {
				all := e.pushHistory(t, e.p.OwnerToken)
				i1, i2 := -1, -1
				for i, it := range all {
					switch it["id"] {
					case v["n1"]:
						i1 = i
					case v["n2"]:
						i2 = i
					}
				}
				if i1 < 0 || i2 < 0 || i2 > i1 {
					t.Errorf("positions of the first and second send: %d, %d; want the second first", i1, i2)
				}
			}},
		{name: "default limit is 20", setup: func(t *testing.T, e *env, v vars) {
			accounts("a")(t, e, v)
			for i := 0; i < 21; i++ {
				send(fmt.Sprintf("n%d", i))(t, e, v)
			}
		}, url: url, status: 200, check: func(t *testing.T, e *env, v vars, r reply) {
			var p struct {
				Notifications []map[string]any
				NextCursor    string
			}
			mustDecode(t, r.Body, &p)
			if len(p.Notifications) != 20 || p.NextCursor == "" {
				t.Errorf("default page has %d items, nextCursor %q; want 20 and a cursor", len(p.Notifications), p.NextCursor)
			}
		}},
		{name: "a user sees only what was sent to them", as: "none", headers: as("b"),
			setup: pushThen(accounts("a", "b"), reg("a", "x-{rand}", "web"), reg("b", "y-{rand}", "web"), send("n1"),
				ownerSend("/api/notifications/send-to-user/{bUid}", "n2", sendBodyFor(""))),
			url: url, status: 200, check: func(t *testing.T, e *env, v vars, r reply) {
				nodetest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
					h := e.pushHistory(t, v["b"])
					if findBy(h, "id", v["n2"]) == nil {
						return fmt.Errorf("b's history lacks %s: %v", v["n2"], h)
					}
					if len(h) != 1 {
						return fmt.Errorf("b's history = %v, want only %s", h, v["n2"])
					}
					return nil
				})
			}},
		{name: "limit 100", url: url + "?limit=100", status: 200},
		bad("limit 0", "?limit=0", "limit"),
		bad("limit 101", "?limit=101", "limit"),
		bad("limit abc", "?limit=abc", "limit"),
		bad("limit -5", "?limit=-5", "limit"),
		bad("limit empty", "?limit=", "limit"),
		bad("limit huge", "?limit=99999999999999999999", "limit"),
		bad("cursor not hex", "?cursor=xyz", "cursor"),
		bad("cursor too long", "?cursor="+strings.Repeat("0", 129), "cursor"),
		{name: "POST is 405", method: "POST", url: url, body: `{}`, status: 405, code: "method_not_allowed", check: allowIs("GET")},
	}
}

const defaultPrefs = `{"pushEnabled":true,"emailEnabled":true,"marketingEnabled":false,"securityEnabled":true,` +
	`"quietHoursEnabled":false,"quietHoursStart":"22:00","quietHoursEnd":"07:00","timezone":"UTC"}`

// customPrefs are what putCustom stores.
const customPrefs = `{"pushEnabled":true,"emailEnabled":false,"marketingEnabled":true,"securityEnabled":true,` +
	`"quietHoursEnabled":true,"quietHoursStart":"23:15","quietHoursEnd":"06:45","timezone":"Europe/Paris"}`

var putCustom = putPrefs("a", `{"emailEnabled":false,"marketingEnabled":true,"quietHoursEnabled":true,`+
	`"quietHoursStart":"23:15","quietHoursEnd":"06:45","timezone":"Europe/Paris"}`)

func prefsScenarios() []scenario {
	const url = "/api/notifications/preferences"
	put := func(name, body string, status int, want string) scenario {
		return scenario{name: name, as: "none", headers: as("a"), setup: pushThen(accounts("a"), putCustom), method: "PUT", url: url,
			body: body, status: status, json: want, check: pushChecks(hasRevision, prefsAre("a", want))}
	}
	// bad rows start from customPrefs, which must survive the refusal.
	bad := func(name, body, field string) scenario {
		return scenario{name: name, as: "none", headers: as("a"), setup: pushThen(accounts("a"), putCustom), method: "PUT", url: url,
			body: body, status: 400, code: "invalid_argument", field: field, check: prefsAre("a", customPrefs)}
	}
	// badFresh rows start from the defaults, which must stay.
	badFresh := func(name, body, field string) scenario {
		return scenario{name: name + " (fresh)", as: "none", headers: as("a"), setup: accounts("a"), method: "PUT", url: url,
			body: body, status: 400, code: "invalid_argument", field: field, check: prefsAre("a", defaultPrefs)}
	}
	with := func(member string) string {
		// customPrefs with one member replaced.
		var m map[string]any
		_ = json.Unmarshal([]byte(customPrefs), &m)
		var d map[string]any
		_ = json.Unmarshal([]byte("{"+member+"}"), &d)
		for k, val := range d {
			m[k] = val
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	return []scenario{
		{name: "defaults", as: "none", headers: as("a"), setup: accounts("a"), url: url, status: 200,
			check: func(t *testing.T, e *env, v vars, r reply) {
				if !jsonEqual(r.Body, []byte(defaultPrefs)) {
					t.Errorf("defaults = %s, want %s", r.Body, defaultPrefs)
				}
			}},
		{name: "the owner has preferences too", url: url, status: 200, json: `{"timezone":"UTC"}`},
		{name: "GET after PUT", as: "none", headers: as("a"), setup: pushThen(accounts("a"), putCustom), url: url, status: 200,
			check: func(t *testing.T, e *env, v vars, r reply) {
				if !jsonEqual(r.Body, []byte(customPrefs)) {
					t.Errorf("preferences = %s, want %s", r.Body, customPrefs)
				}
			}},
		{name: "another account's are untouched", as: "none", headers: as("b"), setup: pushThen(accounts("a", "b"), putCustom), url: url, status: 200,
			check: func(t *testing.T, e *env, v vars, r reply) {
				if !jsonEqual(r.Body, []byte(defaultPrefs)) {
					t.Errorf("b's preferences = %s, want the defaults", r.Body)
				}
			}},
		{name: "PUT all fields from the defaults", as: "none", headers: as("a"), setup: accounts("a"), method: "PUT", url: url, body: customPrefs,
			status: 200, json: customPrefs, check: pushChecks(hasRevision, prefsAre("a", customPrefs))},
		put("partial PUT keeps other fields", `{"pushEnabled":false}`, 200, with(`"pushEnabled":false`)),
		put("quiet hours start", `{"quietHoursStart":"00:00"}`, 200, with(`"quietHoursStart":"00:00"`)),
		put("quiet hours end 23:59", `{"quietHoursEnd":"23:59"}`, 200, with(`"quietHoursEnd":"23:59"`)),
		put("timezone UTC", `{"timezone":"UTC"}`, 200, with(`"timezone":"UTC"`)),
		put("timezone America/New_York", `{"timezone":"America/New_York"}`, 200, with(`"timezone":"America/New_York"`)),
		put("null members are left alone", `{"timezone":null,"marketingEnabled":false}`, 200, with(`"marketingEnabled":false`)),
		put("unknown members are ignored", `{"securityEnabled":false,"sound":"ding"}`, 200, with(`"securityEnabled":false`)),
		bad("empty object", `{}`, ""),
		bad("only nulls", `{"pushEnabled":null}`, ""),
		bad("only unknown members", `{"volume":3}`, ""),
		bad("start 7:00", `{"quietHoursStart":"7:00"}`, "quietHoursStart"),
		bad("start 24:00", `{"quietHoursStart":"24:00"}`, "quietHoursStart"),
		bad("start 07:60", `{"quietHoursStart":"07:60"}`, "quietHoursStart"),
		bad("start ab:cd", `{"quietHoursStart":"ab:cd"}`, "quietHoursStart"),
		bad("start +7:00", `{"quietHoursStart":"+7:00"}`, "quietHoursStart"),
		bad("start 07:00:00", `{"quietHoursStart":"07:00:00"}`, "quietHoursStart"),
		bad("start 0700", `{"quietHoursStart":"0700"}`, "quietHoursStart"),
		bad("start empty", `{"quietHoursStart":""}`, "quietHoursStart"),
		bad("start a number", `{"quietHoursStart":700}`, "quietHoursStart"),
		bad("end 24:00", `{"quietHoursEnd":"24:00"}`, "quietHoursEnd"),
		bad("end 7:00", `{"quietHoursEnd":"7:00"}`, "quietHoursEnd"),
		bad("end 07:60", `{"quietHoursEnd":"07:60"}`, "quietHoursEnd"),
		bad("end ab:cd", `{"quietHoursEnd":"ab:cd"}`, "quietHoursEnd"),
		bad("end -1:00", `{"quietHoursEnd":"-1:00"}`, "quietHoursEnd"),
		bad("timezone Mars/Olympus", `{"timezone":"Mars/Olympus"}`, "timezone"),
		bad("timezone Local", `{"timezone":"Local"}`, "timezone"),
		bad("timezone empty", `{"timezone":""}`, "timezone"),
		bad("timezone climbing out", `{"timezone":"../../etc/passwd"}`, "timezone"),
		bad("timezone absolute path", `{"timezone":"/etc/localtime"}`, "timezone"),
		bad("timezone a number", `{"timezone":1}`, "timezone"),
		bad("pushEnabled a string", `{"pushEnabled":"yes"}`, "pushEnabled"),
		bad("pushEnabled a number", `{"pushEnabled":0}`, "pushEnabled"),
		bad("emailEnabled a string", `{"emailEnabled":"false"}`, "emailEnabled"),
		bad("marketingEnabled an object", `{"marketingEnabled":{}}`, "marketingEnabled"),
		bad("securityEnabled an array", `{"securityEnabled":[true]}`, "securityEnabled"),
		bad("quietHoursEnabled a number", `{"quietHoursEnabled":1}`, "quietHoursEnabled"),
		bad("a good field with a bad one changes nothing", `{"pushEnabled":false,"timezone":"Mars/Olympus"}`, "timezone"),
		bad("a good start with a bad end changes nothing", `{"quietHoursStart":"01:00","quietHoursEnd":"25:00"}`, "quietHoursEnd"),
		badFresh("empty object", `{}`, ""),
		badFresh("start 24:00", `{"quietHoursStart":"24:00"}`, "quietHoursStart"),
		badFresh("timezone Local", `{"timezone":"Local"}`, "timezone"),
		badFresh("pushEnabled a string", `{"pushEnabled":"no"}`, "pushEnabled"),
		bad("array body", `[{"pushEnabled":false}]`, ""),
		bad("null body", `null`, ""),
		{name: "malformed JSON", as: "none", headers: as("a"), setup: pushThen(accounts("a"), putCustom), method: "PUT", url: url,
			body: `{"pushEnabled":false`, status: 400, code: "invalid_json", check: prefsAre("a", customPrefs)},
		{name: "no Content-Type is 415", as: "none", headers: withHeaders(as("a"), map[string]string{"Content-Type": ""}),
			setup: pushThen(accounts("a"), putCustom), method: "PUT", url: url, body: `{"pushEnabled":false}`, status: 415,
			code: "unsupported_media_type", check: prefsAre("a", customPrefs)},
		{name: "POST is 405", as: "none", headers: as("a"), setup: pushThen(accounts("a"), putCustom), method: "POST", url: url,
			body: `{"pushEnabled":false}`, status: 405, code: "method_not_allowed",
			check: pushChecks(allowIs("GET, PUT"), prefsAre("a", customPrefs))},
		{name: "DELETE is 405", as: "none", headers: as("a"), setup: pushThen(accounts("a"), putCustom), method: "DELETE", url: url,
			status: 405, code: "method_not_allowed", check: pushChecks(allowIs("GET, PUT"), prefsAre("a", customPrefs))},
	}
}

// pushOn requires the project's push switch to be on or off.
func pushOn(want bool) pushCheck {
	return func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		on, err := e.c.Nodes[0].Node.Push.Enabled(e.p.ID)
		if err != nil {
			t.Fatalf("read the push switch: %v", err)
		}
		if on != want {
			t.Errorf("push enabled = %v, want %v", on, want)
		}
	}
}

// historyLen requires the owner's history to hold n notifications.
func historyLen(n int) pushCheck {
	return func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		if h := e.pushHistory(t, e.p.OwnerToken); len(h) != n {
			t.Errorf("owner history has %d notifications, want %d: %v", len(h), n, h)
		}
	}
}

// TestPushToggle turns push off and on in a project of its own, one row
// after the other.
func TestPushToggle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p2 := e.c.CreateProject(0)
	e.extra = vars{"pid2": p2.ID}
	v := e.vars()
	reg("user", "dev-user", "ios")(t, e, v)
	subscribe("user", "news")(t, e, v)
	const url = "/api/notifications/toggle-push"
	off := `{"projectId":"{pid}","enabled":false}`
	bad := func(name, body string, status int, code, field string) scenario {
		return scenario{name: name, method: "POST", url: url, body: body, status: status, code: code, field: field,
			check: pushChecks(pushOn(true), historyLen(0))}
	}
	rows := []scenario{
		{name: "a user may not", as: "user", method: "POST", url: url, body: off, status: 403, code: "forbidden", check: pushOn(true)},
		{name: "another user may not", as: "other", method: "POST", url: url, body: off, status: 403, code: "forbidden", check: pushOn(true)},
		bad("another project's id", `{"projectId":"{pid2}","enabled":false}`, 403, "project_mismatch", "projectId"),
		bad("an unknown project id", `{"projectId":"nosuchproject","enabled":false}`, 403, "project_mismatch", "projectId"),
		bad("no projectId", `{"enabled":false}`, 400, "invalid_argument", "projectId"),
		bad("empty projectId", `{"projectId":"","enabled":false}`, 400, "invalid_argument", "projectId"),
		bad("projectId a number", `{"projectId":1,"enabled":false}`, 400, "invalid_argument", "projectId"),
		bad("no enabled", `{"projectId":"{pid}"}`, 400, "invalid_argument", "enabled"),
		bad("enabled null", `{"projectId":"{pid}","enabled":null}`, 400, "invalid_argument", "enabled"),
		bad("enabled a string", `{"projectId":"{pid}","enabled":"false"}`, 400, "invalid_argument", "enabled"),
		bad("enabled a number", `{"projectId":"{pid}","enabled":0}`, 400, "invalid_argument", "enabled"),
		bad("empty object", `{}`, 400, "invalid_argument", "projectId"),
		bad("null body", `null`, 400, "invalid_argument", "projectId"),
		bad("array body", `[{"projectId":"{pid}","enabled":false}]`, 400, "invalid_argument", ""),
		bad("malformed JSON", `{"projectId":"{pid}","enabled":false`, 400, "invalid_json", ""),
		{name: "no Content-Type is 415", method: "POST", url: url, headers: map[string]string{"Content-Type": ""}, body: off,
			status: 415, code: "unsupported_media_type", check: pushOn(true)},
		{name: "PUT is 405", method: "PUT", url: url, body: off, status: 405, code: "method_not_allowed", check: pushChecks(allowIs("GET, POST"), pushOn(true))},
		{name: "GET reads the switch", url: url, status: 200, json: `{"projectId":"{pid}","pushEnabled":true}`},
		{name: "turn off", method: "POST", url: url, body: off, status: 200, json: `{"projectId":"{pid}","pushEnabled":false}`,
			check: pushChecks(hasRevision, pushOn(false))},
		{name: "turn off again", method: "POST", url: url, body: off, status: 200, json: `{"projectId":"{pid}","pushEnabled":false}`,
			check: pushOn(false)},
		{name: "send-to-project is 403 while off", method: "POST", url: "/api/notifications/send-to-project/{pid}", body: sendBodyFor(""),
			status: 403, code: "push_disabled", check: pushChecks(noSend, historyLen(0))},
		{name: "send-to-user is 403 while off", method: "POST", url: "/api/notifications/send-to-user/{uid}", body: sendBodyFor(""),
			status: 403, code: "push_disabled", check: pushChecks(noSend, historyLen(0))},
		{name: "send-to-topic is 403 while off", method: "POST", url: "/api/notifications/send-to-topic", body: sendBodyFor(`"topic":"news"`),
			status: 403, code: "push_disabled", check: pushChecks(noSend, historyLen(0))},
		{name: "a bad send is still 400 while off", method: "POST", url: "/api/notifications/send-to-project/{pid}", body: `{"title":""}`,
			status: 400, code: "invalid_argument", field: "title", check: historyLen(0)},
		{name: "a due schedule is held while off", method: "POST", url: "/api/notifications/schedule",
			body: `{"title":"held","body":"B-{rand}","sendAt":"{past2m}","target":{"userId":"{uid}"}}`, status: 201,
			check: pushChecks(keep("id", "held"), func(t *testing.T, e *env, v vars, r reply) {
				e.extra["held"] = v["held"]
			}, historyLen(0))},
		{name: "a user may still register while off", as: "user", method: "POST", url: "/api/notifications/register",
			body: registerBodyFor("dev2-user", "web"), status: 201},
		{name: "a user may still set preferences while off", as: "user", method: "PUT", url: "/api/notifications/preferences",
			body: `{"marketingEnabled":true}`, status: 200},
		{name: "a user may not turn it on", as: "user", method: "POST", url: url, body: `{"projectId":"{pid}","enabled":true}`,
			status: 403, code: "forbidden", check: pushOn(false)},
		{name: "turn on", method: "POST", url: url, body: `{"projectId":"{pid}","enabled":true}`, status: 200,
			json: `{"projectId":"{pid}","pushEnabled":true}`, check: pushChecks(hasRevision, pushOn(true))},
		{name: "the held schedule fires once on", url: "/api/notifications/scheduled", status: 200,
			check: func(t *testing.T, e *env, v vars, r reply) {
				nodetest.CheckFor(t, 15*time.Second, 50*time.Millisecond, func() error {
					sc := findBy(e.pushSchedules(t, e.p.OwnerToken), "id", v["held"])
					if sc == nil {
						return fmt.Errorf("the held schedule %s is gone", v["held"])
					}
					if sc["status"] != "sent" {
						return fmt.Errorf("held schedule status %v, want sent", sc["status"])
					}
					if findBy(e.pushHistory(t, e.p.OwnerToken), "title", "held") == nil {
						return fmt.Errorf("held notification not in the owner's history")
					}
					if findBy(e.pushHistory(t, e.user.Token), "title", "held") == nil {
						return fmt.Errorf("held notification not in the user's history")
					}
					return nil
				})
			}},
		{name: "send-to-project works again", method: "POST", url: "/api/notifications/send-to-project/{pid}", body: sendBodyFor(""),
			status: 202, json: `{"status":"queued"}`, check: queued(-1, `{"project":true}`, "general", `{}`)},
	}
	e.runSeq(t, pushRows(rows))
}

// noKeyInAnswer requires an answer never to show the private key.
func noKeyInAnswer(t *testing.T, e *env, v vars, r reply) {
	t.Helper()
	pushKeys(t)
	body := string(r.Body)
	keyBody := strings.Split(pushRSAPEM, "\n")[1]
	for _, leak := range []string{"PRIVATE KEY", "BEGIN", keyBody, "sealed"} {
		if strings.Contains(body, leak) {
			t.Errorf("answer shows %q: %.300s", leak, body)
		}
	}
}

// credsAre requires the owner's GET of the credentials to match want (JSON
// subset) and to show no key.
func credsAre(want string) pushCheck {
	return func(t *testing.T, e *env, v vars, r reply) {
		t.Helper()
		gr := e.mustCall(t, e.p.OwnerToken, http.MethodGet, "/api/notifications/fcm-credentials", "", http.StatusOK)
		if !jsonSubset(decodeAny(t, []byte(v.expand(want))), decodeAny(t, gr.Body)) {
			t.Errorf("credentials = %s, want %s", gr.Body, v.expand(want))
		}
		noKeyInAnswer(t, e, v, gr)
	}
}

// TestPushCredentials sets and reads FCM credentials in a project of its
// own, one row after the other.
func TestPushCredentials(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pushKeys(t)
	const url = "/api/notifications/fcm-credentials"
	sa := func(mods map[string]any) string { return serviceAccount(t, mods) }
	good := sa(nil)
	notSet := credsAre(`{"configured":false}`)
	bad := func(name, body, field string, after pushCheck) scenario {
		return scenario{name: name, method: "PUT", url: url, body: body, status: 400, code: "invalid_argument", field: field, check: after}
	}
	badKeys := func(after pushCheck, suffix string) []scenario {
		return []scenario{
			bad("type user"+suffix, sa(map[string]any{"type": "authorized_user", "client_email": "x@y.z"}), "type", after),
			bad("no type"+suffix, sa(map[string]any{"type": deleted}), "type", after),
			bad("no project_id"+suffix, sa(map[string]any{"project_id": deleted}), "project_id", after),
			bad("no client_email"+suffix, sa(map[string]any{"client_email": deleted}), "client_email", after),
			bad("no private_key"+suffix, sa(map[string]any{"private_key": deleted}), "private_key", after),
			bad("empty private_key"+suffix, sa(map[string]any{"private_key": ""}), "private_key", after),
			bad("garbage private_key"+suffix, sa(map[string]any{"private_key": "garbage"}), "private_key", after),
			bad("PEM of garbage"+suffix, sa(map[string]any{"private_key": "-----BEGIN PRIVATE KEY-----\nQUFBQQ==\n-----END PRIVATE KEY-----\n"}), "private_key", after),
			bad("a public key"+suffix, sa(map[string]any{"private_key": "-----BEGIN PUBLIC KEY-----\nQUFBQQ==\n-----END PUBLIC KEY-----\n"}), "private_key", after),
			bad("token_uri ftp"+suffix, sa(map[string]any{"token_uri": "ftp://example.com/token"}), "token_uri", after),
			bad("token_uri not a URL"+suffix, sa(map[string]any{"token_uri": "token"}), "token_uri", after),
			// The leader would POST a signed assertion there: only Google's
			// token endpoint (or the operator's FCM endpoint's host) is taken.
			bad("token_uri on loopback"+suffix, sa(map[string]any{"token_uri": "http://127.0.0.1:8080/internal/propose"}), "token_uri", after),
			bad("token_uri on a private address"+suffix, sa(map[string]any{"token_uri": "http://10.0.0.7/token"}), "token_uri", after),
			bad("token_uri on IPv6 loopback"+suffix, sa(map[string]any{"token_uri": "https://[::1]/token"}), "token_uri", after),
			bad("token_uri on another host"+suffix, sa(map[string]any{"token_uri": "https://oauth2.googleapis.com.evil.example/token"}), "token_uri", after),
			bad("token_uri on Google's host, another port"+suffix, sa(map[string]any{"token_uri": "https://oauth2.googleapis.com:8443/token"}), "token_uri", after),
			bad("token_uri on Google's host over http"+suffix, sa(map[string]any{"token_uri": "http://oauth2.googleapis.com/token"}), "token_uri", after),
			bad("token_uri with credentials"+suffix, sa(map[string]any{"token_uri": "https://user@oauth2.googleapis.com/token"}), "token_uri", after),
			bad("empty object"+suffix, `{}`, "type", after),
			bad("array body"+suffix, `[`+good+`]`, "", after),
			{name: "no Content-Type is 415" + suffix, method: "PUT", url: url, headers: map[string]string{"Content-Type": ""}, body: good,
				status: 415, code: "unsupported_media_type", check: after},
			{name: "a user may not set them" + suffix, as: "user", method: "PUT", url: url, body: sa(map[string]any{"client_email": "user@evil.example"}),
				status: 403, code: "forbidden", check: after},
			{name: "a user may not read them" + suffix, as: "user", url: url, status: 403, code: "forbidden", check: after},
		}
	}
	setOnce := sa(map[string]any{"client_email": "first@edgebase-test.iam.gserviceaccount.com", "project_id": "fcm-first"})
	firstSet := credsAre(`{"configured":true,"fcmProjectId":"fcm-first","clientEmail":"first@edgebase-test.iam.gserviceaccount.com","updatedAt":"{firstAt}"}`)
	rows := []scenario{
		{name: "none at first", url: url, status: 200, json: `{"configured":false}`, check: func(t *testing.T, e *env, v vars, r reply) {
			var m map[string]any
			mustDecode(t, r.Body, &m)
			for _, k := range []string{"fcmProjectId", "clientEmail"} {
				if m[k] != nil && m[k] != "" {
					t.Errorf("unset credentials show %s = %v", k, m[k])
				}
			}
		}},
	}
	rows = append(rows, badKeys(notSet, "")...)
	rows = append(rows,
		// API.md, General: "wrong types are a 400 naming the field".
		bad("private_key a number", sa(map[string]any{"private_key": 5}), "private_key", notSet),
		bad("type a number", sa(map[string]any{"type": 1}), "type", notSet),
		bad("client_email an object", sa(map[string]any{"client_email": map[string]any{}}), "client_email", notSet),
	)
	rows = append(rows,
		scenario{name: "set", method: "PUT", url: url, body: setOnce, status: 200,
			json: `{"configured":true,"fcmProjectId":"fcm-first","clientEmail":"first@edgebase-test.iam.gserviceaccount.com"}`,
			check: pushChecks(hasRevision, isTime("updatedAt"), keep("updatedAt", "firstAt"), func(t *testing.T, e *env, v vars, r reply) {
				e.extra = vars{"firstAt": v["firstAt"]}
			}, noKeyInAnswer, firstSet)},
		scenario{name: "GET after PUT", url: url, status: 200,
			json:  `{"configured":true,"fcmProjectId":"fcm-first","clientEmail":"first@edgebase-test.iam.gserviceaccount.com","updatedAt":"{firstAt}"}`,
			check: noKeyInAnswer},
		scenario{name: "the key is stored sealed", url: url, status: 200, check: func(t *testing.T, e *env, v vars, r reply) {
			d, err := e.c.Nodes[0].Node.Store.Get(e.p.ID + "/_fcm")
			if err != nil || d == nil {
				t.Fatalf("stored credentials: %v, %v", d, err)
			}
			keyBody := strings.Split(pushRSAPEM, "\n")[1]
			if s := string(d.Data); strings.Contains(s, "PRIVATE KEY") || strings.Contains(s, keyBody) || strings.Contains(s, "private_key") {
				t.Errorf("the stored credentials show the key in clear: %.300s", s)
			}
		}},
		scenario{name: "not readable through /api/db", url: docQuery("_fcm"), status: 400, check: noKeyInAnswer},
	)
	rows = append(rows, badKeys(firstSet, " once set")...)
	rows = append(rows,
		scenario{name: "replace with a PKCS#1 key", method: "PUT", url: url,
			body:   sa(map[string]any{"private_key": pushPKCS1PEM, "client_email": "second@edgebase-test.iam.gserviceaccount.com", "token_uri": deleted}),
			status: 200, json: `{"configured":true,"clientEmail":"second@edgebase-test.iam.gserviceaccount.com","fcmProjectId":"edgebase-test"}`,
			check: pushChecks(noKeyInAnswer, credsAre(`{"configured":true,"clientEmail":"second@edgebase-test.iam.gserviceaccount.com"}`))},
		scenario{name: "POST is 405", method: "POST", url: url, body: good, status: 405, code: "method_not_allowed",
			check: pushChecks(allowIs("GET, PUT"), credsAre(`{"clientEmail":"second@edgebase-test.iam.gserviceaccount.com"}`))},
		scenario{name: "DELETE is 405", method: "DELETE", url: url, status: 405, code: "method_not_allowed",
			check: pushChecks(allowIs("GET, PUT"), credsAre(`{"configured":true}`))},
		// Last, as it is accepted today: an EC key parses as PKCS#8 but FCM
		// (Google OAuth, RS256) needs an RSA key, so every send would fail.
		bad("an EC key", sa(map[string]any{"private_key": pushECPEM, "client_email": "ec@edgebase-test.iam.gserviceaccount.com"}), "private_key",
			credsAre(`{"configured":true,"clientEmail":"second@edgebase-test.iam.gserviceaccount.com"}`)),
	)
	for i := range rows {
		rows[i].check = pushChecks(noKeyInAnswer, orNone(rows[i].check))
	}
	e.runSeq(t, pushRows(rows))
}

func orNone(c pushCheck) pushCheck {
	if c == nil {
		return func(*testing.T, *env, vars, reply) {}
	}
	return c
}

// pushRoute is one push route with a valid request for the owner.
type pushRoute struct {
	method, url, body string
	allow             string
	ownerOnly         bool
}

// pushRoutes are every push route, with bodies that would change state if a
// refused request got through: {keep} is a device token and {kept} a topic
// of the owner, {skeep} an owner's schedule.
func pushRoutes(t testing.TB) []pushRoute {
	return []pushRoute{
		{method: "POST", url: "/api/notifications/toggle-push", body: `{"projectId":"{pid}","enabled":false}`, allow: "GET, POST", ownerOnly: true},
		{method: "GET", url: "/api/notifications/toggle-push", allow: "GET, POST", ownerOnly: true},
		{method: "GET", url: "/api/notifications/project-topics", allow: "GET", ownerOnly: true},
		{method: "POST", url: "/api/notifications/register", body: registerBodyFor("new-{rand}", "ios"), allow: "POST"},
		{method: "POST", url: "/api/notifications/unregister", body: `{"token":"{keep}"}`, allow: "POST"},
		{method: "GET", url: "/api/notifications/devices", allow: "GET"},
		{method: "POST", url: "/api/notifications/subscribe", body: `{"topic":"new-{rand}"}`, allow: "POST"},
		{method: "POST", url: "/api/notifications/unsubscribe", body: `{"topic":"{kept}"}`, allow: "POST"},
		{method: "GET", url: "/api/notifications/topics", allow: "GET"},
		{method: "POST", url: "/api/notifications/send-to-project/{pid}", body: sendBodyFor(""), allow: "POST", ownerOnly: true},
		{method: "POST", url: "/api/notifications/send-to-user/{uid}", body: sendBodyFor(""), allow: "POST", ownerOnly: true},
		{method: "POST", url: "/api/notifications/send-to-topic", body: sendBodyFor(`"topic":"{kept}"`), allow: "POST", ownerOnly: true},
		{method: "POST", url: "/api/notifications/schedule", body: sendBodyFor(`"sendAt":"{in1h}"`), allow: "POST"},
		{method: "GET", url: "/api/notifications/scheduled", allow: "GET"},
		{method: "DELETE", url: "/api/notifications/scheduled/{skeep}", allow: "DELETE"},
		{method: "GET", url: "/api/notifications/history", allow: "GET"},
		{method: "GET", url: "/api/notifications/preferences", allow: "GET, PUT"},
		{method: "PUT", url: "/api/notifications/preferences", body: `{"pushEnabled":false,"timezone":"Europe/Paris"}`, allow: "GET, PUT"},
		{method: "GET", url: "/api/notifications/fcm-credentials", allow: "GET, PUT", ownerOnly: true},
		{method: "PUT", url: "/api/notifications/fcm-credentials", body: serviceAccount(t, nil), allow: "GET, PUT", ownerOnly: true},
	}
}

func (r pushRoute) name() string {
	return r.method + " " + strings.TrimPrefix(r.url, "/api/notifications/")
}

// pushStateKept checks that nothing changed in a project where only refused
// requests were made: the owner still has exactly device {keep}, topic
// {kept}, schedule {skeep} (still scheduled), default preferences, push on,
// no credentials and an empty history; the users have nothing.
func pushStateKept(t *testing.T, e *env) {
	t.Helper()
	v := e.vars()
	r := reply{}
	devicesAre("owner", "{keep}")(t, e, v, r)
	topicsAre("owner", "{kept}")(t, e, v, r)
	prefsAre("owner", defaultPrefs)(t, e, v, r)
	scheduleStatus("skeep", "scheduled")(t, e, v, r)
	scheduleCount("owner", 1)(t, e, v, r)
	historyLen(0)(t, e, v, r)
	pushOn(true)(t, e, v, r)
	credsAre(`{"configured":false}`)(t, e, v, r)
	for _, who := range []string{"user", "other"} {
		devicesAre(who)(t, e, v, r)
		topicsAre(who)(t, e, v, r)
		prefsAre(who, defaultPrefs)(t, e, v, r)
		scheduleCount(who, 0)(t, e, v, r)
	}
}

// newPushStateEnv starts a node whose owner holds device {keep}, topic
// {kept} and schedule {skeep}, and another project ({pid2}, {key2},
// {owner2}, {user2}); a logged-out token is {revoked}.
func newPushStateEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	p2 := e.c.CreateProject(0)
	u2 := e.mustRegister(t, p2, "")
	gone := e.mustRegister(t, e.p, "")
	e.mustLogout(t, e.p, gone.Token)
	e.extra = vars{"pid2": p2.ID, "key2": p2.APIKey, "owner2": p2.OwnerToken, "user2": u2.Token,
		"keep": "keep-device", "kept": "kept-topic", "revoked": gone.Token}
	v := e.vars()
	pushTimeVars(v)
	reg("owner", "{keep}", "android")(t, e, v)
	subscribe("owner", "{kept}")(t, e, v)
	ownerSchedule("skeep", `{"title":"kept","sendAt":"{in1h}"}`)(t, e, v)
	e.extra["skeep"] = v["skeep"]
	return e
}

// TestPushRoles: a user token on every owner-only route is 403 forbidden and
// changes nothing.
func TestPushRoles(t *testing.T) {
	t.Parallel()
	e := newPushStateEnv(t)
	var rows []scenario
	for _, rt := range pushRoutes(t) {
		if !rt.ownerOnly {
			continue
		}
		for _, who := range []string{"user", "other"} {
			rows = append(rows, scenario{name: who + " " + rt.name(), as: who, method: rt.method, url: rt.url, body: rt.body,
				status: 403, code: "forbidden", check: noKeyInAnswer})
			if rt.body != "" {
				// The role is checked before the body is looked at.
				rows = append(rows, scenario{name: who + " " + rt.name() + " with a bad body", as: who, method: rt.method, url: rt.url,
					body: `{"title":`, status: 403, code: "forbidden"})
			}
		}
	}
	rows = append(rows,
		scenario{name: "user send-to-user to themselves", as: "user", method: "POST", url: "/api/notifications/send-to-user/{uid}",
			body: sendBodyFor(""), status: 403, code: "forbidden"},
		scenario{name: "user send-to-project of another project", as: "user", method: "POST", url: "/api/notifications/send-to-project/{pid2}",
			body: sendBodyFor(""), status: 403, code: "forbidden"},
	)
	t.Run("rows", func(t *testing.T) { e.run(t, pushRows(rows)) })
	t.Run("nothing changed", func(t *testing.T) { pushStateKept(t, e) })
}

// TestPushAuth: every push route refuses requests without the right key and
// token, with the wrong method, and with a bad body, and changes nothing.
func TestPushAuth(t *testing.T) {
	t.Parallel()
	e := newPushStateEnv(t)
	var rows []scenario
	for _, rt := range pushRoutes(t) {
		n := rt.name()
		row := func(name, as string, headers map[string]string, status int, code string) scenario {
			return scenario{name: n + ": " + name, as: as, method: rt.method, url: rt.url, body: rt.body, headers: headers,
				status: status, code: code, check: noKeyInAnswer}
		}
		rows = append(rows,
			row("no X-API-Key", "owner", map[string]string{"X-API-Key": ""}, 401, "missing_api_key"),
			row("no X-Project-Id", "owner", map[string]string{"X-Project-Id": ""}, 401, "missing_api_key"),
			row("no project headers", "owner", map[string]string{"X-API-Key": "", "X-Project-Id": ""}, 401, "missing_api_key"),
			row("wrong key", "owner", map[string]string{"X-API-Key": "eb_wrong-key"}, 401, "invalid_api_key"),
			row("another project's key", "owner", map[string]string{"X-API-Key": "{key2}"}, 401, "invalid_api_key"),
			row("unknown project", "owner", map[string]string{"X-Project-Id": "nosuchproject"}, 401, "invalid_api_key"),
			row("no bearer", "none", nil, 401, "missing_token"),
			row("empty bearer", "none", map[string]string{"Authorization": "Bearer "}, 401, "missing_token"),
			row("basic auth", "none", map[string]string{"Authorization": "Basic b3duZXI6cGFzcw=="}, 401, "missing_token"),
			row("bogus bearer", "none", map[string]string{"Authorization": "Bearer bogus"}, 401, "invalid_token"),
			row("logged-out bearer", "none", map[string]string{"Authorization": "Bearer {revoked}"}, 401, "invalid_token"),
			row("another project's headers with our owner token", "owner", map[string]string{"X-Project-Id": "{pid2}", "X-API-Key": "{key2}"}, 403, "project_mismatch"),
			row("another project's headers with our user token", "user", map[string]string{"X-Project-Id": "{pid2}", "X-API-Key": "{key2}"}, 403, "project_mismatch"),
			row("our headers with another project's owner token", "none", map[string]string{"Authorization": "Bearer {owner2}"}, 403, "project_mismatch"),
			row("our headers with another project's user token", "none", map[string]string{"Authorization": "Bearer {user2}"}, 403, "project_mismatch"),
		)
		for _, m := range []string{"GET", "POST", "PUT", "DELETE", "PATCH"} {
			if strings.Contains(rt.allow, m) {
				continue
			}
			body := ""
			if m != "GET" && m != "DELETE" {
				body = rt.body
				if body == "" {
					body = "{}"
				}
			}
			rows = append(rows, scenario{name: n + ": " + m + " is 405", method: m, url: rt.url, body: body,
				status: 405, code: "method_not_allowed", check: allowIs(rt.allow)})
		}
		if rt.body == "" {
			continue
		}
		bodyRow := func(name string, headers map[string]string, body string, status int, code string) scenario {
			if code == "invalid_json" && rt.url == "/api/notifications/fcm-credentials" && name != "malformed JSON" {
				// One row shows that this route answers invalid_argument
				// to malformed JSON; the others only require the 400.
				code = ""
			}
			return scenario{name: n + ": " + name, method: rt.method, url: rt.url, headers: headers, body: body, status: status, code: code,
				check: noKeyInAnswer}
		}
		rows = append(rows,
			bodyRow("no Content-Type is 415", map[string]string{"Content-Type": ""}, rt.body, 415, "unsupported_media_type"),
			bodyRow("text/plain is 415", map[string]string{"Content-Type": "text/plain"}, rt.body, 415, "unsupported_media_type"),
			bodyRow("form is 415", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, rt.body, 415, "unsupported_media_type"),
			bodyRow("charset is fine but malformed JSON is 400", map[string]string{"Content-Type": "application/json; charset=utf-8"},
				rt.body[:len(rt.body)-1], 400, "invalid_json"),
			bodyRow("malformed JSON", nil, `{"a":`, 400, "invalid_json"),
			bodyRow("trailing garbage", nil, rt.body+`x`, 400, "invalid_json"),
			bodyRow("invalid UTF-8", nil, "{\"title\":\"\xff\"}", 400, "invalid_json"),
			bodyRow("array body", nil, `[`+rt.body+`]`, 400, "invalid_argument"),
			bodyRow("number body", nil, `42`, 400, "invalid_argument"),
			bodyRow("empty body", map[string]string{"Content-Type": "application/json"}, "", 400, "invalid_argument"),
			bodyRow("blank body", nil, "  \n", 400, "invalid_argument"),
			bodyRow("deeply nested body", nil, strings.Repeat("[", 100)+strings.Repeat("]", 100), 400, "invalid_argument"),
		)
	}
	t.Run("rows", func(t *testing.T) { e.run(t, pushRows(rows)) })
	t.Run("nothing changed", func(t *testing.T) { pushStateKept(t, e) })
}

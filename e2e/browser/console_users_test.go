package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/edgebase/edgebase/internal/proctest"
	"github.com/edgebase/edgebase/node/nodetest"
)

// usersTry is one request to n1 whose status the caller judges (no
// failure on an unexpected status): status and body.
func usersTry(t *testing.T, e *consoleEnv, method, path string, headers map[string]string, body any) (int, []byte) {
	t.Helper()
	r, err := proctest.DoJSON(e.ctx, http.DefaultClient, 20*time.Second, method, e.voters[0].url+path, headers, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r.Status, r.Body
}

// usersBearer is the project's headers with another session.
func usersBearer(e *consoleEnv, token string) map[string]string {
	h := e.keys()
	h["Authorization"] = "Bearer " + token
	return h
}

// usersErrCode is the code of an API error body ("" when there is none).
func usersErrCode(body []byte) string {
	var out struct{ Error struct{ Code string } }
	_ = json.Unmarshal(body, &out)
	return out.Error.Code
}

// usersClick clicks the element the CSS selector names with the mouse, in
// the middle of the window (clear of the toasts), and checks that the click
// reached it.
func usersClick(t *testing.T, p *page, what, selector string) {
	t.Helper()
	p.waitFor(what, fmt.Sprintf(`(() => { const el = document.querySelector(%s); return !!(el && el.getClientRects().length && !el.disabled); })()`, js(selector)), 15*time.Second)
	// A toast of an earlier action may lie over it for a few seconds.
	p.waitFor(what+" (not covered)", fmt.Sprintf(`(() => { const el = document.querySelector(%s); el.scrollIntoView({block: 'center'});
		const r = el.getBoundingClientRect(); const there = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
		return !!there && el.contains(there); })()`, js(selector)), 15*time.Second)
	var at struct{ X, Y float64 }
	p.awaitJSON("aim at "+selector, fmt.Sprintf(`const el = document.querySelector(%s);
		window.__huClicked = false; el.addEventListener('click', () => { window.__huClicked = true; }, {once: true, capture: true});
		const r = el.getBoundingClientRect(); JSON.stringify({x: r.left + r.width / 2, y: r.top + r.height / 2})`, js(selector)), &at)
	p.do(what, chromedp.MouseClickXY(at.X, at.Y))
	if !p.eval(`window.__huClicked === true`) {
		t.Fatalf("%s: the click at (%.0f, %.0f) did not reach %s (there: %s)\n%s", what, at.X, at.Y, selector,
			p.awaitString("the element there", fmt.Sprintf(`(() => { const e = document.elementFromPoint(%f, %f); return e ? e.outerHTML.slice(0, 200) : 'nothing'; })()`, at.X, at.Y)), p.state())
	}
}

// usersSelect sets a <select> to value as a user choosing it does (the
// change event fires).
func usersSelect(t *testing.T, p *page, selector, value string) {
	t.Helper()
	p.await("choose "+value+" in "+selector, fmt.Sprintf(`const s = document.querySelector(%s); s.focus(); s.value = %s;
		if (s.value !== %[2]s) throw new Error('no option ' + %[2]s); s.dispatchEvent(new Event('change', {bubbles: true})); true`, js(selector), js(value)))
}

// consoleUsers walks the users page: a search by email prefix, an account's
// sessions (one revoked in the UI ends on the server), its role changed and
// back (the refusal of the owner's own role shown), disabled and enabled,
// the owner's TOTP status, audit events, and a deletion confirmed inline.
func consoleUsers(t *testing.T, e *consoleEnv) {
	p := e.tab
	keys := e.keys()
	owner := e.proj.Headers()

	// Two accounts through the API; the first signs in twice more, with
	// two user agents (three sessions in all).
	type account struct {
		Token string
		User  struct{ ID, Email, Role string }
	}
	const annEmail, bobEmail, pass = "hu-ann@example.com", "hu-bob@example.com", "users page password 2024!"
	var ann, bob account
	e.call(t, http.MethodPost, "/api/auth", keys, map[string]string{"action": "register", "email": annEmail, "password": pass, "name": "Ann HU"}, http.StatusCreated, &ann)
	e.call(t, http.MethodPost, "/api/auth", keys, map[string]string{"action": "register", "email": bobEmail, "password": pass, "name": "Bob HU"}, http.StatusCreated, &bob)
	login := func(agent string) string {
		t.Helper()
		h := e.keys()
		h["User-Agent"] = agent
		var out account
		e.call(t, http.MethodPost, "/api/auth", h, map[string]string{"action": "login", "email": annEmail, "password": pass}, http.StatusOK, &out)
		if out.Token == "" {
			t.Fatalf("login with %s: no token", agent)
		}
		return out.Token
	}
	tokenA, tokenB := login("HU-Agent-Alpha/1.0"), login("HU-Agent-Beta/2.0")
	me := func(token string) int {
		st, _ := usersTry(t, e, http.MethodPost, "/api/auth", usersBearer(e, token), map[string]string{"action": "me"})
		return st
	}

	// Search by an email prefix: both accounts, nobody else.
	e.open(t, p, "users")
	e.typeInto(t, p, "#users-query", "hu-")
	e.key(t, p, "Enter")
	rowsAre := func(ids ...string) string {
		b, _ := json.Marshal(ids)
		return fmt.Sprintf(`JSON.stringify([...document.querySelectorAll('#users-results tbody tr[data-id]')].map(r => r.dataset.id).sort()) === %s`, js(string(b)))
	}
	want := []string{ann.User.ID, bob.User.ID}
	if want[0] > want[1] {
		want[0], want[1] = want[1], want[0]
	}
	p.waitFor("the two accounts found by prefix", rowsAre(want...), 15*time.Second)
	if !p.eval(fmt.Sprintf(`document.querySelector('#users-results').textContent.includes(%s) && location.hash.includes('q=hu-')`, js(annEmail))) {
		t.Fatalf("the results do not show %s, or the route lost the query\n%s", annEmail, p.state())
	}

	// Open Ann: her fields and her three sessions.
	usersClick(t, p, "open Ann", fmt.Sprintf(`.users-open[data-id=%q]`, ann.User.ID))
	p.waitFor("Ann's detail", fmt.Sprintf(`document.getElementById('users-detail-h').textContent === %s && location.hash.includes(%s)`, js(annEmail), js("id="+ann.User.ID)), 15*time.Second)
	sessionRows := `[...document.querySelectorAll('#users-sessions tbody tr[data-session]')]`
	p.waitFor("Ann's three sessions with their agents", `(() => { const r = `+sessionRows+`; return r.length === 3 &&
		r.some(x => x.textContent.includes('HU-Agent-Alpha/1.0')) && r.some(x => x.textContent.includes('HU-Agent-Beta/2.0')); })()`, 15*time.Second)
	p.await("scroll to the top", `window.scrollTo(0, 0); true`)
	if !p.eval(fmt.Sprintf(`document.getElementById('users-push-link').getAttribute('href') === %s`, js("#/push?user="+ann.User.ID))) {
		t.Errorf("the account's link to its devices is not #/push?user=%s\n%s", ann.User.ID, p.state())
	}
	e.shoot(t, p, "users")
	e.checkA11y(t, p)

	// Revoke the Alpha session in the UI: that token is refused, Beta's is not.
	p.await("click Revoke on the Alpha session", sessionRows+`.find(x => x.textContent.includes('HU-Agent-Alpha/1.0')).querySelector('button.users-revoke').click(); true`)
	p.waitFor("the Alpha session gone from the list", `(() => { const r = `+sessionRows+`; return r.length === 2 && !r.some(x => x.textContent.includes('HU-Agent-Alpha')); })()`, 15*time.Second)
	nodetest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		if st := me(tokenA); st != http.StatusUnauthorized {
			return fmt.Errorf("the revoked session's me: %d, want 401", st)
		}
		return nil
	})
	if st := me(tokenB); st != http.StatusOK {
		t.Fatalf("the Beta session answers %d after revoking Alpha's, want 200", st)
	}

	// The role: owner (by keyboard alone: Tab to Save, Enter), then back.
	roleIs := func(id, want string) {
		t.Helper()
		nodetest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
			var out struct{ User struct{ Role string } }
			st, body := usersTry(t, e, http.MethodGet, "/api/auth/users/"+id, owner, nil)
			if st != http.StatusOK {
				return fmt.Errorf("GET user %s: %d %s", id, st, body)
			}
			if err := json.Unmarshal(body, &out); err != nil {
				return err
			}
			if out.User.Role != want {
				return fmt.Errorf("role of %s is %q, want %q", id, out.User.Role, want)
			}
			return nil
		})
	}
	usersSelect(t, p, "#users-role", "owner")
	e.tabTo(t, p, "#users-save-role")
	e.key(t, p, "Enter")
	p.waitFor("the role shown as owner", `(document.querySelector('#users-detail [data-field=role]') || {}).textContent === 'owner'`, 15*time.Second)
	roleIs(ann.User.ID, "owner")
	usersSelect(t, p, "#users-role", "user")
	usersClick(t, p, "save the role user", "#users-save-role")
	p.waitFor("the role shown as user", `(document.querySelector('#users-detail [data-field=role]') || {}).textContent === 'user'`, 15*time.Second)
	roleIs(ann.User.ID, "user")

	// Disable: her sign-in is refused with account_disabled; enable again.
	usersClick(t, p, "disable Ann", "#users-toggle")
	p.waitFor("Ann shown disabled", `document.getElementById('users-toggle').textContent === 'Enable account' &&
		document.querySelector('#users-detail [data-field=disabled]').textContent === 'yes'`, 15*time.Second)
	loginStatus := func() (int, string) {
		st, body := usersTry(t, e, http.MethodPost, "/api/auth", keys, map[string]string{"action": "login", "email": annEmail, "password": pass})
		return st, usersErrCode(body)
	}
	if st, code := loginStatus(); st != http.StatusForbidden || code != "account_disabled" {
		t.Fatalf("login of the disabled account: %d %s, want 403 account_disabled", st, code)
	}
	nodetest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		if st := me(tokenB); st != http.StatusUnauthorized {
			return fmt.Errorf("a session of the disabled account answers %d, want 401", st)
		}
		return nil
	})
	usersClick(t, p, "enable Ann", "#users-toggle")
	p.waitFor("Ann shown enabled", `document.getElementById('users-toggle').textContent === 'Disable account'`, 15*time.Second)
	if st, code := loginStatus(); st != http.StatusOK {
		t.Fatalf("login of the enabled account: %d %s, want 200", st, code)
	}

	// Her audit events show the role changes and the disabling; so does the
	// project's log filtered by type.
	p.waitFor("Ann's audit events", `(() => { const t = [...document.querySelectorAll('#users-user-audit tbody tr')].map(r => r.textContent).join('\n');
		return t.includes('role-changed') && t.includes('account-disabled') && t.includes('account-enabled'); })()`, 15*time.Second)
	usersSelect(t, p, "#users-audit-type", "role-changed")
	p.waitFor("the project's role-changed events", fmt.Sprintf(`(() => { const all = [...document.querySelectorAll('#users-audit tbody tr')];
		const r = all.filter(x => x.textContent.includes(%s));
		return all.length > 0 && all.every(x => x.textContent.includes('role-changed')) && r.length === 2 && r[0].textContent.includes('role=user') && r[1].textContent.includes('role=owner'); })()`, js(ann.User.ID)), 15*time.Second)

	// The owner: TOTP on, and their own role cannot change (the server's
	// refusal is shown).
	e.typeInto(t, p, "#users-query", e.ownerEmail)
	e.key(t, p, "Enter")
	p.waitFor("the owner's row", rowsAre(e.proj.OwnerID), 15*time.Second)
	if got := p.awaitString("the owner's TOTP cell", fmt.Sprintf(`document.querySelector('#users-results tr[data-id=%q] td[data-label=TOTP]').textContent`, e.proj.OwnerID)); got != "on" {
		t.Fatalf("the owner's TOTP shows %q, want on\n%s", got, p.state())
	}
	usersClick(t, p, "open the owner", fmt.Sprintf(`.users-open[data-id=%q]`, e.proj.OwnerID))
	p.waitFor("the owner's detail", fmt.Sprintf(`document.getElementById('users-detail-h').textContent === %s &&
		document.querySelector('#users-detail [data-field=totpEnabled]').textContent === 'yes'`, js(e.ownerEmail)), 15*time.Second)
	usersSelect(t, p, "#users-role", "user")
	usersClick(t, p, "demote oneself", "#users-save-role")
	msg := p.waitFor("the own_role refusal", `(() => { const e = document.querySelector('#users-detail-msg [role=alert]'); return e && e.textContent.includes('own_role') && e.textContent; })()`, 15*time.Second)
	t.Logf("changing one's own role shows: %s", msg)
	roleIs(e.proj.OwnerID, "owner")

	// Bob's role goes back and forth through the API 22 times: his audit
	// events then fill more than one page of 20.
	for i := 0; i < 22; i++ {
		role := map[bool]string{true: "owner", false: "user"}[i%2 == 0]
		body := map[string]string{"action": "set-role", "userId": bob.User.ID, "role": role}
		// A loaded machine may time a write out (503, maybe applied): again.
		nodetest.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
			if st, out := usersTry(t, e, http.MethodPost, "/api/auth", owner, body); st != http.StatusOK {
				return fmt.Errorf("set-role %s: %d %s", role, st, out)
			}
			return nil
		})
	}
	var bobAudit struct{ Events []struct{ ID string } }
	e.call(t, http.MethodGet, "/api/auth/audit?limit=100&userId="+bob.User.ID, owner, nil, http.StatusOK, &bobAudit)
	if n := len(bobAudit.Events); n <= 20 || n > 40 {
		t.Fatalf("Bob has %d audit events, want 21..40 (more than a page of 20, at most two)", n)
	}

	// Bob from the route: his events by pages of 20, Load more brings the
	// rest, then there is no more.
	e.open(t, p, "users?"+url.Values{"q": {"hu-bob"}, "id": {bob.User.ID}}.Encode())
	p.waitFor("Bob's detail from the route", fmt.Sprintf(`(document.getElementById('users-detail-h') || {}).textContent === %s`, js(bobEmail)), 15*time.Second)
	p.waitFor("Bob in the results from the route", rowsAre(bob.User.ID), 15*time.Second)
	auditRows := `document.querySelectorAll('#users-user-audit tbody tr').length`
	p.waitFor("the first page of Bob's events", auditRows+` === 20 && !document.querySelector('#users-detail .users-more').hidden`, 15*time.Second)
	usersClick(t, p, "load more of Bob's events", "#users-detail .users-more")
	p.waitFor("all of Bob's events", fmt.Sprintf(`%s === %d && document.querySelector('#users-detail .users-more').hidden`, auditRows, len(bobAudit.Events)), 15*time.Second)

	// Delete Bob, confirmed inline; Escape and Cancel first leave him be.
	usersClick(t, p, "ask to delete Bob", "#users-delete")
	p.waitFor("the inline confirmation, focused", `document.activeElement && document.activeElement.id === 'users-delete-confirm'`, 5*time.Second)
	e.key(t, p, "Escape")
	p.waitFor("the confirmation closed by Escape", `document.querySelector('.users-confirm').hidden && document.activeElement.id === 'users-delete'`, 5*time.Second)
	usersClick(t, p, "ask to delete Bob once more", "#users-delete")
	usersClick(t, p, "cancel", "#users-delete-cancel")
	p.waitFor("the confirmation closed", `document.querySelector('.users-confirm').hidden && document.activeElement.id === 'users-delete'`, 5*time.Second)
	if st, _ := usersTry(t, e, http.MethodGet, "/api/auth/users/"+bob.User.ID, owner, nil); st != http.StatusOK {
		t.Fatalf("Bob is gone (%d) after Cancel", st)
	}
	usersClick(t, p, "ask to delete Bob again", "#users-delete")
	usersClick(t, p, "confirm the deletion", "#users-delete-confirm")
	p.waitFor("Bob gone from the page", `document.getElementById('users-detail').hidden && !document.querySelector('#users-results tbody tr[data-id]')`, 15*time.Second)
	nodetest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		if st, body := usersTry(t, e, http.MethodGet, "/api/auth/users/"+bob.User.ID, owner, nil); st != http.StatusNotFound {
			return fmt.Errorf("GET the deleted user: %d %s, want 404", st, body)
		}
		return nil
	})
}

// consolePush walks the push page: FCM credentials (a refused token_uri,
// then the fcmfake service account through the file input), the push
// switch by keyboard, a user's device and topic, the project's topics, a
// security notification sent to that user and delivered (history and the
// fake FCM server), a schedule an hour ahead cancelled in the UI.
func consolePush(t *testing.T, e *consoleEnv) {
	p := e.tab
	owner := e.proj.Headers()
	const fcmProject = "hu-console-fcm"
	sa := e.fcm.ServiceAccountJSON(fcmProject)

	e.open(t, p, "push")
	p.waitFor("the credentials status", `!!document.querySelector('#push-creds-state[data-configured]')`, 15*time.Second)

	// Bad input: a service account whose token_uri is elsewhere is refused,
	// and the page says why.
	var bad map[string]any
	if err := json.Unmarshal(sa, &bad); err != nil {
		t.Fatal(err)
	}
	bad["token_uri"] = "http://127.0.0.1:1/token"
	badJSON, err := json.Marshal(bad)
	if err != nil {
		t.Fatal(err)
	}
	p.await("paste the bad service account", fmt.Sprintf(`const t = document.getElementById('push-creds'); t.value = %s; t.dispatchEvent(new Event('input')); true`, js(string(badJSON))))
	usersClick(t, p, "save the bad credentials", "#push-creds-save")
	msg := p.waitFor("the token_uri refusal", `(() => { const e = document.querySelector('#push-status [role=alert]'); return e && e.textContent.includes('token_uri') && e.textContent; })()`, 15*time.Second)
	t.Logf("a foreign token_uri shows: %s", msg)

	// The fcmfake service account, through the file input (FileReader).
	file := filepath.Join(t.TempDir(), "service-account.json")
	if err := os.WriteFile(file, sa, 0o600); err != nil {
		t.Fatal(err)
	}
	p.do("choose the service account file", chromedp.SetUploadFiles(chromedp.CSS("#push-creds-file"), []string{file}))
	p.waitFor("the file read into the textarea", fmt.Sprintf(`document.getElementById('push-creds').value === %s`, js(string(sa))), 10*time.Second)
	usersClick(t, p, "save the credentials", "#push-creds-save")
	p.waitFor("the credentials configured", fmt.Sprintf(`document.querySelector('#push-creds-state').dataset.configured === 'true' &&
		document.getElementById('push-fcm-project').textContent === %s`, js(fcmProject)), 15*time.Second)
	var creds struct {
		Configured   bool
		FCMProjectID string `json:"fcmProjectId"`
	}
	e.call(t, http.MethodGet, "/api/notifications/fcm-credentials", owner, nil, http.StatusOK, &creds)
	if !creds.Configured || creds.FCMProjectID != fcmProject {
		t.Fatalf("the server's FCM credentials: %+v, want configured for %s", creds, fcmProject)
	}

	// Push on, by keyboard alone.
	p.waitFor("the switch read", `['on', 'off'].includes(document.getElementById('push-switch').dataset.state)`, 15*time.Second)
	if p.eval(`document.getElementById('push-switch').dataset.state === 'on'`) {
		usersClick(t, p, "turn push off first", "#push-toggle")
		p.waitFor("push off", `document.getElementById('push-switch').dataset.state === 'off'`, 15*time.Second)
	}
	e.tabTo(t, p, "#push-toggle")
	e.key(t, p, "Enter")
	p.waitFor("push on", `document.getElementById('push-switch').dataset.state === 'on'`, 15*time.Second)
	var sw struct{ PushEnabled bool }
	e.call(t, http.MethodGet, "/api/notifications/toggle-push", owner, nil, http.StatusOK, &sw)
	if !sw.PushEnabled {
		t.Fatalf("the server says push is off after the page turned it on")
	}

	// A user registers a device and follows a topic through the API.
	const userEmail, topic = "hu-push@example.com", "hu-news"
	deviceToken := "hu-device-" + strings.Repeat("0123456789", 4)
	var user struct {
		Token string
		User  struct{ ID string }
	}
	e.call(t, http.MethodPost, "/api/auth", e.keys(), map[string]string{"action": "register", "email": userEmail, "password": "push page password 2024!"}, http.StatusCreated, &user)
	ub := usersBearer(e, user.Token)
	e.call(t, http.MethodPost, "/api/notifications/register", ub, map[string]any{"token": deviceToken, "deviceInfo": map[string]string{"platform": "android"}}, http.StatusCreated, nil)
	e.call(t, http.MethodPost, "/api/notifications/subscribe", ub, map[string]string{"topic": topic}, http.StatusOK, nil)

	// Her device and topic, found by her email; the topic's one subscriber.
	e.typeInto(t, p, "#push-user", userEmail)
	e.key(t, p, "Enter")
	p.waitFor("the user's device and topic", fmt.Sprintf(`(() => { const v = document.getElementById('push-user-devices');
		return v.dataset.user === %s && v.querySelector('tbody').textContent.includes('android') &&
			v.querySelector('code[title]') && v.querySelector('code[title]').title === %s && v.querySelector('.push-user-topics').textContent === %s; })()`,
		js(user.User.ID), js(deviceToken), js(topic)), 15*time.Second)
	usersClick(t, p, "refresh the topics", "#push-topics-refresh")
	p.waitFor("the topic with one subscriber", fmt.Sprintf(`(() => { const r = document.querySelector('#push-project-topics tr[data-topic=%q]'); return !!r && r.cells[1].textContent === '1'; })()`, topic), 15*time.Second)

	usersClick(t, p, "compose to the topic", fmt.Sprintf(`#push-project-topics tr[data-topic=%q] .push-compose-topic`, topic))
	p.waitFor("the form pointed at the topic", fmt.Sprintf(`document.getElementById('push-audience').value === 'topic' &&
		document.getElementById('push-audience-value').value === %s && document.activeElement.id === 'push-title'`, js(topic)), 5*time.Second)

	// Bad input: data whose value is not a string is refused on the page.
	e.typeInto(t, p, "#push-title", "Security notice")
	e.typeInto(t, p, "#push-data", `{"n": 1}`)
	usersClick(t, p, "send with bad data", "#push-send")
	p.waitFor("the data refusal", `(() => { const e = document.querySelector('#push-compose-msg [role=alert]'); return e && e.textContent.includes('data.n') && document.getElementById('push-data').getAttribute('aria-invalid') === 'true'; })()`, 5*time.Second)

	// Send to the user, category security.
	e.typeInto(t, p, "#push-body", "A new sign-in to your account.")
	e.typeInto(t, p, "#push-data", `{"screen": "security"}`)
	usersSelect(t, p, "#push-category", "security")
	usersSelect(t, p, "#push-audience", "user")
	e.typeInto(t, p, "#push-audience-value", user.User.ID)
	usersClick(t, p, "send now", "#push-send")
	nid := p.waitFor("the queued notification", `(() => { const r = document.getElementById('push-result'); return r.textContent.includes('1 device targeted') && r.dataset.notification; })()`, 15*time.Second)

	// Delivered: the history row (refreshed with its button) and FCM.
	p.waitFor("the history row with delivered 1", fmt.Sprintf(`(() => {
		const r = document.querySelector('#push-history-list tr[data-id=%q]');
		if (r && r.dataset.delivered === '1') return true;
		if (!window.__huRefresh || Date.now() - window.__huRefresh > 500) { window.__huRefresh = Date.now(); document.getElementById('push-history-refresh').click(); }
		return false; })()`, nid), 30*time.Second)
	if row := p.awaitString("the history row", fmt.Sprintf(`document.querySelector('#push-history-list tr[data-id=%q]').textContent`, nid)); !strings.Contains(row, "security") || !strings.Contains(row, "user "+user.User.ID) {
		t.Fatalf("the history row %q does not show the category and the user", row)
	}
	nodetest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		for _, d := range e.fcm.Deliveries() {
			if d.Token == deviceToken && d.Title == "Security notice" && d.Project == fcmProject && d.Data["screen"] == "security" {
				return nil
			}
		}
		return fmt.Errorf("fcmfake has no delivery of the notification to %s (%d deliveries)", deviceToken, len(e.fcm.Deliveries()))
	})

	// Schedule one an hour ahead (local time in the form, UTC on the wire),
	// then cancel it in the UI. The browser's clock is in India (+05:30)
	// meanwhile, so a conversion that forgot the zone would be hours off.
	setZone := func(zone string) {
		t.Helper()
		p.do("time zone "+zone, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: zone})
			return err
		}))
	}
	setZone("Asia/Kolkata")
	if off := p.awaitString("the browser's zone offset", `new Date().getTimezoneOffset()`); off != "-330" {
		t.Fatalf("the browser's zone offset is %s minutes, want -330 (Asia/Kolkata)", off)
	}
	p.await("set the send time an hour ahead", `const d = new Date(Date.now() + 3600e3); const z = (n) => String(n).padStart(2, '0');
		const v = d.getFullYear() + '-' + z(d.getMonth() + 1) + '-' + z(d.getDate()) + 'T' + z(d.getHours()) + ':' + z(d.getMinutes());
		const i = document.getElementById('push-send-at'); i.value = v; i.dispatchEvent(new Event('input')); true`)
	// Schedule by keyboard: from the date-time field, Tab to Schedule, Enter.
	p.await("focus the send time", `document.getElementById('push-send-at').focus(); true`)
	e.tabTo(t, p, "#push-schedule")
	e.key(t, p, "Enter")
	sid := p.waitFor("the schedule", `document.getElementById('push-result').dataset.schedule`, 15*time.Second)
	p.waitFor("the schedule listed", fmt.Sprintf(`(() => { const r = document.querySelector('#push-schedules-list tr[data-id=%q]'); return !!r && r.dataset.status === 'scheduled'; })()`, sid), 15*time.Second)
	var list struct {
		Scheduled []struct {
			ID, Status string
			SendAt     time.Time `json:"sendAt"`
		}
	}
	scheduled := func() (status string, at time.Time) {
		t.Helper()
		e.call(t, http.MethodGet, "/api/notifications/scheduled?limit=100", owner, nil, http.StatusOK, &list)
		for _, s := range list.Scheduled {
			if s.ID == sid {
				return s.Status, s.SendAt
			}
		}
		t.Fatalf("schedule %s not listed by the API: %+v", sid, list)
		return "", time.Time{}
	}
	if st, at := scheduled(); st != "scheduled" || at.Sub(time.Now().Add(time.Hour)).Abs() > 2*time.Minute {
		t.Fatalf("the API's schedule: %s at %v, want scheduled about an hour from now", st, at)
	}
	p.await("scroll to the top", `window.scrollTo(0, 0); true`)
	e.shoot(t, p, "push")
	// The credentials form folded once saved; checkA11y counts the controls
	// of a closed <details> as shown, so unfold it (by keyboard) first.
	if p.eval(`document.querySelector('.push-creds-details').open`) {
		t.Fatalf("the credentials form is still unfolded after the save\n%s", p.state())
	}
	e.tabTo(t, p, ".push-creds-details > summary")
	e.key(t, p, "Enter")
	p.waitFor("the credentials form unfolded", `document.querySelector('.push-creds-details').open`, 5*time.Second)
	e.checkA11y(t, p)
	usersClick(t, p, "cancel the schedule", fmt.Sprintf(`button.push-cancel[data-id=%q]`, sid))
	p.waitFor("the schedule cancelled", fmt.Sprintf(`(() => { const r = document.querySelector('#push-schedules-list tr[data-id=%q]'); return !!r && r.dataset.status === 'cancelled' && !r.querySelector('button'); })()`, sid), 15*time.Second)
	if st, _ := scheduled(); st != "cancelled" {
		t.Fatalf("the API's schedule is %s after Cancel, want cancelled", st)
	}
	setZone("") // the host's zone again
}

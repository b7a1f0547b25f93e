package browser

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/proctest"
)

// opHeaders are the operator's headers (the admin token, no project).
func (e *consoleEnv) opHeaders() map[string]string {
	return map[string]string{"Authorization": "Bearer " + e.adminToken}
}

// opStatus is GET /admin/cluster as the API answers it.
type opStatus struct {
	Leader string `json:"leader"`
	Nodes  []struct {
		ID           string `json:"id"`
		Voter        bool   `json:"voter"`
		State        string `json:"state"`
		AppliedIndex uint64 `json:"appliedIndex"`
	} `json:"nodes"`
}

// opCluster reads GET /admin/cluster on node (a base URL).
func opCluster(t *testing.T, e *consoleEnv, node string) opStatus {
	t.Helper()
	var st opStatus
	call(t, e.ctx, http.MethodGet, node+"/admin/cluster", e.opHeaders(), nil, http.StatusOK, &st)
	return st
}

// opWrite writes a document of e.proj through node (a base URL) and returns
// its revision (X-Revision).
func opWrite(t *testing.T, e *consoleEnv, node, path string, data map[string]any) uint64 {
	t.Helper()
	r, err := proctest.DoJSON(e.ctx, http.DefaultClient, 20*time.Second, http.MethodPost, node+"/api/db",
		e.proj.Headers(), map[string]any{"collection": path, "data": data})
	if err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	if r.Status != http.StatusOK && r.Status != http.StatusCreated {
		t.Fatalf("write %s: %s", path, r)
	}
	rev, err := strconv.ParseUint(r.Header.Get("X-Revision"), 10, 64)
	if err != nil || rev == 0 {
		t.Fatalf("write %s: X-Revision %q: %v", path, r.Header.Get("X-Revision"), err)
	}
	return rev
}

// opClick waits until the element matching selector is shown and enabled, then clicks it.
func opClick(t *testing.T, p *page, selector string) {
	t.Helper()
	p.waitFor("the element "+selector, fmt.Sprintf(`(() => { const el = document.querySelector(%s); return !!(el && el.getClientRects().length && !el.disabled); })()`, js(selector)), 15*time.Second)
	p.await("click "+selector, fmt.Sprintf(`document.querySelector(%s).click(); true`, js(selector)))
}

// projectRow is a selector of the projects table's row of project id.
func projectRow(id string) string { return fmt.Sprintf(`.projects-list tr[data-project=%s]`, js(id)) }

// consoleProjects walks the projects page: e.proj listed with its documents,
// size and last write (after a write through the API and a refresh); a bad
// create shown at its field; a project created by keyboard whose API key is
// shown once (it works through the API, and is gone after leaving the
// page); "Make owner" on the new project.
func consoleProjects(t *testing.T, e *consoleEnv) {
	p := e.tab
	e.open(t, p, "projects")
	p.waitFor("e.proj in the list", fmt.Sprintf(`!!document.querySelector(%s)`, js(projectRow(e.proj.ID))), 15*time.Second)

	// A write, then Refresh: the row's last write is at least its revision,
	// and the documents and size count it.
	rev := opWrite(t, e, e.voters[0].url, "console-projects/doc1", map[string]any{"title": "counted", "n": 1})
	opClick(t, p, "#projects-refresh")
	row := projectRow(e.proj.ID)
	got := p.waitFor("the last write of e.proj after the write", fmt.Sprintf(`(() => {
		const r = document.querySelector(%s);
		const last = r && r.querySelector('.projects-last');
		return !!last && Number(last.dataset.revision) >= %d && last.dataset.revision;
	})()`, js(row), rev), 20*time.Second)
	t.Logf("e.proj's last write shows revision %s (the write committed at %d)", got, rev)
	var counts struct {
		Documents string `json:"documents"`
		Bytes     string `json:"bytes"`
		Name      string `json:"name"`
		Text      string `json:"text"`
	}
	p.awaitJSON("e.proj's row", fmt.Sprintf(`const r = document.querySelector(%s); JSON.stringify({documents: r.querySelector('.projects-docs').dataset.documents, bytes: r.querySelector('.projects-bytes').dataset.bytes,
			name: r.cells[1].textContent, text: r.textContent})`, js(row)), &counts)
	if counts.Name != "console" {
		t.Errorf("e.proj's name shows %q, want console", counts.Name)
	}
	if n, err := strconv.Atoi(counts.Documents); err != nil || n < 1 {
		t.Errorf("e.proj shows %q documents after a write, want >= 1", counts.Documents)
	}
	if n, err := strconv.Atoi(counts.Bytes); err != nil || n <= 0 {
		t.Errorf("e.proj shows %q bytes after a write, want > 0", counts.Bytes)
	}
	if !strings.Contains(counts.Text, "B") {
		t.Errorf("the size is not shown in human units: %q", counts.Text)
	}

	e.shoot(t, p, "projects")

	// A bad create: the server's error, the password field marked.
	newOwner := "new-owner@example.com"
	const newPass = "new project owner pass 2024!"
	e.typeInto(t, p, "#projects-name", "made in the console")
	e.typeInto(t, p, "#projects-owner-email", newOwner)
	e.typeInto(t, p, "#projects-owner-password", "x")
	opClick(t, p, "#projects-create")
	msg := p.waitFor("the refused password", `(() => { const e = document.querySelector('.page-projects [role=alert]'); return !!e && document.getElementById('projects-owner-password').getAttribute('aria-invalid') === 'true' && e.textContent; })()`, 15*time.Second)
	t.Logf("a too short owner password shows: %s", msg)
	if p.eval(`!!document.getElementById('projects-new-key')`) {
		t.Fatalf("a refused create shows a key\n%s", p.state())
	}

	// The create, by keyboard alone: the key is shown once.
	e.typeInto(t, p, "#projects-owner-password", newPass)
	e.tabTo(t, p, "#projects-create")
	e.key(t, p, "Enter")
	p.waitFor("the created project's key", `!!document.getElementById('projects-new-key')`, 20*time.Second)
	var made struct {
		ID, Key, Link, Warning string
		Focused                bool
	}
	p.awaitJSON("the created project", `JSON.stringify({
		id: document.getElementById('projects-new-id').textContent,
		key: document.getElementById('projects-new-key').textContent,
		link: document.getElementById('projects-signin-link').getAttribute('href'),
		warning: document.querySelector('.projects-warning').textContent,
		focused: document.activeElement === document.querySelector('.projects-created h2'),
	})`, &made)
	if made.ID == "" || !strings.HasPrefix(made.Key, "ebk_") {
		t.Fatalf("the created project shows id %q and key %q", made.ID, made.Key)
	}
	if !strings.Contains(made.Warning, "not shown again") {
		t.Errorf("the key's warning is %q", made.Warning)
	}
	if !made.Focused {
		t.Errorf("the created card's heading does not take the focus\n%s", p.state())
	}
	link, err := url.Parse(made.Link)
	if err != nil || !strings.HasPrefix(made.Link, "#/signin?") {
		t.Fatalf("the sign-in link is %q (%v)", made.Link, err)
	}
	if q, _ := url.ParseQuery(strings.TrimPrefix(link.Fragment, "/signin?")); q.Get("project") != made.ID || q.Get("key") != made.Key {
		t.Errorf("the sign-in link %q does not name the project and its key", made.Link)
	}
	// The key works: an account registers with it; the owner signs in.
	keys := map[string]string{"X-Project-Id": made.ID, "X-API-Key": made.Key}
	call(t, e.ctx, http.MethodPost, e.voters[1].url+"/api/auth", keys,
		map[string]string{"action": "register", "email": "second@example.com", "password": newPass}, http.StatusCreated, nil)
	var login struct{ User struct{ Role string } }
	call(t, e.ctx, http.MethodPost, e.voters[1].url+"/api/auth", keys,
		map[string]string{"action": "login", "email": newOwner, "password": newPass}, http.StatusOK, &login)
	if login.User.Role != "owner" {
		t.Errorf("the new project's owner signs in as %q", login.User.Role)
	}
	p.waitFor("the new project in the list", fmt.Sprintf(`!!document.querySelector(%s)`, js(projectRow(made.ID))), 15*time.Second)
	e.checkA11y(t, p)

	// "Make owner": the second account of the new project becomes an owner.
	newRow := projectRow(made.ID)
	opClick(t, p, newRow+" details.projects-owner > summary")
	e.typeInto(t, p, newRow+" .projects-owner-email", "nobody@example.com")
	e.key(t, p, "Enter")
	msg = p.waitFor("the unknown account", fmt.Sprintf(`(() => { const o = document.querySelector(%s); return !!o && o.classList.contains('error') && o.textContent.includes('not_found') && o.textContent; })()`, js(newRow+" .projects-owner-out")), 15*time.Second)
	t.Logf("make owner of an unknown email shows: %s", msg)
	e.typeInto(t, p, newRow+" .projects-owner-email", "second@example.com")
	e.key(t, p, "Enter")
	p.waitFor("the new owner", fmt.Sprintf(`(() => { const o = document.querySelector(%s); return !!o && o.classList.contains('ok') && o.textContent.includes('second@example.com'); })()`, js(newRow+" .projects-owner-out")), 15*time.Second)
	call(t, e.ctx, http.MethodPost, e.voters[0].url+"/api/auth", keys,
		map[string]string{"action": "login", "email": "second@example.com", "password": newPass}, http.StatusOK, &login)
	if login.User.Role != "owner" {
		t.Errorf("after Make owner the account signs in as %q", login.User.Role)
	}

	// Leaving the page forgets the key: back on it, it is not shown.
	e.open(t, p, "data")
	e.open(t, p, "projects")
	p.waitFor("the list again", fmt.Sprintf(`!!document.querySelector(%s)`, js(newRow)), 15*time.Second)
	if p.eval(fmt.Sprintf(`!!document.getElementById('projects-new-key') || document.body.textContent.includes(%s)`, js(made.Key))) {
		t.Fatalf("the API key is shown again after leaving the page\n%s", p.state())
	}
}

// consoleCluster walks the cluster page (last: it changes the cluster): the
// four nodes with the leader and applied indexes; the leadership handed to
// another voter by keyboard; a backup downloaded; the write rate chart
// moving after writes; n3 removed with the inline confirmation (cancelled
// once, then confirmed); three nodes left.
func consoleCluster(t *testing.T, e *consoleEnv) {
	p := e.tab
	e.open(t, p, "cluster")
	p.waitFor("four nodes", `document.querySelectorAll('.cluster-nodes tbody tr[data-node]').length === 4`, 20*time.Second)
	st := opCluster(t, e, e.voters[0].url)
	p.waitFor("the leader marked", fmt.Sprintf(`(() => { const b = document.querySelectorAll('.cluster-leader-badge'); return b.length === 1 && b[0].closest('tr').dataset.node === %s; })()`, js(st.Leader)), 15*time.Second)
	var rows []struct {
		Node, Role, Kind, Applied string
	}
	p.awaitJSON("the node rows", `JSON.stringify([...document.querySelectorAll('.cluster-nodes tbody tr[data-node]')].map(r => ({
		node: r.dataset.node, role: r.dataset.role, kind: r.cells[2].textContent, applied: r.dataset.applied })))`, &rows)
	kinds := map[string]string{}
	for _, r := range rows {
		kinds[r.Node] = r.Kind
		if n, err := strconv.ParseUint(r.Applied, 10, 64); err != nil || n == 0 {
			t.Errorf("%s shows applied index %q", r.Node, r.Applied)
		}
		if r.Node == st.Leader && r.Role != "leader" {
			t.Errorf("the leader %s shows role %q", r.Node, r.Role)
		}
		if r.Node != st.Leader && r.Role != "follower" {
			t.Errorf("%s shows role %q, want follower", r.Node, r.Role)
		}
	}
	if want := map[string]string{"n1": "voter", "n2": "voter", "n3": "voter", "e1": "edge"}; fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Errorf("the nodes' kinds are %v, want %v", kinds, want)
	}
	if p.eval(fmt.Sprintf(`!!document.querySelector(%s)`, js(`tr[data-node="e1"] .cluster-make-leader:not([hidden])`))) ||
		p.eval(fmt.Sprintf(`!!document.querySelector(%s)`, js(fmt.Sprintf(`tr[data-node=%q] .cluster-make-leader:not([hidden])`, st.Leader)))) {
		t.Errorf("Make leader is offered on the edge node or on the leader\n%s", p.state())
	}

	// Hand the leadership to n1 or n2 (so that n3, removed below, is not
	// the leader), by keyboard alone.
	target := "n1"
	if st.Leader == "n1" {
		target = "n2"
	}
	e.tabTo(t, p, fmt.Sprintf(`tr[data-node=%q] .cluster-make-leader`, target))
	e.key(t, p, "Enter")
	msg := p.waitFor("the new leader shown", fmt.Sprintf(`(() => { const o = document.querySelector('.cluster-action-out'); return !!o && o.textContent.includes('The leader is now ' + %s) && o.textContent; })()`, js(target)), 30*time.Second)
	t.Logf("the hand-over shows: %s", msg)
	p.waitFor("the leader badge moved", fmt.Sprintf(`(() => { const b = document.querySelectorAll('.cluster-leader-badge'); return b.length === 1 && b[0].closest('tr').dataset.node === %s; })()`, js(target)), 15*time.Second)
	if !leaderIs(t, e, e.voters[2].url, target, 15*time.Second) {
		t.Fatalf("n3 does not see %s as the leader after the hand-over", target)
	}

	// A backup: its size and revision are shown.
	before := opCluster(t, e, e.voters[0].url)
	opClick(t, p, "#cluster-backup")
	size := p.waitFor("the backup's size", `(() => { const r = document.getElementById('cluster-backup-result'); return !!r && Number(r.dataset.size) > 0 && r.dataset.size + ' bytes at revision ' + r.dataset.revision; })()`, 30*time.Second)
	t.Logf("the backup: %s", size)
	brev := atoi(t, p.awaitString("the backup's revision", `document.getElementById('cluster-backup-result').dataset.revision`))
	if brev <= 0 || uint64(brev) > before.Nodes[0].AppliedIndex+1000 {
		t.Errorf("the backup's revision %d is not plausible (n1 applied %d before)", brev, before.Nodes[0].AppliedIndex)
	}
	if !p.eval(`(() => { const a = document.getElementById('cluster-backup-link'); return !!a && a.href.startsWith('blob:') && a.getAttribute('download') === 'edgebase.backup'; })()`) {
		t.Errorf("no download link of the backup\n%s", p.state())
	}

	// Writes through the console's node move its write rate (three points
	// of it, for the screenshot).
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		opWrite(t, e, e.url(), fmt.Sprintf("console-cluster/w%d", i%20), map[string]any{"i": i})
		if p.eval(`(() => { const c = document.getElementById('cluster-chart-writes').dataset; return Number(c.last) > 0 && Number(c.points) >= 3; })()`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the write rate chart never went above 0 after %d writes\n%s", i+1, p.state())
		}
	}
	label := p.awaitString("the write chart's label", `document.querySelector('#cluster-chart-writes svg').getAttribute('aria-label')`)
	if !strings.HasPrefix(label, "Writes: now ") {
		t.Errorf("the write chart's aria-label is %q", label)
	}
	if pts := atoi(t, p.awaitString("the write chart's points", `document.getElementById('cluster-chart-writes').dataset.points`)); pts < 1 || pts > 60 {
		t.Errorf("the write chart holds %d points", pts)
	}

	e.shoot(t, p, "cluster")
	e.checkA11y(t, p)
	// The charts, scrolled into view.
	p.await("scroll to the charts", `document.getElementById('cluster-metrics-h').scrollIntoView(); true`)
	e.shoot(t, p, "cluster-activity")
	p.await("scroll back up", `window.scrollTo(0, 0); true`)

	// Remove n3: cancel once (Escape), then confirm.
	remove := `tr[data-node="n3"] .cluster-remove`
	opClick(t, p, remove)
	p.waitFor("the confirmation, focused", `(() => { const a = document.activeElement; return !!a && a.matches('tr[data-node="n3"] .cluster-confirm-remove'); })()`, 5*time.Second)
	e.key(t, p, "Escape")
	p.waitFor("the confirmation closed", fmt.Sprintf(`(() => { const c = document.querySelector('tr[data-node="n3"] .cluster-confirm'); return c.hidden && document.activeElement === document.querySelector(%s); })()`, js(remove)), 5*time.Second)
	if n := len(opCluster(t, e, e.voters[0].url).Nodes); n != 4 {
		t.Fatalf("a cancelled removal left %d nodes", n)
	}
	opClick(t, p, remove)
	opClick(t, p, `tr[data-node="n3"] .cluster-confirm-remove`)
	p.waitFor("n3 removed", `!document.querySelector('tr[data-node="n3"]') && document.querySelectorAll('.cluster-nodes tbody tr[data-node]').length === 3 && document.querySelector('.cluster-action-out').textContent.includes('n3 was removed')`, 30*time.Second)
	after := opCluster(t, e, e.voters[0].url)
	var ids []string
	for _, n := range after.Nodes {
		ids = append(ids, n.ID)
	}
	if len(ids) != 3 {
		t.Fatalf("after the removal /admin/cluster lists %v", ids)
	}
	for _, id := range ids {
		if id == "n3" {
			t.Fatalf("n3 is still a member: %v", ids)
		}
	}
	// The page keeps refreshing: still three nodes, the leader unchanged.
	p.waitFor("three nodes after a refresh", fmt.Sprintf(`document.querySelectorAll('.cluster-nodes tbody tr[data-node]').length === 3 && document.querySelector('.page-cluster').dataset.leader === %s`, js(after.Leader)), 10*time.Second)
}

// leaderIs polls GET /admin/cluster on node until it names leader.
func leaderIs(t *testing.T, e *consoleEnv, node, leader string, within time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r, err := proctest.DoJSON(e.ctx, http.DefaultClient, 5*time.Second, http.MethodGet, node+"/admin/cluster", e.opHeaders(), nil)
		if err == nil && r.Status == http.StatusOK {
			var st opStatus
			if json.Unmarshal(r.Body, &st) == nil && st.Leader == leader {
				return true
			}
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-e.ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/edgebase/edgebase/internal/proctest"
	"github.com/edgebase/edgebase/internal/repo"
	"github.com/edgebase/edgebase/internal/rfc6238"
	"github.com/edgebase/edgebase/internal/testbin"
	"github.com/edgebase/edgebase/node/nodetest"
)

// The SDK test runs real node processes: three voters on loopback, started
// from the binary `make test-bins` built (or one testbin builds).
const (
	sdkAdminToken    = "eba_browser-sdk-test-admin-token-0123456789"
	sdkClusterSecret = "browser-sdk-test-cluster-secret-0123456789"
	// sdkSecretKey seals TOTP secrets: the authenticator is off without one.
	sdkSecretKey = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// sdkNode is one node process of the SDK test's cluster.
type sdkNode struct {
	*proctest.Proc
	url string
}

// startSDKCluster starts three voters (n1 bootstraps, n2 and n3 join) and
// waits until n1 reports three voters and a leader.
func startSDKCluster(t *testing.T, ctx context.Context) []*sdkNode {
	t.Helper()
	voters, _ := startProcCluster(t, ctx, procClusterOptions{})
	return voters
}

// procClusterOptions shape the process cluster of startProcCluster.
type procClusterOptions struct {
	// Edges is the number of edge nodes (e1, e2, ...) joined with --edge
	// after the three voters.
	Edges int
	// Args are added to every node's serve command.
	Args []string
}

// startProcCluster starts three voters (n1 bootstraps, n2 and n3 join) and
// opts.Edges edge nodes, and waits until n1 reports three voters, a leader
// and every edge node.
func startProcCluster(t *testing.T, ctx context.Context, opts procClusterOptions) (voters, edges []*sdkNode) {
	t.Helper()
	base := t.TempDir()
	bin, err := testbin.Edgebase(ctx, testbin.Options{Dir: base, Logf: t.Logf})
	if err != nil {
		t.Fatalf("edgebase binary: %v", err)
	}
	var nodes []*sdkNode
	for i := 1; i <= 3+opts.Edges; i++ {
		id := fmt.Sprintf("n%d", i)
		if i > 3 {
			id = fmt.Sprintf("e%d", i-3)
		}
		n := newSDKNode(t, bin, base, id)
		p := n.Proc
		if i > 1 {
			p.Args = append(p.Args, "--join", nodes[0].url)
		}
		if i > 3 {
			p.Args = append(p.Args, "--edge")
		}
		p.Args = append(p.Args, opts.Args...)
		nodes = append(nodes, n)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.KillIfRunning()
		}
		if t.Failed() {
			for _, n := range nodes {
				t.Logf("---- output of %s ----\n%s", n.ID, n.LogTail(32<<10))
			}
		}
	})
	for i, n := range nodes {
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			waitReady(t, ctx, n)
		}
	}
	for _, n := range nodes {
		waitReady(t, ctx, n)
	}
	nodetest.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		r, err := proctest.DoJSON(ctx, http.DefaultClient, 5*time.Second, http.MethodGet, nodes[0].url+"/admin/cluster",
			map[string]string{"Authorization": "Bearer " + sdkAdminToken}, nil)
		if err != nil {
			return err
		}
		var st proctest.ClusterStatus
		if err := json.Unmarshal(r.Body, &st); err != nil {
			return fmt.Errorf("/admin/cluster: %s", r)
		}
		if err := st.Healthy(3, ""); err != nil {
			return err
		}
		for _, e := range nodes[3:] {
			if m := st.Node(e.ID); m == nil || m.Voter {
				return fmt.Errorf("edge node %s is not a member yet: %+v", e.ID, st)
			}
		}
		return nil
	})
	return nodes[:3], nodes[3:]
}

// newSDKNode is node id of a process cluster, its data and log under base,
// on free loopback ports, with the tests' secrets; not started. A voter
// bootstraps alone unless its Args get a --join.
func newSDKNode(t *testing.T, bin, base, id string) *sdkNode {
	t.Helper()
	httpPort, raftPort := proctest.FreePort(t), proctest.FreePort(t)
	u := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	return &sdkNode{url: u, Proc: &proctest.Proc{ID: id, Bin: bin, LogPath: filepath.Join(base, id+".log"),
		Env: []string{"EDGEBASE_SECRET_KEY=" + sdkSecretKey}, Args: []string{"serve",
			"--node-id", id,
			"--data-dir", filepath.Join(base, id),
			"--http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort),
			"--raft-addr", fmt.Sprintf("127.0.0.1:%d", raftPort),
			"--advertise-http", u,
			"--advertise-raft", fmt.Sprintf("127.0.0.1:%d", raftPort),
			"--admin-token", sdkAdminToken,
			"--cluster-secret", sdkClusterSecret,
		}}}
}

// waitReady polls /readyz of n until it answers 200 (setup: a generous bound).
func waitReady(t *testing.T, ctx context.Context, n *sdkNode) {
	t.Helper()
	nodetest.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		if !n.Running() {
			t.Fatalf("%s exited while starting: %v\n%s", n.ID, n.WaitErr(), n.LogTail(8<<10))
		}
		r, err := proctest.DoJSON(ctx, http.DefaultClient, 3*time.Second, http.MethodGet, n.url+"/readyz", nil, nil)
		if err != nil {
			return err
		}
		if r.Status != http.StatusOK {
			return fmt.Errorf("%s /readyz: %s", n.ID, r)
		}
		return nil
	})
}

// call is one JSON request that must answer want; out (if not nil) receives
// the body.
func call(t *testing.T, ctx context.Context, method, u string, headers map[string]string, body any, want int, out any) http.Header {
	t.Helper()
	r, err := proctest.DoJSON(ctx, http.DefaultClient, 20*time.Second, method, u, headers, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	if r.Status != want {
		t.Fatalf("%s %s: %s, want %d", method, u, r, want)
	}
	if out != nil {
		if err := json.Unmarshal(r.Body, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, u, r.Body, err)
		}
	}
	return r.Header
}

// sdkPage is the app page the test serves from its own origin: it imports
// the SDK from the node (/_/sdk/edgebase.js) and exposes the module.
const sdkPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>edgebase SDK app</title></head>
<body><h1>an app on another origin</h1>
<script type="module">
try {
  window.edgebase = await import(%s + '/_/sdk/edgebase.js');
  window.sdkReady = true;
} catch (e) {
  window.sdkError = String(e && e.stack || e);
}
</script></body></html>`

// TestSDKInBrowser runs the JavaScript SDK in real Chromium, on a page whose
// origin is not the node's: the project lists that origin (CORS), the owner
// logs in with the TOTP second step, writes and sees the change live, the
// page's node is killed and restarted while another node takes writes and the
// page sees each of them once and in order, and once the origin is removed
// from the list the browser refuses the node's answers.
func TestSDKInBrowser(t *testing.T) {
	bin := chromiumPath()
	if bin == "" {
		if os.Getenv("EDGEBASE_REQUIRE_BROWSER") == "1" {
			t.Fatal("EDGEBASE_REQUIRE_BROWSER=1 but no chromium, chromium-browser or google-chrome on PATH (Debian: apt-get install chromium)")
		}
		t.Skip("no chromium, chromium-browser or google-chrome on PATH: skipping the browser test of the JavaScript SDK (Debian: apt-get install chromium; set EDGEBASE_REQUIRE_BROWSER=1 to make this a failure)")
	}
	ctx, cancel := testbin.Context(t)
	defer cancel()
	nodes := startSDKCluster(t, ctx)
	n1, n2 := nodes[0], nodes[1] // the page talks to n2; n1 takes writes while n2 is down

	const ownerEmail, ownerPassword = "owner@example.com", "browser sdk owner 2024!"
	proj, err := proctest.CreateProject(ctx, http.DefaultClient, n1.Bin, n1.url, sdkAdminToken, "sdk", ownerEmail, ownerPassword)
	if err != nil {
		t.Fatal(err)
	}

	// The app's page, served from an origin of its own.
	pageSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, sdkPage, js(n2.url))
	}))
	defer pageSrv.Close()
	pageOrigin := pageSrv.URL
	if pageOrigin == n2.url {
		t.Fatalf("the page's origin %s is the node's", pageOrigin)
	}

	// The owner lists the page's origin, then turns on TOTP.
	call(t, ctx, http.MethodPut, n1.url+"/api/origins", proj.Headers(), map[string]any{"origins": []string{pageOrigin}}, http.StatusOK, nil)
	var enrolled struct{ Secret string }
	call(t, ctx, http.MethodPost, n1.url+"/api/authenticator/enroll", proj.Headers(), nil, http.StatusOK, &enrolled)
	code, err := rfc6238.Authenticator(enrolled.Secret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	call(t, ctx, http.MethodPost, n1.url+"/api/authenticator/confirm", proj.Headers(), map[string]string{"code": code}, http.StatusOK, nil)

	// A second user writes from outside the browser, into its own tree,
	// which the owner may read.
	keys := map[string]string{"X-Project-Id": proj.ID, "X-API-Key": proj.APIKey}
	var writer struct {
		Token string
		User  struct{ ID string }
	}
	call(t, ctx, http.MethodPost, n1.url+"/api/auth", keys,
		map[string]string{"action": "register", "email": "writer@example.com", "password": "browser sdk writer 2024!"}, http.StatusCreated, &writer)
	notes := "users/" + writer.User.ID + "/notes"
	write := func(node *sdkNode, name string, data map[string]any) uint64 {
		t.Helper()
		var out struct{ Revision uint64 }
		call(t, ctx, http.MethodPost, node.url+"/api/db", map[string]string{"Authorization": "Bearer " + writer.Token},
			map[string]any{"collection": notes + "/" + name, "data": data}, http.StatusCreated, &out)
		if out.Revision == 0 {
			t.Fatalf("write %s: no revision", name)
		}
		return out.Revision
	}
	write(n1, "before", map[string]any{"n": 0})

	p := openBrowser(t, bin)
	p.do("open the app page", chromedp.Navigate(pageSrv.URL+"/"))
	p.waitForSDK()

	// Log in: the password step asks for the second factor.
	p.await("create the client", fmt.Sprintf(`window.client = edgebase.createClient({url: %s, projectId: %s, apiKey: %s}); true`,
		js(n2.url), js(proj.ID), js(proj.APIKey)))
	var step1 struct {
		RequiresTotp bool   `json:"requiresTotp"`
		LoginTicket  string `json:"loginTicket"`
	}
	p.awaitJSON("log in with the password", fmt.Sprintf(`JSON.stringify(await client.auth.login(%s, %s))`, js(ownerEmail), js(ownerPassword)), &step1)
	if !step1.RequiresTotp || step1.LoginTicket == "" {
		t.Fatalf("login answered %+v, want requiresTotp and a loginTicket", step1)
	}
	// The next code: the one confirm used may not be taken twice.
	code = nextCode(t, enrolled.Secret, code)
	var me struct {
		ID   string `json:"id"`
		Role string `json:"role"`
	}
	p.awaitJSON("finish with the TOTP code", fmt.Sprintf(`await client.auth.loginVerify(%s, %s); JSON.stringify(client.auth.user())`,
		js(step1.LoginTicket), js(code)), &me)
	if me.ID != proj.OwnerID || me.Role != "owner" {
		t.Fatalf("after login-verify the user is %+v, want %s as owner", me, proj.OwnerID)
	}

	// Subscribe: the snapshot holds the document written before.
	p.await("subscribe", fmt.Sprintf(`window.events = []; window.sub = client.realtime.subscribe(%s, {prefix: true}, e => events.push(e)); true`, js(notes)))
	p.waitFor("the snapshot", `events.length > 0 && events[0].type === 'snapshot' && events[0].documents.length === 1`, 20*time.Second)

	// The page writes and sees its own change live.
	var own struct {
		Revision uint64 `json:"revision"`
	}
	p.awaitJSON("write from the page", fmt.Sprintf(`JSON.stringify(await client.db.set(%s, {by: 'page'}))`, js(notes+"/mine")), &own)
	if own.Revision == 0 {
		t.Fatalf("the page's write reported no revision")
	}
	want := []uint64{own.Revision}
	p.waitFor("the page's own change", fmt.Sprintf(`events.some(e => e.type === 'change' && e.revision === %d && e.collection === %s)`, own.Revision, js(notes+"/mine")), 10*time.Second)
	want = append(want, write(n1, "live", map[string]any{"n": 1}))
	p.waitFor("a change made elsewhere", fmt.Sprintf(`events.some(e => e.type === 'change' && e.revision === %d)`, want[len(want)-1]), 10*time.Second)

	// The page's node is killed; the cluster goes on taking writes; the node
	// comes back and the page resumes where it stopped.
	if err := n2.Kill9(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		want = append(want, write(n1, fmt.Sprintf("away%d", i), map[string]any{"n": 10 + i}))
	}
	if err := n2.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ctx, n2)
	want = append(want, write(n1, "after", map[string]any{"n": 99}))
	p.waitFor("the changes made while the node was down", fmt.Sprintf(`events.some(e => e.type === 'change' && e.revision === %d)`, want[len(want)-1]), 60*time.Second)
	var got []struct {
		Type     string `json:"type"`
		Revision uint64 `json:"revision"`
	}
	p.awaitJSON("the events", `JSON.stringify(events.slice(1).map(e => ({type: e.type, revision: e.revision})))`, &got)
	var revs []uint64
	for _, e := range got {
		if e.Type != "change" {
			t.Fatalf("event %+v after the snapshot: want only changes (no reset: the change log reaches back)\nall: %+v", e, got)
		}
		revs = append(revs, e.Revision)
	}
	if fmt.Sprint(revs) != fmt.Sprint(want) {
		t.Fatalf("changes seen by the page: %v, want each write once and in order: %v", revs, want)
	}

	// The origin is taken off the list: the browser refuses the node's answers.
	token := p.awaitString("the page's token", `client.auth.token()`)
	h := map[string]string{"Authorization": "Bearer " + token, "X-Project-Id": proj.ID, "X-API-Key": proj.APIKey}
	call(t, ctx, http.MethodPut, n1.url+"/api/origins", h, map[string]any{"origins": []string{}}, http.StatusOK, nil)
	p.await("unsubscribe", `sub.unsubscribe(); true`)
	probe := fmt.Sprintf(`(async () => {
		try { await client.db.get(%s); return 'read'; }
		catch (e) { return 'refused: status ' + (e && e.status) + ' code ' + (e && e.code) + ': ' + (e && e.name) + ': ' + (e && e.message); }
	})()`, js(notes+"/mine"))
	var refusal string
	nodetest.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
		refusal = p.awaitString("a read after the origin was removed", probe)
		if refusal == "read" {
			return fmt.Errorf("the browser still reads the node's answer")
		}
		return nil
	})
	t.Logf("after the origin was removed: %s", refusal)
	// An answer the browser let through carries the node's status; a CORS
	// refusal reaches the SDK as a network failure (status 0). The port in the
	// message may itself contain "403", so the status is read, not the text.
	if !strings.HasPrefix(refusal, "refused: status 0 ") {
		t.Fatalf("the refusal came from the node, not from the browser's CORS check: %s", refusal)
	}
	// A plain fetch, without the SDK, is refused by the browser too.
	raw := fmt.Sprintf(`fetch(%s + '/api/db?collection=' + encodeURIComponent(%s), {headers: {Authorization: 'Bearer ' + %s}}).then(r => 'status ' + r.status, e => 'blocked: ' + e)`,
		js(n2.url), js(notes+"/mine"), js(token))
	if got := p.awaitString("a raw fetch", raw); !strings.HasPrefix(got, "blocked") {
		t.Fatalf("a raw cross-origin fetch after the origin was removed: %s", got)
	}

	// The README's web app, as printed there, on an origin of its own that
	// the owner lists: the writer logs in, saves a note and sees it live.
	app := readmeWebApp(t, n2.url, proj.ID, proj.APIKey)
	appSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, app)
	}))
	defer appSrv.Close()
	call(t, ctx, http.MethodPut, n1.url+"/api/origins", h, map[string]any{"origins": []string{appSrv.URL}}, http.StatusOK, nil)
	p.do("open the README's web app", chromedp.Navigate(appSrv.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("email")),
		chromedp.SetValue(chromedp.ID("email"), "writer@example.com"),
		chromedp.SetValue(chromedp.ID("password"), "browser sdk writer 2024!"),
		chromedp.Click(chromedp.CSS("#login button")),
	)
	// The snapshot lists the writer's notes, the ones written above among them.
	p.waitFor("the README app's snapshot", `document.querySelectorAll('#notes li').length > 0`, 20*time.Second)
	p.do("save a note", chromedp.SetValue(chromedp.ID("note"), "hello from the README"), chromedp.Click(chromedp.ID("save")))
	p.waitFor("the saved note, live", `[...document.querySelectorAll('#notes li')].some(li => li.textContent === 'hello from the README')`, 20*time.Second)
}

// readmeWebApp is the HTML block of README.md's "A web app" section, with
// its node URL, project id and API key replaced by these.
func readmeWebApp(t *testing.T, node, projectID, apiKey string) string {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## A web app\n")
	if !ok {
		t.Fatal(`README.md has no "## A web app" section`)
	}
	_, block, ok := strings.Cut(section, "```html\n")
	if !ok {
		t.Fatal("README.md's web app section has no html block")
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatal("README.md's web app html block does not end")
	}
	for _, placeholder := range []string{"http://127.0.0.1:8080", "<project id>", "<API key>"} {
		if !strings.Contains(block, placeholder) {
			t.Fatalf("README.md's web app does not hold %q:\n%s", placeholder, block)
		}
	}
	return strings.NewReplacer("http://127.0.0.1:8080", node, "<project id>", projectID, "<API key>", apiKey).Replace(block)
}

// nextCode waits for the authenticator's code to differ from used and
// returns it (a code is accepted once).
func nextCode(t *testing.T, secret, used string) string {
	t.Helper()
	var code string
	nodetest.CheckFor(t, 40*time.Second, 200*time.Millisecond, func() error {
		var err error
		if code, err = rfc6238.Authenticator(secret, time.Now()); err != nil {
			t.Fatal(err)
		}
		if code == used {
			return fmt.Errorf("the code is still the one confirm used")
		}
		return nil
	})
	return code
}

// waitForSDK waits until the page imported the SDK, failing with the
// import's error.
func (p *page) waitForSDK() {
	p.t.Helper()
	p.waitFor("the SDK module", `window.sdkReady === true || typeof window.sdkError === 'string'`, 20*time.Second)
	if msg := p.awaitString("the import error", `window.sdkError || ''`); msg != "" {
		p.t.Fatalf("the page could not import /_/sdk/edgebase.js: %s\n%s", msg, p.state())
	}
}

// awaitString evaluates expr (awaiting a promise) and returns it as a string.
func (p *page) awaitString(what, expr string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(async () => String(await (async () => { return `+expr+` })()))()`, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("%s: %v\n%s", what, err, p.state())
	}
	return v
}

// await runs statements ending in an expression (awaiting), for its effect.
func (p *page) await(what, stmts string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](`(async () => { `+lastReturn(stmts)+` })()`, chromedp.EvalAwaitPromise)); err != nil {
		p.t.Fatalf("%s: %v\n%s", what, err, p.state())
	}
}

// awaitJSON runs statements whose last one is a JSON string, into out.
func (p *page) awaitJSON(what, stmts string, out any) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(async () => { `+lastReturn(stmts)+` })()`, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("%s: %v\n%s", what, err, p.state())
	}
	if err := json.Unmarshal([]byte(s), out); err != nil {
		p.t.Fatalf("%s: %q is not the JSON expected: %v", what, s, err)
	}
}

// lastReturn turns "a; b; c" into "a; b; return c".
func lastReturn(stmts string) string {
	stmts = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(stmts), ";"))
	i := strings.LastIndex(stmts, "; ")
	if i < 0 {
		return "return " + stmts
	}
	return stmts[:i+2] + "return " + stmts[i+2:]
}

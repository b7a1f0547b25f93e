package main

// The PocketBase peer of Q1 and Q2 (--peer pocketbase): bench/pocketbase
// (a module of its own) built with go build, cached under the temporary
// directory, started as one process, seeded with the same orders through
// its /api/batch, and queried with its list API as an authenticated end
// user. The end-user workloads W1, W64, HOT, R64, L32 and RT against the
// same process are in pocketbase_peer.go and pocketbase_rt.go.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/edgebase/edgebase/internal/proctest"
)

// pbSource is the peer's module, relative to the repository root.
const pbSource = "bench/pocketbase"

// buildPocketBase builds the peer into a cache directory under the system's
// temporary directory, named after a hash of its sources and the Go
// version, and returns the binary (built once per version of the sources).
func buildPocketBase(ctx context.Context, root string, logf func(string, ...any)) (string, error) {
	dir := filepath.Join(root, pbSource)
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum", "main.go"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return "", fmt.Errorf("pocketbase peer sources: %w", err)
		}
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
	}
	gov, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOVERSION: %w", err)
	}
	h.Write(gov)
	cache := filepath.Join(os.TempDir(), "edgebase-bench-pocketbase-"+hex.EncodeToString(h.Sum(nil))[:16])
	bin := filepath.Join(cache, "pocketbase")
	if st, err := os.Stat(bin); err == nil && st.Mode().IsRegular() {
		return bin, nil
	}
	if err := os.MkdirAll(cache, 0o700); err != nil {
		return "", err
	}
	t := time.Now()
	tmp := bin + ".tmp"
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pbSource, err, b)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	logf("bench: built the PocketBase peer %s in %v", bin, time.Since(t).Round(time.Millisecond))
	return bin, nil
}

// pbEnv is the running PocketBase peer.
type pbEnv struct {
	hc         *http.Client
	o          *options
	node       *benchNode
	superToken string // superuser: seeding
	userToken  string // end user: the queries, the notes workloads
	seeded     map[string]int
	// userEmail and userPassword are the end user's (L32 logs in as it);
	// value is the JSON string literal the notes records hold (ours:
	// env.value, the same letters).
	userEmail, userPassword string
	value                   []byte
}

// startPocketBase starts the peer under dir, waits for /api/health, and
// logs in its superuser and its end user.
func startPocketBase(ctx context.Context, hc *http.Client, bin, dir string, o *options, value []byte) (pe *pbEnv, err error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	n := &benchNode{id: "pb", url: fmt.Sprintf("http://127.0.0.1:%d", port),
		dataDir: filepath.Join(dir, "pb_data"), logPath: filepath.Join(dir, "pocketbase.log")}
	superEmail, superPass := "bench-su@example.com", "bench su "+randomHex(12)
	userEmail, userPass := "bench-user@example.com", "bench user "+randomHex(12)
	c := &cluster{nodes: []*benchNode{n}, leader: n, leaderKnown: true}
	defer c.stopOnError(&err)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	args := []string{"--http", fmt.Sprintf("127.0.0.1:%d", port), "--dir", n.dataDir,
		"--superuser-email", superEmail, "--superuser-password", superPass,
		"--user-email", userEmail, "--user-password", userPass, "--batch-max", fmt.Sprint(qBatch)}
	if err := n.start(bin, args); err != nil {
		return nil, err
	}
	err = proctest.Poll(ctx, 60*time.Second, func() error {
		if err := n.exitedWhileStarting("pocketbase "); err != nil {
			return err
		}
		r, err := call(ctx, hc, http.MethodGet, n.url+"/api/health", nil, nil)
		if err != nil {
			return err
		}
		if r.status != http.StatusOK {
			return fmt.Errorf("pocketbase /api/health: %s", r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	pe = &pbEnv{hc: hc, o: o, node: n, seeded: map[string]int{}, userEmail: userEmail, userPassword: userPass, value: value}
	if pe.superToken, err = pbLogin(ctx, hc, n.url, "_superusers", superEmail, superPass); err != nil {
		return nil, err
	}
	if pe.userToken, err = pbLogin(ctx, hc, n.url, "users", userEmail, userPass); err != nil {
		return nil, err
	}
	return pe, nil
}

func (pe *pbEnv) stop() {
	(&cluster{nodes: []*benchNode{pe.node}}).stop()
}

// pbLogin is POST /api/collections/{coll}/auth-with-password; it returns
// the token.
func pbLogin(ctx context.Context, hc *http.Client, base, coll, email, password string) (string, error) {
	r, err := call(ctx, hc, http.MethodPost, base+"/api/collections/"+coll+"/auth-with-password", nil,
		map[string]string{"identity": email, "password": password})
	if err != nil {
		return "", fmt.Errorf("pocketbase login %s: %w", coll, err)
	}
	var res struct {
		Token string `json:"token"`
	}
	if r.status != http.StatusOK || json.Unmarshal(r.body, &res) != nil || res.Token == "" {
		return "", fmt.Errorf("pocketbase login %s: %s", coll, r)
	}
	return res.Token, nil
}

// do sends one request to the peer with token (PocketBase takes the bare
// token in Authorization) and returns the body of a 2xx answer.
func (pe *pbEnv) do(ctx context.Context, method, route, token string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, pe.o.reqTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, pe.node.url+route, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", token)
	resp, err := pe.hc.Do(req)
	if err != nil {
		return nil, transportError("pocketbase "+method, err)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	_ = resp.Body.Close()
	if err != nil {
		return nil, transportError("pocketbase "+method, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, pbStatusError(method, resp.StatusCode, b)
	}
	return b, nil
}

// pbStatusError is a PocketBase error answer {"status","message","data"}.
func pbStatusError(method string, status int, body []byte) error {
	var eb struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(body, &eb)
	return &opError{kind: fmt.Sprintf("pocketbase %s %d %s", method, status, eb.Message), status: status}
}

// pbSeedBatch is the POST /api/batch body that creates orders from..to-1
// as records of coll.
func pbSeedBatch(coll string, from, to int) []byte {
	type req struct {
		Method string `json:"method"`
		URL    string `json:"url"`
		Body   order  `json:"body"`
	}
	rs := make([]req, 0, to-from)
	for i := from; i < to; i++ {
		rs = append(rs, req{Method: http.MethodPost, URL: "/api/collections/" + coll + "/records", Body: genOrder(i)})
	}
	b, _ := json.Marshal(map[string]any{"requests": rs}) // plain structs: cannot fail
	return b
}

// checkPBBatch checks a /api/batch answer: one 200 per request.
func checkPBBatch(body []byte, want int) error {
	var rs []struct {
		Status int             `json:"status"`
		Body   json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal(body, &rs); err != nil {
		return fmt.Errorf("pocketbase batch: unreadable answer: %w", err)
	}
	if len(rs) != want {
		return fmt.Errorf("pocketbase batch: %d results for %d requests", len(rs), want)
	}
	for i, r := range rs {
		if r.Status != http.StatusOK {
			return fmt.Errorf("pocketbase batch: request %d: %d %s", i, r.Status, r.Body)
		}
	}
	return nil
}

// seed creates records 0..n-1 of coll through /api/batch (qBatch records a
// batch, one batch at a time: SQLite has one writer) as the superuser.
func (pe *pbEnv) seed(ctx context.Context, coll string, n int, logf func(string, ...any)) error {
	if pe.seeded[coll] >= n {
		return nil
	}
	t0 := time.Now()
	for from := 0; from < n; from += qBatch {
		to := min(from+qBatch, n)
		b, err := pe.do(ctx, http.MethodPost, "/api/batch", pe.superToken, pbSeedBatch(coll, from, to))
		if err != nil {
			return fmt.Errorf("pocketbase seed %s %d..%d: %w", coll, from, to-1, err)
		}
		if err := checkPBBatch(b, to-from); err != nil {
			return fmt.Errorf("pocketbase seed %s %d..%d: %w", coll, from, to-1, err)
		}
	}
	pe.seeded[coll] = n
	logf("bench: seeded %d records of %s through PocketBase's /api/batch in %.1fs", n, coll, time.Since(t0).Seconds())
	return nil
}

// pbQueryRoute is the list request of Q1 and Q2 on coll for one status.
func pbQueryRoute(coll, status string) string {
	q := url.Values{}
	q.Set("filter", "(status='"+status+"')")
	q.Set("sort", "-createdAt")
	q.Set("perPage", fmt.Sprint(qLimit))
	q.Set("skipTotal", "1")
	return "/api/collections/" + coll + "/records?" + q.Encode()
}

// checkPBList checks a list answer {"items":[...],...} as checkOrders does.
func checkPBList(body []byte, status string, want int) error {
	var r struct {
		Items []order `json:"items"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return &opError{kind: "pocketbase list: unreadable answer"}
	}
	if r.Items == nil {
		return &opError{kind: "pocketbase list: answer without items"}
	}
	return checkOrders("pocketbase list", r.Items, status, want)
}

func (pe *pbEnv) queryOp(ctx context.Context, coll string, c, i int) error {
	status := qStatus(c, i)
	b, err := pe.do(ctx, http.MethodGet, pbQueryRoute(coll, status), pe.userToken, nil)
	if err != nil {
		return err
	}
	return checkPBList(b, status, qLimit)
}

// side prepares the PocketBase counterpart of spec: the same documents as
// our scenario's, and the same query for --query-duration a run.
func (pe *pbEnv) side(ctx context.Context, spec compareSpec, s *scenario, logf func(string, ...any)) (*side, error) {
	var coll string
	var n int
	switch spec.Name {
	case "Q1":
		coll, n = qIndexedColl, pe.o.q1Docs
	case "Q2":
		coll, n = qUnindexedColl, pe.o.q2Docs
	default:
		return pe.userSide(ctx, spec, s, logf)
	}
	if err := pe.seed(ctx, coll, n, logf); err != nil {
		return nil, err
	}
	clients := s.Clients(pe.o)
	return &side{nodes: []*benchNode{pe.node}, leader: pe.node, settle: func(context.Context) {}, close: func() {},
		run: func(ctx context.Context, _ int) (runResult, *histogram, map[string]int, map[string]int) {
			return runFor(ctx, clients, pe.o.queryDuration, func(ctx context.Context, c, i int) error {
				return pe.queryOp(ctx, coll, c, i)
			})
		}}, nil
}

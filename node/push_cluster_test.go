package node_test

// Push across a 3-voter cluster: the leader's dispatcher delivers through the
// real firebase-admin-go SDK to an FCM stand-in (internal/fcmfake), and a
// killed leader's successor resends the batches it had claimed and not marked
// sent, then goes on. Every device gets a notification at least once; the
// only duplicates are the batches in flight when the leader died.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/fcmfake"
	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/push"
	"github.com/edgebase/edgebase/raftstore"
)

// pushWait bounds every wait for a delivery outcome (generous: -race on two
// busy cores).
const pushWait = 4 * time.Minute

// pushCluster is a 3-voter cluster with one project whose FCM credentials
// point at a stand-in.
type pushCluster struct {
	t      *testing.T
	c      *nodetest.Cluster
	p      nodetest.Project
	fcm    *fcmfake.Server
	tuning push.Tuning
	// killStart and killEnd bracket the last pushKillLeaderAt's Kill.
	killStart, killEnd time.Time
}

func startPushCluster(t *testing.T, latency time.Duration, tuning push.Tuning) *pushCluster {
	t.Helper()
	t0 := time.Now()
	fcm, err := fcmfake.New(fcmfake.Options{Latency: latency})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fcm.Close) // after the nodes are killed (cleanups run last first)
	c := nodetest.Start(t, nodetest.Options{Voters: 3, FCMEndpoint: fcm.Endpoint(), PushTuning: tuning})
	leader := c.Leader(20 * time.Second)
	pc := &pushCluster{t: t, c: c, p: c.CreateProject(leader), fcm: fcm, tuning: tuning}
	var info push.CredentialsInfo
	sa := fcm.ServiceAccountJSON("fcm-" + strings.ToLower(pc.p.ID))
	if st := c.Do(leader, http.MethodPut, "/api/notifications/fcm-credentials", pc.owner(), json.RawMessage(sa), &info); st != http.StatusOK || !info.Configured {
		t.Fatalf("PUT fcm-credentials: status %d, %+v", st, info)
	}
	t.Logf("3-voter cluster, project and FCM credentials ready in %v (leader %s)", time.Since(t0).Round(time.Millisecond), c.Nodes[leader].ID)
	return pc
}

// with returns pc reporting to t (a subtest must not fail its parent).
func (pc *pushCluster) with(t *testing.T) *pushCluster {
	c := *pc
	c.t = t
	return &c
}

func (pc *pushCluster) owner() map[string]string {
	return map[string]string{"Authorization": "Bearer " + pc.p.OwnerToken, "X-Project-Id": pc.p.ID, "X-API-Key": pc.p.APIKey}
}

func (pc *pushCluster) userH(tok string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + tok, "X-Project-Id": pc.p.ID, "X-API-Key": pc.p.APIKey}
}

// call is one JSON request to member i that reports errors instead of
// failing (the member may have been killed).
func (pc *pushCluster) call(i int, method, path string, h map[string]string, body, out any) (int, error) {
	m := pc.c.Nodes[i]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, b, err := nodetest.DoJSON(ctx, m.URL(), method, path, h, body)
	if err != nil {
		return 0, fmt.Errorf("%s %s on %s: %w", method, path, m.ID, err)
	}
	if out != nil && st < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			return st, fmt.Errorf("%s %s on %s: decode %q: %w", method, path, m.ID, b, err)
		}
	}
	if st >= 300 {
		return st, fmt.Errorf("%s %s on %s: %d %s", method, path, m.ID, st, b)
	}
	return st, nil
}

// ---- devices ---------------------------------------------------------------

// pushTokenHash mirrors push.tokenHash: a token's name in paths.
func pushTokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:16])
}

// pushFakeToken is a registration token shaped like FCM's (an instance id, a
// colon, then APA91b and a long tail), unique per (tag, user, device).
func pushFakeToken(tag string, u, d int) string {
	return fmt.Sprintf("%s%07d%03d:APA91b%s", tag, u, d, strings.Repeat("x", 96))
}

type pushSeedUser struct {
	id     string
	tokens []string
	topics []string
}

// seed writes users, their devices and topic memberships straight into the
// replicated tree, in transactions of at most ~1000 ops, four at a time, as
// push.Service.Register and Subscribe write them (a device document, the
// token's owner) plus a minimal user record for these synthetic users (the
// dispatcher walks <pid>/_users). It returns how long it took.
func (pc *pushCluster) seed(users []pushSeedUser) time.Duration {
	pc.t.Helper()
	t0 := time.Now()
	pid := pc.p.ID
	now := time.Now().UTC()
	at := now.Format(time.RFC3339Nano)
	var txns [][]raftstore.Op
	var cur []raftstore.Op
	for _, u := range users {
		var ops []raftstore.Op
		ops = append(ops, raftstore.Op{Kind: raftstore.OpPut, Path: pid + "/_users/" + u.id,
			Data: pushJSON(map[string]any{"id": u.id, "email": u.id + "@seed.example.com", "name": u.id, "role": "user", "createdAt": at})})
		for _, tok := range u.tokens {
			th := pushTokenHash(tok)
			ops = append(ops,
				raftstore.Op{Kind: raftstore.OpPut, Path: pid + "/_tokens/" + th, Data: pushJSON(map[string]string{"userId": u.id})},
				raftstore.Op{Kind: raftstore.OpPut, Path: pid + "/_devices/" + u.id + "/" + th,
					Data: pushJSON(push.Device{Token: tok, Platform: "android", UserID: u.id, RegisteredAt: at})})
		}
		sub := pushJSON(map[string]string{"subscribedAt": at})
		for _, topic := range u.topics {
			ops = append(ops,
				raftstore.Op{Kind: raftstore.OpPut, Path: pid + "/_topics/" + topic + "/" + u.id, Data: sub},
				raftstore.Op{Kind: raftstore.OpPut, Path: pid + "/_usertopics/" + u.id + "/" + topic, Data: sub})
		}
		if len(cur)+len(ops) > 1000 {
			txns = append(txns, cur)
			cur = nil
		}
		cur = append(cur, ops...)
	}
	if len(cur) > 0 {
		txns = append(txns, cur)
	}
	// Any running member's store forwards to the leader. The ops are plain
	// puts, so a transaction whose outcome is unknown (leadership lost on a
	// starved machine) is simply proposed again.
	var stores []*raftstore.Store
	for _, m := range pc.c.Nodes {
		if m.Node != nil {
			stores = append(stores, m.Node.Store)
		}
	}
	work := make(chan []raftstore.Op)
	errs := make(chan error, len(txns))
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ops := range work {
				var err error
				for attempt := 0; attempt < 5; attempt++ {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					var res *raftstore.TxnResult
					res, err = stores[attempt%len(stores)].Txn(ctx, &raftstore.Txn{Time: time.Now().UnixNano(), Ops: ops})
					cancel()
					if err == nil && !res.OK() {
						err = fmt.Errorf("refused: %s at op %d", res.Err, res.Index)
						break
					}
					if err == nil || !(errors.Is(err, raftstore.ErrUnknownOutcome) || errors.Is(err, raftstore.ErrNoLeader)) {
						break
					}
				}
				if err != nil {
					errs <- fmt.Errorf("seed txn of %d ops: %w", len(ops), err)
				}
			}
		}()
	}
	for _, ops := range txns {
		work <- ops
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		pc.t.Fatal(err)
	}
	return time.Since(t0)
}

func pushJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// pushSeedUsers makes n users with k devices each: ids tag-u0000000.
func pushSeedUsers(tag string, n, k int, topics ...string) ([]pushSeedUser, []string) {
	users := make([]pushSeedUser, n)
	var all []string
	for u := range users {
		users[u] = pushSeedUser{id: fmt.Sprintf("%s-u%07d", tag, u), topics: topics}
		for d := 0; d < k; d++ {
			tok := pushFakeToken(tag, u, d)
			users[u].tokens = append(users[u].tokens, tok)
			all = append(all, tok)
		}
	}
	return users, all
}

type pushHTTPUser struct {
	id, token string
	devices   []string
}

// registerHTTP signs a user up and registers its devices through the real
// routes of member i.
func (pc *pushCluster) registerHTTP(i int, email string, devices []string) pushHTTPUser {
	pc.t.Helper()
	var reg struct {
		Token string `json:"token"`
		User  struct {
			ID string `json:"id"`
		} `json:"user"`
	}
	if _, err := pc.call(i, http.MethodPost, "/api/auth", map[string]string{"X-Project-Id": pc.p.ID, "X-API-Key": pc.p.APIKey},
		map[string]string{"action": "register", "email": email, "password": "device owner password", "name": email}, &reg); err != nil {
		pc.t.Fatal(err)
	}
	if reg.Token == "" || reg.User.ID == "" {
		pc.t.Fatalf("register %s: no token or user id", email)
	}
	u := pushHTTPUser{id: reg.User.ID, token: reg.Token, devices: devices}
	for _, tok := range devices {
		var dev struct {
			Token, Platform, RegisteredAt string
		}
		st, err := pc.call(i, http.MethodPost, "/api/notifications/register", pc.userH(u.token),
			map[string]any{"token": tok, "deviceInfo": map[string]string{"platform": "android"}}, &dev)
		if err != nil || st != http.StatusCreated || dev.Token != tok || dev.Platform != "android" {
			pc.t.Fatalf("register device of %s: status %d, %+v, %v", email, st, dev, err)
		}
	}
	return u
}

// checkSeedMatchesRegister proves that seeded documents are laid out as the
// real route lays them out: the device of an HTTP-registered token is where
// pushTokenHash says, holds exactly push.Device's fields, and its owner record
// is the same JSON seed writes.
func (pc *pushCluster) checkSeedMatchesRegister(u pushHTTPUser) {
	pc.t.Helper()
	store := pc.c.Nodes[pc.c.Leader(20*time.Second)].Node.Store
	for _, tok := range u.devices {
		th := pushTokenHash(tok)
		d, err := store.Get(pc.p.ID + "/_devices/" + u.id + "/" + th)
		if err != nil || d == nil {
			pc.t.Fatalf("device of %s registered over HTTP is not at _devices/%s/%s (%v): the seeded layout would not match", u.id, u.id, th, err)
		}
		var dev push.Device
		if err := json.Unmarshal(d.Data, &dev); err != nil {
			pc.t.Fatal(err)
		}
		if dev.Token != tok || dev.UserID != u.id || dev.Platform != "android" || dev.RegisteredAt == "" {
			pc.t.Fatalf("device document %s: %+v", d.Data, dev)
		}
		if again := pushJSON(dev); string(again) != string(d.Data) {
			pc.t.Fatalf("device document %s is not exactly push.Device (%s): the seeded documents would differ", d.Data, again)
		}
		o, err := store.Get(pc.p.ID + "/_tokens/" + th)
		if err != nil || o == nil {
			pc.t.Fatalf("token owner of %s missing: %v", tok, err)
		}
		if want := pushJSON(map[string]string{"userId": u.id}); string(o.Data) != string(want) {
			pc.t.Fatalf("token owner document %s, seed writes %s", o.Data, want)
		}
	}
}

// ---- sending and history ---------------------------------------------------

type pushAck struct {
	NotificationID string `json:"notificationId"`
	Status         string `json:"status"`
	Targets        int    `json:"targets"`
}

func (pc *pushCluster) send(i int, path string, body map[string]any, targets int) pushAck {
	pc.t.Helper()
	var ack pushAck
	st, err := pc.call(i, http.MethodPost, path, pc.owner(), body, &ack)
	if err != nil || st != http.StatusAccepted || ack.NotificationID == "" || ack.Status != "queued" {
		pc.t.Fatalf("POST %s: status %d, %+v, %v", path, st, ack, err)
	}
	if targets >= 0 && ack.Targets != targets {
		pc.t.Fatalf("POST %s: targets %d, want %d", path, ack.Targets, targets)
	}
	return ack
}

func (pc *pushCluster) sendProject(i int, title string, targets int) pushAck {
	pc.t.Helper()
	return pc.send(i, "/api/notifications/send-to-project/"+url.PathEscape(pc.p.ID), map[string]any{"title": title, "body": "b"}, targets)
}

type pushHistoryItem struct {
	ID        string  `json:"id"`
	Title     string  `json:"title"`
	Status    string  `json:"status"`
	SentAt    *string `json:"sentAt"`
	Targets   int     `json:"targets"`
	Delivered int     `json:"delivered"`
	Failed    int     `json:"failed"`
	Pruned    int     `json:"pruned"`
	Skipped   int     `json:"skipped"`
	Deferred  int     `json:"deferred"`
}

// String renders every field, sentAt's value included, for comparisons.
func (it pushHistoryItem) String() string {
	sent := "<nil>"
	if it.SentAt != nil {
		sent = *it.SentAt
	}
	return fmt.Sprintf("id=%s title=%s status=%s sentAt=%s targets=%d delivered=%d failed=%d pruned=%d skipped=%d deferred=%d",
		it.ID, it.Title, it.Status, sent, it.Targets, it.Delivered, it.Failed, it.Pruned, it.Skipped, it.Deferred)
}

func (pc *pushCluster) history(i int) ([]pushHistoryItem, error) {
	var out struct {
		Notifications []pushHistoryItem `json:"notifications"`
		NextCursor    string            `json:"nextCursor"`
	}
	if _, err := pc.call(i, http.MethodGet, "/api/notifications/history?limit=100", pc.owner(), nil, &out); err != nil {
		return nil, err
	}
	if out.NextCursor != "" {
		return nil, fmt.Errorf("history has more than one page")
	}
	return out.Notifications, nil
}

// waitSent polls member i's owner history until notification nid is sent.
func (pc *pushCluster) waitSent(i int, nid string) pushHistoryItem {
	pc.t.Helper()
	var it pushHistoryItem
	nodetest.CheckFor(pc.t, pushWait, 100*time.Millisecond, func() error {
		items, err := pc.history(i)
		if err != nil {
			return err
		}
		for _, x := range items {
			if x.ID == nid {
				it = x
				if x.Status != "sent" {
					return fmt.Errorf("notification %s on %s: %+v (fcm total %d)", nid, pc.c.Nodes[i].ID, x, pc.fcm.Total())
				}
				return nil
			}
		}
		return fmt.Errorf("notification %s not in the history of %s", nid, pc.c.Nodes[i].ID)
	})
	if it.SentAt == nil || *it.SentAt == "" {
		pc.t.Errorf("notification %s is sent without sentAt: %+v", nid, it)
	}
	return it
}

// pushJob is the dispatcher's job record, as committed.
type pushJob struct {
	ID        string `json:"id"`
	NID       string `json:"nid"`
	Cursor    string `json:"cursor"`
	Exhausted bool   `json:"exhausted"`
	Inflight  []struct {
		ID    int    `json:"id"`
		After string `json:"after"`
		Last  string `json:"last"`
	} `json:"inflight"`
	NextBatch int `json:"nextBatch"`
}

func pushJobs(n *raftstore.Store) ([]pushJob, error) {
	docs, next, err := n.List(raftstore.SystemPrefix+"/push/jobs", "", 1000)
	if err != nil {
		return nil, err
	}
	if next != "" {
		return nil, errors.New("more than 1000 push jobs")
	}
	out := make([]pushJob, len(docs))
	for i, d := range docs {
		if err := json.Unmarshal(d.Data, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// waitNoJobs polls every running member until no push job is left: the job
// of a sent notification is deleted by its last mark.
func (pc *pushCluster) waitNoJobs() {
	pc.t.Helper()
	nodetest.CheckFor(pc.t, time.Minute, 100*time.Millisecond, func() error {
		for _, m := range pc.c.Nodes {
			if m.Node == nil {
				continue
			}
			jobs, err := pushJobs(m.Node.Store)
			if err != nil {
				return err
			}
			if len(jobs) > 0 {
				return fmt.Errorf("%s still has %d push jobs: %+v", m.ID, len(jobs), jobs)
			}
		}
		return nil
	})
}

// countTokens reports, over tokens, those never delivered, those delivered
// more than once, and the deliveries beyond the first.
func (pc *pushCluster) countTokens(tokens []string) (missing []string, dupTokens, extra int) {
	for _, tok := range tokens {
		switch n := pc.fcm.Count(tok); {
		case n == 0:
			missing = append(missing, tok)
		case n > 1:
			dupTokens++
			extra += n - 1
		}
	}
	return missing, dupTokens, extra
}

func (pc *pushCluster) checkNoRejections() {
	pc.t.Helper()
	if r := pc.fcm.Rejections(); len(r) > 0 {
		pc.t.Errorf("the FCM stand-in saw %d protocol violations, first %+v", pc.fcm.RejectionCount(), r[0])
	}
}

// deliveriesOf counts the stand-in's accepted messages titled title, by token.
func (pc *pushCluster) deliveriesOf(title string) map[string]int {
	out := map[string]int{}
	for _, d := range pc.fcm.Deliveries() {
		if d.Title == title {
			out[d.Token]++
		}
	}
	return out
}

// perHandover is how many devices one change of leader may send to twice:
// the batches in flight, InFlight x BatchSize, with push.Tuning's defaults
// (500 and 8) for zero values.
func (pc *pushCluster) perHandover() int {
	b, f := pc.tuning.BatchSize, pc.tuning.InFlight
	if b <= 0 || b > 500 {
		b = 500
	}
	if f <= 0 {
		f = 8
	}
	return b * f
}

// leaderLog is who led, in order, as sampled: "" while no member led.
type leaderLog []string

// handovers is how many times leadership was taken after the first leader:
// each may resend the batches in flight at the change (InFlight x BatchSize
// devices at most). On a starved machine (-race on two busy cores)
// leadership can also move without any kill.
func (l leaderLog) handovers() int {
	n := 0
	for _, id := range l {
		if id != "" {
			n++
		}
	}
	return max(n-1, 0)
}

// watchLeaders samples who leads every 10ms until the returned stop is
// called, which returns the leaders seen (elections take far longer than
// 10ms, so none is missed).
func (pc *pushCluster) watchLeaders() (stop func() leaderLog) {
	var stores []*raftstore.Store
	for _, m := range pc.c.Nodes {
		if m.Node != nil {
			stores = append(stores, m.Node.Store)
		}
	}
	sample := func(seen leaderLog) leaderLog {
		id := ""
		for _, st := range stores {
			if st.IsLeader() {
				id = st.NodeID()
			}
		}
		if len(seen) == 0 || seen[len(seen)-1] != id {
			seen = append(seen, id)
		}
		return seen
	}
	first := sample(nil) // before the caller goes on (and kills someone)
	done := make(chan struct{})
	out := make(chan leaderLog, 1)
	go func() {
		seen := first
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			seen = sample(seen)
			select {
			case <-done:
				out <- seen
				return
			case <-tick.C:
			}
		}
	}()
	return func() leaderLog {
		close(done)
		return <-out
	}
}

// pushRaceEnabled reports whether the test binary has the race detector.
func pushRaceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

func pushSurvivor(c *nodetest.Cluster, not int) int {
	for _, i := range c.Followers(not) {
		return i
	}
	return -1
}

// ---- tests -------------------------------------------------------------------

// TestPushFanOut100k sends one notification to a project of 100,000 devices
// (99,995 users seeded through the leader's store, one device each, plus five
// users who sign up and register through the real routes) and checks that
// each device got it exactly once and the history counts them all.
//
// It is skipped under the race detector unless EDGEBASE_PUSH_100K_RACE=1:
// three race-instrumented nodes in one process apply ~300,000 seeded writes
// and ~100,000 SDK requests at roughly a tenth of the normal speed, which
// is far beyond a test's budget on a small machine (without -race the whole
// test takes 1-3 minutes on two busy cores).
func TestPushFanOut100k(t *testing.T) {
	if pushRaceEnabled() && os.Getenv("EDGEBASE_PUSH_100K_RACE") != "1" {
		t.Skip("100,000-device fan-out skipped under -race (set EDGEBASE_PUSH_100K_RACE=1 to run it anyway); run it with go test -run TestPushFanOut100k ./node")
	}
	const seeded, viaHTTP = 99_995, 5
	const total = seeded + viaHTTP
	t0 := time.Now()
	pc := startPushCluster(t, 0, push.Tuning{})
	leader := pc.c.Leader(20 * time.Second)

	var httpTokens []string
	var httpUsers []pushHTTPUser
	for u := 0; u < viaHTTP; u++ {
		tok := pushFakeToken("http", u, 0)
		httpTokens = append(httpTokens, tok)
		httpUsers = append(httpUsers, pc.registerHTTP((leader+u)%3, fmt.Sprintf("fan%d@example.com", u), []string{tok}))
	}
	for _, u := range httpUsers {
		pc.checkSeedMatchesRegister(u)
	}
	users, tokens := pushSeedUsers("fan", seeded, 1)
	took := pc.seed(users)
	t.Logf("seeded %d users with one device each (%d ops) in %v", seeded, 3*seeded, took.Round(time.Millisecond))
	tokens = append(tokens, httpTokens...)

	leader = pc.c.Leader(20 * time.Second)
	stopWatch := pc.watchLeaders()
	tSend := time.Now()
	ack := pc.sendProject(leader, "fan-out", total)
	it := pc.waitSent(pushSurvivor(pc.c, leader), ack.NotificationID)
	dispatch := time.Since(tSend)
	leaders := stopWatch()
	t.Logf("fan-out to %d devices: sent in %v (%.0f/s); history %s; leaders %q", total, dispatch.Round(time.Millisecond), float64(total)/dispatch.Seconds(), it.String(), leaders)

	// Each batch is marked once, whoever sent it: the counts are exact.
	if it.Targets != total || it.Delivered != total || it.Failed != 0 || it.Pruned != 0 || it.Skipped != 0 || it.Deferred != 0 {
		t.Errorf("history: %+v, want %d targets and delivered, nothing failed, pruned, skipped or deferred", it, total)
	}
	missing, dups, extra := pc.countTokens(tokens)
	if len(missing) > 0 {
		t.Errorf("%d devices got nothing (first %v)", len(missing), missing[:min(3, len(missing))])
	}
	if got := pc.fcm.Total(); got != total+extra {
		t.Errorf("the stand-in accepted %d messages, want %d (every device once plus %d duplicates)", got, total+extra, extra)
	}
	if h := leaders.handovers(); h == 0 {
		// One leader from start to end: exactly once.
		if dups > 0 {
			t.Errorf("%d devices got it more than once (%d extra) though one leader did the whole send", dups, extra)
		}
	} else {
		// The starved cluster changed leader on its own: each change may
		// resend the batches in flight.
		t.Logf("leadership moved %d time(s) during the send: %d devices got it twice (%d extra)", h, dups, extra)
		if extra > h*pc.perHandover() {
			t.Errorf("%d extra deliveries, more than %d handover(s) x InFlight x BatchSize = %d", extra, h, h*pc.perHandover())
		}
	}
	pc.checkNoRejections()
	pc.waitNoJobs()
	t.Logf("TestPushFanOut100k total %v", time.Since(t0).Round(time.Millisecond))
}

// pushKillLeaderAt kills the leader once the stand-in has accepted killAt
// messages of a send to n devices, and checks that the send was not over by
// then. It returns the killed member.
func pushKillLeaderAt(t *testing.T, pc *pushCluster, n, killAt int) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), pushWait)
	defer cancel()
	if err := pc.fcm.WaitTotal(ctx, killAt); err != nil {
		t.Fatalf("waiting for %d deliveries before the kill: %v (total %d)", killAt, err, pc.fcm.Total())
	}
	leader := pc.c.Leader(5 * time.Second)
	atKill := pc.fcm.Total()
	pc.killStart = time.Now()
	pc.c.Kill(leader)
	pc.killEnd = time.Now()
	afterKill := pc.fcm.Total()
	t.Logf("killed leader %s with %d deliveries accepted (%d once it was down, %v later)", pc.c.Nodes[leader].ID, atKill, afterKill, pc.killEnd.Sub(pc.killStart).Round(time.Millisecond))
	if afterKill >= n {
		t.Fatalf("the send was complete (%d of %d) before the leader was down: the failover was not exercised", afterKill, n)
	}
	return leader
}

// pushCheckFailover checks the outcome of a send to tokens whose leader old
// was killed mid-send: every device reached, duplicates within the batches
// that were in flight, the history exact, the killed member back in the
// cluster with the same history. It returns the history entry.
func pushCheckFailover(t *testing.T, pc *pushCluster, tokens []string, nid string, old int, tKill time.Time, stopWatch func() leaderLog) pushHistoryItem {
	t.Helper()
	n := len(tokens)
	newLeader := pc.c.Leader(30 * time.Second)
	t.Logf("new leader %s, %v after the kill", pc.c.Nodes[newLeader].ID, time.Since(tKill).Round(time.Millisecond))
	reader := pushSurvivor(pc.c, newLeader)
	it := pc.waitSent(reader, nid)
	leaders := stopWatch()
	t.Logf("sent %v after the kill; history on %s: %s; leaders during the send: %q", time.Since(tKill).Round(time.Millisecond), pc.c.Nodes[reader].ID, it.String(), leaders)

	missing, dups, extra := pc.countTokens(tokens)
	// One handover (the kill) resends at most InFlight batches; should the
	// starved cluster also change leader on its own, each change may too.
	handovers := max(leaders.handovers(), 1)
	bound := handovers * pc.perHandover()
	t.Logf("observed: %d devices delivered more than once, %d extra deliveries (bound %d = %d handover(s) x InFlight %d x BatchSize %d), stand-in total %d",
		dups, extra, bound, handovers, pc.tuning.InFlight, pc.tuning.BatchSize, pc.fcm.Total())
	if len(missing) > 0 {
		t.Errorf("%d of %d devices never got the notification (first %v)", len(missing), n, missing[:min(3, len(missing))])
	}
	if dups > bound || extra > bound {
		t.Errorf("%d devices got duplicates (%d extra deliveries), more than handovers x InFlight x BatchSize = %d (leaders during the send: %q)", dups, extra, bound, leaders)
	}
	if got, want := pc.fcm.Total(), n+extra; got != want {
		t.Errorf("stand-in total %d, want %d (every device once plus %d duplicates)", got, want, extra)
	}
	// With one change of leader, a device is sent to by the killed leader
	// and at most once more by the resend of its successor: a third delivery
	// means some leader sent a claimed batch twice.
	hist := map[int]int{}
	var thrice string
	for _, tok := range tokens {
		k := pc.fcm.Count(tok)
		hist[k]++
		if k > 2 && thrice == "" {
			thrice = tok
		}
	}
	t.Logf("devices by number of deliveries: %v", hist)
	if thrice != "" && leaders.handovers() == 1 {
		var at []string
		for _, d := range pc.fcm.Deliveries() {
			if d.Token == thrice {
				at = append(at, d.At.Format("15:04:05.000"))
			}
		}
		t.Errorf("with one change of leader (%q), %d devices got the notification 3 times or more; e.g. %s at %v (the kill ran from %s to %s)",
			leaders, dups-hist[2], thrice, at, pc.killStart.Format("15:04:05.000"), pc.killEnd.Format("15:04:05.000"))
	}
	// Each claimed batch is marked exactly once (by the leader that sent it,
	// or by its successor after resending it), so the counts are exact even
	// though some devices got the message twice.
	if it.Targets != n || it.Delivered != n || it.Failed != 0 || it.Pruned != 0 {
		t.Errorf("history %+v: want targets = delivered = %d, none failed or pruned", it, n)
	}
	pc.checkNoRejections()
	pc.waitNoJobs()

	// The killed member rejoins and serves the same history.
	pc.c.StartMember(old)
	pc.c.WaitReady(old, 30*time.Second)
	if back := pc.waitSent(old, nid); back.String() != it.String() {
		t.Errorf("restarted %s shows %s, %s showed %s", pc.c.Nodes[old].ID, back.String(), pc.c.Nodes[reader].ID, it.String())
	}
	pc.waitNoJobs()
	return it
}

// TestPushFailoverMidSend kills the leader while it sends to 10,000 devices,
// two batches of 500 at a time.
func TestPushFailoverMidSend(t *testing.T) {
	const n = 10_000
	t0 := time.Now()
	pc := startPushCluster(t, 5*time.Millisecond, push.Tuning{BatchSize: 500, InFlight: 2})
	users, tokens := pushSeedUsers("mid", n/5, 5)
	took := pc.seed(users)
	t.Logf("seeded %d users x 5 devices in %v", n/5, took.Round(time.Millisecond))
	leader := pc.c.Leader(20 * time.Second)
	stopWatch := pc.watchLeaders()
	ack := pc.sendProject(leader, "mid-send", n)
	old := pushKillLeaderAt(t, pc, n, 2000)
	pushCheckFailover(t, pc, tokens, ack.NotificationID, old, time.Now(), stopWatch)
	t.Logf("TestPushFailoverMidSend total %v", time.Since(t0).Round(time.Millisecond))
}

type pushSchedule struct {
	ID             string      `json:"id"`
	Title          string      `json:"title"`
	Target         push.Target `json:"target"`
	SendAt         string      `json:"sendAt"`
	Status         string      `json:"status"`
	FiredAt        string      `json:"firedAt"`
	NotificationID string      `json:"notificationId"`
}

// TestPushFailoverDueSchedule schedules a notification to the whole project
// (10,000 devices) two seconds ahead and kills the leader once its deliveries
// have started: the schedule fires once, not early, and its one notification
// reaches every device.
func TestPushFailoverDueSchedule(t *testing.T) {
	const n = 10_000
	const title = "scheduled-failover"
	t0 := time.Now()
	pc := startPushCluster(t, 5*time.Millisecond, push.Tuning{BatchSize: 500, InFlight: 2})
	users, tokens := pushSeedUsers("due", n/5, 5)
	took := pc.seed(users)
	t.Logf("seeded %d users x 5 devices in %v", n/5, took.Round(time.Millisecond))
	leader := pc.c.Leader(20 * time.Second)

	sendAt := time.Now().Add(2 * time.Second).Truncate(time.Second).Add(time.Second).UTC()
	var sc pushSchedule
	if st, err := pc.call(leader, http.MethodPost, "/api/notifications/schedule", pc.owner(),
		map[string]any{"title": title, "body": "b", "sendAt": sendAt.Format(time.RFC3339)}, &sc); err != nil || st != http.StatusCreated {
		t.Fatalf("schedule: %d %v", st, err)
	}
	if sc.ID == "" || sc.Status != "scheduled" || !sc.Target.Project {
		t.Fatalf("schedule answer %+v", sc)
	}
	stopWatch := pc.watchLeaders()
	old := pushKillLeaderAt(t, pc, n, 2000)
	tKill := time.Now()
	if ds := pc.fcm.Deliveries(); len(ds) == 0 {
		t.Errorf("no delivery recorded")
	} else if ds[0].At.Before(sendAt) {
		t.Errorf("first delivery at %v, before sendAt %v", ds[0].At, sendAt)
	}

	// The schedule shows it fired, on a survivor.
	var fired pushSchedule
	reader := pushSurvivor(pc.c, old)
	nodetest.CheckFor(t, time.Minute, 100*time.Millisecond, func() error {
		var out struct {
			Scheduled []pushSchedule `json:"scheduled"`
		}
		if _, err := pc.call(reader, http.MethodGet, "/api/notifications/scheduled?limit=100", pc.owner(), nil, &out); err != nil {
			return err
		}
		for _, s := range out.Scheduled {
			if s.ID == sc.ID {
				fired = s
				if s.Status != "sent" || s.NotificationID == "" || s.FiredAt == "" {
					return fmt.Errorf("schedule %+v", s)
				}
				return nil
			}
		}
		return fmt.Errorf("schedule %s not listed", sc.ID)
	})
	pushCheckFailover(t, pc, tokens, fired.NotificationID, old, tKill, stopWatch)

	// Fired exactly once: one notification with that title, and it is the
	// schedule's.
	items, err := pc.history(reader)
	if err != nil {
		t.Fatal(err)
	}
	var same []pushHistoryItem
	for _, it := range items {
		if it.Title == title {
			same = append(same, it)
		}
	}
	if len(same) != 1 || same[0].ID != fired.NotificationID {
		t.Errorf("history holds %d notifications titled %q (%+v), want exactly the schedule's %s", len(same), title, same, fired.NotificationID)
	}
	d, err := pc.c.Nodes[reader].Node.Store.Get(pc.p.ID + "/_notifications/" + fired.NotificationID)
	if err != nil || d == nil {
		t.Fatalf("notification record: %v", err)
	}
	var rec struct {
		ScheduleID string `json:"scheduleId"`
	}
	if err := json.Unmarshal(d.Data, &rec); err != nil || rec.ScheduleID != sc.ID {
		t.Errorf("notification record %s: scheduleId %q, want %q (%v)", d.Data, rec.ScheduleID, sc.ID, err)
	}
	t.Logf("TestPushFailoverDueSchedule total %v", time.Since(t0).Round(time.Millisecond))
}

// TestPushKillRightAfterAck kills the leader right after it acknowledged a
// send-to-project and before the job claimed anything: the successor does
// the whole send, each device exactly once. To make "before any claim" a
// fact rather than a race, the dispatcher's only send slot (InFlight 1) is
// held by another notification whose one device answers 429 with a long
// Retry-After; the job record is checked unclaimed at the kill.
func TestPushKillRightAfterAck(t *testing.T) {
	const users, perUser = 1000, 2
	const title, blockTitle = "after-ack", "blocker"
	t0 := time.Now()
	pc := startPushCluster(t, 0, push.Tuning{BatchSize: 500, InFlight: 1})
	seedUsers, tokens := pushSeedUsers("ack", users, perUser)
	blocker := pushSeedUser{id: "blocker", tokens: []string{pushFakeToken("block", 0, 0)}}
	blockTok := blocker.tokens[0]
	took := pc.seed(append(seedUsers, blocker))
	tokens = append(tokens, blockTok)
	n := len(tokens)
	t.Logf("seeded %d devices in %v", n, took.Round(time.Millisecond))
	leader := pc.c.Leader(20 * time.Second)

	pc.fcm.FailTransient(blockTok, 1, http.StatusTooManyRequests, 20*time.Second)
	ackB := pc.send(leader, "/api/notifications/send-to-user/blocker", map[string]any{"title": blockTitle}, 1)
	nodetest.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
		if a := pc.fcm.Attempts(blockTok); a != 1 {
			return fmt.Errorf("blocker attempts %d", a)
		}
		return nil
	})
	ack := pc.sendProject(leader, title, n)

	// At the kill: the job is committed and unclaimed, nothing delivered.
	jobs, err := pushJobs(pc.c.Nodes[leader].Node.Store)
	if err != nil {
		t.Fatal(err)
	}
	var main *pushJob
	for i := range jobs {
		if jobs[i].NID == ack.NotificationID {
			main = &jobs[i]
		}
	}
	if main == nil || main.Cursor != "" || len(main.Inflight) != 0 || main.NextBatch != 0 {
		t.Fatalf("the job of %s is not committed-and-unclaimed at the kill: %+v (all jobs %+v)", ack.NotificationID, main, jobs)
	}
	if tot := pc.fcm.Total(); tot != 0 {
		t.Fatalf("%d messages delivered before the kill, want 0", tot)
	}
	stopWatch := pc.watchLeaders()
	pc.c.Kill(leader)
	tKill := time.Now()
	newLeader := pc.c.Leader(30 * time.Second)
	reader := pushSurvivor(pc.c, newLeader)
	it := pc.waitSent(reader, ack.NotificationID)
	itB := pc.waitSent(reader, ackB.NotificationID)
	if leaders := stopWatch(); leaders.handovers() != 1 {
		// Exactly once holds when the successor is the only other leader;
		// should the starved cluster move leadership again, each change
		// may resend the batches in flight.
		h := leaders.handovers()
		missing, dups, extra := pc.countTokens(tokens)
		t.Logf("leadership moved %d times (%q): only at-least-once applies; %d devices got duplicates (%d extra)", h, leaders, dups, extra)
		if len(missing) > 0 || extra > (h-1)*pc.perHandover()+1 || it.Delivered != n {
			t.Errorf("%d devices got nothing, %d extra deliveries (bound %d), history %s", len(missing), extra, (h-1)*pc.perHandover()+1, it)
		}
		return
	}
	t.Logf("after the kill: %s sent in %v: %s; blocker %s", title, time.Since(tKill).Round(time.Millisecond), it.String(), itB.String())

	got := pc.deliveriesOf(title)
	var wrong []string
	for _, tok := range tokens {
		if got[tok] != 1 {
			wrong = append(wrong, fmt.Sprintf("%s:%d", tok, got[tok]))
		}
	}
	if len(wrong) > 0 || len(got) != n {
		t.Errorf("%d devices did not get %q exactly once (first %v); %d distinct tokens got it, want %d", len(wrong), title, wrong[:min(3, len(wrong))], len(got), n)
	}
	if it.Targets != n || it.Delivered != n || it.Failed != 0 {
		t.Errorf("history of %q: %+v, want %d delivered, none failed", title, it, n)
	}
	// The blocker's batch was claimed and cut short by the kill: resent once.
	if b := pc.deliveriesOf(blockTitle); len(b) != 1 || b[blockTok] != 1 || itB.Delivered != 1 || itB.Failed != 0 {
		t.Errorf("blocker: deliveries %v, history %+v; want one delivery", b, itB)
	}
	if a := pc.fcm.Attempts(blockTok); a != 3 {
		t.Errorf("blocker token attempted %d times, want 3 (429 on the old leader, the resend, the project send)", a)
	}
	pc.checkNoRejections()
	pc.waitNoJobs()
	t.Logf("TestPushKillRightAfterAck total %v", time.Since(t0).Round(time.Millisecond))
}

// deviceTokens lists a user's devices through GET /api/notifications/devices on member i.
func (pc *pushCluster) deviceTokens(i int, u pushHTTPUser) ([]string, error) {
	var out struct {
		Devices []push.Device `json:"devices"`
	}
	if _, err := pc.call(i, http.MethodGet, "/api/notifications/devices", pc.userH(u.token), nil, &out); err != nil {
		return nil, err
	}
	var toks []string
	for _, d := range out.Devices {
		toks = append(toks, d.Token)
	}
	sort.Strings(toks)
	return toks, nil
}

// TestPushPruneAndRetries goes through the real SDK: unregistered tokens are
// pruned (and not targeted again), 503s are retried by the SDK, and a 429
// with Retry-After is retried by the sender no sooner than asked.
func TestPushPruneAndRetries(t *testing.T) {
	t0 := time.Now()
	pc := startPushCluster(t, 0, push.Tuning{})
	leader := pc.c.Leader(20 * time.Second)
	var us []pushHTTPUser
	for u := 0; u < 4; u++ {
		us = append(us, pc.registerHTTP((leader+u)%3, fmt.Sprintf("pr%d@example.com", u),
			[]string{pushFakeToken("pr", u, 0), pushFakeToken("pr", u, 1)}))
	}
	gone := []string{us[0].devices[0], us[1].devices[1]}
	for _, tok := range gone {
		pc.fcm.SetUnregistered(tok)
	}

	t.Run("PruneUnregistered", func(t *testing.T) {
		pc := pc.with(t)
		ack := pc.sendProject(leader, "prune-1", 8)
		it := pc.waitSent(leader, ack.NotificationID)
		if it.Delivered != 6 || it.Pruned != 2 || it.Failed != 0 {
			t.Errorf("history %+v: want 6 delivered, 2 pruned, 0 failed", it)
		}
		for _, tok := range gone {
			if a, c := pc.fcm.Attempts(tok), pc.fcm.Count(tok); a != 1 || c != 0 {
				t.Errorf("unregistered token: %d attempts, %d deliveries; want 1 and 0 (not retried)", a, c)
			}
			if d, err := pc.c.Nodes[leader].Node.Store.Get(pc.p.ID + "/_tokens/" + pushTokenHash(tok)); err != nil || d != nil {
				t.Errorf("token owner of a pruned token still there: %v %v", d, err)
			}
		}
		// Every node lists what is left, through the real route.
		want := map[int][]string{0: {us[0].devices[1]}, 1: {us[1].devices[0]}}
		for u, toks := range want {
			for i := range pc.c.Nodes {
				nodetest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
					got, err := pc.deviceTokens(i, us[u])
					if err != nil {
						return err
					}
					if strings.Join(got, ",") != strings.Join(toks, ",") {
						return fmt.Errorf("devices of user %d on %s: %v, want %v", u, pc.c.Nodes[i].ID, got, toks)
					}
					return nil
				})
			}
		}
		ack2 := pc.sendProject(leader, "prune-2", 6)
		it2 := pc.waitSent(leader, ack2.NotificationID)
		if it2.Delivered != 6 || it2.Pruned != 0 || it2.Failed != 0 {
			t.Errorf("second send: %+v, want 6 delivered", it2)
		}
		for _, tok := range gone {
			if a := pc.fcm.Attempts(tok); a != 1 {
				t.Errorf("pruned token attempted %d times after a second send, want 1 (no longer targeted)", a)
			}
		}
	})

	t.Run("Retry503BySDK", func(t *testing.T) {
		pc := pc.with(t)
		tok := us[2].devices[0]
		before := pc.fcm.Attempts(tok)
		pc.fcm.FailTransient(tok, 2, http.StatusServiceUnavailable, 0)
		ack := pc.send(leader, "/api/notifications/send-to-user/"+us[2].id, map[string]any{"title": "retry-503"}, 2)
		it := pc.waitSent(leader, ack.NotificationID)
		if it.Delivered != 2 || it.Failed != 0 {
			t.Errorf("history %+v: want 2 delivered", it)
		}
		if a := pc.fcm.Attempts(tok) - before; a != 3 {
			t.Errorf("%d attempts for a token failing twice with 503, want 3", a)
		}
		if got := pc.deliveriesOf("retry-503"); got[tok] != 1 || got[us[2].devices[1]] != 1 {
			t.Errorf("deliveries %v", got)
		}
	})

	t.Run("Retry429HonoursRetryAfter", func(t *testing.T) {
		pc := pc.with(t)
		tok := us[3].devices[0]
		before := pc.fcm.Attempts(tok)
		pc.fcm.FailTransient(tok, 1, http.StatusTooManyRequests, time.Second)
		tReq := time.Now()
		ack := pc.send(leader, "/api/notifications/send-to-user/"+us[3].id, map[string]any{"title": "retry-429"}, 2)
		it := pc.waitSent(leader, ack.NotificationID)
		if it.Delivered != 2 || it.Failed != 0 {
			t.Errorf("history %+v: want 2 delivered", it)
		}
		if a := pc.fcm.Attempts(tok) - before; a != 2 {
			t.Errorf("%d attempts for a token answered 429 once, want 2", a)
		}
		var at time.Time
		for _, d := range pc.fcm.Deliveries() {
			if d.Title == "retry-429" && d.Token == tok {
				at = d.At
			}
		}
		if at.IsZero() {
			t.Fatalf("no delivery of retry-429 to the throttled token")
		}
		if wait := at.Sub(tReq); wait < time.Second {
			t.Errorf("delivered %v after the request, sooner than Retry-After: 1", wait)
		} else {
			t.Logf("delivered %v after the request (Retry-After: 1)", wait.Round(time.Millisecond))
		}
	})
	pc.checkNoRejections()
	t.Logf("TestPushPruneAndRetries total %v", time.Since(t0).Round(time.Millisecond))
}

// TestPushBatchCapWithMultiDeviceUsers sends to 200 users of three devices
// each (600 devices, BatchSize 500). A claimed batch must never hold more
// than FCM's SendEach takes (500 messages), whatever the users' device
// counts.
func TestPushBatchCapWithMultiDeviceUsers(t *testing.T) {
	const n = 600
	pc := startPushCluster(t, 0, push.Tuning{})
	users, tokens := pushSeedUsers("cap", n/3, 3, "uneven")
	pc.seed(users)
	leader := pc.c.Leader(20 * time.Second)
	ack := pc.send(leader, "/api/notifications/send-to-topic", map[string]any{"topic": "uneven", "title": "cap"}, n)
	it := pc.waitSent(leader, ack.NotificationID)
	if it.Delivered != n || it.Failed != 0 {
		var rec struct {
			LastError string `json:"lastError"`
		}
		if d, err := pc.c.Nodes[leader].Node.Store.Get(pc.p.ID + "/_notifications/" + ack.NotificationID); err == nil && d != nil {
			_ = json.Unmarshal(d.Data, &rec)
		}
		t.Errorf("history %+v: want %d delivered, none failed (last error %q)", it, n, rec.LastError)
	}
	missing, dups, _ := pc.countTokens(tokens)
	if len(missing) > 0 || dups > 0 {
		t.Errorf("%d of %d devices got nothing, %d got duplicates", len(missing), n, dups)
	}
	pc.checkNoRejections()
}

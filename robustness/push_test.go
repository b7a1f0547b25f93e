package robustness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/edgebase/edgebase/internal/fcmfake"
	"github.com/edgebase/edgebase/internal/proctest"
)

// pushFaults are the faults that move the leader, which runs the scheduler
// and the FCM dispatch.
var pushFaults = []string{"kill-leader", "pause-leader", "partition-leader"}

// TestRobustnessPush sends and schedules notifications to every device of
// a project while the leader is killed, paused or cut off, and checks with
// the stand-in FCM's records that every due notification reached every
// device at least once, with duplicates only around a leadership change.
func TestRobustnessPush(t *testing.T) {
	p := currentProfile(t)
	for _, name := range pushFaults {
		i := slices.IndexFunc(faultCases, func(f faultCase) bool { return f.name == name })
		fc := faultCases[i]
		for _, seed := range p.seeds {
			t.Run(fmt.Sprintf("%s/seed=%d", fc.name, seed), func(t *testing.T) { runPushFault(t, fc, seed, p) })
		}
	}
}

// pushSend is one send-to-project or schedule call and what it answered.
type pushSend struct {
	Title     string    `json:"title"`
	Scheduled bool      `json:"scheduled"`
	SendAt    time.Time `json:"sendAt,omitzero"`
	Node      string    `json:"node"`
	Outcome   Outcome   `json:"outcome"`
	ID        string    `json:"id"`
	Err       string    `json:"err,omitempty"`
}

func runPushFault(t *testing.T, fc faultCase, seed uint64, p profile) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if fc.needsNet && os.Geteuid() != 0 {
		if requireFaults() {
			t.Fatalf("%s needs root (iptables, a user per node) and EDGEBASE_REQUIRE_FAULTS=1", fc.name)
		}
		t.Skipf("%s needs root for iptables and a user per node", fc.name)
	}
	fcm, err := fcmfake.New(fcmfake.Options{Latency: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fcm.Close) // after the nodes are killed: cleanups run last first
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, ctx, clusterOpts{env: []string{"EDGEBASE_FCM_ENDPOINT=" + fcm.Endpoint(), "EDGEBASE_SECRET_KEY=" + hex.EncodeToString(key)}})
	if fc.needsNet && c.net == nil {
		if requireFaults() {
			t.Fatalf("%s: network partitions are not available here", fc.name)
		}
		t.Skipf("%s: network partitions are not available here", fc.name)
	}
	r := &run{t: t, c: c, p: p, seed: seed, rng: mrand.New(mrand.NewPCG(seed, 0x9054)), start: time.Now()}
	leader := c.leader(20 * time.Second)
	resp, err := c.do(leader, 15*time.Second, http.MethodPut, "/api/notifications/fcm-credentials", c.pr.Headers(),
		json.RawMessage(fcm.ServiceAccountJSON("fcm-"+strings.ToLower(c.pr.ID))))
	if err != nil || resp.Status != http.StatusOK {
		t.Fatalf("PUT fcm-credentials: %v %v", resp, err)
	}
	devices := registerDevices(t, c, 8, 3)

	// Each rise of the cluster's Raft term is a (possible) leadership
	// change, and excuses duplicates around it.
	stopWatch := watchTerms(ctx, r)

	// Sends through every node, and scheduled notifications due during
	// the fault.
	var sendsMu sync.Mutex
	var sends []pushSend
	sendCtx, stopSends := context.WithCancel(ctx)
	var senders sync.WaitGroup
	for i, n := range c.nodes {
		senders.Go(func() {
			for seq := 0; sendCtx.Err() == nil; seq++ {
				s := pushOnce(c, n, fmt.Sprintf("send-%s-%d", n.id, seq), time.Time{})
				sendsMu.Lock()
				sends = append(sends, s)
				sendsMu.Unlock()
				select {
				case <-sendCtx.Done():
				case <-time.After(time.Duration(150+50*i) * time.Millisecond):
				}
			}
		})
	}
	for k := range 6 {
		// RFC 3339 has second resolution here: due 2..7 s from now, across
		// the fault.
		at := time.Now().Add(time.Duration(2+k) * time.Second).UTC().Truncate(time.Second)
		s := pushOnce(c, c.nodes[k%len(c.nodes)], fmt.Sprintf("scheduled-%d", k), at)
		if s.Outcome != OutOK {
			t.Fatalf("schedule %s: %s", s.Title, s.Err)
		}
		sendsMu.Lock()
		sends = append(sends, s)
		sendsMu.Unlock()
	}
	time.Sleep(p.warm) // sends before the fault: a duration of the run
	fc.run(r)
	r.event("fault healed; waiting for every node")
	for _, n := range c.nodes {
		c.mustReady(n, 60*time.Second)
	}
	time.Sleep(p.after) // sends on the whole cluster again
	stopSends()
	senders.Wait()

	// What was due: every acknowledged send, and every schedule (all due
	// by now: the last one 7 s after it was made).
	sendsMu.Lock()
	all := slices.Clone(sends)
	sendsMu.Unlock()
	maybe := map[string]bool{} // unknown outcome: delivered or not, both fine
	var due []Due
	for _, s := range all {
		switch s.Outcome {
		case OutOK:
			due = append(due, Due{NotificationID: s.Title, Devices: devices})
		case OutUnknown:
			maybe[s.Title] = true
			if len(maybe) == 1 {
				r.event("first send of unknown outcome: %+v", s)
			}
		}
	}
	lastDue := time.Now()
	for _, s := range all {
		if s.Scheduled && s.SendAt.After(lastDue) {
			lastDue = s.SendAt
		}
	}
	var deliveries []Delivery
	collect := func() {
		deliveries = deliveries[:0]
		for _, d := range fcm.Deliveries() {
			if !maybe[d.Title] {
				deliveries = append(deliveries, Delivery{NotificationID: d.Title, Device: d.Token, At: d.At})
			}
		}
	}
	c.checkFor(90*time.Second, "every due notification delivered to every device", func() error {
		collect()
		rep, _ := CheckPush(due, deliveries, nil, 0)
		if rep.Missing > 0 {
			return fmt.Errorf("%d of %d (notification, device) pairs not delivered yet, e.g. %v", rep.Missing, rep.Expected, rep.MissingList[:min(3, len(rep.MissingList))])
		}
		if time.Now().Before(lastDue) {
			return fmt.Errorf("the last schedule is due at %s", lastDue.Format(time.RFC3339))
		}
		return nil
	})
	var changes []LeaderChange
	for _, at := range stopWatch() {
		changes = append(changes, LeaderChange{At: at})
	}
	collect()
	rep, errs := CheckPush(due, deliveries, changes, time.Second)
	r.event("%d sends (%d due, %d of unknown outcome), %d devices, %d deliveries: %+v; %d term changes seen",
		len(all), len(due), len(maybe), len(devices), len(deliveries), rep, len(changes))
	if len(changes) == 0 {
		t.Errorf("the fault started no election: nothing was proven")
	}
	if rej := fcm.Rejections(); len(rej) > 0 {
		t.Errorf("the FCM stand-in saw %d protocol violations, first %+v", fcm.RejectionCount(), rej[0])
	}
	for _, err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		res := &result{name: fc.name, seed: seed}
		dir := saveReport(t, r, res, porcupine.LinearizationInfo{}, nil)
		b, _ := json.MarshalIndent(map[string]any{"sends": all, "deliveries": deliveries, "changes": changes}, "", "  ")
		if err := os.WriteFile(dir+"/push.json", b, 0o644); err != nil {
			t.Log(err)
		}
		t.Errorf("replay: EDGEBASE_ROBUSTNESS_SEED=%d go test ./robustness -run 'TestRobustnessPush/%s/'", seed, fc.name)
	}
}

// pushOnce sends to the whole project through n (at zero) or schedules for
// at, titled title, and classifies the answer like a write.
func pushOnce(c *cluster, n *node, title string, at time.Time) pushSend {
	s := pushSend{Title: title, Node: n.id, Scheduled: !at.IsZero(), SendAt: at}
	body := map[string]any{"title": title, "body": "robustness"}
	path, want := "/api/notifications/send-to-project/"+c.pr.ID, http.StatusAccepted
	if s.Scheduled {
		body["sendAt"] = at.Format(time.RFC3339)
		path, want = "/api/notifications/schedule", http.StatusCreated
	}
	r, err := c.do(n, 4*time.Second, http.MethodPost, path, c.pr.Headers(), body)
	s.Outcome = outcome(r, err)
	switch {
	case err != nil:
		s.Err = err.Error()
	case r.Status != want:
		s.Err = r.String()
		if s.Outcome == OutOK {
			s.Outcome = OutUnknown // a 2xx we do not expect: keep it out of "due"
		}
	default:
		var ack struct {
			NotificationID string `json:"notificationId"`
			ID             string `json:"id"`
		}
		_ = json.Unmarshal(r.Body, &ack)
		s.ID = ack.NotificationID + ack.ID
	}
	return s
}

// registerDevices signs up users and registers perUser devices each, and
// returns the device tokens.
func registerDevices(t *testing.T, c *cluster, users, perUser int) []string {
	t.Helper()
	var tokens []string
	for u := range users {
		n := c.nodes[u%len(c.nodes)]
		email := fmt.Sprintf("device-owner-%02d@example.com", u)
		r, err := c.do(n, 30*time.Second, http.MethodPost, "/api/auth", map[string]string{"X-Project-Id": c.pr.ID, "X-API-Key": c.pr.APIKey},
			map[string]string{"action": "register", "email": email, "password": "a device owner's password", "name": email})
		var reg struct {
			Token string `json:"token"`
		}
		if err != nil || r.Status != http.StatusCreated || json.Unmarshal(r.Body, &reg) != nil || reg.Token == "" {
			t.Fatalf("register %s on %s: %v %v", email, n.id, r, err)
		}
		h := map[string]string{"Authorization": "Bearer " + reg.Token, "X-Project-Id": c.pr.ID, "X-API-Key": c.pr.APIKey}
		for d := range perUser {
			tok := fmt.Sprintf("robust%02d%02d:APA91b%s", u, d, strings.Repeat("z", 96))
			r, err := c.do(n, 30*time.Second, http.MethodPost, "/api/notifications/register", h,
				map[string]any{"token": tok, "deviceInfo": map[string]string{"platform": "android"}})
			if err != nil || r.Status != http.StatusCreated {
				t.Fatalf("register device %s on %s: %v %v", tok, n.id, r, err)
			}
			tokens = append(tokens, tok)
		}
	}
	return tokens
}

// raftTerm reads edgebase_raft_term from n's /metrics.
func raftTerm(ctx context.Context, c *cluster, n *node) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	r, err := proctest.DoJSON(ctx, c.http, 300*time.Millisecond, http.MethodGet, n.url()+"/metrics", nil, nil)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(r.Body), "\n") {
		if v, ok := strings.CutPrefix(line, "edgebase_raft_term "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return uint64(f), err
		}
	}
	return 0, fmt.Errorf("%s /metrics: no edgebase_raft_term", n.id)
}

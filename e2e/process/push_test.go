package process

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/fcmfake"
)

// The binary's push tuning (push.Tuning.withDefaults): batches of 500
// devices, 8 batches in flight.
const (
	pushBatchSize = 500
	pushInFlight  = 8
)

// pushHistoryItem is one entry of the owner's notification history.
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

func (it pushHistoryItem) String() string {
	sent := "<nil>"
	if it.SentAt != nil {
		sent = *it.SentAt
	}
	return fmt.Sprintf("id=%s title=%s status=%s sentAt=%s targets=%d delivered=%d failed=%d pruned=%d skipped=%d deferred=%d",
		it.ID, it.Title, it.Status, sent, it.Targets, it.Delivered, it.Failed, it.Pruned, it.Skipped, it.Deferred)
}

// pushWatchLeaders polls p's view of who leads every 50ms until the
// returned stop is called, which returns the distinct leaders seen in order
// ("" while none is known).
func pushWatchLeaders(c *cluster, p *proc) (stop func() []string) {
	done := make(chan struct{})
	out := make(chan []string, 1)
	go func() {
		var seen []string
		for {
			id := ""
			if st, err := c.clusterStatus(p); err == nil {
				id = st.Leader
			}
			if len(seen) == 0 || seen[len(seen)-1] != id {
				seen = append(seen, id)
			}
			select {
			case <-done:
				out <- seen
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() []string {
		close(done)
		return <-out
	}
}

// pushNotification reads notification nid from p's owner history.
func pushNotification(c *cluster, p *proc, pr project, nid string) (pushHistoryItem, error) {
	r, err := doJSON(c.ctx, httpClient, 10*time.Second, http.MethodGet, p.url()+"/api/notifications/history?limit=100", pr.Headers(), nil)
	if err != nil {
		return pushHistoryItem{}, fmt.Errorf("history on %s: %w", p.id, err)
	}
	if r.status != http.StatusOK {
		return pushHistoryItem{}, fmt.Errorf("history on %s: %s", p.id, r)
	}
	var out struct {
		Notifications []pushHistoryItem `json:"notifications"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil {
		return pushHistoryItem{}, fmt.Errorf("history on %s: decode %s: %w", p.id, r, err)
	}
	for _, it := range out.Notifications {
		if it.ID == nid {
			return it, nil
		}
	}
	return pushHistoryItem{}, fmt.Errorf("notification %s not in the history of %s", nid, p.id)
}

// pushWaitSent polls p's owner history until notification nid is sent.
func pushWaitSent(t *testing.T, c *cluster, p *proc, pr project, nid string, total time.Duration) pushHistoryItem {
	t.Helper()
	var it pushHistoryItem
	checkFor(t, total, 200*time.Millisecond, func() error {
		var err error
		if it, err = pushNotification(c, p, pr, nid); err != nil {
			return err
		}
		if it.Status != "sent" {
			return fmt.Errorf("notification on %s: %s", p.id, it.String())
		}
		return nil
	})
	return it
}

// pushRegisterUsers signs users up and registers perUser devices each through
// the real routes, spread over the nodes, workers at a time. It returns every
// token.
func pushRegisterUsers(t *testing.T, c *cluster, pr project, users, perUser, workers int) []string {
	t.Helper()
	type result struct {
		tokens []string
		err    error
	}
	jobs := make(chan int)
	results := make(chan result, users)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range jobs {
				toks, err := pushRegisterOne(c, c.nodes[u%len(c.nodes)], pr, u, perUser)
				results <- result{toks, err}
			}
		}()
	}
	for u := 0; u < users; u++ {
		jobs <- u
	}
	close(jobs)
	wg.Wait()
	close(results)
	var all []string
	for r := range results {
		if r.err != nil {
			t.Fatal(r.err)
		}
		all = append(all, r.tokens...)
	}
	return all
}

func pushRegisterOne(c *cluster, p *proc, pr project, u, perUser int) ([]string, error) {
	email := fmt.Sprintf("push-user-%03d@example.com", u)
	r, err := doJSON(c.ctx, httpClient, 30*time.Second, http.MethodPost, p.url()+"/api/auth",
		map[string]string{"X-Project-Id": pr.ID, "X-API-Key": pr.APIKey},
		map[string]string{"action": "register", "email": email, "password": "a device owner's password", "name": email})
	if err != nil {
		return nil, fmt.Errorf("register %s on %s: %w", email, p.id, err)
	}
	var reg struct {
		Token string `json:"token"`
	}
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &reg) != nil || reg.Token == "" {
		return nil, fmt.Errorf("register %s on %s: %s", email, p.id, r)
	}
	h := map[string]string{"Authorization": "Bearer " + reg.Token, "X-Project-Id": pr.ID, "X-API-Key": pr.APIKey}
	var toks []string
	for d := 0; d < perUser; d++ {
		tok := fmt.Sprintf("proc%03d%03d:APA91b%s", u, d, strings.Repeat("y", 96))
		r, err := doJSON(c.ctx, httpClient, 30*time.Second, http.MethodPost, p.url()+"/api/notifications/register", h,
			map[string]any{"token": tok, "deviceInfo": map[string]string{"platform": "android"}})
		if err != nil {
			return nil, fmt.Errorf("register device %d of %s on %s: %w", d, email, p.id, err)
		}
		if r.status != http.StatusCreated {
			return nil, fmt.Errorf("register device %d of %s on %s: %s", d, email, p.id, r)
		}
		toks = append(toks, tok)
	}
	return toks, nil
}

// TestPushKillNineLeaderMidSend runs three edgebase processes whose FCM
// sender talks to a stand-in in this test process, registers 10,000 devices
// (100 users x 100) through the HTTP API, sends to the whole project and
// kill -9s the leader mid-send: the new leader resends what was claimed and
// not marked, then goes on. Every device gets the notification, duplicates
// stay within the batches in flight (InFlight x BatchSize), the history is
// exact, and the killed node rejoins with the same history.
func TestPushKillNineLeaderMidSend(t *testing.T) {
	const users, perUser = 100, 100
	const n = users * perUser
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	t0 := time.Now()
	fcm, err := fcmfake.New(fcmfake.Options{Latency: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fcm.Close) // after the nodes are killed (cleanups run last first)
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	c := mustStartCluster(t, ctx, clusterOpts{env: []string{
		"EDGEBASE_FCM_ENDPOINT=" + fcm.Endpoint(),
		"EDGEBASE_SECRET_KEY=" + hex.EncodeToString(raw),
	}})
	leader := c.mustLeader(c.nodes[0], 10*time.Second)
	pr := c.mustCreateProject(leader)
	r, err := doJSON(ctx, httpClient, 15*time.Second, http.MethodPut, leader.url()+"/api/notifications/fcm-credentials", pr.Headers(),
		json.RawMessage(fcm.ServiceAccountJSON("fcm-"+strings.ToLower(pr.ID))))
	if err != nil || r.status != http.StatusOK || !strings.Contains(string(r.body), `"configured":true`) {
		t.Fatalf("PUT fcm-credentials: %v %v", r, err)
	}
	t.Logf("cluster, project and FCM credentials ready in %v (leader %s)", time.Since(t0).Round(time.Millisecond), leader.id)

	tReg := time.Now()
	tokens := pushRegisterUsers(t, c, pr, users, perUser, 12)
	if len(tokens) != n {
		t.Fatalf("registered %d devices, want %d", len(tokens), n)
	}
	t.Logf("registered %d users x %d devices over HTTP in %v", users, perUser, time.Since(tReg).Round(time.Millisecond))

	// Send through the leader (which has applied every registration), then
	// kill it once 2,000 messages are accepted.
	leader = c.mustLeader(c.nodes[0], 10*time.Second)
	r, err = doJSON(ctx, httpClient, 15*time.Second, http.MethodPost, leader.url()+"/api/notifications/send-to-project/"+pr.ID, pr.Headers(),
		map[string]any{"title": "kill-nine", "body": "mid-send"})
	var ack struct {
		NotificationID string `json:"notificationId"`
		Status         string `json:"status"`
		Targets        int    `json:"targets"`
	}
	if err != nil || r.status != http.StatusAccepted || json.Unmarshal(r.body, &ack) != nil || ack.NotificationID == "" || ack.Targets != n {
		t.Fatalf("send-to-project: %v %v (want 202 with %d targets)", r, err, n)
	}
	wctx, wcancel := context.WithTimeout(ctx, 3*time.Minute)
	err = fcm.WaitTotal(wctx, 2000)
	wcancel()
	if err != nil {
		t.Fatalf("waiting for 2000 deliveries: %v (total %d)", err, fcm.Total())
	}
	atKill := fcm.Total()
	leader.mustKill9()
	tKill := time.Now()
	afterKill := fcm.Total()
	t.Logf("kill -9 of leader %s with %d deliveries accepted (%d once it was gone)", leader.id, atKill, afterKill)
	if afterKill >= n {
		t.Fatalf("the send was complete (%d of %d) before the leader was gone: the failover was not exercised", afterKill, n)
	}

	var survivor, newLeader *proc
	for _, p := range c.nodes {
		if p != leader {
			survivor = p
			break
		}
	}
	stopWatch := pushWatchLeaders(c, survivor)
	checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		st, err := c.clusterStatus(survivor)
		if err != nil {
			return err
		}
		if newLeader = c.byID(st.Leader); newLeader == nil || newLeader == leader {
			return fmt.Errorf("no new leader yet: %+v", *st)
		}
		return nil
	})
	t.Logf("new leader %s %v after the kill", newLeader.id, time.Since(tKill).Round(time.Millisecond))
	it := pushWaitSent(t, c, survivor, pr, ack.NotificationID, 4*time.Minute)
	sentTotal := fcm.Total()
	leaders := stopWatch()
	t.Logf("sent %v after the kill; history on %s: %s; leaders seen by %s after the kill: %q", time.Since(tKill).Round(time.Millisecond), survivor.id, it.String(), survivor.id, leaders)
	// The kill is one handover; should leadership move again on a starved
	// machine, each change may resend the batches in flight too.
	handovers := 0
	for _, id := range leaders {
		if id != "" && id != leader.id {
			handovers++
		}
	}
	handovers = max(handovers, 1)

	var missing []string
	dups, extra := 0, 0
	for _, tok := range tokens {
		switch k := fcm.Count(tok); {
		case k == 0:
			missing = append(missing, tok)
		case k > 1:
			dups++
			extra += k - 1
		}
	}
	bound := handovers * pushInFlight * pushBatchSize
	t.Logf("observed: %d devices delivered more than once, %d extra deliveries (bound %d = %d handover(s) x InFlight %d x BatchSize %d), stand-in total %d",
		dups, extra, bound, handovers, pushInFlight, pushBatchSize, sentTotal)
	if len(missing) > 0 {
		t.Errorf("%d of %d devices never got the notification (first %v)", len(missing), n, missing[:min(3, len(missing))])
	}
	if dups > bound || extra > bound {
		t.Errorf("%d devices got duplicates (%d extra deliveries), more than handovers x InFlight x BatchSize = %d (leaders %q)", dups, extra, bound, leaders)
	}
	if sentTotal != n+extra {
		t.Errorf("stand-in total %d, want %d (every device once plus %d duplicates)", sentTotal, n+extra, extra)
	}
	// Every claimed batch is marked once, by the leader that sent it or by
	// its successor after resending it: the counts are exact.
	if it.Targets != n || it.Delivered != n || it.Failed != 0 || it.Pruned != 0 {
		t.Errorf("history %s: want targets = delivered = %d, none failed or pruned", it.String(), n)
	}
	if rej := fcm.Rejections(); len(rej) > 0 {
		t.Errorf("the FCM stand-in saw %d protocol violations, first %+v", fcm.RejectionCount(), rej[0])
	}

	// The killed node restarts, rejoins, and serves the same history.
	leader.mustStart()
	c.mustReady(leader, 60*time.Second)
	checkFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		st, err := c.clusterStatus(leader)
		if err != nil {
			return err
		}
		if err := st.Healthy(3, ""); err != nil {
			return err
		}
		if m := st.Node(leader.id); m == nil || (m.State != "follower" && m.State != "leader") {
			return fmt.Errorf("%s is not back: %+v", leader.id, *st)
		}
		return nil
	})
	back := pushWaitSent(t, c, leader, pr, ack.NotificationID, time.Minute)
	if back.String() != it.String() {
		t.Errorf("restarted %s shows %s, %s showed %s", leader.id, back.String(), survivor.id, it.String())
	}
	if got := fcm.Total(); got != sentTotal {
		t.Errorf("the stand-in accepted %d more messages after the notification was sent", got-sentTotal)
	}
	t.Logf("TestPushKillNineLeaderMidSend total %v", time.Since(t0).Round(time.Millisecond))
}

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/edgebase/edgebase/internal/fcmfake"
)

// Push scenarios (P1, P2). The leader's dispatcher delivers through the
// firebase-admin-go SDK to an FCM-compatible endpoint; the bench hosts that
// endpoint itself (internal/fcmfake, a stand-in for Google's FCM HTTP v1 API
// and OAuth2 token endpoint, answering every message after --fcm-latency) and
// starts every node with --fcm-endpoint pointing at it and a --secret-key
// (the FCM service account is stored sealed). It drives edgebase only
// through the public HTTP API: the owner stores the stand-in's service
// account with PUT /api/notifications/fcm-credentials, end users register
// with POST /api/auth and their devices with POST /api/notifications/register,
// and the owner sends with POST /api/notifications/send-to-project/{pid} or
// schedules with POST /api/notifications/schedule. What arrives is read from
// the stand-in's records (it runs in the bench's process, so its receive
// times are on the bench's clock), so the bench's CPU includes the stand-in.

const (
	// pushDevicesPerUser is how many devices each audience user registers:
	// the most an account may have (push.MaxDevicesByUser).
	pushDevicesPerUser = 100
	// pushTokenLen is the length of the device tokens the bench registers,
	// about that of a real FCM registration token.
	pushTokenLen = 163
	// pushFCMProject is the Firebase project of the stand-in's service account.
	pushFCMProject = "edgebase-bench"
	// pushLeadIn is the least time between creating P2's schedules and the
	// first of them falling due.
	pushLeadIn = time.Second
	// pushSpreadSeconds: P2's schedules fall due over this many whole seconds.
	pushSpreadSeconds = 10
	// pushSentWait bounds the wait for the owner's history to show a
	// notification sent, once its messages have arrived.
	pushSentWait = 30 * time.Second
	// pushConnSample is how often the connections to the stand-in are
	// counted. Reading /proc/net/tcp costs the bench milliseconds of CPU
	// when thousands of closed connections linger in TIME_WAIT, so rarely;
	// the count of connections opened is exact anyway (see connSampler).
	pushConnSample = time.Second
)

var errNoStandIn = errors.New("the push scenarios need the FCM stand-in the bench starts, and nodes started by the bench pointing at it (not available with --target)")

// needsFCM reports whether a selected scenario sends push notifications.
func (o *options) needsFCM() bool {
	for _, s := range o.scenarios {
		if s.FCM {
			return true
		}
	}
	return false
}

// startFCMStandIn starts the FCM stand-in when a push scenario is selected
// and the bench starts its own nodes, and adds the node flags that point
// them at it: --fcm-endpoint, and a random --secret-key (the same for every
// node) to seal the service account with. stop closes it.
func startFCMStandIn(o *options, logf func(string, ...any)) (stop func(), err error) {
	if !o.needsFCM() || len(o.targets) > 0 {
		return func() {}, nil
	}
	s, err := fcmfake.New(fcmfake.Options{Latency: o.fcmLatency})
	if err != nil {
		return nil, err
	}
	o.fcm = s
	o.serveArgs = append(o.serveArgs, "--fcm-endpoint", s.Endpoint(), "--secret-key", randomHex(32))
	logf("bench: FCM stand-in at %s, answering each message after %v", s.Endpoint(), o.fcmLatency)
	return s.Close, nil
}

// pushUser is an end user of the bench's project with registered devices.
type pushUser struct {
	email, password string
	id, token       string // the account's id and session token
	devices         []string
}

// pushRunResult is what one run of a push scenario saw (the JSON's
// push.runs; warm-up runs are not in it).
type pushRunResult struct {
	// P1: the notification's audience (devices registered in the project)
	// and how many distinct devices' messages reached the stand-in.
	Expected  int `json:"expected"`
	Delivered int `json:"delivered"`
	// Seconds: from the send's 202 to the last message's arrival at the
	// stand-in; PerSec = Delivered / Seconds. P2: from the first schedule
	// request to the last arrival.
	Seconds float64 `json:"seconds"`
	PerSec  float64 `json:"perSec,omitempty"`
	// PostMs is the send request's round trip (P1); FirstMs the time from
	// the 202 to the first message; SentMs the time from the 202 until the
	// owner's history showed the notification sent.
	PostMs  float64 `json:"postMs,omitempty"`
	FirstMs float64 `json:"firstMs,omitempty"`
	SentMs  float64 `json:"sentMs,omitempty"`
	// HistoryStatus and HistoryDelivered/Failed are the owner's history
	// entry of the notification (GET /api/notifications/history?limit=1).
	HistoryStatus    string `json:"historyStatus,omitempty"`
	HistoryDelivered int    `json:"historyDelivered,omitempty"`
	HistoryFailed    int    `json:"historyFailed,omitempty"`
	// Duplicates: messages beyond the first to one device (P1) or one
	// schedule (P2). Missing: never arrived. Stray: arrived for a device
	// or schedule the run did not address. Rejections: protocol violations
	// the stand-in recorded.
	Duplicates int `json:"duplicates"`
	Missing    int `json:"missing"`
	Stray      int `json:"stray"`
	Rejections int `json:"rejections"`
	// ConnsPeak is the most TCP connections open from the nodes to the
	// stand-in at one sample (every second); ConnsOpened how many new ones
	// were seen during the run (a connection the pool cannot keep idle is
	// closed and later dialled again).
	ConnsPeak   int `json:"connsPeak"`
	ConnsOpened int `json:"connsOpened"`
	// P2: lateness (arrival at the stand-in minus sendAt) of the run, and
	// the time it took to create the schedules.
	LatenessP50Ms float64 `json:"latenessP50Ms,omitempty"`
	LatenessP99Ms float64 `json:"latenessP99Ms,omitempty"`
	LatenessMaxMs float64 `json:"latenessMaxMs,omitempty"`
	CreateSeconds float64 `json:"createSeconds,omitempty"`
}

// pushResult is a push scenario's own figures (the JSON's "push").
type pushResult struct {
	FCMLatencyMs float64 `json:"fcmLatencyMs"`
	// P1: the audience and the time it took to register it.
	Devices         int     `json:"devices,omitempty"`
	Users           int     `json:"users,omitempty"`
	RegisterSeconds float64 `json:"registerSeconds,omitempty"`
	// P2: schedules per run, spread over SpreadSeconds whole seconds.
	Schedules     int `json:"schedules,omitempty"`
	SpreadSeconds int `json:"spreadSeconds,omitempty"`
	// P2: lateness over all measured runs.
	LatenessP50Ms float64         `json:"latenessP50Ms,omitempty"`
	LatenessP99Ms float64         `json:"latenessP99Ms,omitempty"`
	LatenessMaxMs float64         `json:"latenessMaxMs,omitempty"`
	Runs          []pushRunResult `json:"runs"`
}

// pushState is one cluster's push setup and history, shared by P1 and P2.
type pushState struct {
	fcm *fcmfake.Server
	hc  *http.Client // setup and sends, with its own pool of connections
	tag string       // makes this cluster's tokens unique

	users    []*pushUser    // P1's audience
	tokens   map[string]int // every registered token -> its user's index (-1: P2's user)
	regTime  time.Duration  // registering P1's audience
	sched    *pushUser      // P2's recipient: one device
	fanouts  int            // P1 notifications sent
	round    int            // P2 rounds
	sendAt   []time.Time    // sendAt of each schedule of the current P2 round
	runs     map[string][]pushRunResult
	runNotes map[string][]string
}

// pushSetup makes the cluster's push state once: a client, and the
// stand-in's service account stored as the project's FCM credentials.
func pushSetup(ctx context.Context, e *env) (*pushState, error) {
	if e.push != nil {
		return e.push, nil
	}
	if e.o.fcm == nil {
		return nil, errNoStandIn
	}
	ps := &pushState{fcm: e.o.fcm, tag: randomHex(4), tokens: map[string]int{},
		runs: map[string][]pushRunResult{}, runNotes: map[string][]string{}}
	ps.hc = &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: e.o.clients + 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}}
	r, err := ps.request(ctx, e, http.MethodPut, "/api/notifications/fcm-credentials", e.pr.Token, ps.fcm.ServiceAccountJSON(pushFCMProject))
	if err != nil {
		return nil, fmt.Errorf("store FCM credentials: %w", err)
	}
	if r.status != http.StatusOK {
		return nil, fmt.Errorf("store FCM credentials: %s", r)
	}
	e.push = ps
	return ps, nil
}

// request sends body (nil: none) to the leader's path with the project's
// key and bearer, within --request-timeout. A transport error is an opError.
func (ps *pushState) request(ctx context.Context, e *env, method, path, bearer string, body []byte) (*response, error) {
	ctx, cancel := context.WithTimeout(ctx, e.o.reqTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.c.leader.url+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-Project-Id", e.pr.ID)
	req.Header.Set("X-API-Key", e.pr.APIKey)
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := ps.hc.Do(req)
	if err != nil {
		return nil, transportError(method, err)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	_ = resp.Body.Close()
	if err != nil {
		return nil, transportError(method, err)
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// deviceToken is device d of user u: printable, unique per cluster (tag),
// pushTokenLen long like a real registration token.
func deviceToken(tag string, u, d int) string {
	p := fmt.Sprintf("bench%s-u%05d-d%03d:APA91b", tag, u, d)
	var b strings.Builder
	b.WriteString(p)
	for i := 0; b.Len() < pushTokenLen; i++ {
		sum := sha256.Sum256([]byte(p + strconv.Itoa(i)))
		b.WriteString(hex.EncodeToString(sum[:]))
	}
	return b.String()[:pushTokenLen]
}

// usersFor is how many users hold devices devices, pushDevicesPerUser each.
func usersFor(devices int) int {
	return (devices + pushDevicesPerUser - 1) / pushDevicesPerUser
}

// registerPushUser creates an end-user account through the leader (a 409 on
// a retry, its earlier answer lost, falls back to a login) and keeps its id
// and session token.
func registerPushUser(ctx context.Context, e *env, u *pushUser) error {
	var b []byte
	var err error
	for attempt := 0; attempt < 3 && ctx.Err() == nil; attempt++ {
		if attempt > 0 {
			sleepCtx(ctx, time.Second)
		}
		b, err = e.authCall(ctx, e.c.leader, "register", map[string]string{"action": "register", "email": u.email, "password": u.password, "name": "bench push user"}, http.StatusCreated)
		var oe *opError
		if err != nil && attempt > 0 && errors.As(err, &oe) && oe.status == http.StatusConflict {
			b, err = e.authCall(ctx, e.c.leader, "login", map[string]string{"action": "login", "email": u.email, "password": u.password}, http.StatusOK)
		}
		if err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("register %s: %w", u.email, err)
	}
	var res struct {
		Token string `json:"token"`
		User  struct {
			ID string `json:"id"`
		} `json:"user"`
	}
	if json.Unmarshal(b, &res) != nil || res.Token == "" || res.User.ID == "" {
		return fmt.Errorf("register %s: no token or user id in %s", u.email, b)
	}
	u.id, u.token = res.User.ID, res.Token
	return nil
}

// registerDevice registers token for u (201), retrying transport errors and
// 5xx answers: registering is idempotent.
func (ps *pushState) registerDevice(ctx context.Context, e *env, u *pushUser, token string) error {
	body, _ := json.Marshal(map[string]any{"token": token, "deviceInfo": map[string]string{"platform": "android"}})
	var err error
	for attempt := 0; attempt < 3 && ctx.Err() == nil; attempt++ {
		if attempt > 0 {
			sleepCtx(ctx, 200*time.Millisecond)
		}
		var r *response
		if r, err = ps.request(ctx, e, http.MethodPost, "/api/notifications/register", u.token, body); err != nil {
			continue
		}
		if r.status == http.StatusCreated {
			return nil
		}
		err = statusError("register device", &http.Response{StatusCode: r.status, Header: r.header}, r.body)
		if r.status < 500 {
			return err
		}
	}
	return err
}

// preparePushAudience (P1) registers --devices devices for the project:
// ceil(devices/100) users, then up to 100 devices each, both with --clients
// concurrent requests, all through the leader.
func preparePushAudience(ctx context.Context, e *env) error {
	ps, err := pushSetup(ctx, e)
	if err != nil {
		return err
	}
	if len(ps.users) > 0 {
		return nil
	}
	t0 := time.Now()
	n := e.o.devices
	users := make([]*pushUser, usersFor(n))
	for i := range users {
		users[i] = &pushUser{email: "bench-push-" + ps.tag + "-" + strconv.Itoa(i) + "@example.com", password: "bench " + randomHex(16)}
	}
	if err := parallel(ctx, len(users), e.o.clients, func(i int) error { return registerPushUser(ctx, e, users[i]) }); err != nil {
		return err
	}
	tUsers := time.Since(t0)
	var done atomic.Int64
	// Device k belongs to user k mod users: concurrent registrations are
	// for different accounts, as when many people register at once (one
	// account's registrations are serialised by the node).
	err = parallel(ctx, n, e.o.clients, func(k int) error {
		u, d := k%len(users), k/len(users)
		tok := deviceToken(ps.tag, u, d)
		if err := ps.registerDevice(ctx, e, users[u], tok); err != nil {
			return fmt.Errorf("register device %d of %s: %w", d, users[u].email, err)
		}
		if x := done.Add(1); x%5000 == 0 && int(x) < n {
			fmt.Fprintf(os.Stderr, "bench: P1: %d of %d devices registered in %v\n", x, n, time.Since(t0).Round(time.Millisecond))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for k := range n {
		u, d := k%len(users), k/len(users)
		tok := deviceToken(ps.tag, u, d)
		users[u].devices = append(users[u].devices, tok)
		ps.tokens[tok] = u
	}
	ps.users = users
	ps.regTime = time.Since(t0)
	fmt.Fprintf(os.Stderr, "bench: P1: %d users in %.1fs, %d devices in %.1fs (%.0f registrations/s)\n",
		len(users), tUsers.Seconds(), n, (ps.regTime - tUsers).Seconds(), float64(n)/(ps.regTime-tUsers).Seconds())
	return nil
}

// prepareSchedules (P2) registers the recipient of the schedules: one user
// with one device.
func prepareSchedules(ctx context.Context, e *env) error {
	ps, err := pushSetup(ctx, e)
	if err != nil {
		return err
	}
	if ps.sched != nil {
		return nil
	}
	u := &pushUser{email: "bench-push-" + ps.tag + "-sched@example.com", password: "bench " + randomHex(16)}
	if err := registerPushUser(ctx, e, u); err != nil {
		return err
	}
	tok := deviceToken(ps.tag, 99999, 0)
	if err := ps.registerDevice(ctx, e, u, tok); err != nil {
		return fmt.Errorf("register the P2 device: %w", err)
	}
	u.devices = []string{tok}
	ps.tokens[tok] = -1
	ps.sched = u
	return nil
}

// ---- P1: fan-out -----------------------------------------------------------

// tally is what the stand-in received for one run.
type tally struct {
	first      map[string]time.Time // first arrival per addressed key
	dups       int                  // arrivals beyond the first per key
	stray      int                  // arrivals for keys not addressed
	firstAt    time.Time            // earliest arrival
	lastAt     time.Time            // latest first arrival
	arrivalsOK int                  // distinct addressed keys that arrived
}

// tallyDeliveries groups deliveries by key (key returns "" for a delivery
// the run did not address, a stray one); want says which keys were
// addressed.
func tallyDeliveries(ds []fcmfake.Delivery, key func(d *fcmfake.Delivery) string, want func(k string) bool) tally {
	t := tally{first: make(map[string]time.Time, len(ds))}
	for i := range ds {
		d := &ds[i]
		k := key(d)
		if k == "" || !want(k) {
			t.stray++
			continue
		}
		if _, ok := t.first[k]; ok {
			t.dups++
			continue
		}
		t.first[k] = d.At
		if t.firstAt.IsZero() || d.At.Before(t.firstAt) {
			t.firstAt = d.At
		}
		if d.At.After(t.lastAt) {
			t.lastAt = d.At
		}
	}
	t.arrivalsOK = len(t.first)
	return t
}

// historyItem is an entry of the owner's GET /api/notifications/history.
type historyItem struct {
	ID        string `json:"id"`
	Status    string `json:"status"`
	Targets   int    `json:"targets"`
	Delivered int    `json:"delivered"`
	Failed    int    `json:"failed"`
	Pruned    int    `json:"pruned"`
}

// waitSent polls the owner's newest history entry until it is notification
// nid with status "sent" (or pushSentWait passes) and returns the last entry
// seen and when it was seen.
func (ps *pushState) waitSent(ctx context.Context, e *env, nid string) (historyItem, time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, pushSentWait)
	defer cancel()
	var last historyItem
	var err error
	for {
		var r *response
		r, err = ps.request(ctx, e, http.MethodGet, "/api/notifications/history?limit=1", e.pr.Token, nil)
		if err == nil && r.status != http.StatusOK {
			err = fmt.Errorf("GET history: %s", r)
		}
		if err == nil {
			var page struct {
				Notifications []historyItem `json:"notifications"`
			}
			if json.Unmarshal(r.body, &page) != nil || len(page.Notifications) == 0 {
				err = fmt.Errorf("GET history: unexpected answer %s", r)
			} else if last = page.Notifications[0]; last.ID != nid {
				err = fmt.Errorf("GET history: newest notification is %s, not %s", last.ID, nid)
			} else if last.Status == "sent" {
				return last, time.Now(), nil
			}
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("history: status %q (not sent) after %v", last.Status, pushSentWait)
			}
			return last, time.Now(), err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// fanOut is one P1 run: one notification to the whole project, then the wait
// until the stand-in has a message for every registered device and the
// owner's history shows it sent.
func (ps *pushState) fanOut(ctx context.Context, e *env) (runResult, *histogram, map[string]int) {
	rctx, cancel := context.WithTimeout(ctx, e.o.runTimeout)
	defer cancel()
	kinds := map[string]int{}
	var h histogram
	want := len(ps.tokens)
	pr := pushRunResult{Expected: want}
	ps.fcm.Reset()
	ps.fanouts++
	title := "bench P1 fan-out " + ps.tag + " " + strconv.Itoa(ps.fanouts)
	conns := startConnSampler(ps.fcm.URL())
	body, _ := json.Marshal(map[string]string{"title": title, "body": "edgebase bench: one notification to every device of the project"})
	t0 := time.Now()
	r, err := ps.request(rctx, e, http.MethodPost, "/api/notifications/send-to-project/"+url.PathEscape(e.pr.ID), e.pr.Token, body)
	t202 := time.Now()
	pr.PostMs = ms(t202.Sub(t0))
	var sent struct {
		NotificationID string `json:"notificationId"`
		Targets        int    `json:"targets"`
	}
	switch {
	case err != nil:
		kinds[err.Error()]++
	case r.status != http.StatusAccepted:
		kinds[statusError("send-to-project", &http.Response{StatusCode: r.status, Header: r.header}, r.body).Error()]++
	case json.Unmarshal(r.body, &sent) != nil || sent.NotificationID == "":
		kinds["send-to-project 202 without a notificationId"]++
	}
	if len(kinds) > 0 {
		conns.finish()
		ps.record("P1", pr)
		return runResult{Errors: 1, WallSeconds: round(time.Since(t0).Seconds(), 3)}, &h, kinds
	}
	if sent.Targets != want {
		kinds[fmt.Sprintf("send-to-project: targets %d, but %d devices are registered", sent.Targets, want)]++
	}
	werr := ps.fcm.WaitTotal(rctx, want)
	timedOut := werr != nil && ctx.Err() == nil
	item, sentAt, herr := ps.waitSent(ctx, e, sent.NotificationID)
	sleepCtx(ctx, 250*time.Millisecond) // a duplicate would come right after
	pr.ConnsPeak, pr.ConnsOpened = conns.finish()
	pr.HistoryStatus, pr.HistoryDelivered, pr.HistoryFailed = item.Status, item.Delivered, item.Failed
	if herr == nil {
		pr.SentMs = ms(sentAt.Sub(t202))
	} else if ctx.Err() == nil {
		kinds[herr.Error()]++
	}
	if item.Delivered != want {
		kinds[fmt.Sprintf("history: delivered %d of %d (failed %d, pruned %d)", item.Delivered, want, item.Failed, item.Pruned)]++
	}

	t := tallyDeliveries(ps.fcm.Deliveries(),
		func(d *fcmfake.Delivery) string {
			if d.Title != title || d.Project != pushFCMProject {
				return ""
			}
			return d.Token
		},
		func(k string) bool { _, ok := ps.tokens[k]; return ok })
	for _, at := range t.first {
		h.add(at.Sub(t202))
	}
	pr.Delivered, pr.Duplicates, pr.Stray = t.arrivalsOK, t.dups, t.stray
	pr.Missing = want - t.arrivalsOK
	wall := t.lastAt.Sub(t202)
	if t.arrivalsOK == 0 || wall <= 0 {
		wall = time.Since(t202)
	} else {
		pr.FirstMs = ms(t.firstAt.Sub(t202))
	}
	pr.Seconds = round(wall.Seconds(), 3)
	pr.PerSec = round(throughput(t.arrivalsOK, wall), 1)
	rej := ps.fcm.Rejections()
	pr.Rejections = len(rej)
	ps.countProblems(kinds, pr, rej, "device")
	ps.checkLeader(ctx, e, "P1", "fan-out "+strconv.Itoa(ps.fanouts)+" of this cluster, warm-up included")
	ps.record("P1", pr)
	rr := runResult{Ops: t.arrivalsOK, WallSeconds: pr.Seconds, OpsPerSec: pr.PerSec, TimedOut: timedOut}
	for _, v := range kinds {
		rr.Errors += v
	}
	fmt.Fprintf(os.Stderr, "bench: P1: %d of %d messages at the stand-in %.2fs after the 202 (%.0f/s; first after %s), history sent after %s with delivered %d; connections to the stand-in: %d open at peak, %d opened\n",
		t.arrivalsOK, want, pr.Seconds, pr.PerSec, fmtMs(pr.FirstMs), fmtMs(pr.SentMs), item.Delivered, pr.ConnsPeak, pr.ConnsOpened)
	return rr, &h, kinds
}

// countProblems adds a run's missing, duplicate and stray messages and the
// stand-in's rejections to kinds.
func (ps *pushState) countProblems(kinds map[string]int, pr pushRunResult, rej []fcmfake.Rejection, what string) {
	if pr.Missing > 0 {
		kinds["message never reached the FCM stand-in (one per "+what+")"] += pr.Missing
	}
	if pr.Duplicates > 0 {
		kinds["message reached the FCM stand-in twice for one "+what] += pr.Duplicates
	}
	if pr.Stray > 0 {
		kinds["message for no "+what+" of the run reached the FCM stand-in"] += pr.Stray
	}
	for _, x := range rej {
		kinds["FCM stand-in rejected a request: "+x.Reason]++
	}
}

// checkLeader notes when the leader is no longer the node the pass began
// with: the dispatcher runs on the leader, and a new leader sends again the
// batches the old one had claimed and not marked (duplicates by design).
func (ps *pushState) checkLeader(ctx context.Context, e *env, scen, run string) {
	if e.c.adminToken == "" {
		return
	}
	st, err := e.c.status(ctx, ps.hc, e.c.leader)
	switch {
	case err != nil:
		ps.runNotes[scen] = append(ps.runNotes[scen], run+": could not ask the cluster for its leader: "+err.Error())
	case st.Leader != e.c.leader.id:
		ps.runNotes[scen] = append(ps.runNotes[scen], fmt.Sprintf("%s: the leader is now %q, not %s", run, st.Leader, e.c.leader.id))
	}
}

func (ps *pushState) record(scen string, pr pushRunResult) {
	ps.runs[scen] = append(ps.runs[scen], pr)
}

// fanOutOp is P1's operation: one fan-out (its Run makes one per run).
func fanOutOp(ctx context.Context, e *env, _, _ int) error {
	rr, _, kinds, _ := runFanOut(ctx, e, nil, 0)
	if rr.Errors == 0 && !rr.TimedOut {
		return nil
	}
	var ks []string
	for k, v := range kinds {
		ks = append(ks, fmt.Sprintf("%d × %s", v, k))
	}
	slices.Sort(ks)
	return fmt.Errorf("fan-out: %s (timed out: %v)", strings.Join(ks, "; "), rr.TimedOut)
}

func runFanOut(ctx context.Context, e *env, _ *scenario, _ int) (runResult, *histogram, map[string]int, map[string]int) {
	if e.push == nil {
		return runResult{Errors: 1}, &histogram{}, map[string]int{errNoStandIn.Error(): 1}, nil
	}
	rr, h, kinds := e.push.fanOut(ctx, e)
	return rr, h, kinds, nil
}

// ---- P2: scheduler lateness --------------------------------------------------

// scheduleTimes spreads n sendAt times over spread whole seconds from base
// (truncated to the second): schedule i is due at base + (i mod spread) s.
func scheduleTimes(base time.Time, n, spread int) []time.Time {
	base = base.UTC().Truncate(time.Second)
	out := make([]time.Time, n)
	for i := range out {
		out[i] = base.Add(time.Duration(i%max(spread, 1)) * time.Second)
	}
	return out
}

// scheduleTitle names schedule i of round (of cluster tag): the title maps a
// message at the stand-in back to its schedule.
func scheduleTitle(tag string, round, i int) string {
	return "bench P2 " + tag + " r" + strconv.Itoa(round) + " s" + strconv.Itoa(i)
}

// parseScheduleTitle reverses scheduleTitle.
func parseScheduleTitle(title string) (tag string, round, i int, ok bool) {
	rest, ok := strings.CutPrefix(title, "bench P2 ")
	if !ok {
		return "", 0, 0, false
	}
	f := strings.Fields(rest)
	if len(f) != 3 || !strings.HasPrefix(f[1], "r") || !strings.HasPrefix(f[2], "s") {
		return "", 0, 0, false
	}
	r, err1 := strconv.Atoi(f[1][1:])
	n, err2 := strconv.Atoi(f[2][1:])
	if err1 != nil || err2 != nil || r < 0 || n < 0 {
		return "", 0, 0, false
	}
	return f[0], r, n, true
}

// createSchedule is P2's operation: the owner schedules notification i of
// the current round for P2's user, due at its sendAt.
func createSchedule(ctx context.Context, e *env, _, i int) error {
	ps := e.push
	if ps == nil || ps.sched == nil {
		return errNoStandIn
	}
	body, _ := json.Marshal(map[string]any{
		"title":  scheduleTitle(ps.tag, ps.round, i),
		"body":   "edgebase bench: scheduler lateness",
		"target": map[string]string{"userId": ps.sched.id},
		"sendAt": ps.sendAt[i].UTC().Format(time.RFC3339),
	})
	r, err := ps.request(ctx, e, http.MethodPost, "/api/notifications/schedule", e.pr.Token, body)
	if err != nil {
		return err
	}
	if r.status != http.StatusCreated {
		return statusError("schedule", &http.Response{StatusCode: r.status, Header: r.header}, r.body)
	}
	return nil
}

// runSchedules is one P2 run: ops schedules due over the next
// pushSpreadSeconds whole seconds (the first at least pushLeadIn ahead),
// created with --clients concurrent requests; then the wait until each has
// reached the stand-in. A sample is a schedule's lateness: its message's
// arrival at the stand-in minus its sendAt.
func runSchedules(ctx context.Context, e *env, s *scenario, ops int) (runResult, *histogram, map[string]int, map[string]int) {
	ps := e.push
	kinds := map[string]int{}
	var h histogram
	if ps == nil || ps.sched == nil {
		return runResult{Errors: 1}, &h, map[string]int{errNoStandIn.Error(): 1}, nil
	}
	ps.fcm.Reset()
	ps.round++
	start := time.Now()
	ps.sendAt = scheduleTimes(start.Add(pushLeadIn+time.Second), ops, pushSpreadSeconds)
	lastDue := slices.MaxFunc(ps.sendAt, func(a, b time.Time) int { return a.Compare(b) })
	rctx, cancel := context.WithDeadline(ctx, lastDue.Add(e.o.runTimeout))
	defer cancel()
	conns := startConnSampler(ps.fcm.URL())

	created := make([]bool, ops)
	var mu sync.Mutex
	_ = parallel(rctx, ops, s.Clients(e.o), func(i int) error {
		err := s.Op(rctx, e, 0, i)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			kinds[err.Error()]++
		} else {
			created[i] = true
		}
		return nil
	})
	createEnd := time.Now()
	pr := pushRunResult{CreateSeconds: round(createEnd.Sub(start).Seconds(), 3)}
	for _, ok := range created {
		if ok {
			pr.Expected++
		}
	}
	if early := ps.sendAt[0]; createEnd.After(early) {
		ps.runNotes["P2"] = append(ps.runNotes["P2"], fmt.Sprintf("round %d: creating the schedules ended %v after the first sendAt", ps.round, createEnd.Sub(early).Round(time.Millisecond)))
	}
	tag, rnd := ps.tag, ps.round
	key := func(d *fcmfake.Delivery) string {
		tg, r, i, ok := parseScheduleTitle(d.Title)
		if !ok || tg != tag || r != rnd || d.Token != ps.sched.devices[0] {
			return ""
		}
		return strconv.Itoa(i)
	}
	want := func(k string) bool { i, err := strconv.Atoi(k); return err == nil && i >= 0 && i < ops && created[i] }
	// Until every created schedule's message is in (a duplicate must not
	// stand in for a missing one), then a moment for late duplicates.
	var t tally
	for {
		t = tallyDeliveries(ps.fcm.Deliveries(), key, want)
		if t.arrivalsOK >= pr.Expected || rctx.Err() != nil {
			break
		}
		sleepCtx(rctx, 20*time.Millisecond)
	}
	timedOut := t.arrivalsOK < pr.Expected && ctx.Err() == nil
	sleepCtx(ctx, 250*time.Millisecond)
	pr.ConnsPeak, pr.ConnsOpened = conns.finish()
	t = tallyDeliveries(ps.fcm.Deliveries(), key, want)
	var run histogram
	for k, at := range t.first {
		i, _ := strconv.Atoi(k)
		run.add(at.Sub(ps.sendAt[i]))
	}
	h.merge(&run)
	pr.Delivered, pr.Duplicates, pr.Stray = t.arrivalsOK, t.dups, t.stray
	pr.Missing = pr.Expected - t.arrivalsOK
	pr.LatenessP50Ms, pr.LatenessP99Ms, pr.LatenessMaxMs = ms(run.percentile(50)), ms(run.percentile(99)), ms(run.max())
	wall := time.Since(start)
	if !t.lastAt.IsZero() {
		wall = t.lastAt.Sub(start)
	}
	pr.Seconds = round(wall.Seconds(), 3)
	rej := ps.fcm.Rejections()
	pr.Rejections = len(rej)
	ps.countProblems(kinds, pr, rej, "schedule")
	ps.checkLeader(ctx, e, "P2", "round "+strconv.Itoa(ps.round)+" of this cluster, warm-up included")
	ps.record("P2", pr)
	rr := runResult{Ops: t.arrivalsOK, WallSeconds: pr.Seconds, OpsPerSec: round(throughput(t.arrivalsOK, wall), 1), TimedOut: timedOut}
	for _, v := range kinds {
		rr.Errors += v
	}
	fmt.Fprintf(os.Stderr, "bench: P2: %d schedules created in %.2fs, %d arrived; lateness p50 %s p99 %s max %s\n",
		pr.Expected, pr.CreateSeconds, t.arrivalsOK, fmtMs(pr.LatenessP50Ms), fmtMs(pr.LatenessP99Ms), fmtMs(pr.LatenessMaxMs))
	return rr, &h, kinds, nil
}

// summarizePush fills r.Push from the scenario's measured runs (the last
// len(r.Runs): a warm-up came first).
func summarizePush(e *env, s *scenario, r *result) {
	ps := e.push
	if ps == nil {
		return
	}
	runs := ps.runs[s.Name]
	runs = runs[max(len(runs)-len(r.Runs), 0):]
	pr := &pushResult{FCMLatencyMs: ms(e.o.fcmLatency), Runs: runs}
	switch s.Name {
	case "P1":
		pr.Devices, pr.Users, pr.RegisterSeconds = len(ps.tokens), len(ps.users), round(ps.regTime.Seconds(), 1)
		if ps.sched != nil {
			r.Notes = append(r.Notes, "the audience includes P2's one-device user")
		}
	case "P2":
		pr.Schedules, pr.SpreadSeconds = e.o.schedules, pushSpreadSeconds
		pr.LatenessP50Ms, pr.LatenessP99Ms, pr.LatenessMaxMs = r.P50Ms, r.P99Ms, r.MaxMs
	}
	r.Notes = append(r.Notes, ps.runNotes[s.Name]...)
	r.Push = pr
}

// ---- connections to the stand-in ------------------------------------------

// connSampler counts, every pushConnSample and once more at the end, the TCP
// connections to the stand-in's port (from /proc/net/tcp: loopback, so the
// nodes' side of each connection is there too). A connection closed during
// the run stays listed in TIME_WAIT for a minute, so the connections opened
// are exact for runs shorter than that; the peak of open connections is the
// peak of the samples.
type connSampler struct {
	port int
	stop chan struct{}
	done chan struct{}
	base map[int]bool // local ports of connections open when it started
	seen map[int]bool
	peak int
}

func startConnSampler(standIn string) *connSampler {
	c := &connSampler{stop: make(chan struct{}), done: make(chan struct{}), base: map[int]bool{}, seen: map[int]bool{}}
	if u, err := url.Parse(standIn); err == nil {
		c.port, _ = strconv.Atoi(u.Port())
	}
	if c.port == 0 {
		close(c.done)
		return c
	}
	if b, err := os.ReadFile("/proc/net/tcp"); err == nil {
		_, ports := parseProcNetTCP(b, c.port)
		for _, p := range ports {
			c.base[p] = true
		}
	}
	go func() {
		defer close(c.done)
		t := time.NewTicker(pushConnSample)
		defer t.Stop()
		for {
			c.sample()
			select {
			case <-c.stop:
				c.sample()
				return
			case <-t.C:
			}
		}
	}()
	return c
}

func (c *connSampler) sample() {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return
	}
	open, ports := parseProcNetTCP(b, c.port)
	c.peak = max(c.peak, open)
	for _, p := range ports {
		c.seen[p] = true
	}
}

// finish stops sampling and returns the peak of open connections and how
// many connections were seen that were not there at the start.
func (c *connSampler) finish() (peak, opened int) {
	select {
	case <-c.done:
	default:
		close(c.stop)
		<-c.done
	}
	for p := range c.seen {
		if !c.base[p] {
			opened++
		}
	}
	return c.peak, opened
}

// parseProcNetTCP reads /proc/net/tcp and returns, for the connections whose
// remote port is port (the client side of connections to it), how many are
// established and the local ports of all of them, in any state (a closed
// connection lingers in TIME_WAIT for a minute).
func parseProcNetTCP(b []byte, port int) (established int, localPorts []int) {
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasSuffix(f[0], ":") {
			continue // the header, or a blank line
		}
		_, remPort, ok1 := strings.Cut(f[2], ":")
		_, locPort, ok2 := strings.Cut(f[1], ":")
		if !ok1 || !ok2 {
			continue
		}
		rp, err1 := strconv.ParseUint(remPort, 16, 16)
		lp, err2 := strconv.ParseUint(locPort, 16, 16)
		if err1 != nil || err2 != nil || int(rp) != port {
			continue
		}
		localPorts = append(localPorts, int(lp))
		if f[3] == "01" {
			established++
		}
	}
	return established, localPorts
}

// ---- table --------------------------------------------------------------------

// printPushTable prints the push scenarios' own figures.
func printPushTable(w io.Writer, rep *report) {
	var p1, p2 []*result
	for _, r := range rep.Results {
		if r.Push == nil || r.Failed != "" {
			continue
		}
		if r.Scenario == "P2" {
			p2 = append(p2, r)
		} else {
			p1 = append(p1, r)
		}
	}
	if len(p1) > 0 {
		fmt.Fprintf(w, "\npush fan-out (P1 rows above: ops = messages that reached the FCM stand-in, ops/s = messages/s from the send's 202 to the last arrival, latencies = 202 -> arrival; bench CPU includes the stand-in):\n")
		fmt.Fprintf(w, "msgs/s per run; post: the send request; first/all: 202 -> first/last message at the stand-in; sent: 202 -> history shows it sent; history: its delivered count; dup/missing/stray/rejected must be 0; conns: to the stand-in, peak open and opened during the runs\n\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "nodes\tscen\tdevices\tusers\tfcm latency\tmsgs/s per run\tpost\tfirst\tall\tsent\thistory\tdup\tmissing\tstray\trejected\tconns peak\tconns opened\t")
		for _, r := range p1 {
			x := r.Push
			var rates, post, first, all, sent, hist []string
			dup, miss, stray, rej, peak, opened := 0, 0, 0, 0, 0, 0
			for _, run := range x.Runs {
				rates = append(rates, fmt.Sprintf("%.0f", run.PerSec))
				post = append(post, fmtMs(run.PostMs))
				first = append(first, fmtMs(run.FirstMs))
				all = append(all, fmt.Sprintf("%.2fs", run.Seconds))
				sent = append(sent, fmtMs(run.SentMs))
				hist = append(hist, strconv.Itoa(run.HistoryDelivered))
				dup += run.Duplicates
				miss += run.Missing
				stray += run.Stray
				rej += run.Rejections
				peak = max(peak, run.ConnsPeak)
				opened += run.ConnsOpened
			}
			fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t\n",
				r.ClusterSize, r.Scenario, x.Devices, x.Users, fmtMs(x.FCMLatencyMs), strings.Join(rates, " "),
				strings.Join(post, " "), strings.Join(first, " "), strings.Join(all, " "), strings.Join(sent, " "), strings.Join(hist, " "),
				dup, miss, stray, rej, peak, opened)
		}
		_ = tw.Flush()
	}
	if len(p2) > 0 {
		fmt.Fprintf(w, "\npush scheduler (P2 rows above: ops = schedules whose message reached the FCM stand-in, latencies = lateness: arrival at the stand-in - sendAt, the stand-in's latency included):\n\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "nodes\tscen\tschedules/run\tover\tfcm latency\tlateness p50\tp99\tmax\tp50/p99/max per run\tcreate s per run\tdup\tmissing\tstray\trejected\t")
		for _, r := range p2 {
			x := r.Push
			var per, create []string
			dup, miss, stray, rej := 0, 0, 0, 0
			for _, run := range x.Runs {
				per = append(per, fmtMs(run.LatenessP50Ms)+"/"+fmtMs(run.LatenessP99Ms)+"/"+fmtMs(run.LatenessMaxMs))
				create = append(create, fmt.Sprintf("%.2f", run.CreateSeconds))
				dup += run.Duplicates
				miss += run.Missing
				stray += run.Stray
				rej += run.Rejections
			}
			fmt.Fprintf(tw, "%d\t%s\t%d\t%ds\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t\n",
				r.ClusterSize, r.Scenario, x.Schedules, x.SpreadSeconds, fmtMs(x.FCMLatencyMs),
				fmtMs(x.LatenessP50Ms), fmtMs(x.LatenessP99Ms), fmtMs(x.LatenessMaxMs),
				strings.Join(per, " "), strings.Join(create, " "), dup, miss, stray, rej)
		}
		_ = tw.Flush()
	}
}

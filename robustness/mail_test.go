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
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/edgebase/edgebase/internal/smtptest"
)

// TestRobustnessMail queues emails (request-password-reset, one per
// account, through every node) while the leader, which runs the mail
// sender, is killed with SIGKILL with emails in its outbox and on the wire,
// and checks with the SMTP server's records that every acknowledged email
// arrived at least once: duplicates allowed and counted, none lost, none
// unasked for (CheckMail).
func TestRobustnessMail(t *testing.T) {
	p := currentProfile(t)
	for _, seed := range p.seeds {
		t.Run(fmt.Sprintf("kill-leader/seed=%d", seed), func(t *testing.T) { runMailKill(t, seed, p) })
	}
}

func runMailKill(t *testing.T, seed uint64, p profile) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// A relay that takes a while to accept each message, so that the kill
	// finds emails sent and not yet removed from the outbox.
	srv := smtptest.Start(t, smtptest.WithDelay(25*time.Millisecond))
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, ctx, clusterOpts{env: []string{
		"EDGEBASE_SECRET_KEY=" + hex.EncodeToString(key),
		"EDGEBASE_SMTP_HOST=" + srv.Host(),
		"EDGEBASE_SMTP_PORT=" + strconv.Itoa(srv.Port()),
		"EDGEBASE_SMTP_SECURITY=none",
		"EDGEBASE_SMTP_FROM=noreply@example.com",
		"EDGEBASE_ALLOW_PRIVATE_HOSTS=" + srv.Host(),
		// Every client is this test on loopback: it names them with
		// X-Forwarded-For, so that the per-address limits see many.
		"EDGEBASE_TRUSTED_PROXIES=127.0.0.1/32",
		"EDGEBASE_REGISTER_LIMIT_ADDR=0",
	}})
	r := &run{t: t, c: c, p: p, seed: seed, rng: mrand.New(mrand.NewPCG(seed, 0x3a11)), start: time.Now()}
	n := 90
	if p.name == "long" {
		n = 240
	}
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("user%03d@example.com", i)
	}
	headers := func(i int) map[string]string {
		h := c.pr.Headers()
		h["X-Forwarded-For"] = fmt.Sprintf("198.51.%d.%d", 100+i/250, 1+i%250)
		return h
	}
	// Accounts first (hashing is the slow part), four at a time.
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 4 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				nd := c.voters()[i%3]
				resp, err := c.do(nd, 30*time.Second, http.MethodPost, "/api/auth", headers(i),
					map[string]string{"action": "register", "email": addrs[i], "password": "robustness password 1"})
				if err != nil || resp.Status != http.StatusCreated {
					t.Errorf("register %s on %s: %v %v", addrs[i], nd.id, resp, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	r.event("%d accounts registered", n)

	// Requests through random running nodes, four at a time, while the
	// leader is killed and restarted.
	var mu sync.Mutex
	var reqs []MailRequest
	var acked atomic.Int64
	next.Store(0)
	for w := range 4 {
		rng := mrand.New(mrand.NewPCG(seed, uint64(w)))
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n && ctx.Err() == nil; i = int(next.Add(1)) - 1 {
				var live []*node
				for _, nd := range c.nodes {
					if nd.Running() {
						live = append(live, nd)
					}
				}
				nd := live[rng.IntN(len(live))]
				resp, err := c.do(nd, 10*time.Second, http.MethodPost, "/api/auth", headers(i),
					map[string]string{"action": "request-password-reset", "email": addrs[i]})
				req := MailRequest{To: addrs[i], Node: nd.id, Acked: err == nil && resp.Status == http.StatusOK}
				if !req.Acked {
					req.Err = fmt.Sprintf("%v %v (%s)", resp, err, outcome(resp, err))
				} else {
					acked.Add(1)
				}
				mu.Lock()
				reqs = append(reqs, req)
				mu.Unlock()
				time.Sleep(time.Duration(5+rng.IntN(15)) * time.Millisecond)
			}
		})
	}
	r.checkFor(60*time.Second, "a third of the emails queued", func() error {
		if a := acked.Load(); a < int64(n/3) {
			return fmt.Errorf("%d of %d requests acknowledged", a, n)
		}
		return nil
	})
	l := c.leader(20 * time.Second)
	ackedAtKill, sentAtKill := acked.Load(), len(srv.Messages())
	r.event("kill -9 leader %s: %d emails acknowledged, %d delivered so far", l.id, ackedAtKill, sentAtKill)
	r.must(l.Kill9())
	r.awaitLeaderOtherThan(l)
	r.holdFault()
	r.event("restart %s", l.id)
	c.restart(l)
	wg.Wait()
	for _, nd := range c.nodes {
		c.mustReady(nd, 60*time.Second)
	}

	delivered := func() map[string]int {
		out := map[string]int{}
		for _, m := range srv.Messages() {
			for _, to := range m.To {
				out[to]++
			}
		}
		return out
	}
	c.checkFor(120*time.Second, "every acknowledged email delivered", func() error {
		rep, _ := CheckMail(reqs, delivered())
		if len(rep.Lost) > 0 {
			return fmt.Errorf("%d of %d acknowledged emails not delivered yet, e.g. %v", len(rep.Lost), rep.Acked, rep.Lost[:min(3, len(rep.Lost))])
		}
		return nil
	})
	got := delivered()
	rep, errs := CheckMail(reqs, got)
	r.event("%d requests, %d acknowledged: %d delivered, %d duplicates, %d unacknowledged delivered anyway, %d SMTP transactions",
		len(reqs), rep.Acked, rep.Delivered, rep.Duplicates, rep.Maybe, srv.Attempts())
	if int64(sentAtKill) >= ackedAtKill {
		t.Errorf("the leader was killed with an empty outbox (%d acknowledged, %d delivered): nothing was proven", ackedAtKill, sentAtKill)
	}
	for _, err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		res := &result{name: "mail-kill-leader", seed: seed}
		dir := saveReport(t, r, res, porcupine.LinearizationInfo{}, nil)
		b, _ := json.MarshalIndent(map[string]any{"requests": reqs, "delivered": got}, "", "  ")
		if err := os.WriteFile(dir+"/mail.json", b, 0o644); err != nil {
			t.Log(err)
		}
		t.Errorf("replay: EDGEBASE_ROBUSTNESS_SEED=%d go test ./robustness -run 'TestRobustnessMail/'", seed)
	}
}

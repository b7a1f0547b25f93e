package process

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/edgebase/edgebase/realtime/client"
)

// TestAuditAcrossProcesses runs three edgebase processes with
// --audit-retention=20s (as EDGEBASE_AUDIT_RETENTION) and reads the audit
// log with the Go client: an event committed through one process is on the
// next page through another; once the events are older than the retention,
// the leader's periodic sweep (every minute) removes them from every node,
// not before. (That the sweep keeps younger events is TestAuditRetention's.)
func TestAuditAcrossProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Second)
	defer cancel()
	const retention = 20 * time.Second
	c := mustStartCluster(t, ctx, clusterOpts{env: []string{"EDGEBASE_AUDIT_RETENTION=" + retention.String()}})
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	pr := c.mustCreateProject(n1)
	on := func(p *proc) *client.Accounts {
		return &client.Accounts{BaseURL: p.url(), ProjectID: pr.ID, APIKey: pr.APIKey, HTTPClient: &http.Client{Timeout: 30 * time.Second}}
	}
	ada, err := on(n2).Register(ctx, "ada@example.com", "a long process password", "Ada")
	if err != nil {
		t.Fatal(err)
	}
	page, err := on(n3).ListAudit(ctx, pr.Token, client.AuditQuery{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 1 || page.Events[0].Type != "register" || page.Events[0].UserID != ada.User.ID {
		t.Fatalf("newest event through n3 after a register through n2: %+v", page.Events)
	}
	registered := time.Now()

	// The sweep runs every minute on the leader: within the retention plus
	// a minute and a margin, the old events are gone from every node, and
	// never before they are older than the retention.
	checkFor(t, retention+3*time.Minute, time.Second, func() error {
		for _, p := range c.nodes {
			page, err := on(p).ListAudit(ctx, pr.Token, client.AuditQuery{})
			if err != nil {
				return fmt.Errorf("%s: %w", p.id, err)
			}
			if len(page.Events) > 0 {
				return fmt.Errorf("%s still lists %d events, the newest %s of %s (%s)", p.id, len(page.Events), page.Events[0].Type, page.Events[0].UserID, page.Events[0].Time)
			}
		}
		return nil
	})
	gone := time.Since(registered)
	if gone < retention {
		t.Fatalf("the events were removed %v after the registration, before the retention of %v", gone, retention)
	}
	t.Logf("events older than %v gone from every node %v after the registration", retention, gone)

	// The log goes on: a new event is listed at once.
	bob, err := on(n1).Register(ctx, "bob@example.com", "another process password", "Bob")
	if err != nil {
		t.Fatal(err)
	}
	page, err = on(n2).ListAudit(ctx, pr.Token, client.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 1 || page.Events[0].UserID != bob.User.ID {
		t.Fatalf("after the sweep, a new registration: %+v", page.Events)
	}
}

package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/realtime/client"
)

// A batch committed through the Go client on one follower reaches a
// subscriber on the other as changes that all carry the batch's revision,
// in one piece; a refused batch writes nothing, so the subscriber's next
// change is the write after it.
func TestBatchThroughGoClientArrivesAsOneRevision(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Voters: 3})
	leader := c.Leader(10 * time.Second)
	p := c.CreateProject(leader)
	f := c.Followers(leader)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	cfg := func(i int) client.Config {
		return client.Config{URL: c.Nodes[i].URL(), Token: p.OwnerToken, ProjectID: p.ID, APIKey: p.APIKey}
	}
	if _, err := client.Batch(ctx, cfg(leader), []client.Write{{Op: "set", Collection: "room/old", Data: map[string]int{"v": 0}}}); err != nil {
		t.Fatalf("seed: %v", err)
	}
	conn, err := client.Dial(ctx, cfg(f[0]))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer func() { _ = conn.CloseNow() }()
	sub, err := conn.Subscribe(ctx, "room", true)
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	next := func() client.Event {
		t.Helper()
		for {
			select {
			case ev, ok := <-sub.Events():
				if !ok {
					t.Fatalf("subscription ended: %v", sub.Err())
				}
				if ev.Kind == client.KindChange {
					return ev
				}
			case <-ctx.Done():
				t.Fatal("no change arrived")
			}
		}
	}

	by := 2.0
	res, err := client.Batch(ctx, cfg(f[1]), []client.Write{
		{Op: "set", Collection: "room/a", Data: map[string]any{"n": 1}},
		{Op: "increment", Collection: "room/a", Field: "n", By: &by},
		{Op: "arrayUnion", Collection: "room/b", Field: "who", Values: []any{"ada", "bob"}},
		{Op: "delete", Collection: "room/old"},
	})
	if err != nil {
		t.Fatalf("batch: %v", err)
	}
	if len(res.Results) != 4 || res.Revision == 0 || res.Results[3].Exists {
		t.Fatalf("batch answered %+v", res)
	}
	got := map[string]client.Event{}
	for range 3 {
		ev := next()
		if ev.Revision != res.Revision {
			t.Fatalf("change of %s has revision %d, want the batch's %d", ev.Collection, ev.Revision, res.Revision)
		}
		got[ev.Collection] = ev
	}
	var a struct{ N float64 }
	if err := json.Unmarshal(got["room/a"].Data, &a); err != nil || a.N != 3 {
		t.Errorf("room/a arrived as %s, want n = 3 (one change, as committed)", got["room/a"].Data)
	}
	if string(got["room/b"].Data) != `{"who":["ada","bob"]}` {
		t.Errorf("room/b arrived as %s", got["room/b"].Data)
	}
	if got["room/old"].Type != client.TypeDelete {
		t.Errorf("room/old arrived as %+v, want a delete", got["room/old"])
	}

	// Refused at its second write: nothing of it is written or delivered.
	zero := uint64(0)
	_, err = client.Batch(ctx, cfg(f[0]), []client.Write{
		{Op: "set", Collection: "room/c", Data: map[string]int{"v": 1}},
		{Op: "set", Collection: "room/a", Data: map[string]int{"v": 1}, IfMatch: &zero},
	})
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusPreconditionFailed || ae.Code != "precondition_failed" || ae.Field != "writes[1]" {
		t.Fatalf("refused batch: %v, want 412 precondition_failed at writes[1]", err)
	}
	if _, err := client.Batch(ctx, cfg(leader), []client.Write{{Op: "set", Collection: "room/fence", Data: map[string]int{"v": 1}}}); err != nil {
		t.Fatalf("fence: %v", err)
	}
	if ev := next(); ev.Collection != "room/fence" {
		t.Fatalf("after a refused batch the next change is %s, want room/fence", ev.Collection)
	}
	if _, err := client.Batch(ctx, client.Config{URL: c.Nodes[leader].URL(), Token: "ebt_nope"}, []client.Write{{Op: "delete", Collection: "room/a"}}); !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
		t.Fatalf("batch with a bad token: %v, want 401", err)
	}
}

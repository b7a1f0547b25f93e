package push_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/edgebase/edgebase/internal/storetest"
	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/push"
	"github.com/edgebase/edgebase/raftstore"
)

func mustOpenStore(t *testing.T) *raftstore.Store {
	t.Helper()
	return storetest.Open(t, raftstore.Config{})
}

// TestQueueForTrigger: a trigger's notification is queued once per event
// id however often the event is delivered, not at all while the project's
// push is off, and bad targets are refused with a 4xx *push.Error.
func TestQueueForTrigger(t *testing.T) {
	store := mustOpenStore(t)
	svc, err := push.NewService(push.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const pid, nid = "p1", "0123456789abcdef01234567"
	content := push.Content{Title: "New order", Body: "o1", Data: map[string]string{"order": "o1"}}
	count := func(dir string) int {
		t.Helper()
		n, err := store.CountPrefix(keys.Under(dir))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i, want := range []bool{true, false, false} {
		queued, err := svc.QueueForTrigger(ctx, pid, nid, "trigger:orders", push.Target{Project: true}, content)
		if err != nil || queued != want {
			t.Fatalf("delivery %d: queued %v, %v; want %v", i+1, queued, err, want)
		}
	}
	if n := count(keys.NotificationsDir(pid)); n != 1 {
		t.Fatalf("%d notifications, want 1", n)
	}
	if n := count(keys.PushJobsDir()); n != 1 {
		t.Fatalf("%d push jobs, want 1", n)
	}
	doc, err := store.Get(keys.Notification(pid, nid))
	if err != nil || doc == nil {
		t.Fatalf("notification: %v %v", doc, err)
	}
	var note push.Notification
	if err := json.Unmarshal(doc.Data, &note); err != nil {
		t.Fatal(err)
	}
	if note.CreatedBy != "trigger:orders" || note.Content.Category != push.CategoryGeneral || note.Content.Title != "New order" {
		t.Fatalf("notification %+v", note)
	}

	// Refusals: a bad id, an unknown user, bad content. All 4xx.
	for name, call := range map[string]func() error{
		"bad id": func() error {
			_, err := svc.QueueForTrigger(ctx, pid, "../x", "trigger:orders", push.Target{Project: true}, content)
			return err
		},
		"unknown user": func() error {
			_, err := svc.QueueForTrigger(ctx, pid, "1123456789abcdef01234567", "trigger:orders", push.Target{UserID: "nobody"}, content)
			return err
		},
		"no title": func() error {
			_, err := svc.QueueForTrigger(ctx, pid, "2123456789abcdef01234567", "trigger:orders", push.Target{Project: true}, push.Content{Body: "x"})
			return err
		},
	} {
		var pe *push.Error
		if err := call(); !errors.As(err, &pe) || pe.Status() >= 500 {
			t.Errorf("%s: %v, want a 4xx *push.Error", name, err)
		}
	}

	// Push off: nothing is queued, and no error (the event is done).
	if _, err := svc.SetEnabled(ctx, push.Caller{ProjectID: pid, Role: "owner"}, false); err != nil {
		t.Fatal(err)
	}
	queued, err := svc.QueueForTrigger(ctx, pid, "3123456789abcdef01234567", "trigger:orders", push.Target{Project: true}, content)
	if err != nil || queued {
		t.Fatalf("push off: queued %v, %v; want false, nil", queued, err)
	}
	if n := count(keys.NotificationsDir(pid)); n != 1 {
		t.Fatalf("push off: %d notifications, want 1", n)
	}
}

package triggers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
	"github.com/edgebase/edgebase/triggers"
)

func mustSealer(t *testing.T) *auth.Sealer {
	t.Helper()
	s, err := auth.NewSealer(bytes.Repeat([]byte{7}, auth.SecretKeyLen))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSecretSealing(t *testing.T) {
	s := mustSealer(t)
	const secret = "whsec_0123456789abcdef"
	stored, err := triggers.SealSecret(s, "p1", "hook", secret)
	if err != nil || !strings.HasPrefix(stored, "sealed:") || strings.Contains(stored, secret) {
		t.Fatalf("SealSecret = %q, %v", stored, err)
	}
	if got, err := triggers.OpenSecret(s, "p1", "hook", stored); err != nil || got != secret {
		t.Errorf("OpenSecret = %q, %v", got, err)
	}
	// Bound to its trigger: another name or project does not open it.
	for _, at := range [][2]string{{"p1", "hook2"}, {"p2", "hook"}} {
		if _, err := triggers.OpenSecret(s, at[0], at[1], stored); err == nil {
			t.Errorf("a secret sealed for p1/hook opened as %s/%s", at[0], at[1])
		}
	}
	if _, err := triggers.OpenSecret(nil, "p1", "hook", stored); !errors.Is(err, triggers.ErrSecretSealed) {
		t.Errorf("OpenSecret without a sealer = %v, want ErrSecretSealed", err)
	}
	// Without a sealer: stored plain.
	if got, err := triggers.SealSecret(nil, "p1", "hook", secret); err != nil || got != secret {
		t.Errorf("SealSecret(nil) = %q, %v", got, err)
	}
	if got, err := triggers.OpenSecret(nil, "p1", "hook", secret); err != nil || got != secret {
		t.Errorf("OpenSecret(nil) of a plain secret = %q, %v", got, err)
	}
	if _, err := triggers.SealSecret(nil, "p1", "hook", "sealed:abc"); err == nil {
		t.Error("a plain secret that reads back as sealed was stored")
	}
}

func TestParseDefinition(t *testing.T) {
	ok := `{"match":"a/{id}","on":["create"],"condition":"true","disabled":true,
		"action":{"webhook":{"url":"https://example.com/x","secret":"0123456789abcdef","headers":{"X-A":"b"}}}}`
	d, err := triggers.ParseDefinition([]byte(ok))
	if err != nil || d.Match != "a/{id}" || !d.Disabled || d.Action.Webhook.Headers["X-A"] != "b" {
		t.Fatalf("ParseDefinition(ok) = %+v, %v", d, err)
	}
	for _, tc := range []struct{ body, field string }{
		{`[]`, ""},
		{`"x"`, ""},
		{`{"match":"a","extra":1}`, "extra"},
		{`{"name":"a"}`, "name"},
		{`{"updatedAt":"x"}`, "updatedAt"},
		{`{"status":{}}`, "status"},
		{`{"action":{"webhook":{"url":"u","secretHint":"abcd"}}}`, "action.webhook.secretHint"},
		{`{"action":{"push":{"to":"user","icon":"x"}}}`, "action.push.icon"},
		{`{"action":{"write":{"op":"set","merge":true}}}`, "action.write.merge"},
		{`{"action":{"sms":{}}}`, "action.sms"},
		{`{"match":["a"]}`, "match"},
		{`{"on":"create"}`, "on"},
		{`{"disabled":"yes"}`, "disabled"},
		{`{"action":{"webhook":{"url":5}}}`, "action.webhook.url"},
		{`{"action":{"push":{"data":{"k":1}}}}`, "action.push.data"},
	} {
		_, err := triggers.ParseDefinition([]byte(tc.body))
		var r *triggers.Refusal
		if !errors.As(err, &r) || r.Status() != 400 || r.Code() != "invalid_argument" {
			t.Errorf("%s: err %v, want invalid_argument", tc.body, err)
			continue
		}
		if tc.field != "" && r.Field() != tc.field {
			t.Errorf("%s: field %q, want %q (%v)", tc.body, r.Field(), tc.field, err)
		}
	}
}

// allowAll is a host policy that allows every host.
type allowAll struct{}

func (allowAll) Check(context.Context, string) error { return nil }

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

func mustService(t *testing.T, store *raftstore.Store, hosts triggers.HostChecker) *triggers.Service {
	t.Helper()
	s, err := triggers.NewService(triggers.ServiceConfig{Store: store, Sealer: mustSealer(t), Hosts: hosts,
		Clock: fixedClock{time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustTxn(t *testing.T, store *raftstore.Store, ops ...raftstore.Op) uint64 {
	t.Helper()
	res, err := store.Txn(context.Background(), &raftstore.Txn{Time: time.Now().UnixNano(), Ops: ops})
	if err != nil || !res.OK() {
		t.Fatalf("txn: %v %+v", err, res)
	}
	return res.Revision
}

func webhookBody(url string) *triggers.Definition {
	return &triggers.Definition{Match: "orders/{id}", Action: triggers.Action{Webhook: &triggers.Webhook{URL: url}}}
}

func TestServiceHostPolicy(t *testing.T) {
	store := mustOpenStore(t)
	ctx := context.Background()
	// The default policy refuses loopback and private addresses.
	svc := mustService(t, store, nil)
	for _, u := range []string{"http://127.0.0.1/x", "http://10.0.0.1/x", "http://[fd00::1]/x"} {
		_, err := svc.Put(ctx, "", pid, "hook", webhookBody(u))
		var r *triggers.Refusal
		if !errors.As(err, &r) || !errors.Is(err, triggers.ErrURLNotAllowed) || r.Field() != "action.webhook.url" {
			t.Errorf("%s: %v, want url_not_allowed", u, err)
		}
	}
	if doc, _ := store.Get(keys.Trigger(pid, "hook")); doc != nil {
		t.Fatal("a refused trigger was stored")
	}
	res, err := mustService(t, store, allowAll{}).Put(ctx, "", pid, "hook", webhookBody("http://127.0.0.1/x"))
	if err != nil || !res.Created || res.Revision == 0 {
		t.Fatalf("Put with an allowing policy: %+v, %v", res, err)
	}
	// Stored with its index entry, in one commit.
	idx, err := store.Get(keys.TriggerIndex(pid, "hook"))
	if err != nil || idx == nil || idx.Revision != res.Revision || string(idx.Data) != `{"name":"hook","project":"p1"}` {
		t.Errorf("index entry %+v, %v", idx, err)
	}
}

func TestServiceStatus(t *testing.T) {
	store := mustOpenStore(t)
	ctx := context.Background()
	svc := mustService(t, store, allowAll{})
	res, err := svc.Put(ctx, "", pid, "hook", webhookBody("http://127.0.0.1/x"))
	if err != nil {
		t.Fatal(err)
	}
	def, _ := store.Get(keys.Trigger(pid, "hook"))
	if res.Trigger.Status.Cursor != def.CreateRevision {
		t.Errorf("a new trigger's cursor %d, want its creation %d", res.Trigger.Status.Cursor, def.CreateRevision)
	}
	// A state left by an earlier trigger of the same name is ignored.
	stale, _ := json.Marshal(triggers.State{DefRevision: def.CreateRevision - 1, Cursor: def.CreateRevision + 100, Delivered: 9})
	mustTxn(t, store, raftstore.Op{Kind: raftstore.OpPut, Path: keys.TriggerState(pid, "hook"), Data: stale})
	v, err := svc.Get(pid, "hook")
	if err != nil || v.Status.Cursor != def.CreateRevision || v.Status.Delivered != 0 {
		t.Errorf("status with a stale state: %+v, %v", v, err)
	}
	st, _ := json.Marshal(triggers.State{DefRevision: def.CreateRevision, Cursor: def.CreateRevision + 1, Delivered: 4, Failed: 2, Dead: 1,
		LastError: "503", LastErrorAt: "2026-11-27T12:00:00Z"})
	rev := mustTxn(t, store, raftstore.Op{Kind: raftstore.OpPut, Path: keys.TriggerState(pid, "hook"), Data: st},
		raftstore.Op{Kind: raftstore.OpPut, Path: keys.Under(keys.TriggerQueueDir(pid, "hook")) + keys.TriggerQueueKey("orders/a", 3), Data: json.RawMessage(`{}`)},
		raftstore.Op{Kind: raftstore.OpPut, Path: keys.Under(keys.TriggerDeadDir(pid, "hook")) + keys.TriggerDeadKey("orders/a", 2), Data: json.RawMessage(`{}`)},
		raftstore.Op{Kind: raftstore.OpPut, Path: keys.Under(keys.TriggerDeadDir(pid, "hook2")) + keys.TriggerDeadKey("orders/a", 2), Data: json.RawMessage(`{}`)})
	if err := store.WaitApplied(ctx, rev); err != nil {
		t.Fatal(err)
	}
	v, err = svc.Get(pid, "hook")
	want := triggers.Status{Cursor: def.CreateRevision + 1, LagRevisions: store.AppliedIndex() - def.CreateRevision - 1, Pending: 1, DeadLetters: 1,
		Delivered: 4, Failed: 2, Dead: 1, LastError: "503", LastErrorAt: "2026-11-27T12:00:00Z"}
	if err != nil || v.Status != want {
		t.Errorf("status %+v, %v; want %+v", v.Status, err, want)
	}
}

// TestServiceReplayAndDeleteInPages: a replay larger than one txn carries
// and a deletion of more records than one page removes, both complete.
func TestServiceReplayAndDeleteInPages(t *testing.T) {
	store := mustOpenStore(t)
	ctx := context.Background()
	svc := mustService(t, store, allowAll{})
	d := webhookBody("http://127.0.0.1/x")
	d.Disabled = true
	if _, err := svc.Put(ctx, "", pid, "hook", d); err != nil {
		t.Fatal(err)
	}
	big := json.RawMessage(`{"blob":"` + strings.Repeat("x", 300<<10) + `"}`)
	var ids []string
	for i := range 4 {
		path := fmt.Sprintf("orders/o%d", i)
		rev := uint64(100 + i)
		data, _ := json.Marshal(triggers.Dead{Parked: triggers.Parked{Payload: triggers.Payload{Trigger: "hook", Project: pid, Revision: rev, Path: path,
			Type: triggers.TypeUpdate, Before: big, After: json.RawMessage(`{}`)}, Attempts: 3, LastError: "timeout"}, DeadAt: "2026-11-27T12:00:00Z"})
		mustTxn(t, store, raftstore.Op{Kind: raftstore.OpPut, Path: keys.Under(keys.TriggerDeadDir(pid, "hook")) + keys.TriggerDeadKey(path, rev), Data: data})
		ids = append(ids, keys.TriggerDeadKey(path, rev))
	}
	before := store.AppliedIndex()
	out, err := svc.Replay(ctx, "", pid, "hook", nil)
	if err != nil || out.Replayed != 4 {
		t.Fatalf("Replay = %+v, %v", out, err)
	}
	if out.Revision < before+2 {
		t.Errorf("4 events of 300 KiB moved in one txn (revision %d after %d)", out.Revision, before)
	}
	if err := store.WaitApplied(ctx, out.Revision); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if doc, _ := store.Get(keys.Under(keys.TriggerDeadDir(pid, "hook")) + id); doc != nil {
			t.Errorf("dead letter %s still there", id)
		}
	}
	queue, _, err := store.List(keys.TriggerQueueDir(pid, "hook"), "", 10)
	if err != nil || len(queue) != 4 {
		t.Fatalf("queue %d, %v", len(queue), err)
	}
	for _, doc := range queue {
		var p triggers.Parked
		if err := json.Unmarshal(doc.Data, &p); err != nil {
			t.Fatal(err)
		}
		if p.Attempts != 0 || p.LastError != "" || !bytes.Equal(p.Before, big) {
			t.Errorf("replayed %s: attempts %d, lastError %q, before of %d bytes", doc.Path, p.Attempts, p.LastError, len(p.Before))
		}
	}
	if _, err := svc.Replay(ctx, "", pid, "hook", make([]string, triggers.MaxReplay+1)); !errors.Is(err, triggers.ErrInvalidArgument) {
		t.Errorf("a replay of %d ids: %v, want invalid_argument", triggers.MaxReplay+1, err)
	}

	// 1,200 parked events: more than a page of the deletion.
	for start := 0; start < 1200; start += 600 {
		ops := make([]raftstore.Op, 0, 600)
		for i := start; i < start+600; i++ {
			ops = append(ops, raftstore.Op{Kind: raftstore.OpPut, Path: keys.Under(keys.TriggerQueueDir(pid, "hook")) + keys.TriggerQueueKey(fmt.Sprintf("p/%d", i), 7), Data: json.RawMessage(`{}`)})
		}
		mustTxn(t, store, ops...)
	}
	rev, err := svc.Delete(ctx, "", pid, "hook")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.WaitApplied(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if n, _ := store.CountPrefix(keys.Under(keys.TriggerQueueDir(pid, "hook"))); n != 0 {
		t.Errorf("%d parked events left after the delete", n)
	}
	if _, err := svc.Delete(ctx, "", pid, "hook"); !errors.Is(err, triggers.ErrTriggerNotFound) {
		t.Errorf("second delete: %v, want not found", err)
	}
	if _, err := svc.Replay(ctx, "", pid, "hook", nil); !errors.Is(err, triggers.ErrTriggerNotFound) {
		t.Errorf("replay of a deleted trigger: %v, want not found", err)
	}
}

func TestServiceDefinitionTooLarge(t *testing.T) {
	store := mustOpenStore(t)
	svc := mustService(t, store, allowAll{})
	data := `{"blob":"` + strings.Repeat("x", raftstore.MaxDocumentSize-100) + `"}`
	d := &triggers.Definition{Match: "a/{id}", Action: triggers.Action{Write: &triggers.WriteAction{Op: "set", Collection: "b/c", Data: json.RawMessage(data)}}}
	_, err := svc.Put(context.Background(), "", pid, "big", d)
	if !errors.Is(err, triggers.ErrDefinitionTooLarge) {
		t.Fatalf("Put of a definition past the document size: %v, want document_too_large", err)
	}
}

// TestServiceRecreateClearsLeftovers: records a deleted trigger left behind
// (a delete cut short) are removed before a trigger of the same name is
// created, and a delete's clean-up never removes a re-created trigger's.
func TestServiceRecreateClearsLeftovers(t *testing.T) {
	store := mustOpenStore(t)
	ctx := context.Background()
	svc := mustService(t, store, allowAll{})
	d := webhookBody("http://127.0.0.1/x")
	d.Disabled = true
	// Leftovers of an earlier "hook": parked events and a dead letter, no
	// definition.
	mustTxn(t, store,
		raftstore.Op{Kind: raftstore.OpPut, Path: keys.Under(keys.TriggerQueueDir(pid, "hook")) + keys.TriggerQueueKey("a", 3), Data: json.RawMessage(`{}`)},
		raftstore.Op{Kind: raftstore.OpPut, Path: keys.Under(keys.TriggerDeadDir(pid, "hook")) + keys.TriggerDeadKey("a", 2), Data: json.RawMessage(`{}`)})
	if _, err := svc.Put(ctx, "", pid, "hook", d); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{keys.TriggerQueueDir(pid, "hook"), keys.TriggerDeadDir(pid, "hook")} {
		if n, err := store.CountPrefix(keys.Under(dir)); err != nil || n != 0 {
			t.Errorf("%s: %d records of the old trigger left (%v)", dir, n, err)
		}
	}
	// The new trigger's records stay when it is replaced.
	mustTxn(t, store, raftstore.Op{Kind: raftstore.OpPut, Path: keys.Under(keys.TriggerQueueDir(pid, "hook")) + keys.TriggerQueueKey("b", 9), Data: json.RawMessage(`{}`)})
	if _, err := svc.Put(ctx, "", pid, "hook", d); err != nil {
		t.Fatal(err)
	}
	if n, _ := store.CountPrefix(keys.Under(keys.TriggerQueueDir(pid, "hook"))); n != 1 {
		t.Errorf("replacing the trigger left %d parked events, want its 1", n)
	}
}

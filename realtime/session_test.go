package realtime_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/node/nodetest"
)

// Session consistency: a subscription's snapshot or replay starts only once
// the node has applied the subscriber's minRevision (the subscribe
// message's, or the connection's from X-Min-Revision / ?minRevision), so a
// client that wrote through another node never sees state older than its
// own write.

func TestMinRevision(t *testing.T) {
	h := startHarness(t, nodetest.Options{})
	p := h.newProject(t)

	t.Run("subscribe waits for minRevision before the snapshot", func(t *testing.T) {
		base := h.put(t, p.OwnerToken, "sess/a", map[string]any{"v": 0})
		c, _ := h.connect(t, p, p.OwnerToken)
		want := base + 3
		c.send(map[string]any{"op": "subscribe", "id": "s", "collection": "sess", "prefix": true, "minRevision": want})
		var last uint64
		for i := 1; i <= 3; i++ {
			last = h.put(t, p.OwnerToken, "sess/b", map[string]any{"v": i})
		}
		if last < want {
			t.Fatalf("three writes after %d reached only %d", base, last)
		}
		rev, docs, _ := c.snapshot("s")
		if rev < want {
			t.Fatalf("snapshot at revision %d, want at least minRevision %d", rev, want)
		}
		found := false
		for _, d := range docs {
			if d.Collection == "sess/b" {
				found = true
				jsonEq(t, "sess/b", d.Data, `{"v":3}`)
			}
		}
		if !found {
			t.Fatalf("snapshot %v lacks sess/b", docPaths(docs))
		}
	})

	t.Run("minRevision as a decimal string, and one already applied", func(t *testing.T) {
		rev := h.put(t, p.OwnerToken, "sess/c", map[string]any{"v": 1})
		c, _ := h.connect(t, p, p.OwnerToken)
		c.send(map[string]any{"op": "subscribe", "id": "str", "collection": "sess/c", "minRevision": "1"})
		if got, _, _ := c.snapshot("str"); got < rev {
			t.Fatalf("snapshot at %d, want at least %d", got, rev)
		}
	})

	t.Run("bad minRevision values are refused, the connection stays", func(t *testing.T) {
		c, _ := h.connect(t, p, p.OwnerToken)
		for i, raw := range []string{`"abc"`, `-1`, `1.5`, `1e3`, `18446744073709551616`, `true`, `{}`, `""`} {
			id := "bad" + string(rune('a'+i))
			c.sendRaw([]byte(`{"op":"subscribe","id":"` + id + `","collection":"sess","prefix":true,"minRevision":` + raw + `}`))
			m := c.expectError(id, "invalid_argument")
			if m.raw == "" || !strings.Contains(m.raw, `"field":"minRevision"`) {
				t.Fatalf("minRevision %s: error %s does not name the field", raw, m)
			}
		}
		c.subscribe("ok", "sess", true)
		c.snapshot("ok")
	})

	t.Run("an unreachable minRevision ends in unavailable", func(t *testing.T) {
		c, ready := h.connect(t, p, p.OwnerToken)
		start := time.Now()
		c.send(map[string]any{"op": "subscribe", "id": "far", "collection": "sess", "prefix": true, "minRevision": ready.Revision + 1_000_000})
		c.expectError("far", "unavailable")
		if el := time.Since(start); el < 4*time.Second {
			t.Fatalf("refused after %v, want after the 5 s read timeout", el)
		}
		// The id is free again and the connection works.
		c.subscribe("far", "sess", true)
		c.snapshot("far")
	})

	t.Run("unsubscribe during the wait cancels it", func(t *testing.T) {
		c, ready := h.connect(t, p, p.OwnerToken)
		c.send(map[string]any{"op": "subscribe", "id": "w", "collection": "sess", "prefix": true, "minRevision": ready.Revision + 1_000_000})
		c.send(map[string]any{"op": "unsubscribe", "id": "w"})
		if m := c.expect("unsubscribed"); m.ID != "w" {
			t.Fatalf("got %s", m)
		}
		c.send(map[string]any{"op": "ping"})
		c.expect("pong") // and no late error for w in between
	})

	t.Run("X-Min-Revision on the upgrade applies to every subscription", func(t *testing.T) {
		base := h.put(t, p.OwnerToken, "sess/d", map[string]any{"v": 0})
		want := base + 2
		hdr := authHeaders(p, p.OwnerToken)
		hdr.Set("X-Min-Revision", strconv.FormatUint(want, 10))
		c, resp, err := h.dial(t, "", hdr)
		if err != nil {
			t.Fatalf("dial: %v (%s)", err, respText(resp))
		}
		c.expect("ready")
		c.subscribe("x", "sess/d", false)
		h.put(t, p.OwnerToken, "sess/e", map[string]any{"v": 1})
		h.put(t, p.OwnerToken, "sess/d", map[string]any{"v": 2})
		rev, docs, _ := c.snapshot("x")
		if rev < want || len(docs) != 1 {
			t.Fatalf("snapshot at %d with %v, want at least %d with sess/d", rev, docPaths(docs), want)
		}
		jsonEq(t, "sess/d", docs[0].Data, `{"v":2}`)
	})

	t.Run("?minRevision on the upgrade (browsers)", func(t *testing.T) {
		base := h.put(t, p.OwnerToken, "sess/f", map[string]any{"v": 0})
		want := base + 1
		c, resp, err := h.dial(t, "?minRevision="+strconv.FormatUint(want, 10), authHeaders(p, p.OwnerToken))
		if err != nil {
			t.Fatalf("dial: %v (%s)", err, respText(resp))
		}
		c.expect("ready")
		c.subscribe("q", "sess/f", false)
		h.put(t, p.OwnerToken, "sess/f", map[string]any{"v": 1})
		rev, docs, _ := c.snapshot("q")
		if rev < want || len(docs) != 1 {
			t.Fatalf("snapshot at %d with %v, want at least %d", rev, docPaths(docs), want)
		}
		jsonEq(t, "sess/f", docs[0].Data, `{"v":1}`)
	})

	t.Run("bad upgrade values are 400 invalid_argument", func(t *testing.T) {
		for _, tc := range []struct{ query, header string }{
			{"", "-1"}, {"", "abc"}, {"", "18446744073709551616"}, {"", "1.0"},
			{"?minRevision=-5", ""}, {"?minRevision=x", ""}, {"?minRevision=", ""},
		} {
			hdr := authHeaders(p, p.OwnerToken)
			if tc.header != "" {
				hdr.Set("X-Min-Revision", tc.header)
			}
			_, resp, err := h.dial(t, tc.query, hdr)
			if err == nil {
				t.Fatalf("%+v: upgraded", tc)
			}
			if st, code := errorCode(t, resp); st != http.StatusBadRequest || code != "invalid_argument" {
				t.Fatalf("%+v: %d %s, want 400 invalid_argument", tc, st, code)
			}
		}
	})

	t.Run("since beyond the node's applied revision waits for it", func(t *testing.T) {
		base := h.put(t, p.OwnerToken, "sess/g", map[string]any{"v": 0})
		since := base + 2
		c, _ := h.connect(t, p, p.OwnerToken)
		c.subscribeSince("g", "sess/g", false, since)
		r1 := h.put(t, p.OwnerToken, "sess/g", map[string]any{"v": 1})
		r2 := h.put(t, p.OwnerToken, "sess/g", map[string]any{"v": 2})
		if r2 < since {
			t.Fatalf("writes reached %d, below since %d", r2, since)
		}
		m := c.expect("resumed")
		if m.ID != "g" || m.Revision < since {
			t.Fatalf("got %s, want resumed at or above %d", m, since)
		}
		// Changes after since still arrive; those at or below it do not.
		r3 := h.put(t, p.OwnerToken, "sess/g", map[string]any{"v": 3})
		ch := c.expectChange("g", "sess/g", "set")
		if ch.Revision != r3 {
			t.Fatalf("change at %d, want %d (r1 %d r2 %d since %d)", ch.Revision, r3, r1, r2, since)
		}
	})
}

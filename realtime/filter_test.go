package realtime_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/edgebase/edgebase/node/nodetest"
)

// Every document a subscription delivers is judged by the read rule of its
// own path (and data), not only the subscribed path's: in the snapshot, in
// a replay with since, in live changes, and again when the rules change.

// secretRules: public/** is readable by everyone except public/secret and
// below (owners only); posts/{id} is readable when its data says pub.
const secretRules = `{"rules":[
	{"match":"public/secret/**","read":"auth.role == 'owner'","write":"auth.role == 'owner'"},
	{"match":"public/**","read":"true","write":"auth.role == 'owner'"},
	{"match":"posts","read":"true","write":"auth.role == 'owner'"},
	{"match":"posts/{id}","read":"auth.role == 'owner' || resource.data.pub == true","write":"auth.role == 'owner'"},
	{"match":"**","read":"auth.role == 'owner'","write":"auth.role == 'owner'"}]}`

// openRules: all of public/** is readable by everyone.
const openRules = `{"rules":[
	{"match":"public/**","read":"true","write":"auth.role == 'owner'"},
	{"match":"**","read":"auth.role == 'owner'","write":"auth.role == 'owner'"}]}`

// expectSnapshotOf reads id's snapshot and checks its documents' paths.
func expectSnapshotOf(t *testing.T, c *client, id string, want ...string) uint64 {
	t.Helper()
	rev, docs, _ := c.snapshot(id)
	if got := docPaths(docs); !slices.Equal(got, want) {
		t.Fatalf("snapshot of %s: %q, want %q", id, got, want)
	}
	return rev
}

func TestSubscriptionsFilterPerDocument(t *testing.T) {
	h := startHarness(t, nodetest.Options{})

	// Each subtest fails on its own point without the filter: until then
	// what it reads is the same with or without it.

	t.Run("snapshot", func(t *testing.T) {
		p := h.newProject(t)
		h.setRules(t, p, secretRules)
		a := h.register(t, p, "f1")
		own := p.OwnerToken
		h.put(t, own, "public/a", map[string]any{"v": 1})
		h.put(t, own, "public/secret", map[string]any{"v": 1})
		h.put(t, own, "public/secret/s1", map[string]any{"v": 1})
		h.put(t, own, "public/b/deep", map[string]any{"v": 1})
		h.put(t, own, "posts/p1", map[string]any{"pub": true})
		h.put(t, own, "posts/p2", map[string]any{"pub": false})
		h.put(t, own, "posts/p1/deep", map[string]any{"pub": true})

		c, _ := h.connect(t, p, a.Token)
		c.subscribe("pub", "public", true)
		expectSnapshotOf(t, c, "pub", "public/a", "public/b/deep")
		c.subscribe("posts", "posts", true)
		expectSnapshotOf(t, c, "posts", "posts/p1")
		// An exact subscription to a hidden document is refused as before.
		c.subscribe("one", "public/secret/s1", false)
		c.expectError("one", "forbidden")
		// The owner still sees everything.
		co, _ := h.connect(t, p, own)
		co.subscribe("pub", "public", true)
		expectSnapshotOf(t, co, "pub", "public/a", "public/b/deep", "public/secret", "public/secret/s1")
	})

	t.Run("live changes", func(t *testing.T) {
		p := h.newProject(t)
		h.setRules(t, p, secretRules)
		a := h.register(t, p, "f2")
		own := p.OwnerToken
		h.put(t, own, "public/a", map[string]any{"v": 1})
		c, _ := h.connect(t, p, a.Token)
		c.subscribe("pub", "public", true)
		expectSnapshotOf(t, c, "pub", "public/a")
		// The secret writes are not delivered, the next public one is.
		h.put(t, own, "public/secret/s1", map[string]any{"v": 2})
		h.put(t, own, "public/secret", map[string]any{"v": 2})
		h.del(t, own, "public/secret/s1")
		r := h.put(t, own, "public/c", map[string]any{"v": 3})
		if m := c.expectChange("pub", "public/c", "set"); m.Revision != r {
			t.Fatalf("change %s: want revision %d", m, r)
		}
		r = h.del(t, own, "public/c")
		if m := c.expectChange("pub", "public/c", "delete"); m.Revision != r {
			t.Fatalf("change %s: want revision %d", m, r)
		}
	})

	t.Run("replay", func(t *testing.T) {
		p := h.newProject(t)
		h.setRules(t, p, secretRules)
		a := h.register(t, p, "f3")
		own := p.OwnerToken
		since := h.put(t, own, "public/a", map[string]any{"v": 1})
		h.put(t, own, "public/secret/s1", map[string]any{"v": 1})
		h.put(t, own, "public/b", map[string]any{"v": 1})
		h.del(t, own, "public/secret/s1")
		h.put(t, own, "public/secret", map[string]any{"v": 1})
		h.del(t, own, "public/b")

		c, _ := h.connect(t, p, a.Token)
		c.subscribeSince("pub", "public", true, since)
		var replayed []string
		for {
			m := c.next()
			if m.Op == "resumed" && m.ID == "pub" {
				break
			}
			if m.Op != "change" || m.ID != "pub" {
				t.Fatalf("got %s, want changes then resumed", m)
			}
			replayed = append(replayed, m.Type+" "+m.Collection)
		}
		if want := []string{"set public/b", "delete public/b"}; !slices.Equal(replayed, want) {
			t.Fatalf("replay after %d: %q, want %q", since, replayed, want)
		}
	})

	t.Run("a rules change starts the subscription over with what it may read now", func(t *testing.T) {
		p := h.newProject(t)
		h.setRules(t, p, openRules)
		a := h.register(t, p, "f4")
		own := p.OwnerToken
		h.put(t, own, "public/a", map[string]any{"v": 1})
		h.put(t, own, "public/secret/s1", map[string]any{"v": 1})

		c, _ := h.connect(t, p, a.Token)
		c.subscribe("pub", "public", true)
		expectSnapshotOf(t, c, "pub", "public/a", "public/secret/s1")

		// Unreadable now: a reset, then a snapshot without it.
		h.setRules(t, p, secretRules)
		if m := c.expect("reset"); m.ID != "pub" {
			t.Fatalf("reset %s: want id pub", m)
		}
		rev := expectSnapshotOf(t, c, "pub", "public/a")
		h.put(t, own, "public/secret/s2", map[string]any{"v": 2})
		r := h.put(t, own, "public/b", map[string]any{"v": 3})
		if m := c.expectChange("pub", "public/b", "set"); m.Revision != r || r <= rev {
			t.Fatalf("change %s: want revision %d above the snapshot's %d", m, r, rev)
		}

		// Readable again: a reset, then a snapshot with them.
		before := r
		h.setRules(t, p, openRules)
		if m := c.expect("reset"); m.ID != "pub" {
			t.Fatalf("reset %s: want id pub", m)
		}
		expectSnapshotOf(t, c, "pub", "public/a", "public/b", "public/secret/s1", "public/secret/s2")
		r = h.put(t, own, "public/secret/s3", map[string]any{"v": 4})
		if m := c.expectChange("pub", "public/secret/s3", "set"); m.Revision != r {
			t.Fatalf("change %s: want revision %d", m, r)
		}

		// A resume across a rules change cannot be a replay: what the
		// subscriber holds was judged by the old rules.
		c2, _ := h.connect(t, p, a.Token)
		c2.subscribeSince("pub", "public", true, before)
		if m := c2.expect("reset"); m.ID != "pub" {
			t.Fatalf("reset %s: want id pub", m)
		}
		expectSnapshotOf(t, c2, "pub", "public/a", "public/b", "public/secret/s1", "public/secret/s2", "public/secret/s3")
	})

	t.Run("documents readable by their data come and go as writes change it", func(t *testing.T) {
		p := h.newProject(t)
		h.setRules(t, p, secretRules)
		a := h.register(t, p, "f5")
		own := p.OwnerToken
		since := h.put(t, own, "posts/p1", map[string]any{"pub": true})

		c, _ := h.connect(t, p, a.Token)
		c.subscribe("posts", "posts", true)
		expectSnapshotOf(t, c, "posts", "posts/p1")

		// Made unreadable: the subscriber holds it, so it is told it is gone,
		// without its new data.
		r := h.put(t, own, "posts/p1", map[string]any{"pub": false, "secret": "s"})
		if m := c.expectChange("posts", "posts/p1", "delete"); m.Revision != r || string(m.Data) != "null" || strings.Contains(m.raw, "secret") {
			t.Fatalf("change %s: want a delete at %d without data", m, r)
		}
		// Unreadable and not held: nothing, neither a write nor a delete.
		h.put(t, own, "posts/p1", map[string]any{"pub": false, "secret": "t"})
		h.put(t, own, "posts/p2", map[string]any{"pub": false})
		h.del(t, own, "posts/p2")
		h.put(t, own, "posts/p1/deep", map[string]any{"pub": true})
		// Made readable: a set.
		h.put(t, own, "posts/p3", map[string]any{"pub": false})
		r = h.put(t, own, "posts/p3", map[string]any{"pub": true})
		m := c.expectChange("posts", "posts/p3", "set")
		jsonEq(t, "posts/p3 made readable", m.Data, `{"pub":true}`)
		if m.Revision != r {
			t.Fatalf("change %s: want revision %d", m, r)
		}
		// A held document deleted: a delete.
		r = h.del(t, own, "posts/p3")
		if m := c.expectChange("posts", "posts/p3", "delete"); m.Revision != r {
			t.Fatalf("change %s: want revision %d", m, r)
		}
		r = h.put(t, own, "posts/p4", map[string]any{"pub": true})
		if m := c.expectChange("posts", "posts/p4", "set"); m.Revision != r {
			t.Fatalf("change %s: want revision %d", m, r)
		}

		// A replay cannot tell what the subscriber holds: reset and snapshot.
		c.subscribeSince("again", "posts", true, since)
		if m := c.expect("reset"); m.ID != "again" {
			t.Fatalf("reset %s: want id again", m)
		}
		expectSnapshotOf(t, c, "again", "posts/p4")
	})
}

package process

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Writes to one hot document are decided where they commit: 64 clients
// writing the same document through every node of a 3-process cluster, with
// plain POSTs and field PUTs and the owner's token alone, all get 2xx (no
// 409, no retry-exhaustion), and the document ends as the answer with the
// highest revision said it was. 32 clients × 10 increments through
// /api/db/batch end at exactly 320.
func TestHotDocumentEveryWriteSucceeds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := mustStartCluster(t, ctx, clusterOpts{})
	pr := c.mustCreateProject(c.nodes[0])
	bearerOnly := map[string]string{"Authorization": "Bearer " + pr.Token}
	const path = "rooms/lobby/last"

	type answer struct {
		rev  uint64
		data json.RawMessage
	}
	const writers, each = 64, 8
	var (
		mu      sync.Mutex
		answers []answer
		fails   []string
	)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			node := c.nodes[w%len(c.nodes)]
			for i := range each {
				var r *response
				var err error
				if i%2 == 0 {
					r, err = doJSON(ctx, httpClient, 30*time.Second, http.MethodPost, node.url()+"/api/db", bearerOnly,
						map[string]any{"collection": path, "data": map[string]int{"writer": w, "seq": i}})
				} else {
					r, err = doJSON(ctx, httpClient, 30*time.Second, http.MethodPut, node.url()+"/api/db?collection="+url.QueryEscape(path), bearerOnly,
						map[string]any{"oldKey": "seq", "newKey": "seq", "value": i, "type": "integer"})
				}
				mu.Lock()
				switch {
				case err != nil:
					fails = append(fails, fmt.Sprintf("writer %d op %d on %s: %v", w, i, node.id, err))
				case r.status == http.StatusNotFound && i%2 == 1:
					// A PUT that ran before any POST created the document.
				case r.status != http.StatusOK && r.status != http.StatusCreated:
					fails = append(fails, fmt.Sprintf("writer %d op %d on %s: %s", w, i, node.id, r))
				default:
					var d doc
					rev, perr := strconv.ParseUint(r.header.Get("X-Revision"), 10, 64)
					if json.Unmarshal(r.body, &d) != nil || perr != nil || d.Revision != rev {
						fails = append(fails, fmt.Sprintf("writer %d op %d: bad answer %s", w, i, r))
					} else {
						answers = append(answers, answer{rev: rev, data: d.Data})
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for i, f := range fails {
		if i < 10 {
			t.Error(f)
		}
	}
	if len(fails) > 0 {
		t.Fatalf("%d of %d writes to one document failed", len(fails), writers*each)
	}
	if len(answers) < writers*each/2 {
		t.Fatalf("only %d writes answered with a document, want at least every POST (%d)", len(answers), writers*each/2)
	}
	last := answers[0]
	seen := map[uint64]bool{}
	for _, a := range answers {
		if seen[a.rev] {
			t.Fatalf("two writes answered the same revision %d", a.rev)
		}
		seen[a.rev] = true
		if a.rev > last.rev {
			last = a
		}
	}
	for _, p := range c.nodes {
		r, err := c.getDoc(p, pr, path, "", last.rev)
		if err != nil || r.status != http.StatusOK {
			t.Fatalf("read %s on %s: %v %v", path, p.id, r, err)
		}
		var d doc
		if err := json.Unmarshal(r.body, &d); err != nil {
			t.Fatal(err)
		}
		if d.Revision != last.rev || string(d.Data) != string(last.data) {
			t.Fatalf("%s on %s is %s at revision %d, want the last acknowledged write %s at %d", path, p.id, d.Data, d.Revision, last.data, last.rev)
		}
	}

	// Increments from many clients through every node add up exactly.
	const incWriters, incEach = 32, 10
	var incFails []string
	for w := range incWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			node := c.nodes[w%len(c.nodes)]
			for range incEach {
				r, err := doJSON(ctx, httpClient, 30*time.Second, http.MethodPost, node.url()+"/api/db/batch", bearerOnly,
					map[string]any{"writes": []map[string]any{{"op": "increment", "collection": "counters/c1", "field": "n", "by": 1}}})
				if err != nil || r.status != http.StatusOK {
					mu.Lock()
					incFails = append(incFails, fmt.Sprintf("increment on %s: %v %v", node.id, r, err))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(incFails) > 0 {
		t.Fatalf("%d increments failed, first: %s", len(incFails), incFails[0])
	}
	r, err := c.getDoc(c.nodes[2], pr, "counters/c1", "", 0)
	if err != nil || r.status != http.StatusOK {
		t.Fatalf("read the counter: %v %v", r, err)
	}
	var d doc
	if err := json.Unmarshal(r.body, &d); err != nil || string(d.Data) != fmt.Sprintf(`{"n":%d}`, incWriters*incEach) {
		t.Fatalf("counter = %s, want n = %d", r.body, incWriters*incEach)
	}
}

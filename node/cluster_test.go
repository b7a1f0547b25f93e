package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/node/nodetest"
)

type doc struct {
	Collection string          `json:"collection"`
	Data       json.RawMessage `json:"data"`
	Revision   uint64          `json:"revision"`
	UpdateTime string          `json:"updateTime"`
}

func bearerH(tok string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + tok}
}

// mustWrite writes one document through member i and returns its revision.
// A 503 (an election under load) is retried for up to 10 s: these puts are
// idempotent, and the tests using this helper check state, not availability.
func mustWrite(t *testing.T, c *nodetest.Cluster, i int, tok, coll string, data any) uint64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var d doc
		st := c.Do(i, http.MethodPost, "/api/db", bearerH(tok), map[string]any{"collection": coll, "data": data}, &d)
		if st == http.StatusCreated || st == http.StatusOK {
			return d.Revision
		}
		if st != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("write %s via %s: status %d", coll, c.Nodes[i].ID, st)
		}
		time.Sleep(50 * time.Millisecond) // pacing retries during an election
	}
}

// mustRead reads one document through member i (strong by default).
func mustRead(t *testing.T, c *nodetest.Cluster, i int, tok, query string) doc {
	t.Helper()
	var d doc
	if st := c.Do(i, http.MethodGet, "/api/db?"+query, bearerH(tok), nil, &d); st != http.StatusOK {
		t.Fatalf("read %s via %s: status %d", query, c.Nodes[i].ID, st)
	}
	return d
}

func TestFollowerWriteIsReadAtOnceThroughOtherFollower(t *testing.T) {
	t.Parallel()
	c := nodetest.Start(t, nodetest.Options{Voters: 3})
	p := c.CreateProject(0)
	leader := c.Leader(10 * time.Second)
	f := c.Followers(leader)
	for i := 0; i < 30; i++ {
		coll := fmt.Sprintf("things/t%d", i)
		rev := mustWrite(t, c, f[0], p.OwnerToken, coll, map[string]int{"i": i})
		// No waiting, no X-Min-Revision: the default strong read must see it.
		d := mustRead(t, c, f[1], p.OwnerToken, "collection="+coll)
		if d.Revision != rev || string(d.Data) != fmt.Sprintf(`{"i":%d}`, i) {
			t.Fatalf("read through %s after write through %s: got rev %d data %s, want rev %d",
				c.Nodes[f[1]].ID, c.Nodes[f[0]].ID, d.Revision, d.Data, rev)
		}
	}
}

func TestTokenIssuedOnOneNodeWorksEverywhereAtOnce(t *testing.T) {
	t.Parallel()
	c := nodetest.Start(t, nodetest.Options{Voters: 3, Edges: 1})
	p := c.CreateProject(0)
	hdr := map[string]string{"X-Project-Id": p.ID, "X-API-Key": p.APIKey}
	for i := range c.Nodes {
		var reg struct {
			Token string
			User  struct{ ID string }
		}
		email := fmt.Sprintf("u%d@example.com", i)
		if st := c.Do(i, http.MethodPost, "/api/auth", hdr, map[string]string{"action": "register", "email": email, "password": "a long enough password", "name": "U"}, &reg); st != http.StatusCreated {
			t.Fatalf("register via %s: %d", c.Nodes[i].ID, st)
		}
		for j := range c.Nodes {
			// Local consistency on purpose: an unknown token must trigger a strong lookup.
			var me struct{ User struct{ ID string } }
			if st := c.Do(j, http.MethodGet, "/api/db?consistency=local&collection=users/"+reg.User.ID, bearerH(reg.Token), nil, &me); st != http.StatusNotFound {
				t.Fatalf("token from %s used on %s: status %d, want 404 (authenticated, no doc yet)", c.Nodes[i].ID, c.Nodes[j].ID, st)
			}
		}
		// Logout through another node revokes it everywhere at once.
		other := (i + 1) % len(c.Nodes)
		if st := c.Do(other, http.MethodPost, "/api/auth", map[string]string{"X-Project-Id": p.ID, "X-API-Key": p.APIKey, "Authorization": "Bearer " + reg.Token}, map[string]string{"action": "logout"}, nil); st != http.StatusOK {
			t.Fatalf("logout via %s: %d", c.Nodes[other].ID, st)
		}
		for j := range c.Nodes {
			if st := c.Do(j, http.MethodGet, "/api/db?collection=users/"+reg.User.ID, bearerH(reg.Token), nil, nil); st != http.StatusUnauthorized {
				t.Fatalf("logged-out token on %s: status %d, want 401", c.Nodes[j].ID, st)
			}
		}
	}
}

func TestEdgeNodeForwardsWritesAndServesReads(t *testing.T) {
	t.Parallel()
	c := nodetest.Start(t, nodetest.Options{Voters: 3, Edges: 1})
	p := c.CreateProject(1)
	edge := 3
	var st struct {
		Leader string
		Nodes  []struct {
			ID    string
			Voter bool
		}
	}
	if code := c.Do(edge, http.MethodGet, "/admin/cluster", bearerH(nodetest.AdminToken), nil, &st); code != http.StatusOK {
		t.Fatalf("cluster status: %d", code)
	}
	voters := 0
	for _, n := range st.Nodes {
		if n.Voter {
			voters++
		}
		if n.ID == c.Nodes[edge].ID && n.Voter {
			t.Fatalf("edge node %s is a voter", n.ID)
		}
	}
	if len(st.Nodes) != 4 || voters != 3 || st.Leader == "" {
		t.Fatalf("cluster status %+v: want 4 nodes, 3 voters, a leader", st)
	}
	rev := mustWrite(t, c, edge, p.OwnerToken, "edge/doc", map[string]string{"via": "edge"})
	for i := range c.Nodes {
		d := mustRead(t, c, i, p.OwnerToken, "collection=edge/doc")
		if d.Revision != rev {
			t.Fatalf("node %s: revision %d, want %d", c.Nodes[i].ID, d.Revision, rev)
		}
	}
	// Edge-fast read with read-your-writes.
	var d doc
	code := c.Do(edge, http.MethodGet, "/api/db?consistency=local&collection=edge/doc",
		map[string]string{"Authorization": "Bearer " + p.OwnerToken, "X-Min-Revision": strconv.FormatUint(rev, 10)}, nil, &d)
	if code != http.StatusOK || d.Revision != rev {
		t.Fatalf("local read with X-Min-Revision on edge: %d rev %d", code, d.Revision)
	}
}

// ack is one acknowledged write.
type ack struct {
	coll string
	data string
	rev  uint64
}

func TestLeaderKilledNewLeaderWithinFiveSecondsNoAckLost(t *testing.T) {
	t.Parallel()
	c := nodetest.Start(t, nodetest.Options{Voters: 3})
	p := c.CreateProject(0)
	leader := c.Leader(10 * time.Second)
	f := c.Followers(leader)

	var acks []ack
	write := func(via, i int) (int, uint64) {
		coll := fmt.Sprintf("log/k%05d", i)
		data := fmt.Sprintf(`{"i":%d}`, i)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		st, b, err := nodetest.DoJSON(ctx, c.Nodes[via].URL(), http.MethodPost, "/api/db", bearerH(p.OwnerToken),
			map[string]any{"collection": coll, "data": json.RawMessage(data)})
		if err != nil {
			return 0, 0
		}
		if st == http.StatusCreated {
			var d doc
			if err := json.Unmarshal(b, &d); err != nil {
				t.Fatalf("decode ack: %v", err)
			}
			acks = append(acks, ack{coll: coll, data: data, rev: d.Revision})
		}
		return st, 0
	}
	i := 0
	for ; i < 50; i++ {
		if st, _ := write(f[i%2], i); st != http.StatusCreated {
			t.Fatalf("write %d before the kill: %d", i, st)
		}
	}

	killedAt := time.Now()
	c.Kill(leader)
	recovered := time.Duration(0)
	for ; i < 200; i++ {
		st, _ := write(f[i%2], i)
		if st == http.StatusCreated && recovered == 0 {
			recovered = time.Since(killedAt)
		}
		if recovered == 0 && time.Since(killedAt) > 5*time.Second {
			t.Fatalf("no write succeeded within 5s of killing the leader %s", c.Nodes[leader].ID)
		}
		if recovered == 0 {
			time.Sleep(20 * time.Millisecond) // pacing retries, not synchronisation
		}
	}
	t.Logf("first write acknowledged %v after the leader was killed", recovered)
	newLeader := c.Leader(5 * time.Second)
	if newLeader == leader {
		t.Fatalf("killed node still reported as leader")
	}
	for _, via := range f {
		for _, a := range acks {
			d := mustRead(t, c, via, p.OwnerToken, "collection="+a.coll)
			if string(d.Data) != a.data || d.Revision != a.rev {
				t.Fatalf("acknowledged %s (rev %d, %s) read on %s as rev %d %s", a.coll, a.rev, a.data, c.Nodes[via].ID, d.Revision, d.Data)
			}
		}
	}
	for k := 1; k < len(acks); k++ {
		if acks[k].rev <= acks[k-1].rev {
			t.Fatalf("revisions not increasing: %d then %d", acks[k-1].rev, acks[k].rev)
		}
	}

	// The old leader rejoins and catches up.
	c.StartMember(leader)
	c.WaitReady(leader, 20*time.Second)
	last := acks[len(acks)-1]
	d := doc{}
	st := c.Do(leader, http.MethodGet, "/api/db?consistency=local&collection="+last.coll,
		map[string]string{"Authorization": "Bearer " + p.OwnerToken, "X-Min-Revision": strconv.FormatUint(last.rev, 10)}, nil, &d)
	if st != http.StatusOK || d.Revision != last.rev {
		t.Fatalf("rejoined %s: status %d rev %d, want rev %d", c.Nodes[leader].ID, st, d.Revision, last.rev)
	}
	assertSameListing(t, c, p.OwnerToken, "log", last.rev)
}

// assertSameListing compares the full listing of parent on every running
// member, read locally once each has applied minRev.
func assertSameListing(t *testing.T, c *nodetest.Cluster, tok, parent string, minRev uint64) {
	t.Helper()
	var want string
	for i, m := range c.Nodes {
		if m.Node == nil {
			continue
		}
		var all []doc
		token := ""
		for {
			var page struct {
				Documents     []doc
				NextPageToken string
			}
			q := "/api/db?consistency=local&list=true&limit=1000&collection=" + parent
			if token != "" {
				q += "&pageToken=" + token
			}
			st := c.Do(i, http.MethodGet, q, map[string]string{"Authorization": "Bearer " + tok, "X-Min-Revision": strconv.FormatUint(minRev, 10)}, nil, &page)
			if st != http.StatusOK {
				t.Fatalf("list on %s: %d", m.ID, st)
			}
			all = append(all, page.Documents...)
			if token = page.NextPageToken; token == "" {
				break
			}
		}
		b, _ := json.Marshal(all)
		if want == "" {
			want = string(b)
			continue
		}
		if string(b) != want {
			t.Fatalf("listing of %s on %s differs from the first node's:\n%s\nvs\n%s", parent, m.ID, b, want)
		}
	}
}

// Not parallel: frequent snapshots on top of other clusters on a 2-core
// machine under -race starve heartbeats and make elections flap.
func TestFollowerBehindSnapshotCatchesUp(t *testing.T) {
	tun := nodetest.FastTuning()
	tun.SnapshotThreshold = 32
	tun.TrailingLogs = 8
	tun.SnapshotInterval = time.Second
	c := nodetest.Start(t, nodetest.Options{Voters: 3, Tuning: tun})
	p := c.CreateProject(0)
	leader := c.Leader(10 * time.Second)
	behind := c.Followers(leader)[0]
	c.Kill(behind)

	var last uint64
	for i := 0; i < 300; i++ {
		last = mustWrite(t, c, leader, p.OwnerToken, fmt.Sprintf("bulk/d%04d", i), map[string]int{"i": i})
	}
	if err := c.Nodes[leader].Node.Store.Snapshot(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	// More writes after the snapshot, so catching up needs snapshot + log tail.
	for i := 300; i < 320; i++ {
		last = mustWrite(t, c, leader, p.OwnerToken, fmt.Sprintf("bulk/d%04d", i), map[string]int{"i": i})
	}
	c.StartMember(behind)
	c.WaitReady(behind, 30*time.Second)
	assertSameListing(t, c, p.OwnerToken, "bulk", last)

	cur, err := os.ReadFile(filepath.Join(c.Nodes[behind].DataDir, "tree", "CURRENT"))
	if err != nil {
		t.Fatalf("the follower did not install a snapshot (no tree/CURRENT): %v", err)
	}
	if gen, _ := strconv.Atoi(strings.TrimSpace(string(cur))); gen < 1 {
		t.Fatalf("tree generation %q, want >= 1 after a snapshot install", cur)
	}
	d := mustRead(t, c, behind, p.OwnerToken, "consistency=local&collection=bulk/d0000")
	if string(d.Data) != `{"i":0}` {
		t.Fatalf("first document on caught-up follower: %s", d.Data)
	}
}

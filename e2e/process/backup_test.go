package process

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// bkWrite is one document write of the test: what was sent, and whether and
// when it was acknowledged (with the document the answer carried).
type bkWrite struct {
	coll    string
	writer  int
	seq     int
	sent    time.Time
	acked   time.Time // zero: not acknowledged
	rev     uint64
	sum     [32]byte // SHA-256 of the acknowledged document's data
	errText string
}

// bkLoad runs writers that each create unique documents, one after the
// other, round robin over the nodes, recording every attempt.
type bkLoad struct {
	c     *cluster
	pr    project
	nodes []*proc
	stop  chan struct{}
	wg    sync.WaitGroup

	mu     sync.Mutex
	writes []*bkWrite
}

func startBkLoad(c *cluster, pr project, name string, nodes []*proc, writers, padBytes int) *bkLoad {
	l := &bkLoad{c: c, pr: pr, nodes: nodes, stop: make(chan struct{})}
	client := &http.Client{Timeout: 15 * time.Second}
	pad := strings.Repeat("w", padBytes)
	for k := 0; k < writers; k++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for seq := 0; ; seq++ {
				select {
				case <-l.stop:
					return
				default:
				}
				w := &bkWrite{coll: fmt.Sprintf("bk/%s-w%d-%06d", name, k, seq), writer: k, seq: seq}
				p := nodes[(k+seq)%len(nodes)]
				w.sent = time.Now()
				l.mu.Lock()
				l.writes = append(l.writes, w)
				l.mu.Unlock()
				d, rev, err := bkPost(c, client, p, pr, w.coll, map[string]any{"w": k, "seq": seq, "pad": pad})
				l.mu.Lock()
				if err != nil {
					w.errText = err.Error()
				} else {
					w.acked, w.rev, w.sum = time.Now(), rev, sha256.Sum256(d.Data)
				}
				l.mu.Unlock()
			}
		}()
	}
	return l
}

func (l *bkLoad) halt() []*bkWrite {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writes
}

func (l *bkLoad) acked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, w := range l.writes {
		if !w.acked.IsZero() {
			n++
		}
	}
	return n
}

// bkPost is cluster.write with its own client (the load must not share the
// test's 15 s client pool with the probes).
func bkPost(c *cluster, client *http.Client, p *proc, pr project, coll string, data any) (doc, uint64, error) {
	var d doc
	r, err := doJSON(c.ctx, client, 15*time.Second, http.MethodPost, p.url()+"/api/db", pr.Headers(), map[string]any{"collection": coll, "data": data})
	if err != nil {
		return d, 0, fmt.Errorf("POST %s on %s: %w", coll, p.id, err)
	}
	if r.status != http.StatusCreated && r.status != http.StatusOK {
		return d, 0, fmt.Errorf("POST %s on %s: %s", coll, p.id, r)
	}
	if err := json.Unmarshal(r.body, &d); err != nil {
		return d, 0, fmt.Errorf("POST %s on %s: decode: %w", coll, p.id, err)
	}
	rev, err := strconv.ParseUint(r.header.Get("X-Revision"), 10, 64)
	if err != nil || rev != d.Revision || d.Collection != coll {
		return d, 0, fmt.Errorf("POST %s on %s: X-Revision %q, document %+v", coll, p.id, r.header.Get("X-Revision"), d)
	}
	return d, rev, nil
}

// bkListAll pages through the children of coll on p with a strong read
// (the default consistency).
func bkListAll(t *testing.T, c *cluster, p *proc, pr project, coll string) []doc {
	t.Helper()
	var all []doc
	token := ""
	for page := 0; page < 10000; page++ {
		q := "&list=true&limit=1000"
		if token != "" {
			q += "&pageToken=" + url.QueryEscape(token)
		}
		r, err := c.getDoc(p, pr, coll, q, 0)
		if err != nil {
			t.Fatalf("list %s on %s: %v", coll, p.id, err)
		}
		if r.status != http.StatusOK {
			t.Fatalf("list %s on %s: %s", coll, p.id, r)
		}
		var out struct {
			Documents     []doc  `json:"documents"`
			NextPageToken string `json:"nextPageToken"`
		}
		if err := json.Unmarshal(r.body, &out); err != nil {
			t.Fatalf("list %s on %s: decode: %v", coll, p.id, err)
		}
		all = append(all, out.Documents...)
		if out.NextPageToken == "" {
			return all
		}
		token = out.NextPageToken
	}
	t.Fatalf("list %s on %s: too many pages", coll, p.id)
	return nil
}

// newBkProc is a node slot like mustStartCluster's, joining join when set.
func newBkProc(t *testing.T, base, id, join string) *proc {
	p := newProc(t, base, id)
	if join != "" {
		p.Args = append(p.Args, "--join", join)
	}
	return p
}

// appliedProbe polls a node's /readyz (a read index round trip, then its
// own applied index) and records when its applied index moved.
type appliedProbe struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	seen []probeSample
}

type probeSample struct {
	at      time.Time
	applied uint64
}

func startAppliedProbe(c *cluster, p *proc) *appliedProbe {
	pb := &appliedProbe{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(pb.done)
		for {
			select {
			case <-pb.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			r, err := doJSON(c.ctx, httpClient, 5*time.Second, http.MethodGet, p.url()+"/readyz", nil, nil)
			if err != nil || r.status != http.StatusOK {
				continue
			}
			var st struct {
				AppliedIndex uint64 `json:"appliedIndex"`
			}
			if json.Unmarshal(r.body, &st) == nil {
				pb.mu.Lock()
				pb.seen = append(pb.seen, probeSample{time.Now(), st.AppliedIndex})
				pb.mu.Unlock()
			}
		}
	}()
	return pb
}

func (pb *appliedProbe) halt() []probeSample {
	close(pb.stop)
	<-pb.done
	pb.mu.Lock()
	defer pb.mu.Unlock()
	return pb.seen
}

// TestBackupUnderLoadRestoreAndJoin is the disaster-recovery path with the
// real binary: a backup taken with `edgebase backup` from a follower of a
// 3-node cluster under a steady write load holds every write acknowledged
// before it started (and is exactly the state at its revision); writers are
// not stalled while it streams; the old cluster is then lost, `edgebase
// restore` seeds a new node, which starts alone with the documents, their
// revisions and the accounts; two fresh nodes join it and converge.
func TestBackupUnderLoadRestoreAndJoin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	testStart := time.Now()
	c := mustStartCluster(t, ctx, clusterOpts{})
	leader := c.mustLeader(c.nodes[0], 10*time.Second)
	pr := c.mustCreateProject(leader)
	const userEmail, userPassword = "before-backup@example.com", "a password made before the backup"
	authCall(t, c, leader, pr, "/api/auth", "", map[string]string{"action": "register", "email": userEmail, "password": userPassword, "name": "Before"}, http.StatusCreated, "")

	// Tens of MB of documents, so the backup streams for a measurable time.
	const seedDocs, seedWriters, seedBytes = 480, 8, 64 << 10
	seed := startBkLoad(c, pr, "seed", c.nodes, seedWriters, seedBytes)
	checkFor(t, 60*time.Second, 20*time.Millisecond, func() error {
		if n := seed.acked(); n < seedDocs {
			return fmt.Errorf("%d of %d seed documents written", n, seedDocs)
		}
		return nil
	})
	writes := seed.halt()
	seedDone := time.Now()

	// The steady load: small unique documents through every node.
	var follower *proc
	for _, p := range c.nodes {
		if p != leader {
			follower = p
			break
		}
	}
	probe := startAppliedProbe(c, follower)
	loadStart := time.Now()
	load := startBkLoad(c, pr, "load", c.nodes, 4, 1<<10)
	checkFor(t, 20*time.Second, 10*time.Millisecond, func() error {
		if n := load.acked(); n < 100 || time.Since(loadStart) < time.Second {
			return fmt.Errorf("%d writes acknowledged under load in %v", n, time.Since(loadStart))
		}
		return nil
	})
	file := filepath.Join(t.TempDir(), "cluster.backup")
	bctx, bcancel := context.WithTimeout(ctx, 60*time.Second)
	defer bcancel()
	cmd := exec.CommandContext(bctx, binPath, "backup", "--server", follower.url(), "--admin-token", adminToken, "--out", file)
	var bout, berr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &bout, &berr
	backupStart := time.Now()
	err := cmd.Run()
	backupEnd := time.Now()
	if err != nil {
		t.Fatalf("edgebase backup: %v\nstdout: %s\nstderr: %s", err, bout.Bytes(), berr.Bytes())
	}
	// Let writes be acknowledged after the backup too, then stop the load.
	afterBackup := load.acked()
	checkFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if n := load.acked(); n < afterBackup+50 {
			return fmt.Errorf("%d writes acknowledged after the backup", n-afterBackup)
		}
		return nil
	})
	writes = append(writes, load.halt()...)
	samples := probe.halt()

	m := regexp.MustCompile(`^wrote (\d+) bytes to .*: revision (\d+), (\d+) records, served by node (\S+) at `).FindSubmatch(bout.Bytes())
	if m == nil {
		t.Fatalf("edgebase backup output %q", bout.Bytes())
	}
	size, _ := strconv.ParseInt(string(m[1]), 10, 64)
	backupRev, _ := strconv.ParseUint(string(m[2]), 10, 64)
	if string(m[4]) != follower.id {
		t.Fatalf("backup served by %s, asked %s", m[4], follower.id)
	}
	if st, err := os.Stat(file); err != nil || st.Size() != size || size < 30<<20 {
		t.Fatalf("backup file: %v (%v), reported %d bytes; want the reported size, at least 30 MiB", st, err, size)
	}
	backupDur := backupEnd.Sub(backupStart)

	// Writers were not stalled by the backup: no write in flight during it
	// took long, writes kept being acknowledged through it, and the follower
	// serving it kept applying.
	// The baseline is the same load before the backup (past its first
	// moments): a stall is judged against the backup's length, and never
	// below twice what the machine does anyway.
	var maxLat, baseLat time.Duration
	maxLatWrite := &bkWrite{coll: "(none)"}
	ackedDuring, failed := 0, 0
	for _, w := range writes {
		if w.errText != "" {
			failed++
			t.Errorf("write %s failed: %s", w.coll, w.errText)
			continue
		}
		if w.sent.After(loadStart.Add(200*time.Millisecond)) && w.acked.Before(backupStart) {
			baseLat = max(baseLat, w.acked.Sub(w.sent))
		}
		if w.sent.Before(backupEnd) && w.acked.After(backupStart) {
			if lat := w.acked.Sub(w.sent); lat > maxLat {
				maxLat, maxLatWrite = lat, w
			}
		}
		if w.sent.After(backupStart) && w.acked.Before(backupEnd) {
			ackedDuring++
		}
	}
	var maxApplyGap, baseApplyGap time.Duration
	var lastMove time.Time
	var lastApplied uint64
	for _, s := range samples {
		if s.applied != lastApplied {
			if !lastMove.IsZero() && s.at.After(backupStart) && lastMove.Before(backupEnd) {
				maxApplyGap = max(maxApplyGap, s.at.Sub(lastMove))
			} else if !lastMove.IsZero() && s.at.Before(backupStart) {
				baseApplyGap = max(baseApplyGap, s.at.Sub(lastMove))
			}
			lastMove, lastApplied = s.at, s.applied
		}
	}
	t.Logf("seed: %d documents of %d KiB in %v; backup: %d bytes, revision %d, in %v; during it %d writes acknowledged, max write latency %v (%s; before it %v), the follower's applied index stood still at most %v (before it %v)",
		seedDocs, seedBytes>>10, seedDone.Sub(testStart), size, backupRev, backupDur.Round(time.Millisecond), ackedDuring,
		maxLat.Round(time.Millisecond), maxLatWrite.coll, baseLat.Round(time.Millisecond), maxApplyGap.Round(time.Millisecond), baseApplyGap.Round(time.Millisecond))
	if failed > 0 {
		t.Fatalf("%d writes failed under load", failed)
	}
	if ackedDuring < 4 {
		t.Errorf("only %d writes were sent and acknowledged while the backup ran for %v: writers stalled", ackedDuring, backupDur)
	}
	if backupDur >= 150*time.Millisecond {
		if limit := max(backupDur/2, 2*baseLat); maxLat > limit {
			t.Errorf("a write in flight during the backup took %v of the backup's %v (limit %v): writers stalled", maxLat, backupDur, limit)
		}
		if limit := max(backupDur/2, 2*baseApplyGap); maxApplyGap > limit {
			t.Errorf("the follower serving the backup applied nothing for %v of the backup's %v (limit %v)", maxApplyGap, backupDur, limit)
		}
	} else {
		t.Logf("the backup took only %v: too short to judge stalls by latency", backupDur)
	}

	// The disaster: the whole cluster is gone.
	for _, p := range c.nodes {
		p.mustKill9()
	}

	// The other way back: backups of the dead nodes' disks. Every write was
	// applied by the leader that acknowledged it (and by every later leader
	// before it led), so the newest of them holds all acknowledged writes.
	var maxAcked, maxDisk uint64
	for _, w := range writes {
		maxAcked = max(maxAcked, w.rev)
	}
	var newestDisk string
	for _, p := range c.nodes {
		f := filepath.Join(t.TempDir(), p.id+"-disk.backup")
		out, err := exec.CommandContext(ctx, binPath, "backup", "--from-data-dir", p.dataDir, "--out", f).CombinedOutput()
		if err != nil {
			t.Fatalf("edgebase backup --from-data-dir %s: %v\n%s", p.id, err, out)
		}
		m := regexp.MustCompile(`: revision (\d+), `).FindSubmatch(out)
		if m == nil {
			t.Fatalf("offline backup output %q", out)
		}
		if rev, _ := strconv.ParseUint(string(m[1]), 10, 64); rev > maxDisk {
			maxDisk, newestDisk = rev, f
		}
	}
	if maxDisk < maxAcked {
		t.Fatalf("the newest disk holds revision %d, below the last acknowledged write's %d", maxDisk, maxAcked)
	}
	if out, err := exec.CommandContext(ctx, binPath, "restore", "--from", newestDisk, "--data-dir", filepath.Join(t.TempDir(), "from-disk"),
		"--advertise-raft", "127.0.0.1:1").CombinedOutput(); err != nil || !bytes.Contains(out, []byte(fmt.Sprintf("restored revision %d ", maxDisk))) {
		t.Fatalf("restore of the newest disk's backup: %v\n%s", err, out)
	}

	base := t.TempDir()
	rc := &cluster{t: t, ctx: ctx}
	r1 := newBkProc(t, base, "r1", "")
	rc.nodes = append(rc.nodes, r1)
	killAtCleanup(t, func() []*proc { return rc.nodes }, 32<<10)
	restoreStart := time.Now()
	out, err := exec.CommandContext(ctx, binPath, "restore", "--from", file, "--data-dir", r1.dataDir,
		"--node-id", r1.id, "--advertise-raft", fmt.Sprintf("127.0.0.1:%d", r1.raftPort)).CombinedOutput()
	if err != nil {
		t.Fatalf("edgebase restore: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte(fmt.Sprintf("restored revision %d ", backupRev))) {
		t.Fatalf("restore output %q does not name revision %d", out, backupRev)
	}
	t.Logf("restore took %v", time.Since(restoreStart).Round(time.Millisecond))
	r1.mustStart()
	rc.mustReady(r1, 60*time.Second)
	st, err := rc.clusterStatus(r1)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Healthy(1, ""); err != nil || st.Leader != "r1" {
		t.Fatalf("restored node's cluster: %v (%+v)", err, st)
	}

	// Every write acknowledged before the backup started is there, as it
	// was; more precisely the state is exactly that of the backup's
	// revision: an acknowledged write is there iff its revision is at most
	// it. Writes never acknowledged may or may not be there, intact.
	listed := bkListAll(t, rc, r1, pr, "bk")
	byColl := make(map[string]doc, len(listed))
	for _, d := range listed {
		byColl[d.Collection] = d
	}
	attempted := make(map[string]*bkWrite, len(writes))
	before, after, afterPresent := 0, 0, 0
	for _, w := range writes {
		attempted[w.coll] = w
		d, ok := byColl[w.coll]
		if w.acked.IsZero() {
			continue
		}
		if w.acked.Before(backupStart) {
			before++
			if !ok {
				t.Errorf("%s (revision %d) was acknowledged before the backup started but is not restored", w.coll, w.rev)
				continue
			}
		}
		if w.sent.After(backupEnd) {
			after++
			if ok {
				afterPresent++
			}
		}
		if w.rev <= backupRev && !ok {
			t.Errorf("%s (revision %d) is at or below the backup's revision %d but is not restored", w.coll, w.rev, backupRev)
		}
		if w.rev > backupRev && ok {
			t.Errorf("%s (revision %d) is above the backup's revision %d but was restored", w.coll, w.rev, backupRev)
		}
		if ok && (d.Revision != w.rev || sha256.Sum256(d.Data) != w.sum) {
			t.Errorf("%s restored with revision %d and other data; acknowledged with revision %d", w.coll, d.Revision, w.rev)
		}
	}
	for coll, d := range byColl {
		w := attempted[coll]
		if w == nil {
			t.Errorf("restored %s was never written", coll)
			continue
		}
		var data struct {
			Seq *int `json:"seq"`
			W   *int `json:"w"`
		}
		if err := json.Unmarshal(d.Data, &data); err != nil || data.W == nil || *data.W != w.writer || *data.Seq != w.seq || d.Revision > backupRev {
			t.Errorf("restored %s is not what was written: revision %d, data %.80s", coll, d.Revision, d.Data)
		}
	}
	t.Logf("restored %d documents; %d acknowledged before the backup, %d of %d sent after it ended are present",
		len(listed), before, afterPresent, after)
	if before < seedDocs+100 {
		t.Fatalf("only %d writes acknowledged before the backup", before)
	}
	if t.Failed() {
		t.FailNow()
	}

	// Accounts and sessions came back: the owner's old token read the list
	// above; the user made before the backup logs in.
	login := authCall(t, rc, r1, pr, "/api/auth", "", map[string]string{"action": "login", "email": userEmail, "password": userPassword}, http.StatusOK, "")
	if login.Token == "" {
		t.Fatal("login on the restored node gave no token")
	}

	// Two fresh nodes join the restored one and catch up (from its snapshot).
	r2, r3 := newBkProc(t, base, "r2", r1.url()), newBkProc(t, base, "r3", r1.url())
	rc.nodes = append(rc.nodes, r2, r3)
	r2.mustStart()
	r3.mustStart()
	rc.mustReady(r2, 60*time.Second)
	rc.mustReady(r3, 60*time.Second)
	checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		st, err := rc.clusterStatus(r1)
		if err != nil {
			return err
		}
		if err := st.Healthy(3, ""); err != nil {
			return err
		}
		for _, old := range []string{"n1", "n2", "n3"} {
			if st.Node(old) != nil {
				return fmt.Errorf("old member %s is in the new cluster: %+v", old, st)
			}
		}
		return nil
	})
	_, rev := rc.mustWrite(r2, pr, "bk/after-restore", map[string]any{"fresh": true})
	if rev <= backupRev {
		t.Fatalf("first write of the new cluster has revision %d, not above the backup's %d", rev, backupRev)
	}
	lists := make([][]doc, 0, 3)
	names := make([]string, 0, 3)
	for _, p := range rc.nodes {
		l := bkListAll(t, rc, p, pr, "bk")
		sort.Slice(l, func(i, j int) bool { return l[i].Collection < l[j].Collection })
		lists, names = append(lists, l), append(names, p.id)
	}
	if len(lists[0]) != len(listed)+1 {
		t.Fatalf("the new cluster lists %d documents, want %d", len(lists[0]), len(listed)+1)
	}
	compareListings(t, names, lists)
	for _, p := range []*proc{r2, r3} {
		authCall(t, rc, p, pr, "/api/auth", "", map[string]string{"action": "login", "email": userEmail, "password": userPassword}, http.StatusOK, "")
	}
	t.Logf("whole test took %v", time.Since(testStart).Round(time.Millisecond))
}

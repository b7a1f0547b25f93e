// Package e2e holds end-to-end tests that run edgebase as a cluster of
// containers (docker-compose.yml) and talk to it only over its public HTTP API.
package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/rfc6238"
	"github.com/edgebase/edgebase/internal/testbin"
	rtclient "github.com/edgebase/edgebase/realtime/client"
)

const (
	image    = "edgebase:dev" // the image docker-compose.yml runs
	caBundle = "/etc/ssl/certs/ca-certificates.crt"

	// failoverLimit: from the moment the leader's container is told to stop
	// (or is killed), a surviving node must report a new leader and accept a
	// write within this time.
	failoverLimit = 15 * time.Second
)

var (
	services = []string{"n1", "n2", "n3", "e1"}
	voters   = []string{"n1", "n2", "n3"}
)

// TestComposeCluster builds the image, starts docker-compose.yml (three voters
// and one edge node), checks replication, forwarding and strong reads across
// nodes, stops the leader and checks that the cluster fails over in time and
// keeps every acknowledged write, restarts the old leader and checks it
// catches up, then does the same with the new leader killed by SIGKILL.
//
// Without a Docker engine or docker-compose the test skips, unless
// EDGEBASE_REQUIRE_DOCKER=1 (as CI sets it), where it fails. The containers'
// logs are printed when the test fails, or always with EDGEBASE_E2E_LOGS=1.
func TestComposeCluster(t *testing.T) {
	cl := startComposeCluster(t)
	c, nodes, adminToken := cl.c, cl.nodes, cl.adminToken

	// 1. Every node ready; every node sees the same 4-member cluster and leader.
	leader := cl.awaitFormed(t)
	followers := without(voters, leader)
	t.Logf("leader %s, followers %v", leader, followers)

	r, err := nodes["n1"].doJSON(http.MethodGet, "/admin/cluster", nil, nil)
	expect(t, "GET /admin/cluster without the admin token", r, err, http.StatusUnauthorized, http.StatusForbidden)

	// 2. A project, created through n1; its owner logs in through a follower.
	proj := cl.newProject(t, "n1", followers[0])
	token := proj.token

	// 2b. The second factor across containers (the nodes share the secret
	// key of deploy/compose.env): a user enrolls through one node, confirms
	// through another; the confirming code replayed through a third is
	// refused; a login through the edge node needs the second step, which a
	// recovery code completes through the leader, once.
	totpAcrossNodes(t, nodes, proj.id, proj.apiKey, leader, followers)

	// 3. Writes through a follower and through the edge node; strong reads
	// on every other node see them at once (no retry: linearizable reads).
	written := map[string]map[string]any{}
	write := func(via, coll string, data map[string]any) document {
		t.Helper()
		r, err := nodes[via].doJSON(http.MethodPost, "/api/db", bearer(token), map[string]any{"collection": coll, "data": data})
		expect(t, fmt.Sprintf("create %s via %s", coll, via), r, err, http.StatusCreated)
		d := checkDoc(t, "create "+coll+" via "+via, r, coll, data)
		written[coll] = data
		return d
	}
	doc1 := write(followers[0], "e2e/doc1", map[string]any{"title": "first", "n": 1, "tags": []any{"a", "b"}, "nested": map[string]any{"ok": true}})
	for _, s := range []string{followers[1], leader, "e1"} {
		d := readDoc(t, nodes[s], token, "e2e/doc1", written["e2e/doc1"])
		if d.Revision != doc1.Revision {
			t.Errorf("e2e/doc1 on %s: revision %d, the write returned %d", s, d.Revision, doc1.Revision)
		}
	}
	write("e1", "e2e/doc2", map[string]any{"title": "through the edge node", "n": 2})
	for _, s := range voters {
		readDoc(t, nodes[s], token, "e2e/doc2", written["e2e/doc2"])
	}
	r, err = nodes["e1"].doJSON(http.MethodGet, "/api/db?collection="+url.QueryEscape("e2e/missing"), bearer(token), nil)
	expect(t, "GET e2e/missing on e1", r, err, http.StatusNotFound)

	// 3b. Live sync across real hosts: subscribers on a follower and on the
	// edge container receive every write made through the leader, in order.
	liveAcrossNodes(t, nodes, proj.id, proj.apiKey, token, leader, []string{followers[1], "e1"})

	// 4. Stop the leader (SIGTERM, graceful). Within failoverLimit of the
	// stop being issued a survivor must report a new leader and accept a write.
	h := &harness{t: t, c: c, nodes: nodes, adminToken: adminToken, token: token, written: written}
	newLeader := h.failover("stop", leader, followers[0], "e2e/doc3", map[string]any{"title": "after a stop", "n": 3})
	if !slices.Contains(followers, newLeader) {
		t.Fatalf("new leader %q is not one of the surviving voters %v", newLeader, followers)
	}

	// Through the edge node too, once it has learnt of the new leader.
	h.writeEventually("e1", "e2e/doc4", map[string]any{"title": "after a stop, through the edge node", "n": 4})

	// Every document, read from the other surviving voter and the edge node;
	// the survivors are ready and agree on the leader.
	survivors := append(slices.Clone(followers), "e1")
	h.readAll(followers[1], "e1")
	checkFor(t, 15*time.Second, 250*time.Millisecond, "/readyz 200 on the survivors", func() error {
		return allReady(nodes, survivors)
	})
	h.agreeOnLeader(survivors, newLeader)

	// 5. The old leader comes back with its volume, catches up and serves
	// every document.
	h.restart(leader)

	// 6. Crash the current leader (SIGKILL: no leadership hand-over, no
	// flush at exit). The two other voters elect a leader in time; every
	// acknowledged write survives, on the survivors and on the crashed node
	// once it is back.
	current := h.agreeOnLeader(services, "")
	rest := without(voters, current)
	third := h.failover("kill", current, rest[0], "e2e/doc5", map[string]any{"title": "after a crash", "n": 5})
	if !slices.Contains(rest, third) {
		t.Fatalf("leader after the crash is %q, want one of %v", third, rest)
	}
	h.writeEventually("e1", "e2e/doc6", map[string]any{"title": "after a crash, through the edge node", "n": 6})
	h.readAll(append(slices.Clone(rest), "e1")...)
	h.restart(current)
	h.agreeOnLeader(services, "")

	// 7. A node that comes back on another IP address (a recreated or
	// restarted container need not get its old one) must rejoin: Raft keeps
	// the advertised host name, not the IP it resolved to once.
	h.addressChange(without(voters, third)[0])
}

// liveAcrossNodes subscribes through the realtime client on each of subs,
// writes through the leader and requires every change, in write order.
func liveAcrossNodes(t *testing.T, nodes map[string]*client, pid, key, token, leader string, subs []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	streams := map[string]*rtclient.Subscription{}
	for _, n := range subs {
		conn, err := rtclient.Dial(ctx, rtclient.Config{URL: nodes[n].base, Token: token, ProjectID: pid, APIKey: key})
		if err != nil {
			t.Fatalf("realtime dial %s: %v", n, err)
		}
		defer func() { _ = conn.Close() }()
		sub, err := conn.Subscribe(ctx, "e2e-live", true)
		if err != nil {
			t.Fatalf("subscribe on %s: %v", n, err)
		}
		if len(sub.Documents()) != 0 {
			t.Fatalf("snapshot on %s: %d documents, want none", n, len(sub.Documents()))
		}
		streams[n] = sub
	}
	type write struct {
		coll string
		rev  uint64
	}
	var writes []write
	for i := 0; i < 40; i++ {
		coll := fmt.Sprintf("e2e-live/d%02d", i)
		r, err := nodes[leader].doJSON(http.MethodPost, "/api/db", bearer(token), map[string]any{"collection": coll, "data": map[string]any{"i": i}})
		expect(t, "live write "+coll, r, err, http.StatusCreated)
		d := checkDoc(t, "live write "+coll, r, coll, map[string]any{"i": i})
		writes = append(writes, write{coll, d.Revision})
	}
	for n, sub := range streams {
		for i, w := range writes {
			select {
			case ev, ok := <-sub.Events():
				if !ok {
					t.Fatalf("stream on %s ended after %d changes: %v", n, i, sub.Err())
				}
				if ev.Kind != rtclient.KindChange || ev.Collection != w.coll || ev.Revision != w.rev {
					t.Fatalf("change %d on %s: %s %s at %d, want %s at %d", i, n, ev.Kind, ev.Collection, ev.Revision, w.coll, w.rev)
				}
			case <-ctx.Done():
				t.Fatalf("stream on %s: only %d of %d changes arrived", n, i, len(writes))
			}
		}
	}
}

// totpAcrossNodes checks that TOTP state is cluster state: codes come from
// the independent RFC 6238 implementation in internal/rfc6238.
func totpAcrossNodes(t *testing.T, nodes map[string]*client, pid, key, leader string, followers []string) {
	t.Helper()
	h := map[string]string{"X-Project-Id": pid, "X-API-Key": key}
	with := func(tok string) map[string]string {
		m := maps.Clone(h)
		m["Authorization"] = "Bearer " + tok
		return m
	}
	email, password := "totp-"+randomHex(t, 4)+"@e2e.example.com", "e2e-totp-pw-"+randomHex(t, 8)
	r, err := nodes["n1"].doJSON(http.MethodPost, "/api/auth", h, map[string]string{"action": "register", "email": email, "password": password, "name": "T"})
	expect(t, "register on n1", r, err, http.StatusCreated)
	var reg struct{ Token string }
	if err := r.decode(&reg); err != nil {
		t.Fatal(err)
	}
	r, err = nodes[followers[0]].doJSON(http.MethodPost, "/api/authenticator/enroll", with(reg.Token), nil)
	expect(t, "enroll on "+followers[0], r, err, http.StatusOK)
	var enr struct{ Secret string }
	if err := r.decode(&enr); err != nil || enr.Secret == "" {
		t.Fatalf("enroll: no secret in %s (%v)", r, err)
	}
	code, err := rfc6238.Authenticator(enr.Secret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	r, err = nodes[followers[1]].doJSON(http.MethodPost, "/api/authenticator/confirm", with(reg.Token), map[string]string{"code": code})
	expect(t, "confirm on "+followers[1], r, err, http.StatusOK)
	var conf struct {
		TotpEnabled   bool     `json:"totpEnabled"`
		RecoveryCodes []string `json:"recoveryCodes"`
	}
	if err := r.decode(&conf); err != nil || !conf.TotpEnabled || len(conf.RecoveryCodes) != 10 {
		t.Fatalf("confirm: want totpEnabled and 10 recovery codes, got %s (%v)", r, err)
	}
	r, err = nodes[leader].doJSON(http.MethodPost, "/api/authenticator/verify", h, map[string]string{"email": email, "code": code, "projectId": pid})
	expect(t, "the confirming code replayed on "+leader, r, err, http.StatusBadRequest)
	r, err = nodes["e1"].doJSON(http.MethodPost, "/api/auth", h, map[string]string{"action": "login", "email": email, "password": password})
	expect(t, "login on e1", r, err, http.StatusOK)
	var lg struct {
		RequiresTotp bool   `json:"requiresTotp"`
		LoginTicket  string `json:"loginTicket"`
	}
	if err := r.decode(&lg); err != nil || !lg.RequiresTotp || lg.LoginTicket == "" {
		t.Fatalf("login with TOTP on: want requiresTotp and a ticket, got %s (%v)", r, err)
	}
	r, err = nodes[leader].doJSON(http.MethodPost, "/api/auth", h, map[string]string{"action": "login-verify", "loginTicket": lg.LoginTicket, "code": conf.RecoveryCodes[0]})
	expect(t, "login-verify with a recovery code on "+leader, r, err, http.StatusOK)
	r, err = nodes["e1"].doJSON(http.MethodPost, "/api/auth", h, map[string]string{"action": "login", "email": email, "password": password})
	expect(t, "second login on e1", r, err, http.StatusOK)
	if err := r.decode(&lg); err != nil || lg.LoginTicket == "" {
		t.Fatalf("second login: %s (%v)", r, err)
	}
	r, err = nodes[followers[0]].doJSON(http.MethodPost, "/api/auth", h, map[string]string{"action": "login-verify", "loginTicket": lg.LoginTicket, "code": conf.RecoveryCodes[0]})
	expect(t, "the used recovery code again on "+followers[0], r, err, http.StatusBadRequest)
}

// addressChange stops a follower, parks a placeholder container on its IP
// address, starts the follower again (on a new address) and requires that it
// becomes ready, serves every document and that the cluster still commits.
func (h *harness) addressChange(name string) {
	t := h.t
	t.Helper()
	id := h.containerID(name)
	network, oldIP := h.containerNetwork(id)
	if out, err := h.c.run(time.Minute, "stop", "-t", "10", name); err != nil {
		t.Fatalf("docker-compose stop %s: %v\n%s", name, err, out)
	}
	// The placeholder runs a throwaway single-node server on other ports,
	// so nothing answers on the old Raft address. Docker hands it the
	// lowest free address, usually the one just released.
	placeholder := h.c.project + "_placeholder"
	t.Cleanup(func() {
		if out, err := run(time.Minute, "", os.Environ(), "docker", "rm", "-f", "-v", placeholder); err != nil {
			t.Logf("docker rm %s: %v\n%s", placeholder, err, out)
		}
	})
	if out, err := run(time.Minute, "", os.Environ(), "docker", "run", "-d", "--name", placeholder, "--network", network,
		image, "serve", "--node-id", "placeholder", "--http-addr", ":9999", "--raft-addr", ":9998", "--advertise-raft", "127.0.0.1:9998"); err != nil {
		t.Fatalf("starting a placeholder container: %v\n%s", err, out)
	}
	if out, err := h.c.run(time.Minute, "start", name); err != nil {
		t.Fatalf("docker-compose start %s: %v\n%s", name, err, out)
	}
	_, newIP := h.containerNetwork(id)
	if newIP == oldIP {
		t.Logf("%s got its old address %s back: the address change is not exercised", name, oldIP)
	} else {
		t.Logf("%s moved from %s to %s", name, oldIP, newIP)
	}
	checkFor(t, 60*time.Second, 250*time.Millisecond, "/readyz 200 on "+name+" after an address change", func() error {
		return allReady(h.nodes, []string{name})
	})
	h.writeEventually(name, "e2e/doc7", map[string]any{"title": "after an address change", "n": 7})
	h.readAll(services...)
	h.agreeOnLeader(services, "")
}

// containerID is the id of a service's container.
func (h *harness) containerID(service string) string {
	h.t.Helper()
	out, err := h.c.run(time.Minute, "ps", "-q", service)
	id := strings.TrimSpace(out)
	if err != nil || id == "" || strings.Contains(id, "\n") {
		h.t.Fatalf("docker-compose ps -q %s: %v\n%s", service, err, out)
	}
	return id
}

// containerNetwork is the (only) network of a container and its address there.
func (h *harness) containerNetwork(id string) (network, ip string) {
	h.t.Helper()
	out, err := run(time.Minute, "", os.Environ(), "docker", "inspect", "-f",
		"{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{$v.IPAddress}}{{end}}", id)
	if err != nil {
		h.t.Fatalf("docker inspect %s: %v\n%s", id, err, out)
	}
	network, ip, _ = strings.Cut(strings.TrimSpace(out), " ")
	if network == "" {
		h.t.Fatalf("docker inspect %s: no network in %q", id, out)
	}
	return network, ip
}

// harness is the running cluster and what the test wrote to it.
type harness struct {
	t          *testing.T
	c          *compose
	nodes      map[string]*client
	adminToken string
	token      string                    // the project owner's session token
	written    map[string]map[string]any // collection → data, acknowledged
}

// failover stops ("stop": SIGTERM) or crashes ("kill": SIGKILL) the leader's
// container and requires that, within failoverLimit of issuing that, node via
// reports another leader and accepts a write of data to coll. It returns the
// new leader.
func (h *harness) failover(how, leader, via, coll string, data map[string]any) string {
	t := h.t
	t.Helper()
	args := []string{"stop", "-t", "10", leader}
	if how == "kill" {
		args = []string{"kill", "-s", "SIGKILL", leader}
	}
	start := time.Now()
	if out, err := h.c.run(time.Minute, args...); err != nil {
		t.Fatalf("docker-compose %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	down := time.Since(start)

	var newLeader string
	_, err := waitFor(failoverLimit-down, 250*time.Millisecond, func() error {
		cs, err := h.nodes[via].cluster(h.adminToken)
		if err != nil {
			return err
		}
		if cs.Leader == "" || cs.Leader == leader {
			return fmt.Errorf("%s reports leader %q", via, cs.Leader)
		}
		newLeader = cs.Leader
		r, err := h.nodes[via].doJSONTimeout(3*time.Second, http.MethodPost, "/api/db", bearer(h.token),
			map[string]any{"collection": coll, "data": data})
		if err != nil {
			return err
		}
		if r.status != http.StatusCreated && r.status != http.StatusOK { // 200: a retry after a lost answer
			return fmt.Errorf("write %s via %s: %s", coll, via, r)
		}
		return nil
	})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("%s %s: no new leader and accepted write within %v (%v): %v", how, leader, failoverLimit, took.Round(time.Millisecond), err)
	}
	if took > failoverLimit {
		t.Fatalf("%s %s: a new leader accepted a write only %v later, more than %v", how, leader, took.Round(time.Millisecond), failoverLimit)
	}
	h.written[coll] = data
	t.Logf("%s %s (took %v): new leader %s; a write through %s succeeded %v after the %s was issued",
		how, leader, down.Round(time.Millisecond), newLeader, via, took.Round(time.Millisecond), how)
	return newLeader
}

// writeEventually writes data to coll through node via, retrying for a while
// (a node may take a moment to learn of a new leader).
func (h *harness) writeEventually(via, coll string, data map[string]any) {
	h.t.Helper()
	checkFor(h.t, 15*time.Second, 250*time.Millisecond, "a write through "+via, func() error {
		r, err := h.nodes[via].doJSONTimeout(3*time.Second, http.MethodPost, "/api/db", bearer(h.token),
			map[string]any{"collection": coll, "data": data})
		if err != nil {
			return err
		}
		if r.status != http.StatusCreated && r.status != http.StatusOK {
			return fmt.Errorf("write %s via %s: %s", coll, via, r)
		}
		return nil
	})
	h.written[coll] = data
}

// readAll reads every acknowledged document once from each named node.
func (h *harness) readAll(names ...string) {
	h.t.Helper()
	colls := slices.Sorted(maps.Keys(h.written))
	for _, s := range names {
		for _, coll := range colls {
			readDoc(h.t, h.nodes[s], h.token, coll, h.written[coll])
		}
	}
}

// agreeOnLeader waits until every named node reports the same voter as
// leader (want, when not empty) and all four members, and returns the leader.
func (h *harness) agreeOnLeader(names []string, want string) string {
	h.t.Helper()
	var leader string
	checkFor(h.t, 30*time.Second, 250*time.Millisecond, fmt.Sprintf("%v agree on the leader", names), func() error {
		seen := map[string]bool{}
		for _, s := range names {
			cs, err := h.nodes[s].cluster(h.adminToken)
			if err != nil {
				return err
			}
			if err := checkMembers(cs, services); err != nil {
				return fmt.Errorf("GET /admin/cluster on %s: %w", s, err)
			}
			if want != "" && cs.Leader != want {
				return fmt.Errorf("%s reports leader %q, want %q", s, cs.Leader, want)
			}
			seen[cs.Leader] = true
			leader = cs.Leader
		}
		if len(seen) != 1 {
			return fmt.Errorf("leaders reported: %v", slices.Sorted(maps.Keys(seen)))
		}
		return nil
	})
	return leader
}

// restart starts a stopped service again, waits for its /readyz and reads
// every acknowledged document from it.
func (h *harness) restart(name string) {
	h.t.Helper()
	start := time.Now()
	if out, err := h.c.run(time.Minute, "start", name); err != nil {
		h.t.Fatalf("docker-compose start %s: %v\n%s", name, err, out)
	}
	checkFor(h.t, 60*time.Second, 250*time.Millisecond, "/readyz 200 on the restarted "+name, func() error {
		return allReady(h.nodes, []string{name})
	})
	h.t.Logf("%s ready %v after docker-compose start was issued", name, time.Since(start).Round(time.Millisecond))
	h.readAll(name)
}

// buildImage builds the static binary and the image from a temporary context
// laid out as the Dockerfile expects (see its header). EDGEBASE_E2E_BINARY,
// when set, names a static linux binary to use instead of building one; else
// it is the one in $EDGEBASE_TEST_BIN_DIR (make test-bins) on a linux host.
func buildImage(t *testing.T, root string) {
	t.Helper()
	start := time.Now()
	ctxDir := t.TempDir()
	stage := filepath.Join(ctxDir, "bin", "image")
	if err := os.MkdirAll(filepath.Join(stage, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(stage, "edgebase")
	if prebuilt := os.Getenv("EDGEBASE_E2E_BINARY"); prebuilt != "" {
		b, err := os.ReadFile(prebuilt)
		if err != nil {
			t.Fatalf("EDGEBASE_E2E_BINARY: %v", err)
		}
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Logf("using the prebuilt binary %s (EDGEBASE_E2E_BINARY)", prebuilt)
	} else {
		// make test-bins' binary when it is there (on a linux host), else a
		// build bounded only by the test's deadline: a cold build on a
		// loaded machine can take minutes.
		ctx, cancel := testbin.Context(t)
		defer cancel()
		if _, err := testbin.Edgebase(ctx, testbin.Options{GOOS: "linux", Dir: stage, Copy: true, Logf: t.Logf}); err != nil {
			t.Fatalf("the static binary: %v", err)
		}
	}
	ca, err := os.ReadFile(caBundle)
	if err != nil {
		t.Fatalf("the image needs the host's CA bundle (Debian package ca-certificates): %v", err)
	}
	if err := os.WriteFile(filepath.Join(stage, "ca-certificates.crt"), ca, 0o644); err != nil {
		t.Fatal(err)
	}
	// Modes independent of the umask: the image runs as an unprivileged user.
	for path, mode := range map[string]os.FileMode{bin: 0o755, filepath.Join(stage, "data"): 0o755, filepath.Join(stage, "ca-certificates.crt"): 0o644} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	// Generous: the build context is small, but a loaded engine is slow.
	if out, err := run(20*time.Minute, "", os.Environ(), "docker", "build", "-q", "-t", image, "-f", filepath.Join(root, "Dockerfile"), ctxDir); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	// The image the tag pointed at before is now dangling: drop such leftovers
	// (ours only, by the Dockerfile's label).
	if out, err := run(time.Minute, "", os.Environ(), "docker", "image", "prune", "-f", "--filter", "label=org.opencontainers.image.title=edgebase"); err != nil {
		t.Logf("pruning old edgebase images: %v\n%s", err, out)
	}
	t.Logf("built %s in %v", image, time.Since(start).Round(time.Millisecond))
}

// allReady is nil when GET /readyz answers 200 on each of the named nodes.
func allReady(nodes map[string]*client, names []string) error {
	for _, s := range names {
		r, err := nodes[s].doJSONTimeout(2*time.Second, http.MethodGet, "/readyz", nil, nil)
		if err != nil {
			return err
		}
		if r.status != http.StatusOK {
			return fmt.Errorf("GET /readyz on %s: %s", s, r)
		}
	}
	return nil
}

// checkMembers is nil when cs lists exactly the wanted members, e1 alone as a
// non-voter, and a voter as leader.
func checkMembers(cs *clusterStatus, want []string) error {
	var ids []string
	for _, n := range cs.Nodes {
		ids = append(ids, n.ID)
		if wantVoter := n.ID != "e1"; n.Voter != wantVoter {
			return fmt.Errorf("node %s: voter=%v, want %v", n.ID, n.Voter, wantVoter)
		}
		if n.HTTPAddr == "" || n.RaftAddr == "" {
			return fmt.Errorf("node %s: httpAddr %q, raftAddr %q: want both", n.ID, n.HTTPAddr, n.RaftAddr)
		}
	}
	slices.Sort(ids)
	sorted := slices.Sorted(slices.Values(want))
	if !slices.Equal(ids, sorted) {
		return fmt.Errorf("members %v, want %v", ids, sorted)
	}
	if !slices.Contains(voters, cs.Leader) {
		return fmt.Errorf("leader %q is not a voter", cs.Leader)
	}
	return nil
}

// checkDoc decodes a document response and checks its path and data.
func checkDoc(t *testing.T, what string, r *response, coll string, data map[string]any) document {
	t.Helper()
	var d document
	if err := r.decode(&d); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if d.Collection != coll || !sameJSON(d.Data, data) || d.Revision == 0 {
		t.Fatalf("%s: got %s, want collection %q, data %v and a revision", what, r, coll, data)
	}
	return d
}

// readDoc reads a document once (no retry) and checks it.
func readDoc(t *testing.T, c *client, token, coll string, data map[string]any) document {
	t.Helper()
	what := fmt.Sprintf("GET %s on %s", coll, c.name)
	r, err := c.doJSON(http.MethodGet, "/api/db?collection="+url.QueryEscape(coll), bearer(token), nil)
	expect(t, what, r, err, http.StatusOK)
	return checkDoc(t, what, r, coll, data)
}

func without(list []string, drop string) []string {
	var out []string
	for _, s := range list {
		if s != drop {
			out = append(out, s)
		}
	}
	return out
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

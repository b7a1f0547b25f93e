package wan

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestDefaultProfile(t *testing.T) {
	p := DefaultProfile()
	cases := []struct {
		a, b Region
		rtt  time.Duration
	}{
		{US, EU, 80 * time.Millisecond}, {EU, US, 80 * time.Millisecond},
		{US, AP, 150 * time.Millisecond}, {AP, US, 150 * time.Millisecond},
		{EU, AP, 220 * time.Millisecond}, {AP, EU, 220 * time.Millisecond},
		{US, US, time.Millisecond}, {EU, EU, time.Millisecond}, {AP, AP, time.Millisecond},
	}
	for _, tc := range cases {
		if got := p.Between(tc.a, tc.b); got != tc.rtt {
			t.Errorf("Between(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.rtt)
		}
	}
	if p.Jitter != 0.10 {
		t.Errorf("Jitter = %v, want 0.10", p.Jitter)
	}
	if err := p.validate([]Region{US, EU, AP}); err != nil {
		t.Errorf("validate: %v", err)
	}
	if got := p.Between(US, "mars"); got != 0 {
		t.Errorf("Between(us, mars) = %v, want 0", got)
	}
}

func TestLatencySplitsTheRoundTrip(t *testing.T) {
	p := DefaultProfile()
	cases := []struct {
		a, b               Region
		up, down, jitterMS int64
	}{
		{US, EU, 40, 40, 4},
		{US, AP, 75, 75, 8}, // 10% of 75 = 7.5 rounds to 8
		{EU, AP, 110, 110, 11},
		{US, US, 0, 1, 0}, // 1 ms: the odd millisecond goes downstream
	}
	for _, tc := range cases {
		up, down, j := p.Latency(tc.a, tc.b)
		if up != tc.up || down != tc.down || j != tc.jitterMS {
			t.Errorf("Latency(%s, %s) = %d, %d, ±%d; want %d, %d, ±%d", tc.a, tc.b, up, down, j, tc.up, tc.down, tc.jitterMS)
		}
		if up+down != p.Between(tc.a, tc.b).Milliseconds() {
			t.Errorf("Latency(%s, %s): %d + %d is not the round trip %v", tc.a, tc.b, up, down, p.Between(tc.a, tc.b))
		}
	}
	if got := p.OneWay(AP, US); got != 75*time.Millisecond {
		t.Errorf("OneWay(ap, us) = %v, want 75ms", got)
	}
	tox := linkToxics(p, EU, AP)
	if len(tox) != 3 || tox[2] != (toxicConfig{Name: "handshake", Type: "handshake", Stream: "upstream", Toxicity: 1, Attributes: latencyAttrs{Latency: 220, Jitter: 22}}) {
		t.Errorf("linkToxics(eu, ap): no handshake of one round trip after the latency: %+v", tox)
	}
	p.FreeConnect = true
	if free := linkToxics(p, EU, AP); len(free) != 2 {
		t.Errorf("linkToxics with FreeConnect: %+v, want the two latency toxics alone", free)
	}
	if len(tox) < 2 || tox[0].Stream != "upstream" || tox[1].Stream != "downstream" ||
		tox[0].Attributes != (latencyAttrs{Latency: 110, Jitter: 11}) || tox[1].Attributes != (latencyAttrs{Latency: 110, Jitter: 11}) ||
		tox[0].Type != "latency" || tox[0].Toxicity != 1 || tox[0].Name == tox[1].Name {
		t.Errorf("linkToxics(eu, ap) = %+v", tox)
	}
}

func TestProfileValidate(t *testing.T) {
	p := DefaultProfile()
	if err := p.validate([]Region{US, "mars"}); err == nil || !strings.Contains(err.Error(), "mars") {
		t.Errorf("validate with an unknown region: %v, want an error naming it", err)
	}
	p.Jitter = 1.5
	if err := p.validate([]Region{US}); err == nil {
		t.Error("validate accepted jitter 1.5")
	}
	p = DefaultProfile()
	p.RTT[[2]Region{US, EU}] = time.Millisecond // unsorted key
	if err := p.validate([]Region{US, EU}); err == nil || !strings.Contains(err.Error(), "sorted") {
		t.Errorf("validate with an unsorted key: %v", err)
	}
}

func TestDefaultTopology(t *testing.T) {
	nodes := DefaultTopology()
	if err := validateNodes(nodes); err != nil {
		t.Fatal(err)
	}
	want := map[string]NodeSpec{
		"v-us1": {"v-us1", US, false}, "v-us2": {"v-us2", US, false}, "v-eu1": {"v-eu1", EU, false},
		"e-us": {"e-us", US, true}, "e-eu": {"e-eu", EU, true}, "e-ap": {"e-ap", AP, true},
	}
	if len(nodes) != len(want) || nodes[0].ID != "v-us1" {
		t.Fatalf("DefaultTopology() = %+v", nodes)
	}
	for _, n := range nodes {
		if want[n.ID] != n {
			t.Errorf("node %+v, want %+v", n, want[n.ID])
		}
	}
	if err := validateNodes([]NodeSpec{{ID: "e", Region: US, Edge: true}}); err == nil {
		t.Error("an edge first (bootstrapping) was accepted")
	}
	if err := validateNodes([]NodeSpec{{ID: "a", Region: US}, {ID: "a", Region: EU}}); err == nil {
		t.Error("a duplicate id was accepted")
	}
}

// testCluster is a Cluster with ports and proxies assigned but nothing
// started, for the flag building.
func testCluster(t *testing.T) *Cluster {
	t.Helper()
	c := &Cluster{o: Options{Nodes: DefaultTopology(), NodeArgs: []string{"--wan"}}, byID: map[string]*node{},
		listen: map[link]string{}, profile: DefaultProfile(), connect: true, adminToken: "adm", clusterSecret: "sec"}
	port := 30000
	for _, s := range c.o.Nodes {
		n := &node{spec: s, httpPort: port, raftPort: port + 1, dataDir: "/d/" + s.ID}
		port += 2
		c.nodes = append(c.nodes, n)
		c.byID[s.ID] = n
	}
	for _, l := range c.links() {
		c.listen[l] = "127.0.0.1:" + strconv.Itoa(port)
		port++
	}
	return c
}

func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

func TestNodeArgs(t *testing.T) {
	c := testCluster(t)
	if got := len(c.links()); got != 3*6*2 {
		t.Fatalf("%d links, want 36 (3 regions x 6 nodes x 2 ports)", got)
	}
	boot := c.nodeArgs(c.byID["v-us1"], true)
	if _, ok := flagValue(boot, "--join"); ok {
		t.Errorf("the bootstrapping node joins: %q", boot)
	}
	eap := c.nodeArgs(c.byID["e-ap"], false)
	if join, _ := flagValue(eap, "--join"); join != c.URL(AP, "v-us1") || join == "" {
		t.Errorf("e-ap joins %q, want v-us1 through the ap proxy %q", join, c.URL(AP, "v-us1"))
	}
	if !strings.Contains(strings.Join(eap, " "), " --edge") || eap[len(eap)-1] != "--wan" {
		t.Errorf("e-ap's args lack --edge or end not with NodeArgs: %q", eap)
	}
	if adv, _ := flagValue(eap, "--advertise-raft"); adv != c.byID["e-ap"].raftAddr() {
		t.Errorf("e-ap advertises %q, want its real raft address", adv)
	}
	ct, ok := flagValue(eap, "--connect-to")
	if !ok {
		t.Fatalf("no --connect-to in %q", eap)
	}
	pairs := strings.Split(ct, ",")
	if len(pairs) != 5*2 {
		t.Fatalf("--connect-to has %d pairs, want 10 (5 other nodes x 2 ports): %s", len(pairs), ct)
	}
	m := map[string]string{}
	for _, p := range pairs {
		from, to, ok := strings.Cut(p, "=")
		if !ok {
			t.Fatalf("pair %q is not FROM=TO", p)
		}
		m[from] = to
	}
	us1 := c.byID["v-us1"]
	if m[us1.raftAddr()] != c.listen[link{AP, "v-us1", kindRaft}] || m[us1.httpAddr()] != c.listen[link{AP, "v-us1", kindHTTP}] {
		t.Errorf("e-ap reaches v-us1 at %q/%q, want the ap proxies", m[us1.raftAddr()], m[us1.httpAddr()])
	}
	if _, self := m[c.byID["e-ap"].raftAddr()]; self {
		t.Error("e-ap maps its own address")
	}
	c.connect = false
	if _, ok := flagValue(c.nodeArgs(c.byID["e-ap"], false), "--connect-to"); ok {
		t.Error("--connect-to passed to a binary without it")
	}
	if c.URL(AP, "nope") != "" || c.DirectURL("nope") != "" {
		t.Error("URLs for an unknown node")
	}
	if got := c.DirectURL("e-ap"); got != "http://"+c.byID["e-ap"].httpAddr() {
		t.Errorf("DirectURL(e-ap) = %q", got)
	}
}

func TestParseMetric(t *testing.T) {
	text := "# HELP edgebase_raft_term x\n# TYPE edgebase_raft_term gauge\nedgebase_raft_term_other 9\nedgebase_raft_term 42\nedgebase_raft_state{state=\"leader\"} 1\n"
	if v, err := parseMetric(text, "edgebase_raft_term"); err != nil || v != 42 {
		t.Errorf("parseMetric = %v, %v; want 42", v, err)
	}
	if _, err := parseMetric(text, "edgebase_raft_applied_index"); err == nil {
		t.Error("parseMetric found a missing metric")
	}
}

// TestHasFlag probes a stand-in binary that parses flags like serve does.
func TestHasFlag(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "fake")
	script := "#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in -known=*) echo 'edgebase: invalid value \"x\" for flag -known' >&2; exit 2;; -serve|serve) ;; *) echo \"edgebase: flag provided but not defined: ${a%%=*}\" >&2; exit 2;; esac; done\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if ok, err := HasFlag(ctx, bin, "known"); err != nil || !ok {
		t.Errorf("HasFlag(known) = %v, %v; want true", ok, err)
	}
	if ok, err := HasFlag(ctx, bin, "wan"); err != nil || ok {
		t.Errorf("HasFlag(wan) = %v, %v; want false", ok, err)
	}
	if _, err := HasFlag(ctx, "/bin/true", "wan"); err == nil {
		t.Error("HasFlag of a binary that accepts anything: no error")
	}
}

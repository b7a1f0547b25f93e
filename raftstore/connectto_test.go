package raftstore

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/testpki"
	"github.com/hashicorp/raft"
)

// relay is a counting TCP relay: every connection accepted on its address
// is joined to a new connection to target.
type relay struct {
	ln     net.Listener
	target string
	conns  atomic.Int64
	bytes  atomic.Int64
	wg     sync.WaitGroup
	mu     sync.Mutex
	open   []net.Conn
}

func newRelay(t *testing.T, target string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("relay listen: %v", err)
	}
	r := &relay{ln: ln, target: target}
	r.wg.Add(1)
	go r.serve()
	t.Cleanup(r.close)
	return r
}

func (r *relay) addr() string { return r.ln.Addr().String() }

func (r *relay) serve() {
	defer r.wg.Done()
	for {
		in, err := r.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", r.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		r.conns.Add(1)
		r.mu.Lock()
		r.open = append(r.open, in, out)
		r.mu.Unlock()
		for _, p := range [][2]net.Conn{{in, out}, {out, in}} {
			r.wg.Add(1)
			go func(dst, src net.Conn) {
				defer r.wg.Done()
				_, _ = io.Copy(countingWriter{dst, &r.bytes}, src)
				_ = dst.Close()
				_ = src.Close()
			}(p[0], p[1])
		}
	}
}

// countingWriter adds what it writes to n as it goes.
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	k, err := c.w.Write(p)
	c.n.Add(int64(k))
	return k, err
}

func (r *relay) close() {
	_ = r.ln.Close()
	r.mu.Lock()
	for _, c := range r.open {
		_ = c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// ctNode is one member of a ctCluster: its Raft listener and HTTP server
// exist before any store opens, so every address is known up front.
type ctNode struct {
	id   string
	dir  string
	ln   net.Listener
	srv  *httptest.Server
	h    atomic.Pointer[http.Handler]
	s    *Store
	conf func(*Config)
}

func (n *ctNode) raftAddr() string { return n.ln.Addr().String() }

func (n *ctNode) httpHost() string {
	u, _ := url.Parse(n.srv.URL)
	return u.Host
}

// newCTNodes prepares n members (listeners and HTTP servers) without
// opening them.
func newCTNodes(t *testing.T, n int) []*ctNode {
	t.Helper()
	base := t.TempDir()
	var nodes []*ctNode
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listen: %v", err)
		}
		nd := &ctNode{id: fmt.Sprintf("n%d", i+1), dir: filepath.Join(base, fmt.Sprintf("n%d", i+1)), ln: ln}
		nd.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := nd.h.Load()
			if h == nil {
				http.Error(w, "down", http.StatusServiceUnavailable)
				return
			}
			(*h).ServeHTTP(w, r)
		}))
		nodes = append(nodes, nd)
	}
	t.Cleanup(func() {
		for _, nd := range nodes {
			if nd.s != nil {
				_ = nd.s.Close()
			} else {
				_ = nd.ln.Close()
			}
			nd.srv.Close()
		}
	})
	return nodes
}

// openCT opens nd (n1 bootstraps) with rvTuning and nd.conf applied.
func openCT(t *testing.T, nd *ctNode, bootstrap bool) {
	t.Helper()
	cfg := Config{
		NodeID: nd.id, Dir: nd.dir, RaftListener: nd.ln, RaftAdvertise: nd.raftAddr(), HTTPAdvertise: nd.srv.URL,
		Bootstrap: bootstrap, Secret: testSecret, Voter: true, Logger: testLogger(), Tuning: rvTuning(),
	}
	if nd.conf != nil {
		nd.conf(&cfg)
	}
	s, err := Open(cfg)
	if err != nil {
		t.Fatalf("open %s: %v", nd.id, err)
	}
	nd.s = s
	h := s.InternalHandler()
	nd.h.Store(&h)
}

// joinCT adds nd to the cluster through the leader ldr as a voter and
// registers its node record.
func joinCT(t *testing.T, ldr, nd *ctNode) {
	t.Helper()
	openCT(t, nd, false)
	mustEventually(t, 30*time.Second, "join "+nd.id, func() (bool, string) {
		err := ldr.s.Join(ctxT(t, 10*time.Second), JoinRequest{ID: nd.id, RaftAddr: nd.raftAddr(), HTTPAddr: nd.srv.URL, Voter: true, TxnVersion: txnVersionLatest})
		if errors.Is(err, ErrNoLeader) {
			return false, err.Error()
		}
		if err != nil {
			t.Fatalf("join %s: %v", nd.id, err)
		}
		return true, ""
	})
	if err := nd.s.EnsureNodeRecord(ctxT(t, 15*time.Second)); err != nil {
		t.Fatalf("%s record: %v", nd.id, err)
	}
}

// With Config.ConnectTo, a node's forwarded writes, read-index calls and
// Raft connections go to the mapped addresses; without it nothing does.
func TestConnectToRoutesEveryNodeToNodeConnection(t *testing.T) {
	nodes := newCTNodes(t, 3)
	n1, n2, x := nodes[0], nodes[1], nodes[2]
	raft1, raft2 := newRelay(t, n1.raftAddr()), newRelay(t, n2.raftAddr())
	http1, http2 := newRelay(t, n1.httpHost()), newRelay(t, n2.httpHost())
	relays := []*relay{raft1, raft2, http1, http2}
	x.conf = func(c *Config) {
		c.ConnectTo = map[string]string{
			n1.raftAddr(): raft1.addr(), n2.raftAddr(): raft2.addr(),
			n1.httpHost(): http1.addr(), n2.httpHost(): http2.addr(),
		}
	}

	openCT(t, n1, true)
	mustEventually(t, 10*time.Second, "n1 leader", func() (bool, string) { return n1.s.IsLeader(), "" })
	if err := n1.s.EnsureNodeRecord(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("n1 record: %v", err)
	}
	joinCT(t, n1, n2)
	// n2 has no map: its forwarded writes and read indexes reach n1
	// directly, and n1 replicates to it directly.
	for i := 0; i < 5; i++ {
		mustTxn(t, n2.s, put(fmt.Sprintf("p/plain%d", i), `{}`))
	}
	if _, err := n2.s.ReadIndex(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("read index on n2: %v", err)
	}
	for i, r := range relays {
		if c, b := r.conns.Load(), r.bytes.Load(); c != 0 || b != 0 {
			t.Fatalf("relay %d carried %d connections, %d bytes before any node was told to use it", i, c, b)
		}
	}

	// x maps every peer address to a relay.
	joinCT(t, n1, x)
	if !n1.s.IsLeader() {
		t.Skip("n1 lost its leadership while joining on a loaded machine; the routing below assumes it leads")
	}
	for i := 0; i < 20; i++ {
		mustTxn(t, x.s, put(fmt.Sprintf("p/x%d", i), `{}`))
	}
	if _, err := x.s.ReadIndex(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("read index on x: %v", err)
	}
	if http1.conns.Load() == 0 || http1.bytes.Load() == 0 {
		t.Fatalf("x's forwarded writes did not go through its relay to n1's HTTP (conns %d, bytes %d)", http1.conns.Load(), http1.bytes.Load())
	}
	// Raft connections are dialed by the sender: make x the leader, so it
	// replicates to n1 and n2 through their relays.
	if _, err := x.s.TransferLeadershipTo(ctxT(t, 20*time.Second), x.id); err != nil {
		t.Fatalf("transfer leadership to x: %v", err)
	}
	mustEventually(t, 10*time.Second, "x to lead", func() (bool, string) { return x.s.IsLeader(), x.s.LeaderID() })
	before1, before2 := raft1.bytes.Load(), raft2.bytes.Load()
	var last *TxnResult
	for i := 0; i < 10; i++ {
		last = mustTxn(t, x.s, put(fmt.Sprintf("p/lead%d", i), `{"v":1}`))
	}
	mustEventually(t, 10*time.Second, "n1 and n2 to apply x's writes", func() (bool, string) {
		return n1.s.AppliedIndex() >= last.Revision && n2.s.AppliedIndex() >= last.Revision, ""
	})
	mustEventually(t, 10*time.Second, "raft bytes through both relays", func() (bool, string) {
		return raft1.bytes.Load() > before1 && raft2.bytes.Load() > before2 && raft1.conns.Load() > 0 && raft2.conns.Load() > 0,
			fmt.Sprintf("raft1 %d conns %d bytes, raft2 %d conns %d bytes", raft1.conns.Load(), raft1.bytes.Load(), raft2.conns.Load(), raft2.bytes.Load())
	})
	if http2.conns.Load() == 0 && http1.conns.Load() == 0 {
		t.Fatal("no internal HTTP call went through a relay")
	}
	t.Logf("raft1 %d conns %d bytes; raft2 %d conns %d bytes; http1 %d conns %d bytes; http2 %d conns",
		raft1.conns.Load(), raft1.bytes.Load(), raft2.conns.Load(), raft2.bytes.Load(), http1.conns.Load(), http1.bytes.Load(), http2.conns.Load())
}

func TestParseConnectTo(t *testing.T) {
	got, err := ParseConnectTo(" a:1=b:2, [::1]:7000=127.0.0.1:17000 ,")
	if err != nil {
		t.Fatalf("ParseConnectTo: %v", err)
	}
	if len(got) != 2 || got["a:1"] != "b:2" || got["[::1]:7000"] != "127.0.0.1:17000" {
		t.Fatalf("ParseConnectTo = %v", got)
	}
	if s := FormatConnectTo(got); s != "[::1]:7000=127.0.0.1:17000,a:1=b:2" {
		t.Fatalf("FormatConnectTo = %q", s)
	}
	for _, bad := range []string{"a:1", "a:1=", "=b:2", "a=b:2", "a:1=b", "a:0=b:2", "a:1=b:99999", ":1=b:2", "a:1=b:2,a:1=c:3", "a:x=b:2"} {
		if _, err := ParseConnectTo(bad); err == nil {
			t.Errorf("ParseConnectTo(%q) accepted", bad)
		}
	}
	if m, err := ParseConnectTo(""); err != nil || len(m) != 0 {
		t.Fatalf("empty: %v %v", m, err)
	}
	// Open refuses a bad map too.
	_, err = Open(Config{NodeID: "n1", Dir: t.TempDir(), RaftBind: "127.0.0.1:0", HTTPAdvertise: "http://127.0.0.1:1", ConnectTo: map[string]string{"a:1": "nope"}})
	if err == nil {
		t.Fatal("Open accepted ConnectTo a:1=nope")
	}
}

// A Raft dial redirected by ConnectTo still verifies the TLS certificate
// against the advertised name (FROM), not the address it dialed (TO).
func TestConnectToRaftTLSVerifiesTheAdvertisedName(t *testing.T) {
	ca := testpki.NewCA(t, "cluster CA")
	for _, tc := range []struct {
		serverName string
		ok         bool
	}{{"n1", true}, {"n2", false}} {
		t.Run("server certificate for "+tc.serverName, func(t *testing.T) {
			// Both certificates are valid for 127.0.0.1, the address dialed:
			// only the advertised name n1 tells them apart.
			c, k := ca.Issue(t, tc.serverName, tc.serverName)
			cert, err := tls.X509KeyPair(c, k)
			if err != nil {
				t.Fatal(err)
			}
			stls, err := raftTLSConfig(&tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: ca.Pool, ClientCAs: ca.Pool})
			if err != nil {
				t.Fatal(err)
			}
			server := &listenerLayer{secret: []byte("s3cret"), tls: stls}
			addr, got := acceptOne(t, server, func(conn net.Conn) error {
				buf := make([]byte, 5)
				_, err := io.ReadFull(conn, buf)
				return err
			})
			_, port, _ := net.SplitHostPort(addr)
			advertised := net.JoinHostPort("n1", port)
			client := &listenerLayer{Listener: server.Listener, secret: []byte("s3cret"), tls: mtlsConfig(t, ca, "n3"),
				dial: connectTo(map[string]string{advertised: addr}, (&net.Dialer{}).DialContext)}
			conn, err := client.Dial(raft.ServerAddress(advertised), 3*time.Second)
			if err == nil {
				_, _ = conn.Write([]byte("hello"))
				defer func() { _ = conn.Close() }()
			}
			if tc.ok && err != nil {
				t.Fatalf("dial %s via %s: %v", advertised, addr, err)
			}
			if !tc.ok && (err == nil || !strings.Contains(err.Error(), "certificate")) {
				t.Fatalf("dial %s via %s to a certificate for %s: %v, want a certificate error", advertised, addr, tc.serverName, err)
			}
			if tc.ok {
				select {
				case rerr := <-got:
					if rerr != nil {
						t.Fatalf("server read: %v", rerr)
					}
				case <-time.After(15 * time.Second):
					t.Fatal("server side did not finish")
				}
			}
		})
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

func TestEtcdRequestBodies(t *testing.T) {
	value64 := []byte(base64.StdEncoding.EncodeToString([]byte("abc123")))
	var put struct {
		Key   []byte `json:"key"`
		Value []byte `json:"value"`
	}
	if err := json.Unmarshal(etcdPutBody("bench/w7", value64), &put); err != nil {
		t.Fatalf("put body is not JSON: %v", err)
	}
	if string(put.Key) != "bench/w7" || string(put.Value) != "abc123" {
		t.Errorf("put body decodes to key %q value %q", put.Key, put.Value)
	}
	for _, ser := range []bool{true, false} {
		var rng map[string]any
		if err := json.Unmarshal(etcdRangeBody("bench/r1", ser), &rng); err != nil {
			t.Fatalf("range body is not JSON: %v", err)
		}
		if rng["key"] != base64.StdEncoding.EncodeToString([]byte("bench/r1")) {
			t.Errorf("range key = %v", rng["key"])
		}
		if got, has := rng["serializable"]; has != ser || (ser && got != true) {
			t.Errorf("serializable=%v: body %v", ser, rng)
		}
	}
	var w struct {
		Create struct {
			Key      []byte `json:"key"`
			RangeEnd []byte `json:"range_end"`
		} `json:"create_request"`
	}
	if err := json.Unmarshal(etcdWatchBody("bench/rt/s1/"), &w); err != nil {
		t.Fatalf("watch body is not JSON: %v", err)
	}
	if string(w.Create.Key) != "bench/rt/s1/" || string(w.Create.RangeEnd) != "bench/rt/s10" {
		t.Errorf("watch create_request = key %q range_end %q", w.Create.Key, w.Create.RangeEnd)
	}
}

func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"a", "b"},
		{"bench/", "bench0"},
		{"a\xff", "b"},
		{"\xff\xff", "\x00"},
		{"", "\x00"},
	} {
		if got := string(prefixEnd(c.in)); got != c.want {
			t.Errorf("prefixEnd(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestParseRangeValue(t *testing.T) {
	v, err := parseRangeValue([]byte(`{"header":{"revision":"5"},"kvs":[{"key":"YQ==","value":"aGVsbG8=","mod_revision":"5"}],"count":"1"}`))
	if err != nil || string(v) != "hello" {
		t.Errorf("value %q, %v; want hello", v, err)
	}
	if _, err := parseRangeValue([]byte(`{"header":{"revision":"5"}}`)); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("no kvs: %v, want key not found", err)
	}
	if _, err := parseRangeValue([]byte(`<html>`)); err == nil {
		t.Error("garbage: no error")
	}
}

// TestWatchStream parses a stream as the gateway writes it: one JSON object
// per message, newline-separated, values base64-encoded.
func TestWatchStream(t *testing.T) {
	enc := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	stream := `{"result":{"header":{"cluster_id":"1","member_id":"2","revision":"9","raft_term":"2"},"created":true}}
{"result":{"header":{"revision":"10"},"events":[{"kv":{"key":"` + enc("p/m1-0") + `","create_revision":"10","mod_revision":"10","version":"1","value":"` + enc(`{"r":1,"s":0,"t":1500,"v":"xy"}`) + `"}},{"type":"DELETE","kv":{"key":"` + enc("p/x") + `","mod_revision":"10"}}]}}
{"result":{"header":{"revision":"11"},"canceled":true,"cancel_reason":"mvcc: required revision has been compacted"}}
{"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader","http_status":"Service Unavailable"}}
`
	w := &etcdWatch{body: io.NopCloser(strings.NewReader(stream)), cancel: func() {}}
	w.dec = json.NewDecoder(w.body)
	m, err := w.next()
	if err != nil || !m.Result.Created {
		t.Fatalf("first message: %+v, %v; want created", m, err)
	}
	m, err = w.next()
	if err != nil || len(m.Result.Events) != 2 {
		t.Fatalf("second message: %+v, %v; want 2 events", m, err)
	}
	ev := m.Result.Events[0]
	run, seq, sent, ok := parseRTData(ev.KV.Value)
	if ev.Type != "" || string(ev.KV.Key) != "p/m1-0" || ev.KV.ModRevision != "10" || !ok || run != 1 || seq != 0 || sent != 1500 {
		t.Errorf("event %+v parsed as run %d seq %d sent %v ok %v", ev, run, seq, sent, ok)
	}
	if m.Result.Events[1].Type != "DELETE" {
		t.Errorf("second event type %q, want DELETE", m.Result.Events[1].Type)
	}
	if _, err := w.next(); err == nil || !strings.Contains(err.Error(), "compacted") {
		t.Errorf("canceled watch: %v, want an error with the reason", err)
	}
	if _, err := w.next(); err == nil || !strings.Contains(err.Error(), "no leader") {
		t.Errorf("error message: %v, want an error", err)
	}
	if _, err := w.next(); err != io.EOF {
		t.Errorf("end of stream: %v, want EOF", err)
	}
}

// mustEtcd starts a 1-member etcd under t.TempDir(), stopped at the end.
// It skips when etcd is not installed.
func mustEtcd(t *testing.T, hc *http.Client) *cluster {
	t.Helper()
	bin, err := findEtcd()
	if err != nil {
		t.Skipf("skipping: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := startEtcd(ctx, hc, bin, t.TempDir(), 1)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(c.stop)
	return c
}

// TestEtcdIntegration drives a real 1-member etcd through the client code:
// put, serializable and linearizable range, a watch that sees a put, and
// one round of the W2 and S1 etcd sides.
func TestEtcdIntegration(t *testing.T) {
	if _, err := os.Stat(etcdBin); err != nil {
		t.Skipf("skipping: %s not installed (Debian package etcd-server)", etcdBin)
	}
	o := &options{clients: 4, subscribers: 3, rate: 200, docs: 10, valueSize: 16,
		reqTimeout: 5 * time.Second, runTimeout: 30 * time.Second}
	hc := newHTTPClient(o)
	c := mustEtcd(t, hc)
	if c.leader == nil || c.leader != c.nodes[0] || len(c.followers()) != 1 {
		t.Fatalf("leader %v, followers %v", c.leader, c.followers())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := c.leader.url

	w, err := openEtcdWatch(ctx, hc, base, "t/")
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	rev, err := etcdPut(ctx, hc, o.reqTimeout, base, "t/k", b64.AppendEncode(nil, []byte("v1")))
	if err != nil || rev < 2 {
		t.Fatalf("put: rev %d, %v", rev, err)
	}
	if _, err := etcdPut(ctx, hc, o.reqTimeout, base, "u/k", b64.AppendEncode(nil, []byte("other"))); err != nil {
		t.Fatal(err)
	}
	for _, ser := range []bool{true, false} {
		v, err := etcdGet(ctx, hc, o.reqTimeout, base, "t/k", ser)
		if err != nil || string(v) != "v1" {
			t.Errorf("range serializable=%v: %q, %v", ser, v, err)
		}
	}
	if _, err := etcdGet(ctx, hc, o.reqTimeout, base, "t/missing", false); err == nil {
		t.Error("range of a missing key: no error")
	}
	m, err := w.next()
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	if len(m.Result.Events) != 1 || string(m.Result.Events[0].KV.Key) != "t/k" || !bytes.Equal(m.Result.Events[0].KV.Value, []byte("v1")) ||
		m.Result.Events[0].KV.ModRevision != m.Result.Header.Revision {
		t.Errorf("watch event %+v, want the put of t/k (not u/k)", m.Result)
	}

	// One round of two compared etcd sides.
	ee := newEtcdEnv(hc, c, o, []byte(`"abcdefghijklmnop"`))
	checkSideRounds(ctx, t, []string{"W2", "R1", "S1"}, "S1", o.subscribers, func(name string) (*side, error) {
		spec, _ := findCompareSpec(name, peerEtcd)
		s, _ := findScenario(spec.Ours)
		return ee.side(ctx, spec, s, t.Logf)
	})
}

// checkSideRounds makes each named compared side with newSide, measures
// one run of 20 ops on it and checks the run counts them all (for the
// realtime side rt, the deliveries to subscribers subscribers, after 20
// writes) with no errors and a measured p99 on one node.
func checkSideRounds(ctx context.Context, t *testing.T, names []string, rt string, subscribers int, newSide func(name string) (*side, error)) {
	t.Helper()
	for _, name := range names {
		sd, err := newSide(name)
		if err != nil {
			t.Fatalf("%s side: %v", name, err)
		}
		ops := 20
		rr := sd.measure(ctx, ops)
		sd.close()
		want := ops
		if name == rt {
			want = ops * subscribers // deliveries
			if rr.Writes != ops {
				t.Errorf("%s: %d writes, want %d", rt, rr.Writes, ops)
			}
		}
		res := sd.finish()
		if rr.Ops != want || rr.Errors != 0 || rr.TimedOut || res.P99Ms <= 0 || len(res.Nodes) != 1 || res.Nodes[0].Unmeasured {
			t.Errorf("%s: run %+v, result %+v; want %d ops, no errors", name, rr, res, want)
		}
	}
}

package main

import (
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSSEReader(t *testing.T) {
	// What PocketBase writes (id, event, data, no space after the colon),
	// and what the specification allows besides: a comment, a space after
	// the colon, data on two lines, CRLF, an event without a name, blank
	// lines between events, an unknown field.
	stream := "id:c1\nevent:PB_CONNECT\ndata:{\"clientId\":\"c1\"}\n\n" +
		": keep-alive\n\n" +
		"id: c1\r\nevent: notes\r\ndata: {\"a\":1,\r\ndata: \"b\":2}\r\nfoo: bar\r\n\r\n" +
		"\n\n" +
		"data:plain\n\n" +
		"event:empty\ndata\n\n"
	r := newSSEReader(strings.NewReader(stream))
	want := []sseEvent{
		{ID: "c1", Event: "PB_CONNECT", Data: []byte(`{"clientId":"c1"}`)},
		{ID: "c1", Event: "notes", Data: []byte("{\"a\":1,\n\"b\":2}")},
		{Event: "message", Data: []byte("plain")},
		{Event: "empty", Data: []byte{}},
	}
	for i, w := range want {
		ev, err := r.next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if ev.ID != w.ID || ev.Event != w.Event || string(ev.Data) != string(w.Data) || ev.Data == nil {
			t.Errorf("event %d: %+v (data %q), want %+v (data %q)", i, ev, ev.Data, w, w.Data)
		}
	}
	if _, err := r.next(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last event: %v, want io.EOF", err)
	}

	// Cut off: an event without its blank line, a line without its end.
	for _, cut := range []string{"event:notes\ndata:{}\n", "event:notes\ndata:{"} {
		if _, err := newSSEReader(strings.NewReader(cut)).next(); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%q: %v, want io.ErrUnexpectedEOF", cut, err)
		}
	}
	// A line longer than the reader takes.
	long := "data:" + strings.Repeat("x", sseMaxLine+1) + "\n\n"
	if _, err := newSSEReader(strings.NewReader(long)).next(); !errors.Is(err, errSSETooLong) {
		t.Errorf("a %d-byte line: %v, want errSSETooLong", len(long), err)
	}
	// A line longer than the buffer but within the bound is whole.
	big := strings.Repeat("y", 100<<10)
	ev, err := newSSEReader(strings.NewReader("event:notes\ndata:" + big + "\n\n")).next()
	if err != nil || string(ev.Data) != big {
		t.Errorf("a 100 KiB data line: %v, %d bytes", err, len(ev.Data))
	}
}

func TestPBConnectAndRecordEvents(t *testing.T) {
	id, err := pbConnectID(newSSEReader(strings.NewReader("id:abc\nevent:PB_CONNECT\ndata:{\"clientId\":\"abc\"}\n\n")))
	if err != nil || id != "abc" {
		t.Errorf("PB_CONNECT: %q %v", id, err)
	}
	for _, bad := range []string{
		"event:notes\ndata:{\"clientId\":\"abc\"}\n\n", // not PB_CONNECT
		"event:PB_CONNECT\ndata:{}\n\n",                // no clientId
		"event:PB_CONNECT\ndata:{\n\n",                 // not JSON
		"",                                             // no event
	} {
		if _, err := pbConnectID(newSSEReader(strings.NewReader(bad))); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}

	rec := `{"action":"create","record":{"collectionId":"pbc_1","collectionName":"notes","id":"x1","r":3,"s":17,"t":123456789,"v":"abc"}}`
	run, seq, sent, ok := pbRecordEvent([]byte(rec))
	if !ok || run != 3 || seq != 17 || sent != 123456789*time.Nanosecond {
		t.Errorf("record event: %d %d %v %v", run, seq, sent, ok)
	}
	for _, bad := range []string{
		`{"action":"update","record":{"r":3,"s":17,"t":1}}`, // not a create
		`{"action":"create"}`,                               // no record
		`{"action":"create","record":{"v":"abc"}}`,          // no run, seq, time
		`not json`,
	} {
		if _, _, _, ok := pbRecordEvent([]byte(bad)); ok {
			t.Errorf("%s: read as a record event", bad)
		}
	}
	// The write's body carries what the event is read back from.
	pr := &pbRealtime{pe: &pbEnv{value: []byte(`"abc"`)}, base: time.Now()}
	b := pr.body(2, 5)
	if run, seq, _, ok := parseRTData(b); !ok || run != 2 || seq != 5 || !strings.HasSuffix(string(b), `"v":"abc"}`) {
		t.Errorf("body %s: %d %d %v", b, run, seq, ok)
	}
}

func TestPBPeerSpecs(t *testing.T) {
	want := []string{"Q1", "Q2", "W1", "W64", "HOT", "R64", "L32", "RT"}
	if got := compareNames(peerPocketBase); !slices.Equal(got, want) {
		t.Fatalf("--peer pocketbase compares %v, want %v", got, want)
	}
	clients := map[string]int{"W1": 1, "W64": 64, "HOT": 64, "R64": 64, "L32": 32}
	o := &options{subscribers: 1000, clients: 7}
	for _, name := range want {
		cs, _ := findCompareSpec(name, peerPocketBase)
		s, ok := findOursScenario(cs.Ours)
		if !ok {
			t.Fatalf("%s compares our %s, which does not exist", name, cs.Ours)
		}
		if n, fixed := clients[name]; fixed && s.Clients(o) != n {
			t.Errorf("%s: %d clients, want %d", name, s.Clients(o), n)
		}
		if isPBPeerScenario(s) != !strings.HasPrefix(name, "Q") {
			t.Errorf("%s: our %s is an end-user scenario: %v", name, s.Name, isPBPeerScenario(s))
		}
		// The end-user scenarios are not in the main table: run alone,
		// they would have no operation.
		if _, inMain := findScenario(cs.Ours); inMain == isPBPeerScenario(s) {
			t.Errorf("%s: our %s in the main table: %v", name, s.Name, inMain)
		}
	}
	if s, _ := findOursScenario("L32"); !s.ExpectShed {
		t.Error("L32 must count 503 + Retry-After as shed")
	}
	if s, _ := findOursScenario("RTU"); s.Realtime == nil || !s.Realtime.paced || s.Clients(o) != 1000 {
		t.Error("RTU must be a paced realtime scenario of --subscribers subscribers")
	}
}

func TestParseFlagsPocketBase(t *testing.T) {
	o, err := parseFlags([]string{"--peer", "pocketbase", "--runs", "1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range o.compared {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"Q1", "Q2", "W1", "W64", "HOT", "R64", "L32", "RT"}) || !slices.Equal(o.nodes, []int{1}) {
		t.Errorf("--peer pocketbase alone: compared %v on %v nodes, want all 8 on 1", names, o.nodes)
	}
	o, err = parseFlags([]string{"--peer", "pocketbase", "--scenarios", "w64, rt,Q3", "--nodes", "1,3"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.compared) != 2 || o.compared[0].Ours != "W64" || o.compared[1].Ours != "RTU" || len(o.solo) != 1 || !slices.Equal(o.nodes, []int{1, 3}) {
		t.Errorf("subset: compared %+v, solo %d, nodes %v", o.compared, len(o.solo), o.nodes)
	}
	for _, bad := range [][]string{
		{"--peer", "pocketbase", "--scenarios", "W2"},  // no PocketBase counterpart
		{"--peer", "pocketbase", "--scenarios", "S1"},  // etcd's
		{"--peer", "pocketbase", "--scenarios", "W1U"}, // our side's name, not the comparison's
		{"--peer", "etcd", "--scenarios", "W64"},       // PocketBase's
		{"--scenarios", "W64"},                         // the end-user sides exist only in a comparison
		{"--scenarios", "HOTU"},
		{"--peer", "pocketbase", "--compare"},
	} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

func TestParseEBLogin(t *testing.T) {
	tok, id, err := parseEBLogin([]byte(`{"requiresTotp":false,"token":"ebt_x","user":{"id":"u1","role":"user"}}`))
	if err != nil || tok != "ebt_x" || id != "u1" {
		t.Errorf("login: %q %q %v", tok, id, err)
	}
	for _, bad := range []string{
		`{"requiresTotp":true,"loginTicket":"t"}`,
		`{"token":"ebt_x","user":{}}`,
		`{"token":"ebt_x","user":{"id":"u1","role":"owner"}}`,
		`nope`,
	} {
		if _, _, err := parseEBLogin([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	if b := fieldUpdateBody("v", []byte(`"abc"`)); string(b) != `{"oldKey":"v","newKey":"v","value":"abc"}` {
		t.Errorf("field update body %s", b)
	}
}

func TestCheckPBRecord(t *testing.T) {
	if id, err := checkPBRecord([]byte(`{"id":"r1","v":"abc"}`), []byte(`"abc"`)); err != nil || id != "r1" {
		t.Errorf("record: %q %v", id, err)
	}
	for _, bad := range []string{`{"v":"abc"}`, `{"id":"r1","v":"abd"}`, `[]`} {
		if _, err := checkPBRecord([]byte(bad), []byte(`"abc"`)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// TestPocketBaseUserSides runs each end-user workload's PocketBase side for
// a few operations against a real PocketBase peer (built as
// TestPocketBaseIntegration does; only with EDGEBASE_BENCH_POCKETBASE=1),
// and checks that the notes collection refuses a caller without a token.
func TestPocketBaseUserSides(t *testing.T) {
	ctx, cancel, bin := pocketBaseTestBin(t)
	defer cancel()
	o := &options{clients: 4, subscribers: 20, rate: 200, reqTimeout: 10 * time.Second, runTimeout: 30 * time.Second}
	hc := newHTTPClient(o)
	value := []byte(`"abcdefghijklmnop"`)
	pe, err := startPocketBase(ctx, hc, bin, t.TempDir(), o, value)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pe.stop)

	// The rules want an authenticated caller: without a token, no create.
	var oe *opError
	if _, err := pe.do(ctx, http.MethodPost, "/api/collections/"+pbNotes+"/records", "", pbNoteBody(value)); !errors.As(err, &oe) || oe.status/100 != 4 {
		t.Errorf("an anonymous create: %v, want a 4xx", err)
	}
	id, err := pe.createNote(ctx, pbNoteBody(value))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pe.do(ctx, http.MethodGet, "/api/collections/"+pbNotes+"/records/"+id, "", nil); !errors.As(err, &oe) || oe.status/100 != 4 {
		t.Errorf("an anonymous view: %v, want a 4xx", err)
	}

	checkSideRounds(ctx, t, []string{"W1", "W64", "HOT", "R64", "L32", "RT"}, "RT", o.subscribers, func(name string) (*side, error) {
		spec, _ := findCompareSpec(name, peerPocketBase)
		s, _ := findOursScenario(spec.Ours)
		return pe.side(ctx, spec, s, t.Logf)
	})
}

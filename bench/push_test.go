package main

import (
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/fcmfake"
)

func TestDeviceToken(t *testing.T) {
	seen := map[string]bool{}
	for u := 0; u < 30; u++ {
		for d := 0; d < pushDevicesPerUser; d++ {
			tok := deviceToken("ab12", u, d)
			if len(tok) != pushTokenLen {
				t.Fatalf("token %q: %d bytes, want %d", tok, len(tok), pushTokenLen)
			}
			for i := 0; i < len(tok); i++ {
				if c := tok[i]; c <= 0x20 || c >= 0x7f {
					t.Fatalf("token %q: byte %d is not printable ASCII", tok, i)
				}
			}
			if seen[tok] {
				t.Fatalf("token %q twice", tok)
			}
			seen[tok] = true
		}
	}
	if a, b := deviceToken("ab12", 3, 4), deviceToken("ab12", 3, 4); a != b {
		t.Error("deviceToken is not deterministic")
	}
	if deviceToken("ab12", 3, 4) == deviceToken("cd34", 3, 4) {
		t.Error("the cluster tag does not change the token")
	}
}

func TestUsersFor(t *testing.T) {
	for _, tc := range []struct{ devices, users int }{{1, 1}, {100, 1}, {101, 2}, {20000, 200}, {20001, 201}} {
		if got := usersFor(tc.devices); got != tc.users {
			t.Errorf("usersFor(%d) = %d, want %d", tc.devices, got, tc.users)
		}
	}
}

func TestScheduleTimes(t *testing.T) {
	base := time.Date(2026, 11, 21, 9, 0, 7, 600_000_000, time.FixedZone("x", 3600))
	ts := scheduleTimes(base, 25, 10)
	if len(ts) != 25 {
		t.Fatalf("%d times", len(ts))
	}
	first := time.Date(2026, 11, 21, 8, 0, 7, 0, time.UTC)
	for i, at := range ts {
		if want := first.Add(time.Duration(i%10) * time.Second); !at.Equal(want) {
			t.Errorf("schedule %d at %v, want %v", i, at, want)
		}
		// The API wants whole seconds, RFC 3339, UTC.
		s := at.Format(time.RFC3339)
		if !strings.HasSuffix(s, "Z") || strings.Contains(s, ".") {
			t.Errorf("schedule %d: sendAt %q is not whole-second UTC", i, s)
		}
	}
	if ts := scheduleTimes(base, 3, 0); !ts[2].Equal(ts[0]) {
		t.Error("spread 0 must put every schedule at base")
	}
}

func TestScheduleTitleRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		tag      string
		round, i int
	}{{"ab12", 0, 0}, {"ab12", 3, 199}, {"ffff", 12, 100000}} {
		tag, r, i, ok := parseScheduleTitle(scheduleTitle(tc.tag, tc.round, tc.i))
		if !ok || tag != tc.tag || r != tc.round || i != tc.i {
			t.Errorf("round trip of %+v = %q %d %d %v", tc, tag, r, i, ok)
		}
	}
	for _, bad := range []string{"", "bench P1 fan-out ab 1", "bench P2 ab r1", "bench P2 ab x1 s2", "bench P2 ab r1 s", "bench P2 ab r-1 s2", "bench P2 ab r1 s2 extra"} {
		if _, _, _, ok := parseScheduleTitle(bad); ok {
			t.Errorf("parseScheduleTitle(%q) accepted", bad)
		}
	}
}

func TestTallyDeliveries(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ds := []fcmfake.Delivery{
		{Token: "a", Title: "x", At: at(30)},
		{Token: "b", Title: "x", At: at(10)},
		{Token: "a", Title: "x", At: at(50)}, // duplicate: the first arrival counts
		{Token: "z", Title: "x", At: at(5)},  // not addressed: stray
		{Token: "c", Title: "y", At: at(1)},  // another run's title: stray
		{Token: "c", Title: "x", At: at(40)},
	}
	addressed := map[string]bool{"a": true, "b": true, "c": true, "d": true}
	tl := tallyDeliveries(ds, func(d *fcmfake.Delivery) string {
		if d.Title != "x" {
			return ""
		}
		return d.Token
	}, func(k string) bool { return addressed[k] })
	if tl.arrivalsOK != 3 || tl.dups != 1 || tl.stray != 2 {
		t.Errorf("arrivals %d dups %d stray %d; want 3, 1, 2", tl.arrivalsOK, tl.dups, tl.stray)
	}
	if !tl.first["a"].Equal(at(30)) || !tl.firstAt.Equal(at(10)) || !tl.lastAt.Equal(at(40)) {
		t.Errorf("first a %v, firstAt %v, lastAt %v", tl.first["a"], tl.firstAt, tl.lastAt)
	}
	if _, ok := tl.first["d"]; ok {
		t.Error("d never arrived")
	}
	empty := tallyDeliveries(nil, func(*fcmfake.Delivery) string { return "" }, func(string) bool { return true })
	if empty.arrivalsOK != 0 || !empty.firstAt.IsZero() || !empty.lastAt.IsZero() {
		t.Errorf("empty tally: %+v", empty)
	}
}

func TestParseProcNetTCP(t *testing.T) {
	const fake = 0x1F90 // 8080
	b := []byte(`  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 0100007F:A000 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:A001 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:A002 0100007F:1F90 06 00000000:00000000 00:00000000 00000000     0        0 0 3 0000000000000000
   4: 0100007F:1F90 0100007F:A000 01 00000000:00000000 00:00000000 00000000     0        0 4 1 0000000000000000 20 4 30 10 -1
   5: 0100007F:B000 0100007F:2328 01 00000000:00000000 00:00000000 00000000     0        0 5 1 0000000000000000 20 4 30 10 -1
`)
	open, ports := parseProcNetTCP(b, fake)
	if open != 2 {
		t.Errorf("%d established, want 2 (the client sides only)", open)
	}
	want := []int{0xA000, 0xA001, 0xA002}
	if len(ports) != len(want) {
		t.Fatalf("ports %v, want %v", ports, want)
	}
	for i := range want {
		if ports[i] != want[i] {
			t.Errorf("ports %v, want %v", ports, want)
		}
	}
	if open, ports := parseProcNetTCP([]byte("garbage\n\n"), fake); open != 0 || len(ports) != 0 {
		t.Errorf("garbage: %d %v", open, ports)
	}
}

func TestPushScenariosRegistered(t *testing.T) {
	o := &options{clients: 8, devices: 500, schedules: 30, warmup: -1}
	for _, name := range []string{"P1", "P2"} {
		s, ok := findScenario(name)
		if !ok {
			t.Fatalf("no scenario %s", name)
		}
		if !s.FCM || s.Run == nil || s.Prepare == nil || s.Summary == nil || s.Ops == nil {
			t.Errorf("%s is not wired as a push scenario", name)
		}
		// --ops does not apply; the warm-up is one whole run.
		o.ops = 7
		if got := o.warmupFor(s); got != o.opsFor(s) {
			t.Errorf("%s: warm-up %d, ops %d", name, got, o.opsFor(s))
		}
	}
	p1, _ := findScenario("P1")
	p2, _ := findScenario("P2")
	if o.opsFor(p1) != 500 || o.opsFor(p2) != 30 {
		t.Errorf("ops: P1 %d, P2 %d; want --devices, --schedules", o.opsFor(p1), o.opsFor(p2))
	}
	w1, _ := findScenario("W1")
	if o.opsFor(w1) != 7 || w1.FCM {
		t.Error("the other scenarios are unchanged")
	}
	o.scenarios = []*scenario{w1}
	if o.needsFCM() {
		t.Error("W1 alone needs no FCM stand-in")
	}
	o.scenarios = append(o.scenarios, p2)
	if !o.needsFCM() {
		t.Error("P2 needs the FCM stand-in")
	}
}

func TestParseFlagsPush(t *testing.T) {
	o, err := parseFlags([]string{"--scenarios", "p1,P2", "--devices", "1234", "--schedules", "12", "--fcm-latency", "2ms"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.devices != 1234 || o.schedules != 12 || o.fcmLatency != 2*time.Millisecond || len(o.scenarios) != 2 {
		t.Errorf("devices %d schedules %d latency %v scenarios %d", o.devices, o.schedules, o.fcmLatency, len(o.scenarios))
	}
	o, err = parseFlags(nil, io.Discard)
	if err != nil || o.devices != 20000 || o.schedules != 200 || o.fcmLatency != 5*time.Millisecond {
		t.Errorf("defaults: %v %+v", err, o)
	}
	for _, bad := range [][]string{
		{"--devices", "0"},
		{"--devices", strconv.Itoa(fcmfake.MaxDeliveries + 1)},
		{"--schedules", "0"},
		{"--fcm-latency", "-1ms"},
	} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestStartFCMStandIn(t *testing.T) {
	p1, _ := findScenario("P1")
	w1, _ := findScenario("W1")
	logf := func(string, ...any) {}

	o := &options{scenarios: []*scenario{w1}}
	stop, err := startFCMStandIn(o, logf)
	if err != nil || o.fcm != nil || len(o.serveArgs) != 0 {
		t.Fatalf("without a push scenario: %v %v %v", err, o.fcm, o.serveArgs)
	}
	stop()

	o = &options{scenarios: []*scenario{p1}, targets: []string{"http://127.0.0.1:1"}}
	stop, err = startFCMStandIn(o, logf)
	if err != nil || o.fcm != nil {
		t.Fatalf("with --target: %v %v", err, o.fcm)
	}
	stop()

	o = &options{scenarios: []*scenario{p1}, serveArgs: []string{"--raft-snapshot-threshold", "4096"}}
	stop, err = startFCMStandIn(o, logf)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if o.fcm == nil {
		t.Fatal("no stand-in")
	}
	args := strings.Join(o.serveArgs, " ")
	if !strings.HasPrefix(args, "--raft-snapshot-threshold 4096 --fcm-endpoint "+o.fcm.Endpoint()+" --secret-key ") {
		t.Errorf("serve args %q", args)
	}
	key := o.serveArgs[len(o.serveArgs)-1]
	if len(key) != 64 || strings.Trim(key, "0123456789abcdef") != "" {
		t.Errorf("secret key %q is not 64 hex digits", key)
	}
}

func TestPrintPushTable(t *testing.T) {
	rep := &report{Runs: 2, Results: []*result{
		{ClusterSize: 1, Scenario: "P1", Push: &pushResult{FCMLatencyMs: 5, Devices: 20000, Users: 200, Runs: []pushRunResult{
			{Expected: 20000, Delivered: 20000, Seconds: 4, PerSec: 5000, PostMs: 12, FirstMs: 20, SentMs: 4100, HistoryDelivered: 20000, ConnsPeak: 400, ConnsOpened: 900},
			{Expected: 20000, Delivered: 19999, Seconds: 5, PerSec: 3999.8, Missing: 1, Duplicates: 2, ConnsPeak: 420, ConnsOpened: 800},
		}}},
		{ClusterSize: 3, Scenario: "P2", Push: &pushResult{FCMLatencyMs: 5, Schedules: 200, SpreadSeconds: 10, LatenessP50Ms: 150, LatenessP99Ms: 300, LatenessMaxMs: 310,
			Runs: []pushRunResult{{LatenessP50Ms: 150, LatenessP99Ms: 300, LatenessMaxMs: 310, CreateSeconds: 0.3}}}},
	}}
	var b strings.Builder
	printPushTable(&b, rep)
	out := b.String()
	for _, want := range []string{"push fan-out", "5000 4000", "4.00s 5.00s", "P1    20000    200", "push scheduler", "150.0ms/300.0ms/310.0ms", "0.30"} {
		if !strings.Contains(out, want) {
			t.Errorf("push table lacks %q:\n%s", want, out)
		}
	}
	// Totals: 2 duplicates, 1 missing, peak 420, 1700 opened.
	if !strings.Contains(out, "  2    1        0      0         420         1700") {
		t.Errorf("P1 totals:\n%s", out)
	}
}

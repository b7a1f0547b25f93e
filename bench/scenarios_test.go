package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestScenarioTable(t *testing.T) {
	o := &options{clients: 10, subscribers: 5, q3Subscribers: 5}
	seen := map[string]bool{}
	for _, s := range scenarios {
		if seen[s.Name] {
			t.Errorf("scenario %s twice", s.Name)
		}
		seen[s.Name] = true
		if s.What == "" || s.Clients == nil || s.Target == nil || (s.Op == nil && s.Run == nil) == (s.Realtime == nil) || (s.DefaultOps < 1) != s.Timed || s.Clients(o) < 1 {
			t.Errorf("scenario %s is incomplete (it needs an Op or a Run, or Realtime)", s.Name)
		}
		// Only the login scenarios tolerate load shedding: elsewhere a 503 is an error.
		if s.ExpectShed != (s.Name == "A1" || s.Name == "A2") {
			t.Errorf("scenario %s: ExpectShed = %v", s.Name, s.ExpectShed)
		}
	}
	for _, name := range []string{"W1", "W2", "W3", "R1", "R2", "R3", "A1", "A2", "RT1", "RT1F", "RT2"} {
		if !seen[name] {
			t.Errorf("no scenario %s", name)
		}
	}
	a1, _ := findScenario("A1")
	a2, _ := findScenario("A2")
	if a1.Clients(o) != 10 || a2.Clients(o) != 40 {
		t.Errorf("clients: A1 %d, A2 %d; want --clients and 4x --clients", a1.Clients(o), a2.Clients(o))
	}
	if a1.Prepare == nil || a2.Prepare == nil {
		t.Error("the login scenarios must register their accounts first")
	}
}

func TestParseFlagsLoginScenarios(t *testing.T) {
	var out strings.Builder
	if _, err := parseFlags([]string{"--list"}, &out); !errors.Is(err, errListed) {
		t.Fatalf("--list: %v", err)
	}
	for _, name := range []string{"A1 ", "A2 "} {
		if !strings.Contains(out.String(), "\n"+name) {
			t.Errorf("--list does not show %s:\n%s", name, out.String())
		}
	}
	o, err := parseFlags([]string{"--nodes", "1,3", "--scenarios", "a1, A2", "--clients", "8", "--ops", "50", "--runs", "2", "--warmup", "0", "--accounts", "5"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.scenarios) != 2 || o.scenarios[0].Name != "A1" || o.scenarios[1].Name != "A2" {
		t.Fatalf("scenarios = %v", o.scenarios)
	}
	if o.opsFor(o.scenarios[1]) != 50 || o.warmupFor(o.scenarios[1]) != 0 || o.runs != 2 || o.accounts != 5 {
		t.Errorf("ops %d warmup %d runs %d accounts %d", o.opsFor(o.scenarios[1]), o.warmupFor(o.scenarios[1]), o.runs, o.accounts)
	}
	if o.maxClients() != 32 {
		t.Errorf("maxClients = %d, want A2's 4x8", o.maxClients())
	}
	if _, err := parseFlags([]string{"--accounts", "0"}, io.Discard); err == nil {
		t.Error("--accounts 0 accepted")
	}
}

func TestStatusErrorShed(t *testing.T) {
	answer := func(status int, retry string) *opError {
		resp := &http.Response{StatusCode: status, Header: http.Header{}}
		if retry != "" {
			resp.Header.Set("Retry-After", retry)
		}
		var oe *opError
		if !errors.As(statusError("login", resp, []byte(`{"error":{"code":"unavailable"}}`)), &oe) {
			t.Fatal("statusError is not an *opError")
		}
		return oe
	}
	if oe := answer(503, "2"); !oe.shed || oe.retryAfter != 2*time.Second || oe.kind != "login 503 unavailable" || oe.status != 503 {
		t.Errorf("503 with Retry-After: %+v", oe)
	}
	// Overload must be announced with Retry-After; a bare 503 is an error.
	if oe := answer(503, ""); oe.shed || oe.kind != "login 503 unavailable (no Retry-After)" {
		t.Errorf("503 without Retry-After: %+v", oe)
	}
	for _, status := range []int{429, 500, 502} {
		if oe := answer(status, "1"); oe.shed {
			t.Errorf("%d counted as shed", status)
		}
	}
}

// fakeAuth is an /api/auth that answers login with status and body, after
// checking what the bench sends.
func fakeAuth(t *testing.T, status int, retry, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req map[string]string
		if r.Method != http.MethodPost || r.URL.Path != "/api/auth" || r.Header.Get("X-Project-Id") != "p1" ||
			r.Header.Get("X-API-Key") != "k1" || r.Header.Get("Content-Type") != "application/json" ||
			json.NewDecoder(r.Body).Decode(&req) != nil || req["action"] != "login" || req["email"] != "u@example.com" || req["password"] != "pw pw pw pw" {
			t.Errorf("unexpected request %s %s %v", r.Method, r.URL, r.Header)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if retry != "" {
			w.Header().Set("Retry-After", retry)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestLoginOutcomes(t *testing.T) {
	acc := benchAccount{email: "u@example.com", password: "pw pw pw pw"}
	for _, tc := range []struct {
		name, retry, body string
		status            int
		wantKind          string // "": success
		wantShed          bool
	}{
		{"ok", "", `{"requiresTotp":false,"token":"t","user":{}}`, 200, "", false},
		{"no token", "", `{"requiresTotp":false,"user":{}}`, 200, "login 200 without a token", false},
		{"totp", "", `{"requiresTotp":true,"token":"t"}`, 200, "login 200 without a token", false},
		{"not json", "", `<html>`, 200, "login 200 without a token", false},
		{"wrong password", "", `{"error":{"code":"invalid_credentials"}}`, 401, "login 401 invalid_credentials", false},
		{"rate limited", "60", `{"error":{"code":"rate_limited"}}`, 429, "login 429 rate_limited", false},
		{"overloaded", "1", `{"error":{"code":"unavailable"}}`, 503, "login 503 unavailable", true},
		{"internal", "", `{"error":{"code":"internal"}}`, 500, "login 500 internal", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeAuth(t, tc.status, tc.retry, tc.body)
			e := &env{hc: srv.Client(), pr: project{ID: "p1", APIKey: "k1"}, o: &options{reqTimeout: time.Second}}
			err := e.login(context.Background(), &benchNode{id: "n1", url: srv.URL}, acc)
			if tc.wantKind == "" {
				if err != nil {
					t.Fatalf("login: %v", err)
				}
				return
			}
			var oe *opError
			if !errors.As(err, &oe) || oe.kind != tc.wantKind || oe.shed != tc.wantShed {
				t.Fatalf("login = %#v, want kind %q shed %v", err, tc.wantKind, tc.wantShed)
			}
		})
	}
}

func TestLoginTransportError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL
	srv.Close() // nothing listens any more
	e := &env{hc: &http.Client{}, o: &options{reqTimeout: time.Second}}
	var oe *opError
	if err := e.login(context.Background(), &benchNode{url: u}, benchAccount{}); !errors.As(err, &oe) || oe.kind != "login transport error" || oe.shed {
		t.Fatalf("login to a closed port = %#v", err)
	}
}

func TestAuthTimeoutOutlastsServerBound(t *testing.T) {
	e := &env{o: &options{reqTimeout: 10 * time.Second}}
	if got := e.authTimeout(); got <= serverAuthBound {
		t.Errorf("authTimeout = %v with --request-timeout 10s: a queued login's 503 would arrive after the client gave up", got)
	}
	e.o.reqTimeout = time.Minute
	if got := e.authTimeout(); got != time.Minute {
		t.Errorf("authTimeout = %v, want --request-timeout 1m", got)
	}
}

func TestRunOnceCountsShedApart(t *testing.T) {
	shed := &opError{kind: "login 503 unavailable", status: 503, shed: true, retryAfter: time.Millisecond}
	s := scenario{Name: "T", Op: func(ctx context.Context, e *env, c, i int) error {
		switch i % 10 {
		case 1, 2, 3:
			return shed
		case 4:
			return &opError{kind: "login 500 internal", status: 500}
		case 5:
			return errors.New("plain")
		}
		return nil
	}}
	e := &env{o: &options{runTimeout: time.Minute}}
	for _, expect := range []bool{true, false} {
		s.ExpectShed = expect
		rr, h, kinds, sheds := runOnce(context.Background(), e, &s, 4, 100)
		if rr.Ops != 50 || h.count() != 50 {
			t.Errorf("expect shed %v: %d ops, %d samples; want 50", expect, rr.Ops, h.count())
		}
		wantShed, wantErrs := 30, 20
		if !expect {
			wantShed, wantErrs = 0, 50
		}
		if rr.Shed != wantShed || rr.Errors != wantErrs || sheds[shed.kind] != wantShed {
			t.Errorf("expect shed %v: shed %d %v, errors %d %v; want %d shed, %d errors", expect, rr.Shed, sheds, rr.Errors, kinds, wantShed, wantErrs)
		}
		if kinds["login 500 internal"] != 10 || kinds["plain"] != 10 {
			t.Errorf("expect shed %v: error kinds %v", expect, kinds)
		}
	}
	// Shed answers alone do not flag a result (the exit status stays 0).
	r := &result{Ops: 50, Shed: 30, Runs: []runResult{{Ops: 50, Shed: 30}}}
	if r.flagged() {
		t.Error("a result with shed answers and no errors is flagged")
	}
}

func TestPrintTableShedAndP95(t *testing.T) {
	rep := &report{Runs: 1, Results: []*result{
		{ClusterSize: 1, Scenario: "A2", Clients: 256, Target: "node n1", Ops: 400, OpsPerSec: 60, P50Ms: 3000, P95Ms: 3900, P99Ms: 4100, P999Ms: 4200,
			Runs: []runResult{{Ops: 400, Shed: 112}}, Shed: 112, ShedKinds: map[string]int{"login 503 unavailable": 112},
			Nodes: []nodeResult{{ID: "n1", Leader: true, PeakRSSMiB: 240}}},
		{ClusterSize: 3, Scenario: "A1", Failed: "prepare: register: boom"},
	}}
	var b strings.Builder
	printTable(&b, rep)
	out := b.String()
	for _, want := range []string{
		" p50 ", " p95 ", " p99 ", "3.90s",
		"note: 1 nodes A2: 112 × login 503 unavailable with Retry-After: load shed, expected here, not an error",
		"note: 3 nodes A1: FAILED: prepare: register: boom",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "0 !") {
		t.Errorf("shed answers flagged as errors:\n%s", out)
	}
}

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/raftstore"
)

// --connect-to is checked before anything starts: bad syntax or an address
// that is not host:port exits 2 with a message naming the flag.
func TestConnectToFlagErrors(t *testing.T) {
	for _, tc := range []struct{ name, value, msg string }{
		{"no equals", "a:1", `"a:1" is not FROM=TO`},
		{"empty to", "a:1=", "is not FROM=TO"},
		{"from without port", "a=b:2", `"a" is not host:port`},
		{"to without port", "a:1=b", `"b" is not host:port`},
		{"port zero", "a:1=b:0", "port must be a number in 1-65535"},
		{"port too big", "a:1=b:70000", "port must be a number in 1-65535"},
		{"no host", ":7000=b:2", "has no host"},
		{"mapped twice", "a:1=b:2,a:1=c:3", "a:1 is mapped twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := runCLI(t, "serve", "--data-dir", t.TempDir(), "--connect-to", tc.value)
			if code != 2 {
				t.Fatalf("exit %d, want 2 (stderr %q)", code, errs)
			}
			if !strings.Contains(errs, "connect-to") || !strings.Contains(errs, tc.msg) {
				t.Fatalf("stderr %q does not name --connect-to and %q", errs, tc.msg)
			}
		})
	}
	// Repeated flags merge; a FROM given twice with two targets is refused.
	code, _, errs := runCLI(t, "serve", "--data-dir", t.TempDir(), "--connect-to", "a:1=b:2", "--connect-to", "a:1=c:3")
	if code != 2 || !strings.Contains(errs, "a:1 is mapped twice") {
		t.Fatalf("repeated conflicting --connect-to: exit %d, stderr %q", code, errs)
	}
	// From the environment too.
	t.Setenv("EDGEBASE_CONNECT_TO", "a:1=nope")
	code, _, errs = runCLI(t, "serve", "--data-dir", t.TempDir())
	if code == 0 || !strings.Contains(errs, "EDGEBASE_CONNECT_TO") || !strings.Contains(errs, `"nope" is not host:port`) {
		t.Fatalf("bad EDGEBASE_CONNECT_TO: exit %d, stderr %q", code, errs)
	}
}

func TestConnectToFlagMerges(t *testing.T) {
	c := connectToFlag{}
	for _, v := range []string{"a:1=b:2", "c:3=d:4, a:1=b:2"} {
		if err := c.Set(v); err != nil {
			t.Fatalf("Set(%q): %v", v, err)
		}
	}
	if got := c.String(); got != "a:1=b:2,c:3=d:4" {
		t.Fatalf("merged --connect-to = %q", got)
	}
}

func TestResolveTuning(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name     string
		in       raftstore.Tuning
		wan      bool
		hb, el   time.Duration
		lease    time.Duration
		commit   time.Duration
		trailing uint64
		maxApp   int
	}{
		{"defaults", raftstore.Tuning{}, false, 1000 * ms, 1000 * ms, 500 * ms, 5 * ms, 10240, 512},
		{"election alone sets both", raftstore.Tuning{ElectionTimeout: 300 * ms}, false, 300 * ms, 300 * ms, 150 * ms, 5 * ms, 10240, 512},
		{"wan preset", raftstore.Tuning{}, true, 500 * ms, 500 * ms, 500 * ms, 2 * ms, 50000, 512},
		{"wan, election alone still sets both", raftstore.Tuning{ElectionTimeout: 2000 * ms}, true, 2000 * ms, 2000 * ms, 1000 * ms, 2 * ms, 50000, 512},
		{"wan, heartbeat alone", raftstore.Tuning{HeartbeatTimeout: 2000 * ms}, true, 2000 * ms, 2000 * ms, 1000 * ms, 2 * ms, 50000, 512},
		{"wan, explicit flags win", raftstore.Tuning{HeartbeatTimeout: 800 * ms, ElectionTimeout: 1200 * ms, LeaderLeaseTimeout: 400 * ms, CommitTimeout: 2 * ms, TrailingLogs: 7},
			true, 800 * ms, 1200 * ms, 400 * ms, 2 * ms, 7, 512},
		{"wan, lease alone", raftstore.Tuning{LeaderLeaseTimeout: 400 * ms}, true, 500 * ms, 500 * ms, 400 * ms, 2 * ms, 50000, 512},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveTuning(tc.in, tc.wan)
			if err != nil {
				t.Fatalf("resolveTuning: %v", err)
			}
			if got.HeartbeatTimeout != tc.hb || got.ElectionTimeout != tc.el || got.LeaderLeaseTimeout != tc.lease || got.CommitTimeout != tc.commit ||
				got.TrailingLogs != tc.trailing || got.MaxAppendEntries != tc.maxApp {
				t.Fatalf("resolveTuning = %v", got)
			}
		})
	}
}

func TestTuningFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"lease over heartbeat", []string{"--raft-heartbeat-timeout", "500ms", "--raft-leader-lease-timeout", "600ms"}, "--raft-leader-lease-timeout 600ms is longer than the heartbeat timeout 500ms"},
		{"lease over the wan heartbeat", []string{"--wan", "--raft-leader-lease-timeout", "2s"}, "--raft-leader-lease-timeout 2s is longer than the heartbeat timeout 500ms"},
		{"heartbeat over election", []string{"--raft-heartbeat-timeout", "2s", "--raft-election-timeout", "1s"}, "--raft-heartbeat-timeout 2s is longer than --raft-election-timeout 1s"},
		{"negative heartbeat", []string{"--raft-heartbeat-timeout", "-1s"}, "--raft-heartbeat-timeout -1s is negative"},
		{"negative in flight", []string{"--raft-max-inflight", "-1"}, "raft appends in flight -1 is not in 1-1024"},
		{"too many in flight", []string{"--wan", "--raft-max-inflight", "5000"}, "raft appends in flight 5000 is not in 1-1024"},
		{"negative commit", []string{"--wan", "--raft-commit-timeout", "-5ms"}, "--raft-commit-timeout -5ms is negative"},
		{"negative lease", []string{"--raft-leader-lease-timeout", "-1ms"}, "--raft-leader-lease-timeout -1ms is negative"},
		{"too short", []string{"--raft-election-timeout", "1ms"}, "at least 5ms"},
		{"not a duration", []string{"--raft-commit-timeout", "soon"}, "raft-commit-timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := runCLI(t, append([]string{"serve", "--data-dir", t.TempDir()}, tc.args...)...)
			if code != 2 || !strings.Contains(errs, tc.msg) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, errs, tc.msg)
			}
		})
	}
}

// --raft-max-inflight: raft's 2 by default, 64 with --wan, and an explicit
// value wins over the preset.
func TestResolveMaxInFlight(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   raftstore.Tuning
		wan  bool
		want int
	}{
		{"default", raftstore.Tuning{}, false, 2},
		{"wan", raftstore.Tuning{}, true, 64},
		{"explicit over wan", raftstore.Tuning{MaxRPCsInFlight: 8}, true, 8},
		{"pipelining off", raftstore.Tuning{MaxRPCsInFlight: 1}, false, 1},
	} {
		got, err := resolveTuning(tc.in, tc.wan)
		if err != nil {
			t.Fatalf("%s: resolveTuning: %v", tc.name, err)
		}
		if got.MaxRPCsInFlight != tc.want {
			t.Errorf("%s: MaxRPCsInFlight = %d, want %d", tc.name, got.MaxRPCsInFlight, tc.want)
		}
	}
}

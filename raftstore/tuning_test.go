package raftstore

import (
	"strings"
	"testing"
	"time"
)

func TestTuningValidate(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		t    Tuning
		msg  string
	}{
		{"negative", Tuning{CommitTimeout: -ms}, "negative"},
		{"heartbeat over election", Tuning{HeartbeatTimeout: 2 * time.Second, ElectionTimeout: time.Second}, "longer than the election timeout"},
		{"lease over heartbeat", Tuning{HeartbeatTimeout: 500 * ms, ElectionTimeout: 500 * ms, LeaderLeaseTimeout: 600 * ms}, "longer than the heartbeat timeout"},
		{"too short", Tuning{ElectionTimeout: ms}, "at least 5ms"},
		{"too many appends", Tuning{MaxAppendEntries: 5000}, "not in 1-1024"},
	} {
		if err := tc.t.Validate(); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: Validate = %v, want %q", tc.name, err, tc.msg)
		}
	}
	for _, ok := range []Tuning{{}, DefaultTuning(), WANTuning(), fastTuning(), rvTuning()} {
		if err := ok.Validate(); err != nil {
			t.Errorf("Validate(%v) = %v", ok, err)
		}
	}
	// Open refuses an impossible combination before touching the disk.
	_, err := Open(Config{NodeID: "n1", Dir: t.TempDir(), RaftBind: "127.0.0.1:0", HTTPAdvertise: "http://127.0.0.1:1",
		Tuning: Tuning{HeartbeatTimeout: 500 * ms, LeaderLeaseTimeout: 600 * ms}})
	if err == nil || !strings.Contains(err.Error(), "leader lease") {
		t.Fatalf("Open with lease over heartbeat: %v", err)
	}
}

// A node runs with the WAN preset and reports it.
func TestWANTuningRuns(t *testing.T) {
	s := openTestStore(t, t.TempDir(), "127.0.0.1:0", func(c *Config) { c.Tuning = WANTuning() })
	mustLeader(t, s)
	mustTxn(t, s, put("p/a", `{}`))
	if got := s.Tuning(); got != WANTuning().Effective() {
		t.Fatalf("Tuning() = %v, want %v", got, WANTuning())
	}
}

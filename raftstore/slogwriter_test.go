package raftstore

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// raft's lines keep their level, but a heartbeat the guard deferred (which
// happens around every change of term) is not logged as an error.
func TestSlogWriterLevels(t *testing.T) {
	var buf bytes.Buffer
	w := slogWriter{slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	lines := map[string]string{
		"2026-11-26T20:03:56.493Z [ERROR] raft: failed to heartbeat to: peer=127.0.0.1:1 backoff time=10ms error=\"" + errHeartbeatDeferred.Error() + "\"": "INFO",
		"2026-11-26T20:03:56.493Z [ERROR] raft: failed to appendEntries to: peer=127.0.0.1:1 error=EOF":                                                    "ERROR",
		"2026-11-26T20:03:56.493Z [WARN]  raft: heartbeat timeout reached, starting election":                                                              "WARN",
		"2026-11-26T20:03:56.493Z [INFO]  raft: entering follower state":                                                                                   "INFO",
	}
	for line, want := range lines {
		buf.Reset()
		if _, err := w.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
		var rec struct{ Level, Msg string }
		if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
			t.Fatalf("%q: %v", buf.String(), err)
		}
		if rec.Level != want || !strings.Contains(rec.Msg, "raft:") {
			t.Errorf("%q logged at %s (%q), want %s", line, rec.Level, rec.Msg, want)
		}
	}
}

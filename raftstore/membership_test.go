package raftstore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRemovedMarker(t *testing.T) {
	dir := t.TempDir()
	if err := refuseIfRemoved(dir, "n3"); err != nil {
		t.Fatalf("no marker: %v", err)
	}
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	if err := writeRemovedMarker(dir, Removal{ID: "n3", At: at}, at.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	err := refuseIfRemoved(dir, "n3")
	var re *RemovedError
	if !errors.Is(err, ErrRemoved) || !errors.As(err, &re) || re.Removal.ID != "n3" || !re.Removal.At.Equal(at) {
		t.Fatalf("with marker: %v", err)
	}
	want := "node n3 was removed from the cluster at 2026-03-04T05:06:07Z; wipe --data-dir to join again as a new member"
	if err.Error() != want {
		t.Fatalf("message %q, want %q", err, want)
	}
	// Open refuses before touching anything.
	_, err = Open(Config{NodeID: "n3", Dir: dir, HTTPAdvertise: "http://127.0.0.1:1", RaftBind: "127.0.0.1:0"})
	if !errors.Is(err, ErrRemoved) {
		t.Fatalf("Open with a marker: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, walDirName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open created the raft dir of a removed node: %v", err)
	}
	// A damaged marker still means removed.
	if err := os.WriteFile(filepath.Join(dir, RemovedMarkerFile), []byte("{garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := refuseIfRemoved(dir, "n3"); !errors.Is(err, ErrRemoved) || !strings.Contains(err.Error(), "node n3 was removed") {
		t.Fatalf("damaged marker: %v", err)
	}
}

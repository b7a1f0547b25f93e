package raftstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/migrate"
)

// raftLog is what a Store needs of its Raft log: the log entries and the
// stable store (current term, vote), closed with the Store.
type raftLog interface {
	raft.LogStore
	raft.StableStore
	io.Closer
}

// The Raft log's directories under a node's data dir.
const (
	// walDirName holds HashiCorp's raft-wal: segment files written with
	// write + fdatasync, and a small bbolt file with the segment list and
	// the stable store.
	walDirName = "raft-wal"
	// badgerLogDirName held the Raft log in Badger, before raft-wal. A node
	// that still has one is migrated at start (openRaftLog).
	badgerLogDirName = "raft"
	// walMigratingSuffix marks a WAL being filled from the Badger log; it
	// becomes walDirName by one rename when the copy is complete and synced.
	walMigratingSuffix = ".migrating"
)

// DefaultLogSegmentSize is the size of one raft-wal segment file unless
// Tuning.LogSegmentSize sets another: raft-wal's (and Consul's) default.
// Segments are preallocated; the oldest are deleted whole after a snapshot.
const DefaultLogSegmentSize = 64 << 20

// openRaftLog opens the node's Raft log in dir (the node's data dir),
// creating it if needed. A node whose log is still in Badger (a data dir
// written before raft-wal) is migrated first: every entry and the stable
// keys are copied into a new WAL beside it, synced, and the WAL takes the
// Badger log's place with one rename; the Badger log is deleted after.
// A crash at any point leaves either the complete Badger log (the copy
// starts again) or the complete WAL (the Badger log is deleted again).
func openRaftLog(dir string, segmentSize int, logger *slog.Logger) (raftLog, error) {
	walDir := filepath.Join(dir, walDirName)
	oldDir := filepath.Join(dir, badgerLogDirName)
	hasWAL, err := dirExists(walDir)
	if err != nil {
		return nil, err
	}
	hasOld, err := dirExists(oldDir)
	if err != nil {
		return nil, err
	}
	switch {
	case hasWAL && hasOld:
		// The migration's rename happened; deleting the Badger log did not.
		logger.Info("removing the Badger Raft log left by a finished migration", "dir", oldDir)
		if err := os.RemoveAll(oldDir); err != nil {
			return nil, fmt.Errorf("raftstore: remove migrated badger log %s: %w", oldDir, err)
		}
	case hasOld:
		if err := migrateBadgerLog(context.Background(), oldDir, walDir, segmentSize, logger); err != nil {
			return nil, err
		}
		if err := os.RemoveAll(oldDir); err != nil {
			return nil, fmt.Errorf("raftstore: remove migrated badger log %s: %w", oldDir, err)
		}
	}
	return openWAL(walDir, segmentSize, logger)
}

// walLog is raft-wal with one difference: an entry below the first index is
// gone. raft-wal truncates the head logically (it deletes a segment only
// once every entry in it is truncated) and still answers GetLog for a
// truncated entry that sits in the tail segment. Raft would then send a
// follower that fell behind the last snapshot those entries instead of the
// snapshot; they are the same committed entries, but the guarantee that a
// snapshot and its compaction cut the log (the change log's floor, an
// install that replaces a stale tree) rests on DeleteRange removing them.
type walLog struct {
	*wal.WAL
}

// GetLog returns the entry at index, or raft.ErrLogNotFound when index is
// below the first index or above the last.
func (w walLog) GetLog(index uint64, log *raft.Log) error {
	first, err := w.WAL.FirstIndex()
	if err != nil {
		return err
	}
	if index < first {
		return raft.ErrLogNotFound
	}
	return w.WAL.GetLog(index, log)
}

// openWAL opens (creating if needed) a raft-wal log and stable store in dir.
func openWAL(dir string, segmentSize int, logger *slog.Logger) (walLog, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return walLog{}, fmt.Errorf("raftstore: create raft log dir %s: %w", dir, err)
	}
	if segmentSize <= 0 {
		segmentSize = DefaultLogSegmentSize
	}
	hlog := hclog.New(&hclog.LoggerOptions{Name: "raft-wal", Level: hclog.Warn, Output: slogWriter{logger.With("component", "raft-wal")}})
	w, err := wal.Open(dir, wal.WithSegmentSize(segmentSize), wal.WithLogger(hlog))
	if err != nil {
		return walLog{}, fmt.Errorf("raftstore: open raft log %s: %w", dir, err)
	}
	return walLog{w}, nil
}

// stableKeys are the stable store's keys: hashicorp/raft writes only these
// (the term as a uint64, the vote as a term and a candidate), and so do we
// (restore writes CurrentTerm).
var (
	stableUint64Keys = []string{"CurrentTerm", "LastVoteTerm"}
	stableBytesKeys  = []string{"LastVoteCand"}
)

// migrateBadgerLog copies the Badger Raft log in oldDir into a new WAL at
// walDir (built at walDir+".migrating", renamed into place once complete).
func migrateBadgerLog(ctx context.Context, oldDir, walDir string, segmentSize int, logger *slog.Logger) (err error) {
	started := time.Now()
	staging := walDir + walMigratingSuffix
	if err := os.RemoveAll(staging); err != nil {
		return fmt.Errorf("raftstore: clear %s: %w", staging, err)
	}
	src, err := openLogStore(oldDir, logger)
	if err != nil {
		return fmt.Errorf("raftstore: migrate raft log: %w", err)
	}
	defer func() {
		if cerr := src.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("raftstore: migrate raft log: %w", cerr)
		}
	}()
	dst, err := openWAL(staging, segmentSize, logger)
	if err != nil {
		return fmt.Errorf("raftstore: migrate raft log: %w", err)
	}
	first, last, copyErr := copyRaftLog(ctx, dst, src)
	if cerr := dst.Close(); copyErr == nil && cerr != nil {
		copyErr = fmt.Errorf("close the new log: %w", cerr)
	}
	if copyErr != nil {
		_ = os.RemoveAll(staging)
		return fmt.Errorf("raftstore: migrate raft log from %s: %w", oldDir, copyErr)
	}
	if err := os.Rename(staging, walDir); err != nil {
		return fmt.Errorf("raftstore: migrate raft log: put the new log in place: %w", err)
	}
	if err := syncDirErr(filepath.Dir(walDir)); err != nil {
		return fmt.Errorf("raftstore: migrate raft log: %w", err)
	}
	logger.Info("migrated the Raft log from Badger to raft-wal", "first", first, "last", last,
		"entries", entries(first, last), "took", time.Since(started).Round(time.Millisecond))
	return nil
}

// copyRaftLog copies src's stable keys and entries into the empty dst.
func copyRaftLog(ctx context.Context, dst, src raftLog) (first, last uint64, err error) {
	for _, k := range stableUint64Keys {
		v, err := src.GetUint64([]byte(k))
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return 0, 0, fmt.Errorf("read stable key %s: %w", k, err)
		}
		if err := dst.SetUint64([]byte(k), v); err != nil {
			return 0, 0, fmt.Errorf("write stable key %s: %w", k, err)
		}
	}
	for _, k := range stableBytesKeys {
		v, err := src.Get([]byte(k))
		if isNotFound(err) || (err == nil && len(v) == 0) {
			continue
		}
		if err != nil {
			return 0, 0, fmt.Errorf("read stable key %s: %w", k, err)
		}
		if err := dst.Set([]byte(k), v); err != nil {
			return 0, 0, fmt.Errorf("write stable key %s: %w", k, err)
		}
	}
	if first, err = src.FirstIndex(); err != nil {
		return 0, 0, fmt.Errorf("read first index: %w", err)
	}
	if last, err = src.LastIndex(); err != nil {
		return 0, 0, fmt.Errorf("read last index: %w", err)
	}
	if last == 0 {
		return 0, 0, nil // no entries (a node that never got one)
	}
	if err := migrate.CopyLogs(ctx, dst, src, 4<<20, nil); err != nil {
		return 0, 0, fmt.Errorf("copy entries %d..%d: %w", first, last, err)
	}
	return first, last, nil
}

// isNotFound matches the Badger stable store's missing-key error.
func isNotFound(err error) bool { return errors.Is(err, ErrKeyNotFound) }

func entries(first, last uint64) uint64 {
	if last == 0 {
		return 0
	}
	return last - first + 1
}

func dirExists(dir string) (bool, error) {
	st, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("raftstore: %w", err)
	}
	if !st.IsDir() {
		return false, fmt.Errorf("raftstore: %s is not a directory", dir)
	}
	return true, nil
}

// syncDirErr makes a rename or removal in dir durable, or says why not.
func syncDirErr(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s to sync it: %w", dir, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// walFileSizes is the disk space of the WAL's files: the segments
// (preallocated, so their allocated size) and its metadata.
func walFileSizes(dir string) (int64, error) {
	var n int64
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // deleted by a truncation meanwhile
		}
		n += allocatedBytes(info)
	}
	return n, nil
}

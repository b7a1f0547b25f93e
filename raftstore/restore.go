package raftstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Restore turns a backup into the data directory of a NEW cluster of one
// voter, offline. The layout is exactly what Open expects of a node that
// already has state, so `serve` (without --join) starts it as the sole
// voter:
//
//   - tree/: the FSM database loaded from the backup, whose applied index is
//     the backup's revision R;
//   - snapshots/: a Raft snapshot at index R (term 1) whose configuration
//     holds this node alone, and whose data is that same tree. Raft starts
//     from it, so its log continues at R+1: new entries are above the
//     tree's applied index and are applied, not skipped as replays, and
//     document revisions go on from R. Nodes that join later catch up
//     from this snapshot;
//   - raft/: a stable store with current term 1 and an empty log.
//
// The old cluster's membership is dropped from the tree: its member records
// (NodeRecordPath), which would have the node ask (and forward to) the old
// members, and its removal tombstones (RemovedPath), which would stand
// between a new member and an id the old cluster once removed. The new
// cluster has one member; joiners write their own records.
//
// Nothing is written to Dir unless the whole backup reads back intact: the
// state is built in a staging directory inside Dir and moved into place at
// the end, snapshots first, so that even a crash half way through the moves
// leaves a directory Open restores from the snapshot rather than one it
// would bootstrap afresh over the restored tree.

// ErrDirNotEmpty means a restore was pointed at a data directory with
// something in it already.
var ErrDirNotEmpty = errors.New("data directory is not empty")

// RestoreConfig says what to restore, and where.
type RestoreConfig struct {
	// Dir is the new node's data directory: absent or empty. Required.
	Dir string
	// NodeID is the id the node will run with (serve --node-id). Required.
	NodeID string
	// RaftAdvertise is the host:port the node will advertise for Raft (serve
	// --advertise-raft, or what it derives from --raft-addr): it is this
	// node's address in the new cluster's configuration. Required.
	RaftAdvertise string
	// From is the backup stream. Required.
	From io.Reader
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// RestoreInfo reports what a restore did.
type RestoreInfo struct {
	// Backup describes the backup read.
	Backup BackupInfo
	// OldMembers are the node ids whose member records were dropped.
	OldMembers []string
	// OldRemovals are the ids whose removal tombstones were dropped.
	OldRemovals []string
}

// restoreStaging prefixes the staging directory inside Dir.
const restoreStaging = ".restore-"

// Restore builds a new single-node cluster's state in cfg.Dir from a backup.
// It refuses a non-empty directory (ErrDirNotEmpty) and an invalid backup
// (ErrInvalidBackup), and leaves cfg.Dir as it found it when it fails.
func Restore(ctx context.Context, cfg RestoreConfig) (RestoreInfo, error) {
	if cfg.Dir == "" || cfg.NodeID == "" || cfg.RaftAdvertise == "" || cfg.From == nil {
		return RestoreInfo{}, errors.New("raftstore: Restore needs Dir, NodeID, RaftAdvertise and From")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	existed, err := checkEmptyDir(cfg.Dir)
	if err != nil {
		return RestoreInfo{}, err
	}
	if !existed {
		if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
			return RestoreInfo{}, fmt.Errorf("create data dir: %w", err)
		}
	}
	staging, err := os.MkdirTemp(cfg.Dir, restoreStaging)
	if err != nil {
		if !existed {
			_ = os.Remove(cfg.Dir)
		}
		return RestoreInfo{}, fmt.Errorf("create staging dir: %w", err)
	}
	info, err := buildRestore(ctx, cfg, staging)
	if err == nil {
		err = moveIntoPlace(staging, cfg.Dir)
	}
	if err != nil {
		// Leave Dir as we found it (moveIntoPlace fails before its first move
		// or not at all on one filesystem; see there).
		_ = os.RemoveAll(staging)
		if !existed {
			_ = os.RemoveAll(cfg.Dir)
		}
		return RestoreInfo{}, err
	}
	if err := os.Remove(staging); err != nil {
		return info, fmt.Errorf("remove staging dir: %w", err)
	}
	syncDir(cfg.Dir)
	cfg.Logger.Info("restored backup", "dir", cfg.Dir, "node", cfg.NodeID, "revision", info.Backup.Revision,
		"records", info.Backup.Records, "old_members", strings.Join(info.OldMembers, ","))
	return info, nil
}

// checkEmptyDir reports whether dir exists, and refuses one that holds
// anything but an empty lost+found (a fresh filesystem's root).
func checkEmptyDir(dir string) (bool, error) {
	st, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("data dir: %w", err)
	}
	if !st.IsDir() {
		return false, fmt.Errorf("data dir %s is not a directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("data dir: %w", err)
	}
	for _, e := range entries {
		if e.Name() == "lost+found" && e.IsDir() {
			if sub, err := os.ReadDir(filepath.Join(dir, e.Name())); err == nil && len(sub) == 0 {
				continue
			}
		}
		return true, fmt.Errorf("%w: %s holds %q; restore only into a new or empty directory", ErrDirNotEmpty, dir, e.Name())
	}
	return true, nil
}

// buildRestore writes tree/, snapshots/ and raft/ under staging.
func buildRestore(ctx context.Context, cfg RestoreConfig, staging string) (RestoreInfo, error) {
	var out RestoreInfo
	treeDir := filepath.Join(staging, "tree", treeDirName(0))
	if err := os.MkdirAll(filepath.Dir(treeDir), 0o750); err != nil {
		return out, fmt.Errorf("create tree dir: %w", err)
	}
	// A WriteBatch commits in transactions of megabytes: few syncs.
	db, err := openTreeDB(treeDir, cfg.Logger, true)
	if err != nil {
		return out, err
	}
	closed := false
	defer func() {
		if !closed {
			_ = db.Close()
		}
	}()

	wb := db.NewWriteBatch()
	n := 0
	info, err := ReadBackup(cfg.From, func(key, value []byte) error {
		if n++; n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("restore interrupted: %w", err)
			}
		}
		if err := wb.Set(key, value); err != nil {
			return fmt.Errorf("load %q: %w", key, err)
		}
		return nil
	})
	if err != nil {
		wb.Cancel()
		return out, err
	}
	if err := wb.Flush(); err != nil {
		return out, fmt.Errorf("load backup: %w", err)
	}
	out.Backup = info
	applied, err := readApplied(db)
	if err != nil {
		return out, err
	}
	if applied != info.Revision {
		return out, invalid("the header says revision %d, the data holds %d", info.Revision, applied)
	}
	if applied == 0 {
		return out, invalid("the backup holds no applied revision")
	}
	if err := ensureLogFloor(db); err != nil {
		return out, fmt.Errorf("change log floor: %w", err)
	}
	// The applied entry is now the new cluster's snapshot, of its first
	// term: the old cluster's term would make every entry after it look
	// older than the applied one (fsm.checkTerm).
	if err := db.Update(func(txn *badger.Txn) error { return putUint64(txn, keyAppliedTerm, restoreTerm) }); err != nil {
		return out, fmt.Errorf("set the applied term: %w", err)
	}
	if out.OldMembers, err = dropPrefix(db, NodeRecordPath("")); err != nil {
		return out, fmt.Errorf("drop old member records: %w", err)
	}
	if out.OldRemovals, err = dropPrefix(db, RemovedPath("")); err != nil {
		return out, fmt.Errorf("drop old removal records: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return out, fmt.Errorf("restore interrupted: %w", err)
	}

	if err := writeRestoreSnapshot(cfg, db, filepath.Join(staging, "snapshots"), applied); err != nil {
		return out, err
	}
	closed = true
	if err := db.Close(); err != nil {
		return out, fmt.Errorf("close tree db: %w", err)
	}

	logs, err := openWAL(filepath.Join(staging, walDirName), 0, cfg.Logger)
	if err != nil {
		return out, err
	}
	// As raft's own bootstrap does: the snapshot's term is current.
	err = logs.SetUint64([]byte("CurrentTerm"), restoreTerm)
	if cerr := logs.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return out, fmt.Errorf("write raft stable store: %w", err)
	}
	return out, nil
}

// restoreTerm is the term of the restored snapshot: the new cluster's first.
const restoreTerm = 1

// dropPrefix deletes the documents under the path prefix and returns what
// follows the prefix in their paths (node ids).
func dropPrefix(db *badger.DB, pathPrefix string) ([]string, error) {
	prefix := docKey(pathPrefix)
	var ids []string
	err := db.Update(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = prefix
		it := txn.NewIterator(opts)
		var keys [][]byte
		for it.Rewind(); it.Valid(); it.Next() {
			keys = append(keys, it.Item().KeyCopy(nil))
		}
		it.Close()
		for _, k := range keys {
			if err := txn.Delete(k); err != nil {
				return err
			}
			ids = append(ids, string(k[len(prefix):]))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// writeRestoreSnapshot writes the tree as a Raft snapshot at index with a
// configuration of this node alone, in the format fsm.Restore reads.
func writeRestoreSnapshot(cfg RestoreConfig, db *badger.DB, dir string, index uint64) error {
	hlog := hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn, Output: slogWriter{cfg.Logger.With("component", "raft")}})
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hlog)
	if err != nil {
		return fmt.Errorf("open snapshot store: %w", err)
	}
	addr := raft.ServerAddress(cfg.RaftAdvertise)
	conf := raft.Configuration{Servers: []raft.Server{{ID: raft.ServerID(cfg.NodeID), Address: addr, Suffrage: raft.Voter}}}
	// The transport only encodes the legacy peer list kept in the metadata.
	_, trans := raft.NewInmemTransport(addr)
	defer func() { _ = trans.Close() }()
	sink, err := snaps.Create(raft.SnapshotVersionMax, index, restoreTerm, conf, index, trans)
	if err != nil {
		return fmt.Errorf("create snapshot: %w", err)
	}
	if err := backupConsistent(db, sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("write snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("close snapshot: %w", err)
	}
	return nil
}

// moveIntoPlace renames the built state from staging into dir: snapshots
// first (alone, they are enough for Open to rebuild the tree), the tree,
// then the Raft stores. A failure of the first rename changes nothing; a
// later one is practically impossible (same directory, same filesystem).
func moveIntoPlace(staging, dir string) error {
	for _, name := range []string{"snapshots", "tree", walDirName} {
		if err := os.Rename(filepath.Join(staging, name), filepath.Join(dir, name)); err != nil {
			for _, undo := range []string{"snapshots", "tree", walDirName} {
				if undo == name {
					break
				}
				_ = os.Rename(filepath.Join(dir, undo), filepath.Join(staging, undo))
			}
			return fmt.Errorf("move %s into place: %w", name, err)
		}
	}
	return nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

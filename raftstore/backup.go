package raftstore

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// The backup file: what `edgebase backup` writes and `edgebase restore`
// reads. It is our own format rather than a raw Badger backup so that it
// says what it is (magic, version, revision, node, time), so that a
// truncated or damaged file is refused before anything is written, and so
// that its revision is exact: it is read in the same transaction as the data.
//
//	magic      "edgebase backup\n" (16 bytes)
//	version    1 byte (backupFormat)
//	header     uvarint length + JSON BackupInfo (revision, nodeId, createdAt)
//	records    'k' uvarint keyLen key uvarint valueLen value   (tree keys, in order)
//	end        'e' uvarint recordCount, then SHA-256 of every byte before it
//
// Nothing may follow the end record. The records are the live keys of the
// tree database (documents, metadata such as the applied index, the change
// log) as of one read transaction.

const (
	backupMagic  = "edgebase backup\n"
	backupFormat = 1

	recKey = 'k'
	recEnd = 'e'

	// Bounds that keep a damaged length from allocating without limit.
	maxBackupHeader = 64 << 10
	maxBackupKey    = 64 << 10
	maxBackupValue  = 64 << 20

	// backupChunk is how much a backup reads under one iterator before it
	// closes it and writes the chunk out: the read transaction stays open
	// (one consistent view) but no iterator pins memtables while a slow
	// client drains the stream.
	backupChunk = 1 << 20
)

// ErrInvalidBackup means a file is not a complete, intact edgebase backup.
var ErrInvalidBackup = errors.New("not a valid edgebase backup")

// BackupInfo describes a backup: its header, and what reading it found.
type BackupInfo struct {
	// Format is the file format version.
	Format int `json:"-"`
	// Revision is the applied index (the cluster revision) the backup holds.
	Revision uint64 `json:"revision"`
	// NodeID is the node that served the backup.
	NodeID string `json:"nodeId"`
	// CreatedAt is when the node began reading it.
	CreatedAt time.Time `json:"createdAt"`
	// Records is the number of tree keys in it.
	Records uint64 `json:"-"`
	// Bytes is the size of the whole file.
	Bytes int64 `json:"-"`
}

// writeBackup writes the whole tree database, as one read transaction sees
// it, to w. It takes no lock of the FSM: Apply goes on committing while the
// transaction's fixed read timestamp keeps the view consistent.
func writeBackup(ctx context.Context, db *badger.DB, nodeID string, now time.Time, w io.Writer) (BackupInfo, error) {
	txn := db.NewTransaction(false)
	defer txn.Discard()
	rev, _, err := readUint64(txn, keyApplied)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("read applied index: %w", err)
	}
	info := BackupInfo{Format: backupFormat, Revision: rev, NodeID: nodeID, CreatedAt: now.UTC()}
	hdr, err := json.Marshal(info)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("encode backup header: %w", err)
	}
	bw := &backupWriter{w: w, h: sha256.New()}
	var buf bytes.Buffer
	buf.WriteString(backupMagic)
	buf.WriteByte(backupFormat)
	buf.Write(binary.AppendUvarint(nil, uint64(len(hdr))))
	buf.Write(hdr)
	if err := bw.write(buf.Bytes()); err != nil {
		return BackupInfo{}, err
	}

	var next []byte // the first key of the next chunk; nil: start
	for {
		if err := ctx.Err(); err != nil {
			return BackupInfo{}, fmt.Errorf("backup interrupted: %w", err)
		}
		buf.Reset()
		next, err = readChunk(txn, next, &buf, &info.Records)
		if err != nil {
			return BackupInfo{}, err
		}
		if err := bw.write(buf.Bytes()); err != nil {
			return BackupInfo{}, err
		}
		if next == nil {
			break
		}
	}
	end := binary.AppendUvarint([]byte{recEnd}, info.Records)
	if err := bw.write(end); err != nil {
		return BackupInfo{}, err
	}
	if err := bw.write(bw.h.Sum(nil)); err != nil {
		return BackupInfo{}, err
	}
	info.Bytes = bw.n
	return info, nil
}

// readChunk encodes the records from `from` on into buf until it holds
// about backupChunk bytes, and returns the key to continue from (nil: done).
func readChunk(txn *badger.Txn, from []byte, buf *bytes.Buffer, records *uint64) ([]byte, error) {
	opts := badger.DefaultIteratorOptions
	opts.PrefetchSize = 64
	it := txn.NewIterator(opts)
	defer it.Close()
	if from == nil {
		it.Rewind()
	} else {
		it.Seek(from)
	}
	for ; it.Valid(); it.Next() {
		item := it.Item()
		if buf.Len() >= backupChunk {
			return item.KeyCopy(nil), nil
		}
		key := item.Key()
		err := item.Value(func(v []byte) error {
			buf.WriteByte(recKey)
			buf.Write(binary.AppendUvarint(nil, uint64(len(key))))
			buf.Write(key)
			buf.Write(binary.AppendUvarint(nil, uint64(len(v))))
			buf.Write(v)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read %q: %w", key, err)
		}
		*records++
	}
	return nil, nil
}

// backupWriter hashes and counts what it writes.
type backupWriter struct {
	w io.Writer
	h hash.Hash
	n int64
}

func (b *backupWriter) write(p []byte) error {
	b.h.Write(p)
	n, err := b.w.Write(p)
	b.n += int64(n)
	if err != nil {
		return fmt.Errorf("write backup: %w", err)
	}
	return nil
}

// backupReader reads a backup, hashing every byte it consumes (and no byte
// beyond), so that the end record's checksum can be compared exactly.
type backupReader struct {
	r       *bufio.Reader
	h       hash.Hash
	n       int64
	records uint64
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidBackup, fmt.Sprintf(format, a...))
}

// truncatedOr turns an early end of the stream into a clear "truncated".
func (b *backupReader) truncatedOr(err error, what string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return invalid("the file is truncated (it ends in the %s after %d bytes and %d records; a complete backup ends with an end record)", what, b.n, b.records)
	}
	return fmt.Errorf("read backup: %w", err)
}

func (b *backupReader) ReadByte() (byte, error) {
	c, err := b.r.ReadByte()
	if err != nil {
		return 0, err
	}
	b.h.Write([]byte{c})
	b.n++
	return c, nil
}

func (b *backupReader) full(p []byte) error {
	n, err := io.ReadFull(b.r, p)
	b.h.Write(p[:n])
	b.n += int64(n)
	return err
}

func (b *backupReader) uvarint(what string, limit uint64) (uint64, error) {
	v, err := binary.ReadUvarint(b)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, b.truncatedOr(err, what)
		}
		return 0, invalid("bad %s length at byte %d: %v", what, b.n, err)
	}
	if v > limit {
		return 0, invalid("%s length %d at byte %d is over the limit of %d", what, v, b.n, limit)
	}
	return v, nil
}

// ReadBackup reads and checks a whole backup from r, calling fn (when not
// nil) with every record in order; key and value are fresh slices that fn
// may keep. Any damage (wrong magic, unknown version, truncation, a bad
// checksum, trailing bytes) is an error wrapping ErrInvalidBackup. fn sees
// records before the checksum is checked, so a caller must discard what it
// built from them when ReadBackup fails.
func ReadBackup(r io.Reader, fn func(key, value []byte) error) (BackupInfo, error) {
	b := &backupReader{r: bufio.NewReaderSize(r, 1<<20), h: sha256.New()}
	magic := make([]byte, len(backupMagic))
	if err := b.full(magic); err != nil {
		if b.n == 0 && errors.Is(err, io.EOF) {
			return BackupInfo{}, invalid("the file is empty")
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return BackupInfo{}, invalid("the file is too short (%d bytes) to be a backup", b.n)
		}
		return BackupInfo{}, fmt.Errorf("read backup: %w", err)
	}
	if string(magic) != backupMagic {
		return BackupInfo{}, invalid("the file does not start with the edgebase backup marker")
	}
	ver, err := b.ReadByte()
	if err != nil {
		return BackupInfo{}, b.truncatedOr(err, "header")
	}
	if ver != backupFormat {
		return BackupInfo{}, invalid("format version %d is not supported (this edgebase reads version %d)", ver, backupFormat)
	}
	n, err := b.uvarint("header", maxBackupHeader)
	if err != nil {
		return BackupInfo{}, err
	}
	hdr := make([]byte, n)
	if err := b.full(hdr); err != nil {
		return BackupInfo{}, b.truncatedOr(err, "header")
	}
	var info BackupInfo
	if err := json.Unmarshal(hdr, &info); err != nil {
		return BackupInfo{}, invalid("bad header: %v", err)
	}
	info.Format = int(ver)
	for {
		tag, err := b.ReadByte()
		if err != nil {
			return BackupInfo{}, b.truncatedOr(err, "records")
		}
		switch tag {
		case recKey:
			kl, err := b.uvarint("key", maxBackupKey)
			if err != nil {
				return BackupInfo{}, err
			}
			if kl == 0 {
				return BackupInfo{}, invalid("empty key at byte %d", b.n)
			}
			key := make([]byte, kl)
			if err := b.full(key); err != nil {
				return BackupInfo{}, b.truncatedOr(err, "records")
			}
			vl, err := b.uvarint("value", maxBackupValue)
			if err != nil {
				return BackupInfo{}, err
			}
			val := make([]byte, vl)
			if err := b.full(val); err != nil {
				return BackupInfo{}, b.truncatedOr(err, "records")
			}
			b.records++
			if fn != nil {
				if err := fn(key, val); err != nil {
					return BackupInfo{}, err
				}
			}
		case recEnd:
			count, err := b.uvarint("end record", 1<<62)
			if err != nil {
				return BackupInfo{}, err
			}
			want := b.h.Sum(nil)
			got := make([]byte, len(want))
			if _, err := io.ReadFull(b.r, got); err != nil {
				return BackupInfo{}, b.truncatedOr(err, "checksum")
			}
			b.n += int64(len(got))
			if count != b.records {
				return BackupInfo{}, invalid("the end record counts %d records, the file holds %d", count, b.records)
			}
			if !bytes.Equal(got, want) {
				return BackupInfo{}, invalid("checksum mismatch: the file is damaged")
			}
			if _, err := b.r.ReadByte(); err == nil {
				return BackupInfo{}, invalid("unexpected bytes after the end record (at byte %d)", b.n)
			} else if !errors.Is(err, io.EOF) {
				return BackupInfo{}, fmt.Errorf("read backup: %w", err)
			}
			info.Records, info.Bytes = b.records, b.n
			return info, nil
		default:
			return BackupInfo{}, invalid("unknown record type %#x at byte %d", tag, b.n-1)
		}
	}
}

// VerifyBackup reads a whole backup and reports what it holds, or why it
// is not a valid one.
func VerifyBackup(r io.Reader) (BackupInfo, error) { return ReadBackup(r, nil) }

// BackupDir writes a backup of a STOPPED node's data directory: the
// disaster-recovery path when no quorum is left to serve `edgebase backup`
// but a node's disk survived. It holds the node's tree as of the last entry
// the node applied (a committed state; entries its Raft log held beyond it
// are not included) and refuses a directory whose tree is behind its newest
// snapshot (start the node once: it restores that snapshot at start). It
// opens the database as the node would, so it fails while the node runs.
func BackupDir(ctx context.Context, dir, nodeID string, now time.Time, w io.Writer) (BackupInfo, error) {
	base := filepath.Join(dir, "tree")
	b, err := os.ReadFile(filepath.Join(base, currentFile))
	gen := 0
	switch {
	case err == nil:
		if gen, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			return BackupInfo{}, fmt.Errorf("parse %s: %w", currentFile, err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return BackupInfo{}, fmt.Errorf("read %s: %w", currentFile, err)
	}
	treeDir := filepath.Join(base, treeDirName(gen))
	if _, err := os.Stat(treeDir); err != nil {
		return BackupInfo{}, fmt.Errorf("%s holds no edgebase data (no %s): %w", dir, treeDir, err)
	}
	db, err := openTreeDB(treeDir, slog.New(slog.NewTextHandler(io.Discard, nil)), true)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("%w (is the node still running?)", err)
	}
	defer func() { _ = db.Close() }()
	applied, err := readApplied(db)
	if err != nil {
		return BackupInfo{}, err
	}
	if snap := newestSnapshotIndex(filepath.Join(dir, "snapshots")); snap > applied {
		return BackupInfo{}, fmt.Errorf("the tree of %s (revision %d) is behind its newest snapshot (%d): start the node once, so that it restores the snapshot, stop it, and back up again", dir, applied, snap)
	}
	return writeBackup(ctx, db, nodeID, now, w)
}

// newestSnapshotIndex reads the index of the newest complete snapshot in
// raft's file snapshot store at dir (0: none), without opening the store
// (which would write into it).
func newestSnapshotIndex(dir string) uint64 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var newest uint64
	for _, e := range entries {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "meta.json"))
		if err != nil {
			continue
		}
		var meta struct{ Index uint64 }
		if json.Unmarshal(b, &meta) == nil && meta.Index > newest {
			newest = meta.Index
		}
	}
	return newest
}

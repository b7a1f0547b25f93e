//go:build unix

package raftstore

import (
	"os"
	"syscall"
)

// allocatedBytes is the disk space a file takes: Badger preallocates its
// value log and memtable files sparsely, so their length says little.
func allocatedBytes(info os.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return info.Size()
}

//go:build !unix

package raftstore

import "os"

// allocatedBytes is a file's length where the allocated size is unknown.
func allocatedBytes(info os.FileInfo) int64 { return info.Size() }

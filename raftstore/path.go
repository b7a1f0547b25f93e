package raftstore

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Path rules of the database area.
const (
	MaxPathBytes    = 1500
	MaxPathSegments = 100
)

// ValidatePath checks a document path as the client wrote it: 1..100
// non-empty segments, at most 1500 bytes, valid UTF-8, no "." or ".."
// segments, no control characters, and no segment starting with "_" (those
// are reserved for system state).
func ValidatePath(p string) error {
	if p == "" {
		return fmt.Errorf("collection is required")
	}
	if len(p) > MaxPathBytes {
		return fmt.Errorf("collection is longer than %d bytes", MaxPathBytes)
	}
	if !utf8.ValidString(p) {
		return fmt.Errorf("collection is not valid UTF-8")
	}
	segs := strings.Split(p, "/")
	if len(segs) > MaxPathSegments {
		return fmt.Errorf("collection has more than %d segments", MaxPathSegments)
	}
	for _, seg := range segs {
		switch {
		case seg == "":
			return fmt.Errorf("collection has an empty segment")
		case seg == "." || seg == "..":
			return fmt.Errorf("collection segments may not be %q", seg)
		case strings.HasPrefix(seg, "_"):
			return fmt.Errorf("collection segments starting with \"_\" are reserved")
		}
		for _, r := range seg {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
				return fmt.Errorf("collection contains a control character")
			}
		}
	}
	return nil
}

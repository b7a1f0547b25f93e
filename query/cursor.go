package query

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"hash"
)

const (
	cursorVersion = 1
	digestLen     = 8
)

// shapeDigest digests what a cursor is bound to: the collection, the scope,
// the filters (operands by their encoding, so 1 and 1.0 are one shape) and
// the order (with the implied one). limit, select, count and startAfter may
// change between pages.
func (c *Compiled) shapeDigest() [digestLen]byte {
	h := sha256.New()
	put := func(b []byte) {
		var n [binary.MaxVarintLen64]byte
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
		h.Write(b)
	}
	put([]byte("edgebase query shape 1"))
	put([]byte(c.Q.Collection))
	if c.Q.CollectionGroup {
		put([]byte{1})
	} else {
		put([]byte{0})
	}
	put([]byte{byte(len(c.filters))})
	for i, f := range c.filters {
		put([]byte(c.Q.Where[i].Field))
		put([]byte(f.op))
		put(appendEncoded(nil, f.val, false))
	}
	put([]byte{byte(len(c.orders))})
	for _, o := range c.orders {
		put([]byte(o.field))
		if o.desc {
			put([]byte{1})
		} else {
			put([]byte{0})
		}
	}
	return sum8(h)
}

func sum8(h hash.Hash) [digestLen]byte {
	var d [digestLen]byte
	copy(d[:], h.Sum(nil))
	return d
}

// Cursor is the opaque startAfter cursor that continues after the document
// whose SortKey is key. It carries a digest of the query's shape (collection,
// group, where, orderBy), so a cursor from another query is refused.
//
// It is base64url without padding of: a version byte (1), the first 8
// bytes of the SHA-256 of the shape, then key.
func (c *Compiled) Cursor(key []byte) string {
	b := make([]byte, 0, 1+digestLen+len(key))
	b = append(b, cursorVersion)
	b = append(b, c.digest[:]...)
	b = append(b, key...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// After is the SortKey the query's StartAfter cursor names (nil without one):
// results start strictly after it. A cursor that is not one this query
// issued is an *Error on field "startAfter", code "invalid_cursor": not
// base64url, another version or shape, or a key that is not the query's
// SortKey shape (its orderBy values, then a path).
func (c *Compiled) After() ([]byte, error) {
	if c.Q.StartAfter == "" {
		return nil, nil
	}
	bad := func(msg string) error {
		return &Error{Field: "startAfter", Code: CodeInvalidCursor, Message: msg}
	}
	b, err := base64.RawURLEncoding.DecodeString(c.Q.StartAfter)
	if err != nil || len(b) < 1+digestLen || b[0] != cursorVersion {
		return nil, bad("startAfter is not a cursor this service issued")
	}
	if !bytes.Equal(b[1:1+digestLen], c.digest[:]) {
		return nil, bad("startAfter is a cursor of another query (collection, filters and orderBy must stay the same between pages)")
	}
	key := b[1+digestLen:]
	if !c.wellFormed(key) {
		return nil, bad("startAfter is damaged")
	}
	return key, nil
}

// wellFormed reports whether key is made as SortKey makes them.
func (c *Compiled) wellFormed(key []byte) bool {
	for _, o := range c.sortBy {
		if len(key) > 0 && key[0] == tagMissing {
			key = key[1:]
			continue
		}
		n, ok := encodedLen(key, o.desc)
		if !ok {
			return false
		}
		key = key[n:]
	}
	n, ok := encodedLen(key, c.pathDesc)
	if !ok || n != len(key) {
		return false
	}
	first := key[0]
	if c.pathDesc {
		first = ^first
	}
	return first == tagString
}

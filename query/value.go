package query

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Type tags of the value encoding, in the value order. They start at 0x05
// so that 0x00 (the terminator of arrays and objects, and with 0x01 of
// strings) sorts before every value.
const (
	tagMissing = 0x04 // SortKey only: a field the document lacks (it did not Match)
	tagNull    = 0x05
	tagFalse   = 0x06
	tagTrue    = 0x07
	tagNumber  = 0x08
	tagString  = 0x09
	tagArray   = 0x0a
	tagObject  = 0x0b
	tagInvalid = 0x0c // not JSON: after every value, as Compare says
)

// Value classes: range filters match only values of the operand's class
// (false and true are one class, booleans).
const (
	classNull = iota
	classBool
	classNumber
	classString
	classArray
	classObject
	classInvalid
)

// decode parses one JSON value into nil, bool, json.Number, string, []any
// or map[string]any, as encoding/json with UseNumber would (the last of
// duplicate keys wins). ok is false when raw is not exactly one JSON value.
func decode(raw []byte) (v any, ok bool) { return parseJSON(raw, nil) }

// number is a JSON number as float64: beyond float64's range it is ±Inf
// (or 0), and -0 is 0, so that equal numbers encode alike.
func number(n json.Number) float64 {
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		var ne *strconv.NumError
		if !errors.As(err, &ne) || !errors.Is(ne.Err, strconv.ErrRange) {
			return 0 // not reached: the decoder only yields valid literals
		}
	}
	if f == 0 {
		return 0
	}
	return f
}

func class(v any) int {
	switch v.(type) {
	case nil:
		return classNull
	case bool:
		return classBool
	case json.Number:
		return classNumber
	case string:
		return classString
	case []any:
		return classArray
	case map[string]any:
		return classObject
	default:
		return classInvalid
	}
}

// rank is the position of v's type in the value order (false before true).
func rank(v any) int {
	switch v := v.(type) {
	case nil:
		return 0
	case bool:
		if v {
			return 2
		}
		return 1
	case json.Number:
		return 3
	case string:
		return 4
	case []any:
		return 5
	case map[string]any:
		return 6
	default:
		return 7
	}
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// compareValues orders two decoded values by the value order.
func compareValues(a, b any) int {
	ra, rb := rank(a), rank(b)
	if ra != rb {
		return cmpInt(ra, rb)
	}
	switch a := a.(type) {
	case json.Number:
		x, y := number(a), number(b.(json.Number))
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	case string:
		return strings.Compare(a, b.(string))
	case []any:
		bb := b.([]any)
		for i := 0; i < len(a) && i < len(bb); i++ {
			if c := compareValues(a[i], bb[i]); c != 0 {
				return c
			}
		}
		return cmpInt(len(a), len(bb))
	case map[string]any:
		bm := b.(map[string]any)
		ka, kb := sortedKeys(a), sortedKeys(bm)
		for i := 0; i < len(ka) && i < len(kb); i++ {
			if c := strings.Compare(ka[i], kb[i]); c != 0 {
				return c
			}
			if c := compareValues(a[ka[i]], bm[kb[i]]); c != 0 {
				return c
			}
		}
		return cmpInt(len(ka), len(kb))
	}
	return 0 // null, the same boolean, or both invalid
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// equal is equality by the value order (1 == 1.0, -0 == 0).
func equal(a, b any) bool { return compareValues(a, b) == 0 }

// appendEncoded appends the encoding of a decoded value, ascending or
// (desc) with every byte complemented.
func appendEncoded(dst []byte, v any, desc bool) []byte {
	start := len(dst)
	dst = appendAsc(dst, v)
	if desc {
		complementFrom(dst, start)
	}
	return dst
}

func complementFrom(b []byte, start int) {
	for i := start; i < len(b); i++ {
		b[i] = ^b[i]
	}
}

func appendAsc(dst []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(dst, tagNull)
	case bool:
		if v {
			return append(dst, tagTrue)
		}
		return append(dst, tagFalse)
	case json.Number:
		bits := math.Float64bits(number(v))
		if bits&(1<<63) == 0 {
			bits ^= 1 << 63 // positives after negatives
		} else {
			bits = ^bits // negatives: a larger magnitude first
		}
		dst = append(dst, tagNumber)
		return binary.BigEndian.AppendUint64(dst, bits)
	case string:
		return appendString(dst, v)
	case []any:
		dst = append(dst, tagArray)
		for _, e := range v {
			dst = appendAsc(dst, e)
		}
		return append(dst, 0)
	case map[string]any:
		dst = append(dst, tagObject)
		for _, k := range sortedKeys(v) {
			dst = appendString(dst, k)
			dst = appendAsc(dst, v[k])
		}
		return append(dst, 0)
	}
	return append(dst, tagInvalid)
}

// appendString encodes a string: its tag, its bytes with 0x00 escaped as
// 0x00 0xFF, then 0x00 0x01. A prefix thus sorts first, and no encoding is
// a prefix of another's.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, tagString)
	for {
		i := strings.IndexByte(s, 0)
		if i < 0 {
			break
		}
		dst = append(dst, s[:i]...)
		dst = append(dst, 0, 0xff)
		s = s[i+1:]
	}
	dst = append(dst, s...)
	return append(dst, 0, 1)
}

// encodedLen is the length of the one encoded value (ascending, or desc)
// at the start of b, and whether b starts with a well-formed one.
func encodedLen(b []byte, desc bool) (int, bool) {
	at := func(i int) byte {
		if desc {
			return ^b[i]
		}
		return b[i]
	}
	var walk func(i, depth int) (int, bool)
	walk = func(i, depth int) (int, bool) {
		if i >= len(b) || depth > maxDepth {
			return 0, false
		}
		switch at(i) {
		case tagNull, tagFalse, tagTrue, tagInvalid:
			return i + 1, true
		case tagNumber:
			if i+9 > len(b) {
				return 0, false
			}
			return i + 9, true
		case tagString:
			for j := i + 1; j+1 < len(b); j++ {
				if at(j) != 0 {
					continue
				}
				switch at(j + 1) {
				case 1:
					return j + 2, true
				case 0xff:
					j++
				default:
					return 0, false
				}
			}
			return 0, false
		case tagArray, tagObject:
			obj := at(i) == tagObject
			j := i + 1
			for j < len(b) && at(j) != 0 {
				var ok bool
				if obj {
					if at(j) != tagString {
						return 0, false
					}
					if j, ok = walk(j, depth+1); !ok {
						return 0, false
					}
				}
				if j, ok = walk(j, depth+1); !ok {
					return 0, false
				}
			}
			if j >= len(b) {
				return 0, false
			}
			return j + 1, true
		}
		return 0, false
	}
	return walk(0, 0)
}

// maxDepth bounds the nesting encodedLen follows (a cursor is client input).
const maxDepth = 1000

// Compare orders two JSON values by the value order (see the package doc).
// Invalid JSON sorts after everything.
func Compare(a, b json.RawMessage) int {
	va, okA := decode(a)
	vb, okB := decode(b)
	switch {
	case !okA && !okB:
		return 0
	case !okA:
		return 1
	case !okB:
		return -1
	}
	return compareValues(va, vb)
}

// AppendValue appends the order-preserving encoding of one JSON value to dst:
// for any a, b, bytes.Compare(AppendValue(nil,a,false), AppendValue(nil,b,false))
// == Compare(a, b), and the encoding never has one value's bytes be a prefix
// of a different value's (so a key can go on after it). desc inverts the
// encoding (every byte complemented) so that it orders descending.
//
// The encoding: one tag byte per type (0x05 null, 0x06 false, 0x07 true,
// 0x08 number, 0x09 string, 0x0a array, 0x0b object, 0x0c not JSON); a
// number then has its float64 bits, big-endian, with the sign bit flipped
// (positives) or every bit flipped (negatives); a string its bytes, 0x00
// escaped as 0x00 0xFF, and 0x00 0x01; an array its elements and 0x00; an
// object its members in key order, each the key (as a string) then the
// value, and 0x00.
func AppendValue(dst []byte, v json.RawMessage, desc bool) []byte {
	d, ok := decode(v)
	if !ok {
		start := len(dst)
		dst = append(dst, tagInvalid)
		if desc {
			complementFrom(dst, start)
		}
		return dst
	}
	return appendEncoded(dst, d, desc)
}

// Lookup returns the value at a dotted field path of a JSON object, and
// whether it is present. Each segment is a member name: a member whose name
// contains a dot cannot be looked up, and an array is not entered.
func Lookup(data json.RawMessage, field string) (json.RawMessage, bool) {
	cur := data
	for seg := range strings.SplitSeq(field, ".") {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(cur, &m); err != nil || m == nil {
			return nil, false
		}
		v, ok := m[seg]
		if !ok {
			return nil, false
		}
		cur = v
	}
	return cur, true
}

// lookup is Lookup on a decoded value, with the path already split.
func lookup(v any, path []string) (any, bool) {
	for _, seg := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[seg]; !ok {
			return nil, false
		}
	}
	return v, true
}

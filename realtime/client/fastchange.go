package client

import (
	"bytes"
	"strconv"
)

// decodeChange decodes a change message in the exact shape the server
// writes it — {"op":"change","id":"…","revision":N,"collection":"…",
// "type":"…","data":…,"updateTime":"…"} with no escapes in the strings —
// without reflection: at 10,000 subscriptions in one process a generic
// json.Unmarshal (which scans the message twice) is most of the client's
// CPU. Anything else (another op, another field order, an escape, a value
// it cannot delimit) answers false and the caller decodes with
// encoding/json. b is not retained.
func decodeChange(b []byte, f *frame) bool {
	p := fastParser{b: b}
	var ok bool
	if !p.lit(`{"op":"change","id":`) {
		return false
	}
	if f.ID, ok = p.str(); !ok || !p.lit(`,"revision":`) {
		return false
	}
	if f.Revision, ok = p.uint(); !ok || !p.lit(`,"collection":`) {
		return false
	}
	if f.Collection, ok = p.str(); !ok || !p.lit(`,"type":`) {
		return false
	}
	if f.Type, ok = p.str(); !ok || !p.lit(`,"data":`) {
		return false
	}
	start := p.i
	if !p.skipValue(0) {
		return false
	}
	data := b[start:p.i]
	if !p.lit(`,"updateTime":`) {
		if !p.lit(`}`) || p.i != len(b) || string(data) != "null" {
			return false
		}
		f.Op, f.Data = opChange, nil
		return true
	}
	if f.UpdateTime, ok = p.str(); !ok || !p.lit(`}`) || p.i != len(b) {
		return false
	}
	f.Op = opChange
	if string(data) == "null" {
		f.Data = nil
	} else {
		f.Data = bytes.Clone(data)
	}
	return true
}

type fastParser struct {
	b []byte
	i int
}

func (p *fastParser) lit(s string) bool {
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

// str reads a JSON string without escapes or control characters.
func (p *fastParser) str() (string, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return "", false
	}
	for j := p.i + 1; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			s := string(p.b[p.i+1 : j])
			p.i = j + 1
			return s, true
		case c == '\\' || c < 0x20:
			return "", false
		}
	}
	return "", false
}

func (p *fastParser) uint() (uint64, bool) {
	j := p.i
	for j < len(p.b) && p.b[j] >= '0' && p.b[j] <= '9' {
		j++
	}
	if j == p.i || j-p.i > 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(p.b[p.i:j]), 10, 64)
	if err != nil {
		return 0, false
	}
	p.i = j
	return n, true
}

// skipValue moves past one JSON value: objects and arrays by their
// brackets (strings inside skipped whole, escapes included), scalars up to
// the next delimiter. It delimits; it does not validate what it skips
// beyond that.
func (p *fastParser) skipValue(depth int) bool {
	if depth > 64 || p.i >= len(p.b) {
		return false
	}
	switch c := p.b[p.i]; c {
	case '"':
		return p.skipString()
	case '{', '[':
		closing := byte('}')
		if c == '[' {
			closing = ']'
		}
		p.i++
		for {
			if p.i >= len(p.b) {
				return false
			}
			switch p.b[p.i] {
			case closing:
				p.i++
				return true
			case ',', ':', ' ', '\t', '\n', '\r':
				p.i++
			default:
				if !p.skipValue(depth + 1) {
					return false
				}
			}
		}
	default:
		j := p.i
		for j < len(p.b) {
			switch p.b[j] {
			case ',', '}', ']', ':', ' ', '\t', '\n', '\r', '"', '{', '[':
				goto end
			}
			j++
		}
	end:
		if j == p.i {
			return false
		}
		p.i = j
		return true
	}
}

func (p *fastParser) skipString() bool {
	for j := p.i + 1; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '\\':
			j++
		case c == '"':
			p.i = j + 1
			return true
		case c < 0x20:
			return false
		}
	}
	return false
}

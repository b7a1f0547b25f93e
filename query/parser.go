package query

import (
	"encoding/json"
	"unicode/utf8"
)

// The decoder of documents. A query judges many documents and reads a few
// fields of each: this parser validates the whole document (as
// encoding/json would) but builds only the members a query needs, and
// builds them as encoding/json with UseNumber does (nil, bool, json.Number,
// string, []any, map[string]any; the last of duplicate keys wins; strings
// decoded alike, invalid UTF-8 and lone surrogates as U+FFFD).

// need is the part of a JSON object to build: whole, or only the members in
// sub (each with its own need). A nil *need is whole.
type need struct {
	whole bool
	sub   map[string]*need
}

// add records that the value at path (split) is needed.
func (n *need) add(path []string) {
	for _, seg := range path {
		if n.whole {
			return
		}
		if n.sub == nil {
			n.sub = map[string]*need{}
		}
		next := n.sub[seg]
		if next == nil {
			next = &need{}
			n.sub[seg] = next
		}
		n = next
	}
	n.whole, n.sub = true, nil
}

func needOf(paths ...[]string) *need {
	n := &need{}
	for _, p := range paths {
		n.add(p)
	}
	return n
}

// maxNesting is encoding/json's bound on nesting, kept so that both accept
// the same documents.
const maxNesting = 10000

type parser struct {
	b     []byte
	i     int
	depth int
}

// parseJSON decodes exactly one JSON value (with surrounding whitespace),
// building of objects only what n asks for (nil: everything).
func parseJSON(b []byte, n *need) (any, bool) {
	p := parser{b: b}
	p.ws()
	v, ok := p.value(n, true)
	if !ok {
		return nil, false
	}
	p.ws()
	return v, p.i == len(p.b)
}

func (p *parser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) lit(s string) bool {
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

// value parses the value at p.i; without build it only validates.
func (p *parser) value(n *need, build bool) (any, bool) {
	if p.i >= len(p.b) {
		return nil, false
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(n, build)
	case c == '[':
		return p.array(build)
	case c == '"':
		return p.str(build)
	case c == 't':
		return true, p.lit("true")
	case c == 'f':
		return false, p.lit("false")
	case c == 'n':
		return nil, p.lit("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number(build)
	}
	return nil, false
}

func (p *parser) enter() bool {
	p.depth++
	return p.depth <= maxNesting
}

func (p *parser) object(n *need, build bool) (any, bool) {
	if !p.enter() {
		return nil, false
	}
	defer func() { p.depth-- }()
	p.i++ // {
	var m map[string]any
	if build {
		m = map[string]any{}
	}
	if n != nil && n.whole {
		n = nil
	}
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return m, true
	}
	for {
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return nil, false
		}
		kstart := p.i
		simple, ok := p.scanString()
		if !ok {
			return nil, false
		}
		rawKey := p.b[kstart+1 : p.i-1]
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, false
		}
		p.i++
		p.ws()
		var child *need
		wanted := build
		if build && n != nil {
			if simple {
				child, wanted = n.sub[string(rawKey)] // no allocation
			} else {
				key, ok := unquote(p.b[kstart:kstart+len(rawKey)+2], simple)
				if !ok {
					return nil, false
				}
				child, wanted = n.sub[key]
			}
		}
		v, ok := p.value(child, wanted)
		if !ok {
			return nil, false
		}
		if wanted {
			key, ok := unquote(p.b[kstart:kstart+len(rawKey)+2], simple)
			if !ok {
				return nil, false
			}
			m[key] = v
		}
		p.ws()
		if p.i >= len(p.b) {
			return nil, false
		}
		switch p.b[p.i] {
		case ',':
			p.i++
			p.ws()
		case '}':
			p.i++
			return m, true
		default:
			return nil, false
		}
	}
}

func (p *parser) array(build bool) (any, bool) {
	if !p.enter() {
		return nil, false
	}
	defer func() { p.depth-- }()
	p.i++ // [
	var a []any
	if build {
		a = []any{}
	}
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return a, true
	}
	for {
		v, ok := p.value(nil, build)
		if !ok {
			return nil, false
		}
		if build {
			a = append(a, v)
		}
		p.ws()
		if p.i >= len(p.b) {
			return nil, false
		}
		switch p.b[p.i] {
		case ',':
			p.i++
			p.ws()
		case ']':
			p.i++
			return a, true
		default:
			return nil, false
		}
	}
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// str parses a string; its value is decoded as encoding/json does.
func (p *parser) str(build bool) (any, bool) {
	start := p.i
	simple, ok := p.scanString()
	if !ok || !build {
		return nil, ok
	}
	s, ok := unquote(p.b[start:p.i], simple)
	if !ok {
		return nil, false
	}
	return s, true
}

// unquote decodes a scanned string token (quotes included): directly
// when it has no escape and is valid UTF-8, else by encoding/json (which
// turns invalid UTF-8 and lone surrogates into U+FFFD).
func unquote(tok []byte, simple bool) (string, bool) {
	raw := tok[1 : len(tok)-1]
	if simple && utf8.Valid(raw) {
		return string(raw), true
	}
	var s string
	if err := json.Unmarshal(tok, &s); err != nil {
		return "", false
	}
	return s, true
}

// scanString validates the string token at p.i and moves past it; simple
// is whether it has no escape.
func (p *parser) scanString() (simple, ok bool) {
	p.i++ // "
	simple = true
	for {
		if p.i >= len(p.b) {
			return false, false
		}
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return simple, true
		case c == '\\':
			simple = false
			if p.i+1 >= len(p.b) {
				return false, false
			}
			switch p.b[p.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i += 2
			case 'u':
				if p.i+6 > len(p.b) {
					return false, false
				}
				for _, h := range p.b[p.i+2 : p.i+6] {
					if !isHex(h) {
						return false, false
					}
				}
				p.i += 6
			default:
				return false, false
			}
		case c < 0x20:
			return false, false
		default:
			p.i++
		}
	}
}

func (p *parser) digits() int {
	n := 0
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
		n++
	}
	return n
}

// number parses a number by JSON's grammar.
func (p *parser) number(build bool) (any, bool) {
	start := p.i
	if p.b[p.i] == '-' {
		p.i++
	}
	if p.i >= len(p.b) {
		return nil, false
	}
	if p.b[p.i] == '0' {
		p.i++
	} else if p.digits() == 0 {
		return nil, false
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if p.digits() == 0 {
			return nil, false
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if p.digits() == 0 {
			return nil, false
		}
	}
	if !build {
		return nil, true
	}
	return json.Number(p.b[start:p.i]), true
}

// memberNames are the member names of the JSON object b, in order and with
// repeats; ok is false when b is not a JSON object.
func memberNames(b []byte) (names []string, ok bool) {
	p := parser{b: b}
	p.ws()
	if p.i >= len(p.b) || p.b[p.i] != '{' {
		return nil, false
	}
	p.i++
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		p.ws()
		return names, p.i == len(p.b)
	}
	for {
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return nil, false
		}
		start := p.i
		simple, ok := p.scanString()
		if !ok {
			return nil, false
		}
		name, ok := unquote(p.b[start:p.i], simple)
		if !ok {
			return nil, false
		}
		names = append(names, name)
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, false
		}
		p.i++
		p.ws()
		if _, ok := p.value(nil, false); !ok {
			return nil, false
		}
		p.ws()
		if p.i >= len(p.b) {
			return nil, false
		}
		switch p.b[p.i] {
		case ',':
			p.i++
			p.ws()
		case '}':
			p.i++
			p.ws()
			return names, p.i == len(p.b)
		default:
			return nil, false
		}
	}
}

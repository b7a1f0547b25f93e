package raftstore

// JSONDepth is how deeply JSON b nests objects and arrays (0 for a
// scalar), counted without decoding it, so that input too deep to decode
// safely is refused before a decoder recurses into it. Malformed JSON is
// counted as far as it goes; its decoder reports it.
func JSONDepth(b []byte) int {
	d, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range b {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			if d++; d > deepest {
				deepest = d
			}
		case '}', ']':
			d--
		}
	}
	return deepest
}

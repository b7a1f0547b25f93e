package auth

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestNewToken(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"", "ebs_", "ebk_live_"} {
		seen := make(map[string]bool)
		for range 1000 {
			tok, err := NewToken(prefix)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(tok, prefix) {
				t.Fatalf("token %q lacks prefix %q", tok, prefix)
			}
			body := tok[len(prefix):]
			if len(body) != 43 {
				t.Fatalf("token body %q has %d chars, want 43 (32 bytes unpadded base64url)", body, len(body))
			}
			if i := strings.IndexFunc(body, func(r rune) bool {
				return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
			}); i >= 0 {
				t.Fatalf("token body %q has non-base64url char at %d", body, i)
			}
			raw, err := base64.RawURLEncoding.DecodeString(body)
			if err != nil || len(raw) != 32 {
				t.Fatalf("token body %q decodes to %d bytes, %v; want 32", body, len(raw), err)
			}
			if seen[tok] {
				t.Fatalf("duplicate token %q", tok)
			}
			seen[tok] = true
		}
	}
}

func TestHashToken(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	} {
		if got := HashToken(tc.in); got != tc.want {
			t.Errorf("HashToken(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	if HashToken("ebs_a") == HashToken("ebs_b") {
		t.Error("different tokens hash alike")
	}
}

func TestEqualHash(t *testing.T) {
	t.Parallel()
	h := HashToken("tok")
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{h, h, true},
		{h, HashToken("tok"), true},
		{h, HashToken("tok2"), false},
		{h, h[:63], false},
		{h, h + "0", false},
		{h, strings.ToUpper(h), false},
		{"", "", true},
		{h, "", false},
	} {
		if got := EqualHash(tc.a, tc.b); got != tc.want {
			t.Errorf("EqualHash(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestNewID(t *testing.T) {
	t.Parallel()
	seen := make(map[string]bool)
	var used [256]bool
	for range 10000 {
		id, err := NewID()
		if err != nil {
			t.Fatal(err)
		}
		if len(id) != 20 {
			t.Fatalf("NewID() = %q, %d chars, want 20", id, len(id))
		}
		for i := 0; i < len(id); i++ {
			c := id[i]
			if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
				t.Fatalf("NewID() = %q has %q, not lowercase base32", id, c)
			}
			used[c] = true
		}
		if id[0] == '_' {
			t.Fatalf("NewID() = %q starts with _", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
	}
	// 200,000 characters drawn: every one of the 32 symbols must appear.
	for _, c := range []byte(idAlphabet) {
		if !used[c] {
			t.Errorf("symbol %q never produced: biased alphabet mapping", c)
		}
	}
}

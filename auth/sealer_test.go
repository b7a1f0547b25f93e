package auth

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"regexp"
	"strings"
	"testing"
)

// testKey returns a 32-byte key whose bytes start at first.
func testKey(first byte) []byte {
	k := make([]byte, SecretKeyLen)
	for i := range k {
		k[i] = first + byte(i)
	}
	return k
}

func mustSealer(t *testing.T, key []byte) *Sealer {
	t.Helper()
	s, err := NewSealer(key)
	if err != nil {
		t.Fatalf("NewSealer: %v", err)
	}
	return s
}

var sealedRE = regexp.MustCompile(`^v1\.([0-9a-f]{8})\.([A-Za-z0-9_-]+)$`)

// sealedParts splits a sealed value into its key id and raw nonce||ct||tag.
func sealedParts(t *testing.T, sealed string) (string, []byte) {
	t.Helper()
	m := sealedRE.FindStringSubmatch(sealed)
	if m == nil {
		t.Fatalf("sealed value %q is not v1.<8 hex>.<base64url>", sealed)
	}
	raw, err := base64.RawURLEncoding.DecodeString(m[2])
	if err != nil {
		t.Fatalf("sealed body of %q: %v", sealed, err)
	}
	return m[1], raw
}

func TestSealOpenRoundTrip(t *testing.T) {
	t.Parallel()
	s := mustSealer(t, testKey(0))
	aad := []byte("totp\x00proj\x00user")
	for _, pt := range []string{"", "x", "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP", strings.Repeat("secret ", 100)} {
		sealed, err := s.Seal([]byte(pt), aad)
		if err != nil {
			t.Fatalf("Seal(%q): %v", pt, err)
		}
		if len(pt) >= 8 && strings.Contains(sealed, pt) {
			t.Fatalf("sealed value %q shows the plaintext", sealed)
		}
		_, raw := sealedParts(t, sealed)
		if want := 12 + len(pt) + 16; len(raw) != want {
			t.Fatalf("sealed %d-byte plaintext into %d bytes, want nonce+ct+tag = %d", len(pt), len(raw), want)
		}
		got, err := s.Open(sealed, aad)
		if err != nil {
			t.Fatalf("Open(Seal(%q)): %v", pt, err)
		}
		if string(got) != pt {
			t.Fatalf("Open(Seal(%q)) = %q", pt, got)
		}
		// Every node of a cluster builds its own Sealer from the same key: they
		// must open each other's values.
		got, err = mustSealer(t, testKey(0)).Open(sealed, aad)
		if err != nil || string(got) != pt {
			t.Fatalf("a second sealer over the same key: %q, %v", got, err)
		}
	}
}

func TestOpenWithOtherAADFails(t *testing.T) {
	t.Parallel()
	s := mustSealer(t, testKey(0))
	sealed, err := s.Seal([]byte("JBSWY3DPEHPK3PXP"), []byte("totp\x00p1\x00u1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, aad := range []string{"totp\x00p1\x00u2", "totp\x00p2\x00u1", "", "totp\x00p1\x00u1\x00", "totp\x00p1\x00u"} {
		pt, err := s.Open(sealed, []byte(aad))
		if !errors.Is(err, ErrSealedCorrupt) {
			t.Fatalf("Open with aad %q = %q, %v; want ErrSealedCorrupt", aad, pt, err)
		}
	}
}

func TestOpenUnderOtherKeyNamesBothKeyIDs(t *testing.T) {
	t.Parallel()
	a, b := mustSealer(t, testKey(0)), mustSealer(t, testKey(100))
	aad := []byte("totp\x00p\x00u")
	sa, err := a.Seal([]byte("secret"), aad)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.Seal([]byte("secret"), aad)
	if err != nil {
		t.Fatal(err)
	}
	idA, _ := sealedParts(t, sa)
	idB, _ := sealedParts(t, sb)
	if idA == idB {
		t.Fatalf("two keys share the key id %s", idA)
	}
	if strings.Contains(hex.EncodeToString(testKey(0)), idA) {
		t.Fatalf("key id %s is a piece of the key itself", idA)
	}
	_, err = b.Open(sa, aad)
	if !errors.Is(err, ErrSealedCorrupt) {
		t.Fatalf("open under another key: %v, want ErrSealedCorrupt", err)
	}
	if msg := err.Error(); !strings.Contains(msg, idA) || !strings.Contains(msg, idB) {
		t.Fatalf("error %q should name the value's key id %s and this node's %s", msg, idA, idB)
	}
	// The key id is stable for a key.
	sa2, err := mustSealer(t, testKey(0)).Seal([]byte("other"), aad)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := sealedParts(t, sa2); id != idA {
		t.Fatalf("same key, key ids %s and %s", idA, id)
	}
}

// TestOpenRefusesEverySingleByteChange changes each byte of a sealed TOTP
// seed (32 base32 characters, as enrollment makes) to every other byte
// value: no change may open, whether it hits the prefix, the key id, the
// separator, the nonce, the ciphertext or the tag.
func TestOpenRefusesEverySingleByteChange(t *testing.T) {
	t.Parallel()
	s := mustSealer(t, testKey(7))
	aad := []byte("totp\x00p\x00u")
	sealed := checkEveryByteChange(t, s, "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP", aad)
	// Truncations and extensions fail too.
	for _, bad := range []string{sealed[:len(sealed)-1], sealed + "A", sealed[:len(sealed)-22], "v1." + strings.SplitN(sealed, ".", 3)[1] + ".",
		"v1.", "v2" + sealed[2:], "", strings.TrimPrefix(sealed, "v1."), sealed + "="} {
		if _, err := s.Open(bad, aad); !errors.Is(err, ErrSealedCorrupt) {
			t.Fatalf("Open(%q) = %v, want ErrSealedCorrupt", bad, err)
		}
	}
}

// TestOpenRefusesNonCanonicalBase64 does the same for plaintexts whose
// sealed form ends in a base64 character with 2 or 4 unused bits: changing
// those bits must not give a second string that opens.
func TestOpenRefusesNonCanonicalBase64(t *testing.T) {
	t.Parallel()
	s := mustSealer(t, testKey(7))
	aad := []byte("totp\x00p\x00u")
	for _, pt := range []string{"JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PX", "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3P"} {
		checkEveryByteChange(t, s, pt, aad)
	}
	// Line breaks are no part of the format either (Go's base64 decoders
	// skip CR and LF, even in Strict mode).
	sealed, err := s.Seal([]byte("JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"), aad)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{sealed + "\n", sealed[:20] + "\r\n" + sealed[20:]} {
		if _, err := s.Open(bad, aad); !errors.Is(err, ErrSealedCorrupt) {
			t.Errorf("Open(%q) = %v, want ErrSealedCorrupt", bad, err)
		}
	}
}

// checkEveryByteChange seals pt and checks that no single-byte change of the
// sealed text opens; it returns the sealed text.
func checkEveryByteChange(t *testing.T, s *Sealer, pt string, aad []byte) string {
	t.Helper()
	sealed, err := s.Seal([]byte(pt), aad)
	if err != nil {
		t.Fatal(err)
	}
	opened := 0
	for i := 0; i < len(sealed); i++ {
		for v := 0; v < 256; v++ {
			if byte(v) == sealed[i] {
				continue
			}
			bad := []byte(sealed)
			bad[i] = byte(v)
			got, err := s.Open(string(bad), aad)
			if err == nil {
				opened++
				if opened <= 3 {
					t.Errorf("plaintext of %d bytes: byte %d of %q changed to %q still opens (to %q)", len(pt), i, sealed, string(rune(v)), got)
				}
				continue
			}
			if !errors.Is(err, ErrSealedCorrupt) {
				t.Fatalf("byte %d changed: error %v, want ErrSealedCorrupt", i, err)
			}
		}
	}
	if opened > 0 {
		t.Errorf("plaintext of %d bytes: %d single-byte changes of the sealed text still open", len(pt), opened)
	}
	return sealed
}

func TestSealUsesFreshNonces(t *testing.T) {
	t.Parallel()
	s := mustSealer(t, testKey(0))
	aad := []byte("a")
	seen := map[string]bool{}
	nonces := map[string]bool{}
	for i := 0; i < 100; i++ {
		sealed, err := s.Seal([]byte("same plaintext"), aad)
		if err != nil {
			t.Fatal(err)
		}
		if seen[sealed] {
			t.Fatalf("two seals of the same plaintext gave the same value %q", sealed)
		}
		seen[sealed] = true
		_, raw := sealedParts(t, sealed)
		n := string(raw[:12])
		if nonces[n] {
			t.Fatalf("nonce %x used twice", n)
		}
		nonces[n] = true
	}
}

func TestParseSecretKey(t *testing.T) {
	t.Parallel()
	key := testKey(0xd0) // bytes that make base64 use + and / (or - and _)
	hexKey := hex.EncodeToString(key)
	good := map[string]string{
		"hex":                      hexKey,
		"upper hex":                strings.ToUpper(hexKey),
		"hex with newline":         hexKey + "\n",
		"hex with crlf and spaces": "  " + hexKey + " \r\n",
		"std base64 padded":        base64.StdEncoding.EncodeToString(key),
		"std base64 unpadded":      base64.RawStdEncoding.EncodeToString(key),
		"url base64 padded":        base64.URLEncoding.EncodeToString(key),
		"url base64 unpadded":      base64.RawURLEncoding.EncodeToString(key),
		"std base64 with newline":  base64.StdEncoding.EncodeToString(key) + "\n",
		"url base64 with newline":  base64.RawURLEncoding.EncodeToString(key) + "\n",
	}
	if b64 := base64.StdEncoding.EncodeToString(key); !strings.ContainsAny(b64, "+/") {
		t.Fatalf("test key %s does not exercise the base64 alphabets", b64)
	}
	for name, in := range good {
		got, err := ParseSecretKey(in)
		if err != nil {
			t.Errorf("%s: ParseSecretKey(%q): %v", name, in, err)
			continue
		}
		if !bytes.Equal(got, key) {
			t.Errorf("%s: ParseSecretKey(%q) = %x, want %x", name, in, got, key)
		}
	}

	k31, k33 := key[:31], append(append([]byte{}, key...), 1)
	bad := map[string]string{
		"empty":              "",
		"spaces":             "   \n",
		"hex of 31 bytes":    hex.EncodeToString(k31),
		"hex of 33 bytes":    hex.EncodeToString(k33),
		"base64 of 31 bytes": base64.StdEncoding.EncodeToString(k31),
		"base64 of 33 bytes": base64.StdEncoding.EncodeToString(k33),
		"url b64 31 bytes":   base64.RawURLEncoding.EncodeToString(k31),
		"url b64 33 bytes":   base64.RawURLEncoding.EncodeToString(k33),
		"64 chars not hex":   strings.Repeat("zz", 32),
		"garbage":            "correct horse battery staple",
		"hex with inner sp":  hexKey[:32] + " " + hexKey[32:],
		"hex with 0x":        "0x" + hexKey,
		"passphrase":         "my secret key",
	}
	for name, in := range bad {
		if got, err := ParseSecretKey(in); err == nil {
			t.Errorf("%s: ParseSecretKey(%q) = %x, want an error", name, in, got)
		} else if !strings.Contains(err.Error(), "32 bytes") {
			t.Errorf("%s: error %q does not say what a key must be", name, err)
		}
	}
}

func TestNewSecretKeyParses(t *testing.T) {
	t.Parallel()
	a, err := NewSecretKey()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewSecretKey()
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatalf("NewSecretKey returned %s twice", a)
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(a) {
		t.Fatalf("NewSecretKey = %q, want 64 hex digits", a)
	}
	raw, err := ParseSecretKey(a)
	if err != nil {
		t.Fatalf("ParseSecretKey(NewSecretKey()): %v", err)
	}
	if _, err := NewSealer(raw); err != nil {
		t.Fatalf("NewSealer over a new key: %v", err)
	}
}

func TestNewSealerKeyLength(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 16, 24, 31, 33, 64} {
		if s, err := NewSealer(make([]byte, n)); err == nil || s != nil {
			t.Errorf("NewSealer(%d bytes) = %v, %v; want an error", n, s, err)
		}
	}
}

func TestNilSealer(t *testing.T) {
	t.Parallel()
	var s *Sealer
	if v, err := s.Seal([]byte("x"), nil); !errors.Is(err, ErrNoSecretKey) || v != "" {
		t.Fatalf("nil Seal = %q, %v; want ErrNoSecretKey", v, err)
	}
	sealed, err := mustSealer(t, testKey(0)).Seal([]byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.Open(sealed, nil); !errors.Is(err, ErrNoSecretKey) || v != nil {
		t.Fatalf("nil Open = %q, %v; want ErrNoSecretKey", v, err)
	}
	if errors.Is(ErrNoSecretKey, ErrSealedCorrupt) || errors.Is(ErrSealedCorrupt, ErrNoSecretKey) {
		t.Fatal("ErrNoSecretKey and ErrSealedCorrupt must be distinguishable")
	}
}

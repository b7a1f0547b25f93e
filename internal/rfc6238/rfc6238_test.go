package rfc6238

import (
	"encoding/base32"
	"strings"
	"testing"
	"time"
)

// Seeds from RFC 6238 Appendix A/B: the key length matches the hash output.
var seeds = map[Hash][]byte{
	SHA1:   []byte("12345678901234567890"),
	SHA256: []byte("12345678901234567890123456789012"),
	SHA512: []byte("1234567890123456789012345678901234567890123456789012345678901234"),
}

// TestRFC6238AppendixB checks every row of the RFC 6238 Appendix B table
// (X = 30 s, T0 = 0, 8 digits).
func TestRFC6238AppendixB(t *testing.T) {
	vectors := []struct {
		unix int64
		T    uint64 // the "Value of T (hex)" column
		code map[Hash]string
	}{
		{59, 0x0000000000000001, map[Hash]string{SHA1: "94287082", SHA256: "46119246", SHA512: "90693936"}},
		{1111111109, 0x00000000023523EC, map[Hash]string{SHA1: "07081804", SHA256: "68084774", SHA512: "25091201"}},
		{1111111111, 0x00000000023523ED, map[Hash]string{SHA1: "14050471", SHA256: "67062674", SHA512: "99943326"}},
		{1234567890, 0x000000000273EF07, map[Hash]string{SHA1: "89005924", SHA256: "91819424", SHA512: "93441116"}},
		{2000000000, 0x0000000003F940AA, map[Hash]string{SHA1: "69279037", SHA256: "90698825", SHA512: "38618901"}},
		{20000000000, 0x0000000027BC86AA, map[Hash]string{SHA1: "65353130", SHA256: "77737706", SHA512: "47863826"}},
	}
	for _, v := range vectors {
		tm := time.Unix(v.unix, 0).UTC()
		if got := Step(tm); got != int64(v.T) {
			t.Errorf("Step(%d) = %#x, want %#x", v.unix, got, v.T)
		}
		for _, h := range []Hash{SHA1, SHA256, SHA512} {
			want := v.code[h]
			if got := Code(seeds[h], tm, 30*time.Second, 8, h); got != want {
				t.Errorf("Code(t=%d, %v) = %s, want %s", v.unix, h, got, want)
			}
			if got := CodeAt(seeds[h], v.T, 8, h); got != want {
				t.Errorf("CodeAt(T=%#x, %v) = %s, want %s", v.T, h, got, want)
			}
		}
	}
}

// TestRFC4226AppendixD checks the HOTP values of RFC 4226 Appendix D.
func TestRFC4226AppendixD(t *testing.T) {
	want := []string{
		"755224", "287082", "359152", "969429", "338314",
		"254676", "287922", "162583", "399871", "520489",
	}
	for c, w := range want {
		if got := CodeAt(seeds[SHA1], uint64(c), 6, SHA1); got != w {
			t.Errorf("HOTP(counter=%d) = %s, want %s", c, got, w)
		}
	}
}

func TestCodeWithinStep(t *testing.T) {
	// t = 30..59 are all step 1; t = 60 is step 2 (RFC 4226 counter 2).
	for _, s := range []int64{30, 45, 59} {
		if got := Code(seeds[SHA1], time.Unix(s, 0), 30*time.Second, 6, SHA1); got != "287082" {
			t.Errorf("t=%d: got %s, want 287082", s, got)
		}
	}
	if got := Code(seeds[SHA1], time.Unix(60, 999), 30*time.Second, 6, SHA1); got != "359152" {
		t.Errorf("t=60: got %s, want 359152", got)
	}
}

func TestAuthenticator(t *testing.T) {
	// base32("12345678901234567890"). Note: "GEZDGNBVGY3DOOJQ..." (with DOOJQ)
	// is a common typo; it decodes to "12345667901234566790".
	const secret = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"
	if got := base32.StdEncoding.EncodeToString(seeds[SHA1]); got != secret {
		t.Fatalf("base32 of the SHA1 seed = %s, want %s", got, secret)
	}
	at := time.Unix(59, 0)
	want := "287082" // last 6 digits of the SHA1 vector 94287082
	if !strings.HasSuffix("94287082", want) {
		t.Fatal("bad test constant")
	}
	for _, s := range []string{
		secret,
		strings.ToLower(secret),
		"GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ====",    // stray padding ignored
		"gezd gnbv gy3t qojq gezd gnbv gy3t qojq", // spaced, lowercase
		" GEZDGNBVGY3TQOJQ GEZDGNBVGY3TQOJQ ",
	} {
		got, err := Authenticator(s, at)
		if err != nil {
			t.Errorf("Authenticator(%q): %v", s, err)
			continue
		}
		if got != want {
			t.Errorf("Authenticator(%q) = %s, want %s", s, got, want)
		}
	}

	// Secret whose length is not a multiple of 8 characters:
	// base32("1234567") = "GEZDGNBVGY3Q====".
	key := []byte("1234567")
	wantShort := Code(key, at, 30*time.Second, 6, SHA1)
	for _, s := range []string{"GEZDGNBVGY3Q", "GEZDGNBVGY3Q====", "gezdgnbvgy3q"} {
		got, err := Authenticator(s, at)
		if err != nil || got != wantShort {
			t.Errorf("Authenticator(%q) = %q, %v; want %q", s, got, err, wantShort)
		}
	}

	for _, bad := range []string{"", "   ", "GEZDGNB1", "GEZ!DGNB", "A"} {
		if got, err := Authenticator(bad, at); err == nil {
			t.Errorf("Authenticator(%q) = %q, want error", bad, got)
		}
	}
}

func TestStep(t *testing.T) {
	for _, c := range []struct {
		unix int64
		want int64
	}{{0, 0}, {29, 0}, {30, 1}, {59, 1}, {60, 2}, {1111111109, 0x23523EC}} {
		if got := Step(time.Unix(c.unix, 0)); got != c.want {
			t.Errorf("Step(%d) = %d, want %d", c.unix, got, c.want)
		}
	}
}

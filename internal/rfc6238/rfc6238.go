// Package rfc6238 is a test oracle: an independent, standard-library-only
// implementation of TOTP (RFC 6238) and HOTP (RFC 4226).
//
// It exists so that tests can compute expected one-time codes without relying
// on github.com/pquerna/otp, the library the product uses. It is checked
// against the test vectors published in the RFCs. It is NOT used by the
// product and must only be imported from test code.
package rfc6238

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"hash"
	"strings"
	"time"
)

// Hash selects the HMAC hash function.
type Hash int

// Supported hash functions.
const (
	SHA1 Hash = iota
	SHA256
	SHA512
)

// String returns the RFC name of the hash.
func (h Hash) String() string {
	switch h {
	case SHA1:
		return "SHA1"
	case SHA256:
		return "SHA256"
	case SHA512:
		return "SHA512"
	}
	return fmt.Sprintf("Hash(%d)", int(h))
}

func (h Hash) newFunc() func() hash.Hash {
	switch h {
	case SHA1:
		return sha1.New
	case SHA256:
		return sha256.New
	case SHA512:
		return sha512.New
	}
	panic("rfc6238: unknown hash " + h.String())
}

// Authenticator app defaults (RFC 6238 recommends a 30 s step; apps use
// 6 digits and HMAC-SHA1).
const (
	DefaultStep   = 30 * time.Second
	DefaultDigits = 6
)

// CodeAt returns the HOTP value (RFC 4226) of key for counter: HMAC over the
// 8-byte big-endian counter, dynamic truncation, modulo 10^digits, zero
// padded to digits characters. It panics if digits is not in 1..9 (a 31-bit
// value has at most 10 decimal digits; 10 would not be reduced) or h is
// unknown.
func CodeAt(key []byte, counter uint64, digits int, h Hash) string {
	if digits < 1 || digits > 9 {
		panic(fmt.Sprintf("rfc6238: digits %d out of range 1..9", digits))
	}
	var msg [8]byte
	binary.BigEndian.PutUint64(msg[:], counter)
	mac := hmac.New(h.newFunc(), key)
	mac.Write(msg[:])
	sum := mac.Sum(nil)

	offset := int(sum[len(sum)-1] & 0x0f)
	bin := binary.BigEndian.Uint32(sum[offset:offset+4]) & 0x7fffffff

	mod := uint32(1)
	for range digits {
		mod *= 10
	}
	return fmt.Sprintf("%0*d", digits, bin%mod)
}

// Code returns the TOTP value (RFC 6238) of key at time t:
// T = floor((unix(t) - T0) / step) with T0 = 0, then HOTP(key, T).
// It panics if step is not a positive whole number of seconds or t is
// before the Unix epoch.
func Code(key []byte, t time.Time, step time.Duration, digits int, h Hash) string {
	return CodeAt(key, counter(t, step), digits, h)
}

// Step returns the 30 s time step of t, i.e. the TOTP counter T that an
// authenticator app uses at time t.
func Step(t time.Time) int64 {
	return int64(counter(t, DefaultStep))
}

func counter(t time.Time, step time.Duration) uint64 {
	if step <= 0 || step%time.Second != 0 {
		panic(fmt.Sprintf("rfc6238: step %v must be a positive whole number of seconds", step))
	}
	unix := t.Unix()
	if unix < 0 {
		panic(fmt.Sprintf("rfc6238: time %v is before the Unix epoch", t))
	}
	return uint64(unix) / uint64(step/time.Second)
}

// DecodeSecret decodes a base32 secret the way authenticator apps accept it:
// case-insensitive, '=' padding optional, spaces ignored.
func DecodeSecret(secretBase32 string) ([]byte, error) {
	s := strings.ToUpper(strings.ReplaceAll(secretBase32, " ", ""))
	s = strings.TrimRight(s, "=")
	key, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("rfc6238: invalid base32 secret: %w", err)
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("rfc6238: empty secret")
	}
	return key, nil
}

// Authenticator returns the code an authenticator app shows at time t for
// the base32 secret: 30 s step, 6 digits, HMAC-SHA1.
func Authenticator(secretBase32 string, t time.Time) (string, error) {
	key, err := DecodeSecret(secretBase32)
	if err != nil {
		return "", err
	}
	return Code(key, t, DefaultStep, DefaultDigits, SHA1), nil
}

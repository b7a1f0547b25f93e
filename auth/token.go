package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
)

// tokenBytes is the entropy of every token: 256 bits.
const tokenBytes = 32

// idLen and idAlphabet define NewID: 20 characters of 5 bits each, 100 bits.
const (
	idLen      = 20
	idAlphabet = "abcdefghijklmnopqrstuvwxyz234567"
)

// NewToken returns prefix followed by 32 random bytes in unpadded base64url,
// for session tokens, API keys, tickets and the like. The prefix (e.g.
// "ebs_") only makes a leaked secret recognisable to scanners and humans.
func NewToken(prefix string) (string, error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// HashToken returns the hex SHA-256 of tok, the form in which tokens are
// stored. A fast unsalted hash is right here, unlike for passwords: a token
// carries 256 random bits, so there is nothing to brute-force or look up in a
// table, and the lookup by hash must be cheap on every request.
func HashToken(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:])
}

// EqualHash compares two token hashes in constant time (for equal lengths),
// so a comparison leaks nothing about how much of a guess was right.
func EqualHash(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// NewID returns a random identifier of 20 lowercase base32 characters
// ([a-z2-7], 100 bits). It is safe as a path segment and never starts with
// '_', which marks system paths.
func NewID() (string, error) {
	b := make([]byte, idLen)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	for i, c := range b {
		// 32 divides 256, so masking keeps the distribution uniform.
		b[i] = idAlphabet[c&31]
	}
	return string(b), nil
}

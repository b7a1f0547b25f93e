package auth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// SecretKeyLen is the length of the cluster's secret key: 32 bytes, for
// AES-256-GCM.
const SecretKeyLen = 32

// ErrSealedCorrupt means a sealed value could not be opened: a wrong key, a
// value moved to another account, or corrupt state.
var ErrSealedCorrupt = errors.New("auth: sealed value cannot be opened with this key")

// sealedPrefix versions the sealed format: "v1." + key id + "." + base64url
// of nonce||ciphertext||tag.
const sealedPrefix = "v1."

// Sealer encrypts small secrets (TOTP seeds) at rest with AES-256-GCM under
// the cluster's secret key. Every sealed value is bound to its owner through
// the additional data, so a sealed secret copied onto another account does
// not open there.
type Sealer struct {
	aead  cipher.AEAD
	keyID string
}

// ParseSecretKey decodes a secret key written as 64 hex digits or as base64
// (standard or URL alphabet, padded or not) of exactly 32 bytes. Surrounding
// white space is ignored, so a key file may end with a newline.
func ParseSecretKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if len(s) == 2*SecretKeyLen {
		if b, err := hex.DecodeString(s); err == nil {
			return b, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) == SecretKeyLen {
			return b, nil
		}
	}
	return nil, fmt.Errorf("auth: the secret key must be %d bytes written as 64 hex digits or base64", SecretKeyLen)
}

// NewSecretKey returns a fresh random key in hex, the form ParseSecretKey reads.
func NewSecretKey() (string, error) {
	b := make([]byte, SecretKeyLen)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random secret key: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// NewSealer builds a Sealer over a 32-byte key.
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != SecretKeyLen {
		return nil, fmt.Errorf("auth: secret key is %d bytes, want %d", len(key), SecretKeyLen)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("auth: aes: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("auth: gcm: %w", err)
	}
	// The key id names the key (not its bits) so a value sealed under another
	// key is recognised as such instead of failing as "corrupt".
	sum := sha256.Sum256(append([]byte("edgebase key id\x00"), key...))
	return &Sealer{aead: aead, keyID: hex.EncodeToString(sum[:4])}, nil
}

// Seal encrypts plaintext for the owner named by aad.
func (s *Sealer) Seal(plaintext, aad []byte) (string, error) {
	if s == nil {
		return "", ErrNoSecretKey
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("auth: random nonce: %w", err)
	}
	out := s.aead.Seal(nonce, nonce, plaintext, aad)
	return sealedPrefix + s.keyID + "." + base64.RawURLEncoding.EncodeToString(out), nil
}

// Open decrypts a value made by Seal with the same aad.
func (s *Sealer) Open(sealed string, aad []byte) ([]byte, error) {
	if s == nil {
		return nil, ErrNoSecretKey
	}
	rest, ok := strings.CutPrefix(sealed, sealedPrefix)
	if !ok {
		return nil, fmt.Errorf("%w: unknown format", ErrSealedCorrupt)
	}
	id, body, ok := strings.Cut(rest, ".")
	if !ok {
		return nil, fmt.Errorf("%w: unknown format", ErrSealedCorrupt)
	}
	if id != s.keyID {
		return nil, fmt.Errorf("%w: sealed under key %s, this node has key %s", ErrSealedCorrupt, id, s.keyID)
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	// Only the canonical encoding opens: the decoder would skip line breaks
	// and ignore spare low bits, letting several strings mean one value.
	if err != nil || len(raw) < s.aead.NonceSize() || base64.RawURLEncoding.EncodeToString(raw) != body {
		return nil, fmt.Errorf("%w: bad encoding", ErrSealedCorrupt)
	}
	ns := s.aead.NonceSize()
	pt, err := s.aead.Open(nil, raw[:ns], raw[ns:], aad)
	if err != nil {
		return nil, fmt.Errorf("%w: authentication failed", ErrSealedCorrupt)
	}
	return pt, nil
}

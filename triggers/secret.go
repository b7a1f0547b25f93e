package triggers

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// Sealer encrypts secrets at rest; auth.Sealer satisfies it (and so does
// push.Sealer's implementation).
type Sealer interface {
	Seal(plaintext, aad []byte) (string, error)
	Open(sealed string, aad []byte) ([]byte, error)
}

// sealedPrefix marks a stored webhook secret as sealed; a stored secret
// without it is the plain secret (no Sealer was configured).
const sealedPrefix = "sealed:"

// secretPrefix starts every secret the service makes (like Stripe's
// "whsec_"), so that one pasted into the wrong place is recognisable.
const secretPrefix = "whsec_"

// ErrSecretSealed is returned by OpenSecret for a sealed secret when no
// Sealer is configured (the node lost its secret key).
var ErrSecretSealed = errors.New("triggers: the webhook secret is sealed and no secret key is configured")

// secretAAD binds a sealed secret to its trigger: a sealed value copied to
// another trigger or project does not open.
func secretAAD(pid, name string) []byte {
	return []byte("edgebase trigger secret\x00" + pid + "\x00" + name)
}

// SealSecret returns the form of secret stored in trigger name's
// definition: sealed with s when s is set, else the secret itself.
func SealSecret(s Sealer, pid, name, secret string) (string, error) {
	if s == nil {
		if strings.HasPrefix(secret, sealedPrefix) {
			// It would read back as a sealed value.
			return "", fmt.Errorf("triggers: a secret may not start with %q", sealedPrefix)
		}
		return secret, nil
	}
	sealed, err := s.Seal([]byte(secret), secretAAD(pid, name))
	if err != nil {
		return "", fmt.Errorf("triggers: seal the webhook secret of %s: %w", name, err)
	}
	return sealedPrefix + sealed, nil
}

// OpenSecret returns the secret of a stored definition's webhook.
func OpenSecret(s Sealer, pid, name, stored string) (string, error) {
	sealed, ok := strings.CutPrefix(stored, sealedPrefix)
	if !ok {
		return stored, nil
	}
	if s == nil {
		return "", ErrSecretSealed
	}
	p, err := s.Open(sealed, secretAAD(pid, name))
	if err != nil {
		return "", fmt.Errorf("triggers: open the webhook secret of %s: %w", name, err)
	}
	return string(p), nil
}

// newSecret makes a webhook secret: "whsec_" and 32 random bytes.
func newSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("triggers: make a webhook secret: %w", err)
	}
	return secretPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// secretHint is what answers show of a secret: its last 4 characters.
func secretHint(secret string) string {
	if len(secret) <= 4 {
		return ""
	}
	return secret[len(secret)-4:]
}

package auth

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/subtle"
	_ "embed"
	"encoding/base64"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// Password length limits, counted in characters (runes), not bytes.
const (
	MinPasswordLen = 8
	MaxPasswordLen = 128
)

// Bounds accepted when parsing a stored hash. They are far above anything we
// write and only stop a corrupt record from asking argon2 for absurd work.
const (
	minSaltLen   = 8       // RFC 9106 §3.1 minimum
	maxSaltLen   = 1024    //
	minKeyLen    = 4       // RFC 9106 §3.1 minimum
	maxKeyLen    = 1024    //
	maxMemoryKiB = 1 << 22 // 4 GiB
	maxTime      = 1 << 10 //
)

// HashParams are the argon2id cost parameters used for new hashes. Verify
// reads the parameters of an existing hash from the hash itself, so changing
// these does not break stored passwords.
type HashParams struct {
	Memory      uint32 // KiB
	Iterations  uint32
	Parallelism uint8
	SaltLen     uint32 // bytes
	KeyLen      uint32 // bytes
}

// DefaultHashParams returns the OWASP minimum for argon2id: 19 MiB, two
// passes, one lane.
func DefaultHashParams() HashParams {
	return HashParams{Memory: 19456, Iterations: 2, Parallelism: 1, SaltLen: 16, KeyLen: 32}
}

// Hasher hashes and verifies passwords with argon2id. Each hash holds
// HashParams.Memory KiB for its duration, so the number running at once is
// bounded by a semaphore: a login flood queues instead of exhausting memory.
// A Hasher is safe for concurrent use.
type Hasher struct {
	params HashParams
	sem    chan struct{}
	dummy  string // hash of a random secret, for VerifyDummy

	// active and peak count slots in use; tests read them to prove the bound.
	active atomic.Int64
	peak   atomic.Int64
}

// NewHasher returns a Hasher producing hashes with p and running at most
// maxConcurrent hash or verify operations at once (runtime.GOMAXPROCS(0) if
// maxConcurrent <= 0). It spends one hash computing the dummy hash used by
// VerifyDummy.
func NewHasher(p HashParams, maxConcurrent int) *Hasher {
	if maxConcurrent <= 0 {
		maxConcurrent = runtime.GOMAXPROCS(0)
	}
	h := &Hasher{params: p, sem: make(chan struct{}, maxConcurrent)}
	// The dummy must cost exactly what a real hash costs, so it uses the
	// same parameters; its secret is random and thrown away.
	h.dummy = encodeHash(p, randomBytes(p.SaltLen), argon2.IDKey(randomBytes(32), randomBytes(p.SaltLen), p.Iterations, p.Memory, p.Parallelism, p.KeyLen))
	return h
}

// minHashBudget is the least time a caller must have left to start a hash.
const minHashBudget = time.Second

func (h *Hasher) acquire(ctx context.Context) error {
	// Checked first so a cancelled caller never starts work, even when a
	// slot happens to be free.
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case h.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	// A caller whose deadline is about to pass gives its slot back instead of
	// hashing for an answer nobody will wait for (and that could not be
	// committed in time anyway).
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < minHashBudget {
		<-h.sem
		return context.DeadlineExceeded
	}
	n := h.active.Add(1)
	for {
		p := h.peak.Load()
		if n <= p || h.peak.CompareAndSwap(p, n) {
			break
		}
	}
	return nil
}

func (h *Hasher) release() {
	h.active.Add(-1)
	<-h.sem
}

// Hash returns the PHC string of password under a fresh random salt, e.g.
// "$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>" (unpadded standard base64).
// It waits for a free slot; a cancelled ctx returns ctx.Err().
func (h *Hasher) Hash(ctx context.Context, password string) (string, error) {
	if err := h.acquire(ctx); err != nil {
		return "", err
	}
	defer h.release()
	p := h.params
	salt := randomBytes(p.SaltLen)
	key := argon2.IDKey([]byte(password), salt, p.Iterations, p.Memory, p.Parallelism, p.KeyLen)
	return encodeHash(p, salt, key), nil
}

// Verify reports whether password matches encoded, a PHC string with any
// argon2id parameters. A malformed encoded returns an error wrapping
// ErrBadHash; a cancelled ctx returns ctx.Err().
func (h *Hasher) Verify(ctx context.Context, encoded, password string) (bool, error) {
	p, salt, want, err := decodeHash(encoded)
	if err != nil {
		return false, err
	}
	if err := h.acquire(ctx); err != nil {
		return false, err
	}
	defer h.release()
	got := argon2.IDKey([]byte(password), salt, p.Iterations, p.Memory, p.Parallelism, p.KeyLen)
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// VerifyDummy does the work of a Verify that fails. Call it when the account
// does not exist, so that an unknown e-mail and a wrong password take the
// same time and cannot be told apart. The only error is ctx.Err().
func (h *Hasher) VerifyDummy(ctx context.Context, password string) error {
	_, err := h.Verify(ctx, h.dummy, password)
	return err
}

func encodeHash(p HashParams, salt, key []byte) string {
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, p.Memory, p.Iterations, p.Parallelism,
		base64.RawStdEncoding.EncodeToString(salt),
		base64.RawStdEncoding.EncodeToString(key))
}

func decodeHash(s string) (HashParams, []byte, []byte, error) {
	var p HashParams
	bad := func(why string) (HashParams, []byte, []byte, error) {
		return HashParams{}, nil, nil, fmt.Errorf("%w: %s", ErrBadHash, why)
	}
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[0] != "" {
		return bad("want 5 $-separated fields")
	}
	if parts[1] != "argon2id" {
		return bad("algorithm is not argon2id")
	}
	if parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return bad("unsupported version")
	}
	var seen [3]bool
	for kv := range strings.SplitSeq(parts[3], ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return bad("malformed parameter")
		}
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || v != strconv.FormatUint(n, 10) {
			return bad("malformed parameter value")
		}
		var i int
		switch k {
		case "m":
			i, p.Memory = 0, uint32(n)
		case "t":
			i, p.Iterations = 1, uint32(n)
		case "p":
			if n > 255 {
				return bad("parallelism out of range")
			}
			i, p.Parallelism = 2, uint8(n)
		default:
			return bad("unknown parameter")
		}
		if seen[i] {
			return bad("repeated parameter")
		}
		seen[i] = true
	}
	if !seen[0] || !seen[1] || !seen[2] {
		return bad("missing parameter")
	}
	if p.Parallelism < 1 || p.Iterations < 1 || p.Iterations > maxTime ||
		p.Memory < 8*uint32(p.Parallelism) || p.Memory > maxMemoryKiB {
		return bad("parameters out of range")
	}
	salt, err := base64.RawStdEncoding.Strict().DecodeString(parts[4])
	if err != nil || len(salt) < minSaltLen || len(salt) > maxSaltLen {
		return bad("malformed salt")
	}
	key, err := base64.RawStdEncoding.Strict().DecodeString(parts[5])
	if err != nil || len(key) < minKeyLen || len(key) > maxKeyLen {
		return bad("malformed hash")
	}
	p.SaltLen, p.KeyLen = uint32(len(salt)), uint32(len(key))
	return p, salt, key, nil
}

func randomBytes(n uint32) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand, Go 1.24+)
	return b
}

// ValidatePassword enforces the password policy: MinPasswordLen to
// MaxPasswordLen characters counted as runes, and not one of the 10,000 most
// common passwords embedded in the binary (case-insensitive; see
// common_passwords.txt). There are deliberately no composition rules
// (NIST SP 800-63B §3.1.1.2): length and a blocklist do more good.
func ValidatePassword(pw string) error {
	n := utf8.RuneCountInString(pw)
	switch {
	case n < MinPasswordLen:
		return ErrPasswordTooShort
	case n > MaxPasswordLen:
		return ErrPasswordTooLong
	}
	if _, ok := commonPasswords()[strings.ToLower(pw)]; ok {
		return ErrPasswordCommon
	}
	return nil
}

// commonPasswordsText is the top 10,000 of the xato.net 10-million-password
// list (SecLists, MIT), in frequency order, lowercased, one per line, without
// duplicates. Entries shorter than MinPasswordLen are kept as in the source
// list; the length check rejects them first. Provenance and the command that
// regenerates the file: COMMON_PASSWORDS_SOURCE.md.
//
//go:embed common_passwords.txt
var commonPasswordsText string

// commonPasswords is the embedded list as a set, built on first use and never
// modified afterwards. Entries are stored lowercased; blank lines and lines
// starting with # are skipped.
var commonPasswords = sync.OnceValue(func() map[string]struct{} {
	set := make(map[string]struct{}, strings.Count(commonPasswordsText, "\n")+1)
	sc := bufio.NewScanner(strings.NewReader(commonPasswordsText))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		set[strings.ToLower(line)] = struct{}{}
	}
	return set
})

package auth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// fastParams keep argon2 cheap in tests; one test uses DefaultHashParams.
var fastParams = HashParams{Memory: 64, Iterations: 1, Parallelism: 1, SaltLen: 16, KeyLen: 32}

func mustHash(t *testing.T, h *Hasher, pw string) string {
	t.Helper()
	enc, err := h.Hash(context.Background(), pw)
	if err != nil {
		t.Fatalf("Hash(%q): %v", pw, err)
	}
	return enc
}

var phcRE = regexp.MustCompile(`^\$argon2id\$v=19\$m=(\d+),t=(\d+),p=(\d+)\$([A-Za-z0-9+/]+)\$([A-Za-z0-9+/]+)$`)

func TestHashVerifyRoundTrip(t *testing.T) {
	t.Parallel()
	h := NewHasher(fastParams, 4)
	for _, pw := range []string{
		"correct horse battery staple",
		"",
		"pässwörd-ünïcödé-🔑",
		strings.Repeat("x", 128),
		"trailing space ",
	} {
		enc := mustHash(t, h, pw)
		ok, err := h.Verify(context.Background(), enc, pw)
		if err != nil || !ok {
			t.Errorf("Verify(own hash of %q) = %v, %v; want true, nil", pw, ok, err)
		}
		ok, err = h.Verify(context.Background(), enc, pw+"x")
		if err != nil || ok {
			t.Errorf("Verify(wrong password for %q) = %v, %v; want false, nil", pw, ok, err)
		}
	}
}

func TestHashFormat(t *testing.T) {
	t.Parallel()
	h := NewHasher(fastParams, 1)
	a, b := mustHash(t, h, "same password"), mustHash(t, h, "same password")
	if a == b {
		t.Errorf("two hashes of one password are equal (salt not random): %s", a)
	}
	m := phcRE.FindStringSubmatch(a)
	if m == nil {
		t.Fatalf("hash %q is not a PHC argon2id string", a)
	}
	if m[1] != "64" || m[2] != "1" || m[3] != "1" {
		t.Errorf("params m=%s,t=%s,p=%s; want 64,1,1", m[1], m[2], m[3])
	}
	salt, err := base64.RawStdEncoding.DecodeString(m[4])
	if err != nil || len(salt) != 16 {
		t.Errorf("salt %q: %d bytes, %v; want 16", m[4], len(salt), err)
	}
	key, err := base64.RawStdEncoding.DecodeString(m[5])
	if err != nil || len(key) != 32 {
		t.Errorf("key %q: %d bytes, %v; want 32", m[5], len(key), err)
	}
}

func TestDefaultHashParams(t *testing.T) {
	t.Parallel()
	p := DefaultHashParams()
	if p != (HashParams{Memory: 19456, Iterations: 2, Parallelism: 1, SaltLen: 16, KeyLen: 32}) {
		t.Fatalf("DefaultHashParams() = %+v", p)
	}
	h := NewHasher(p, 0)
	if got, want := h.slots, runtime.GOMAXPROCS(0); got != want {
		t.Errorf("default concurrency = %d, want GOMAXPROCS %d", got, want)
	}
	if got, want := h.maxQueue, DefaultHashQueuePerSlot*runtime.GOMAXPROCS(0); got != want {
		t.Errorf("default queue bound = %d, want %d", got, want)
	}
	enc := mustHash(t, h, "a real password")
	if !strings.HasPrefix(enc, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Errorf("hash %q does not carry the default parameters", enc)
	}
	ok, err := h.Verify(context.Background(), enc, "a real password")
	if err != nil || !ok {
		t.Errorf("Verify = %v, %v; want true, nil", ok, err)
	}
}

func TestVerifyUsesParamsFromHash(t *testing.T) {
	t.Parallel()
	other := HashParams{Memory: 32, Iterations: 3, Parallelism: 2, SaltLen: 8, KeyLen: 24}
	enc := mustHash(t, NewHasher(other, 1), "pw with other params")

	p, salt, key, err := decodeHash(enc)
	if err != nil {
		t.Fatal(err)
	}
	if p != other || len(salt) != 8 || len(key) != 24 {
		t.Errorf("decodeHash = %+v, salt %d, key %d; want %+v, 8, 24", p, len(salt), len(key), other)
	}
	// A Hasher configured differently still verifies it.
	ok, err := NewHasher(fastParams, 1).Verify(context.Background(), enc, "pw with other params")
	if err != nil || !ok {
		t.Errorf("Verify with different configured params = %v, %v; want true, nil", ok, err)
	}
}

func TestVerifyMalformed(t *testing.T) {
	t.Parallel()
	h := NewHasher(fastParams, 1)
	good := mustHash(t, h, "pw")
	parts := strings.Split(good, "$")
	salt, key := parts[4], parts[5]
	join := func(ps ...string) string { return strings.Join(ps, "$") }
	for _, tc := range []struct{ name, enc string }{
		{"empty", ""},
		{"garbage", "not a hash"},
		{"no leading $", strings.TrimPrefix(good, "$")},
		{"argon2i", join("", "argon2i", "v=19", "m=64,t=1,p=1", salt, key)},
		{"bcrypt", "$2a$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy"},
		{"version 16", join("", "argon2id", "v=16", "m=64,t=1,p=1", salt, key)},
		{"no version", join("", "argon2id", "m=64,t=1,p=1", salt, key)},
		{"missing param", join("", "argon2id", "v=19", "m=64,t=1", salt, key)},
		{"repeated param", join("", "argon2id", "v=19", "m=64,t=1,t=1", salt, key)},
		{"unknown param", join("", "argon2id", "v=19", "m=64,t=1,p=1,x=1", salt, key)},
		{"non-numeric", join("", "argon2id", "v=19", "m=abc,t=1,p=1", salt, key)},
		{"negative", join("", "argon2id", "v=19", "m=-64,t=1,p=1", salt, key)},
		{"leading plus", join("", "argon2id", "v=19", "m=+64,t=1,p=1", salt, key)},
		{"p=0", join("", "argon2id", "v=19", "m=64,t=1,p=0", salt, key)},
		{"p>255", join("", "argon2id", "v=19", "m=4096,t=1,p=256", salt, key)},
		{"t=0", join("", "argon2id", "v=19", "m=64,t=0,p=1", salt, key)},
		{"m too small", join("", "argon2id", "v=19", "m=7,t=1,p=1", salt, key)},
		{"m huge", join("", "argon2id", "v=19", "m=4294967295,t=1,p=1", salt, key)},
		{"bad salt base64", join("", "argon2id", "v=19", "m=64,t=1,p=1", "!!!!", key)},
		{"padded salt", join("", "argon2id", "v=19", "m=64,t=1,p=1", salt+"==", key)},
		{"short salt", join("", "argon2id", "v=19", "m=64,t=1,p=1", "AAAA", key)},
		{"empty key", join("", "argon2id", "v=19", "m=64,t=1,p=1", salt, "")},
		{"bad key base64", join("", "argon2id", "v=19", "m=64,t=1,p=1", salt, key[:len(key)-1]+"-")},
		{"extra field", good + "$x"},
	} {
		ok, err := h.Verify(context.Background(), tc.enc, "pw")
		if ok || !errors.Is(err, ErrBadHash) {
			t.Errorf("%s: Verify(%q) = %v, %v; want false, ErrBadHash", tc.name, tc.enc, ok, err)
		}
	}
}

func TestVerifyTampered(t *testing.T) {
	t.Parallel()
	h := NewHasher(fastParams, 1)
	good := mustHash(t, h, "pw-tamper")
	parts := strings.Split(good, "$")
	flip := func(s string) string {
		// Change the first character to another valid base64 character.
		c := byte('A')
		if s[0] == 'A' {
			c = 'B'
		}
		return string(c) + s[1:]
	}
	for _, tc := range []struct{ name, enc string }{
		{"salt", strings.Join([]string{"", parts[1], parts[2], parts[3], flip(parts[4]), parts[5]}, "$")},
		{"key", strings.Join([]string{"", parts[1], parts[2], parts[3], parts[4], flip(parts[5])}, "$")},
		{"params", strings.Join([]string{"", parts[1], parts[2], "m=64,t=2,p=1", parts[4], parts[5]}, "$")},
	} {
		ok, err := h.Verify(context.Background(), tc.enc, "pw-tamper")
		if err != nil || ok {
			t.Errorf("tampered %s: Verify = %v, %v; want false, nil", tc.name, ok, err)
		}
	}
}

func TestVerifyDummy(t *testing.T) {
	t.Parallel()
	h := NewHasher(fastParams, 1)
	p, _, _, err := decodeHash(h.dummy)
	if err != nil {
		t.Fatalf("dummy hash %q: %v", h.dummy, err)
	}
	if p != fastParams {
		t.Errorf("dummy params %+v, want the hasher's %+v (same cost as a real verify)", p, fastParams)
	}
	if err := h.VerifyDummy(context.Background(), "anything"); err != nil {
		t.Errorf("VerifyDummy: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.VerifyDummy(ctx, "anything"); !errors.Is(err, context.Canceled) {
		t.Errorf("VerifyDummy(cancelled) = %v, want context.Canceled", err)
	}
}

func TestSemaphoreBlocksWhenFull(t *testing.T) {
	t.Parallel()
	h := NewHasher(fastParams, 1)
	enc := mustHash(t, h, "pw")
	if err := h.acquire(context.Background()); err != nil { // hold the only slot
		t.Fatal(err)
	}

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.Hash(cancelled, "pw"); !errors.Is(err, context.Canceled) {
		t.Errorf("Hash with slot taken and cancelled ctx = %v, want context.Canceled", err)
	}
	if _, err := h.Verify(cancelled, enc, "pw"); !errors.Is(err, context.Canceled) {
		t.Errorf("Verify with slot taken and cancelled ctx = %v, want context.Canceled", err)
	}
	// A live context waits for the slot rather than proceeding.
	short, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	if _, err := h.Hash(short, "pw"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Hash with slot taken = %v, want it to wait until DeadlineExceeded", err)
	}

	done := make(chan error, 1)
	go func() { _, err := h.Hash(context.Background(), "pw"); done <- err }()
	h.release()
	if err := <-done; err != nil {
		t.Errorf("Hash after release: %v", err)
	}
}

func TestSemaphoreBoundsConcurrency(t *testing.T) {
	t.Parallel()
	const limit, workers = 2, 16
	h := NewHasher(HashParams{Memory: 256, Iterations: 2, Parallelism: 1, SaltLen: 16, KeyLen: 32}, limit, WithHashQueue(-1))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			if _, err := h.Hash(context.Background(), "pw"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if p := h.peak.Load(); p < 1 || p > limit {
		t.Errorf("peak concurrent hashes = %d, want 1..%d", p, limit)
	}
	if a := h.active.Load(); a != 0 {
		t.Errorf("active after all done = %d, want 0", a)
	}
}

// mustQueue waits until n callers wait for a slot of h, polling: the
// goroutines that queue have no other signal to give.
func mustQueue(t *testing.T, h *Hasher, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.queued() != n {
		if time.Now().After(deadline) {
			t.Fatalf("queued = %d, want %d", h.queued(), n)
		}
		runtime.Gosched()
	}
}

// Waiters are admitted in the order they arrived, and one that gives up in
// the middle leaves without costing anyone behind it their place or a slot.
func TestHashQueueFIFO(t *testing.T) {
	t.Parallel()
	h := NewHasher(fastParams, 1, WithHashQueue(8))
	hold, err := h.Occupy(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	const n = 6
	var mu sync.Mutex
	var order []int
	errs := make([]error, n)
	cancels := make([]context.CancelFunc, n)
	var wg sync.WaitGroup
	for i := range n {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		wg.Go(func() {
			release, err := h.Occupy(ctx)
			if errs[i] = err; err != nil {
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			release()
		})
		mustQueue(t, h, i+1) // i is queued before i+1 arrives
	}
	cancels[2]()
	mustQueue(t, h, n-1)
	hold()
	wg.Wait()
	for _, c := range cancels {
		c()
	}
	if !errors.Is(errs[2], context.Canceled) {
		t.Errorf("cancelled waiter: %v, want context.Canceled", errs[2])
	}
	for i, err := range errs {
		if i != 2 && err != nil {
			t.Errorf("waiter %d: %v", i, err)
		}
	}
	if want := []int{0, 1, 3, 4, 5}; !slices.Equal(order, want) {
		t.Errorf("admitted in order %v, want %v", order, want)
	}
	h.mu.Lock()
	free := h.free
	h.mu.Unlock()
	if free != 1 || h.active.Load() != 0 {
		t.Errorf("after all: free %d active %d, want 1 and 0", free, h.active.Load())
	}
}

// With the queue full the next caller is refused at once, with a Retry-After
// of the measured hash time × queued / slots; the queued ones still run.
func TestHashQueueBound(t *testing.T) {
	t.Parallel()
	const slots, bound = 2, 3
	h := NewHasher(fastParams, slots, WithHashQueue(bound))
	enc := mustHash(t, h, "pw")
	var holds []func()
	for range slots {
		release, err := h.Occupy(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		holds = append(holds, release)
	}
	var wg sync.WaitGroup
	errs := make(chan error, bound)
	for i := range bound {
		wg.Go(func() {
			_, err := h.Verify(context.Background(), enc, "pw")
			errs <- err
		})
		mustQueue(t, h, i+1)
	}
	h.mu.Lock()
	h.ewma = 3 // seconds per hash, so the estimate is 3 × 3 / 2 = 4.5 s
	h.mu.Unlock()

	for _, call := range []func(ctx context.Context) error{
		func(ctx context.Context) error { _, err := h.Hash(ctx, "pw"); return err },
		func(ctx context.Context) error { _, err := h.Verify(ctx, enc, "pw"); return err },
		func(ctx context.Context) error { return h.VerifyDummy(ctx, "pw") },
	} {
		// No deadline: a refusal that waited would hang the test instead.
		err := call(context.Background())
		var busy *HashBusyError
		if !errors.As(err, &busy) || !errors.Is(err, ErrHashBusy) {
			t.Fatalf("call beyond the bound = %v, want a *HashBusyError", err)
		}
		if busy.RetryAfter != 4500*time.Millisecond || busy.RetryAfterSeconds() != 5 {
			t.Errorf("RetryAfter = %v (%d s), want 4.5s (5 s)", busy.RetryAfter, busy.RetryAfterSeconds())
		}
		if busy.Status() != 503 || busy.Code() != "overloaded" {
			t.Errorf("HTTP face = %d %s, want 503 overloaded", busy.Status(), busy.Code())
		}
	}
	if got := h.shedCount(); got != 3 {
		t.Errorf("shed = %d, want 3", got)
	}
	mustQueue(t, h, bound) // the refused never joined the queue

	for _, release := range holds {
		release()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("queued Verify: %v", err)
		}
	}
	// Room again: served at once.
	if _, err := h.Hash(context.Background(), "pw"); err != nil {
		t.Errorf("Hash after the queue drained: %v", err)
	}
}

// The estimate is whole seconds, at least 1, and a queue of 0 refuses
// everyone who finds the slots taken.
func TestHashQueueZero(t *testing.T) {
	t.Parallel()
	h := NewHasher(fastParams, 1, WithHashQueue(0))
	release, err := h.Occupy(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Hash(context.Background(), "pw")
	var busy *HashBusyError
	if !errors.As(err, &busy) || busy.RetryAfterSeconds() != 1 {
		t.Fatalf("Hash with the only slot taken and no queue = %v, want busy with Retry-After 1 s", err)
	}
	release()
	release() // idempotent: the slot is not freed twice
	if _, err := h.Hash(context.Background(), "pw"); err != nil {
		t.Fatalf("Hash after release: %v", err)
	}
	h.mu.Lock()
	free := h.free
	h.mu.Unlock()
	if free != 1 {
		t.Errorf("free slots = %d, want 1", free)
	}
}

// The per-hash estimate follows real hashes: it starts at the dummy hash's
// time and moves toward what hashes take.
func TestHashEstimateFollowsHashes(t *testing.T) {
	t.Parallel()
	h := NewHasher(fastParams, 1)
	h.mu.Lock()
	h.ewma = 100 // far above any real hash of fastParams
	h.mu.Unlock()
	mustHash(t, h, "pw")
	h.mu.Lock()
	got := h.ewma
	h.mu.Unlock()
	if got >= 100-ewmaWeight*99 || got <= 0 {
		t.Errorf("estimate after one fast hash = %v s, want below %v", got, 100-ewmaWeight*99)
	}
}

func TestValidatePassword(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		pw   string
		want error
	}{
		{"empty", "", ErrPasswordTooShort},
		{"7 chars", "xkcd-93", ErrPasswordTooShort},
		{"8 chars", "xkcd-936", nil},
		{"128 chars", strings.Repeat("q7", 64), nil},
		{"129 chars", strings.Repeat("q7", 64) + "z", ErrPasswordTooLong},
		{"7 multi-byte runes (21 bytes)", "ж€😀ж€😀ж", ErrPasswordTooShort},
		{"8 multi-byte runes", "ж€😀ж€😀жж", nil},
		{"128 runes of 4 bytes", strings.Repeat("😀", 128), nil},
		{"129 runes of 2 bytes", strings.Repeat("é", 129), ErrPasswordTooLong},
		{"no composition rules: all lowercase", "correcthorsebatterystaple", nil},
		{"spaces allowed", "a b c d e f g h", nil},
		{"common", "password", ErrPasswordCommon},
		{"common upper case", "PASSWORD", ErrPasswordCommon},
		{"common mixed case", "QwErTyUiOp", ErrPasswordCommon},
		{"common digits", "12345678", ErrPasswordCommon},
		{"common iloveyou", "ILoveYou", ErrPasswordCommon},
		{"common with suffix is fine", "password-but-longer", nil},
	} {
		if got := ValidatePassword(tc.pw); !errors.Is(got, tc.want) || (tc.want == nil) != (got == nil) {
			t.Errorf("%s: ValidatePassword(%q) = %v, want %v", tc.name, tc.pw, got, tc.want)
		}
	}
}

// The list is the top 10,000 of the xato.net 10M list (see
// COMMON_PASSWORDS_SOURCE.md). These numbers pin it: a regenerated list must
// update them on purpose.
const (
	commonPasswordCount       = 10000
	commonPasswordCountMinLen = 3377 // entries of at least MinPasswordLen (8) characters
)

func TestCommonPasswordList(t *testing.T) {
	t.Parallel()
	set := commonPasswords()
	if len(set) != commonPasswordCount {
		t.Errorf("common password list has %d entries, want %d", len(set), commonPasswordCount)
	}
	long := 0
	for pw := range set {
		n := utf8.RuneCountInString(pw)
		if n > MaxPasswordLen {
			t.Errorf("list entry %q has %d characters, more than MaxPasswordLen", pw, n)
		}
		want := ErrPasswordCommon
		if n < MinPasswordLen {
			// Kept as in the source list; the length rule refuses these first.
			want = ErrPasswordTooShort
		} else {
			long++
		}
		if err := ValidatePassword(strings.ToUpper(pw)); !errors.Is(err, want) {
			t.Errorf("ValidatePassword(%q) = %v, want %v", strings.ToUpper(pw), err, want)
		}
	}
	if long != commonPasswordCountMinLen {
		t.Errorf("%d list entries have at least %d characters, want %d", long, MinPasswordLen, commonPasswordCountMinLen)
	}
	for _, pw := range []string{
		"password", "12345678", "123456789", "1234567890", "qwertyuiop", "iloveyou",
		"password1", "sunshine", "baseball", "football", "trustno1", "superman",
		"jennifer", "michelle", "princess", "1qaz2wsx", "computer", "starwars",
	} {
		if _, ok := set[pw]; !ok {
			t.Errorf("%q missing from the common password list", pw)
		}
	}
}

func TestCommonPasswordsText(t *testing.T) {
	t.Parallel()
	if strings.ContainsRune(commonPasswordsText, '\r') {
		t.Error("common_passwords.txt contains a CR character")
	}
	if !strings.HasSuffix(commonPasswordsText, "\n") || strings.HasSuffix(commonPasswordsText, "\n\n") {
		t.Error("common_passwords.txt must end with exactly one newline")
	}
	lines := strings.Split(strings.TrimSuffix(commonPasswordsText, "\n"), "\n")
	if len(lines) != commonPasswordCount {
		t.Errorf("common_passwords.txt has %d lines, want %d (one entry per line, no duplicates)", len(lines), commonPasswordCount)
	}
	for i, line := range lines {
		switch {
		case line == "":
			t.Errorf("line %d is blank", i+1)
		case line != strings.TrimSpace(line):
			t.Errorf("line %d %q has surrounding white space", i+1, line)
		case line != strings.ToLower(line):
			t.Errorf("line %d %q is not lowercase", i+1, line)
		case strings.HasPrefix(line, "#"):
			t.Errorf("line %d %q would be skipped as a comment", i+1, line)
		}
	}
	// Frequency order from the source list: the most common ones come first.
	if len(lines) >= 3 && (lines[0] != "123456" || lines[1] != "password" || lines[2] != "12345678") {
		t.Errorf("first lines %q, want the source list's order (123456, password, 12345678)", lines[:3])
	}
}

func TestValidatePasswordCommonCaseInsensitive(t *testing.T) {
	t.Parallel()
	for _, pw := range []string{
		"PassWord", "PASSWORD", "Password1", "12345678", "QwertyUiop", "ILoveYou",
		"BaseBall", "FOOTBALL", "TrustNo1", "SuperMan", "Jennifer", "princess",
	} {
		if err := ValidatePassword(pw); !errors.Is(err, ErrPasswordCommon) {
			t.Errorf("ValidatePassword(%q) = %v, want ErrPasswordCommon", pw, err)
		}
	}
}

func TestValidatePasswordStrongAccepted(t *testing.T) {
	t.Parallel()
	for _, pw := range []string{
		"violet tractor mango quilt 47",
		"Correct-Horse-Battery-Staple-9",
		rand.Text(), // 26 random base32 characters, 130 bits
		rand.Text() + " " + rand.Text(),
	} {
		if err := ValidatePassword(pw); err != nil {
			t.Errorf("ValidatePassword(%q) = %v, want nil", pw, err)
		}
	}
}

func TestValidateEmail(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 64) + "@" + strings.Repeat("b", 185) + ".com" // 254 bytes
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"ada@example.com", true},
		{"first.last+tag@sub.example.co.uk", true},
		{long, true},
		{"x" + long, false}, // 255 bytes
		{"", false},
		{"ada", false},
		{"ada@", false},
		{"@example.com", false},
		{"ada@localhost", false},
		{"ada@example.", false},
		{"ada@.com", false},
		{"Ada Lovelace <ada@example.com>", false},
		{"<ada@example.com>", false},
		{" ada@example.com", false},
		{"ada@example.com ", false},
		{"ada@example.com, bob@example.com", false},
		{"ada @example.com", false},
		{`"a b"@example.com`, false},
	} {
		err := ValidateEmail(tc.in)
		if tc.ok && err != nil {
			t.Errorf("ValidateEmail(%q) = %v, want nil", tc.in, err)
		}
		if !tc.ok && !errors.Is(err, ErrInvalidEmail) {
			t.Errorf("ValidateEmail(%q) = %v, want ErrInvalidEmail", tc.in, err)
		}
	}
}

func TestNormalizeEmail(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"  Ada@Example.COM\n": "ada@example.com",
		"bob@x.io":            "bob@x.io",
		"":                    "",
	} {
		if got := NormalizeEmail(in); got != want {
			t.Errorf("NormalizeEmail(%q) = %q, want %q", in, got, want)
		}
	}
}

// BenchmarkVerifyDefault is the per-hash time of the production parameters
// on one goroutine: the unit of the hashing queue's wait.
func BenchmarkVerifyDefault(b *testing.B) {
	h := NewHasher(DefaultHashParams(), 1)
	enc, err := h.Hash(context.Background(), "correct horse battery")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := h.Verify(context.Background(), enc, "correct horse battery"); err != nil {
			b.Fatal(err)
		}
	}
}

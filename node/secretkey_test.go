package node_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/internal/rfc6238"
	"github.com/edgebase/edgebase/node"
	"github.com/edgebase/edgebase/node/nodetest"
)

const skPassword = "correct horse battery 42"

// skStartPlain starts a single non-dev node with the given key settings; the
// caller closes it.
func skStartPlain(t *testing.T, dir, key, keyFile string) (*node.Node, error) {
	t.Helper()
	hp := auth.HashParams{Memory: 1024, Iterations: 1, Parallelism: 1, SaltLen: 16, KeyLen: 32}
	return node.Start(node.Config{DataDir: dir, HTTPAddr: freePort(t), RaftAddr: freePort(t),
		SecretKey: key, SecretKeyFile: keyFile, Out: io.Discard,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Tuning: nodetest.FastTuning(), HashParams: &hp})
}

func skWaitLeader(t *testing.T, n *node.Node) {
	t.Helper()
	nodetest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		if !n.Store.IsLeader() {
			return errors.New("not leader yet")
		}
		return nil
	})
}

// skUser registers an account in project pid and returns its principal.
func skUser(t *testing.T, n *node.Node, pid, email string) *auth.Principal {
	t.Helper()
	ctx := context.Background()
	res, err := n.Accounts.Register(ctx, pid, email, skPassword, "t", "")
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	p, err := n.Accounts.Authenticate(res.Token)
	if err != nil {
		t.Fatalf("authenticate: %v", err)
	}
	return p
}

// skSealedID returns the key id of the account's sealed TOTP secret
// (pending or confirmed).
func skSealedID(t *testing.T, n *node.Node, p *auth.Principal) string {
	t.Helper()
	doc, err := n.Store.Get(p.ProjectID + "/_users/" + p.UserID)
	if err != nil || doc == nil {
		t.Fatalf("read account: %v", err)
	}
	var acc struct {
		TOTP struct{ Secret, Pending string } `json:"totp"`
	}
	if err := json.Unmarshal(doc.Data, &acc); err != nil {
		t.Fatal(err)
	}
	sealed := acc.TOTP.Secret + acc.TOTP.Pending
	m := regexp.MustCompile(`^v1\.([0-9a-f]+)\.`).FindStringSubmatch(sealed)
	if m == nil {
		t.Fatalf("stored TOTP secret %q is not sealed", sealed)
	}
	return m[1]
}

// skKeyID is the id a sealer over key writes into sealed values.
func skKeyID(t *testing.T, key []byte) string {
	t.Helper()
	s, err := auth.NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Seal([]byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(v, ".")[1]
}

func skCode(t *testing.T, secret string, at time.Time) string {
	t.Helper()
	c, err := rfc6238.Authenticator(secret, at)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestDevSecretKeyCreatedOnceAndReused: --dev keeps a key in
// data-dir/dev-secret-key (0600), made on the first start and used again
// after a restart, so TOTP secrets sealed before the restart still open.
func TestDevSecretKeyCreatedOnceAndReused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	n, _, m := startDev(t, dir)
	keyFile := filepath.Join(dir, "dev-secret-key")
	st, err := os.Stat(keyFile)
	if err != nil {
		t.Fatalf("--dev made no key file: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("dev-secret-key mode %v, want 0600", st.Mode().Perm())
	}
	first, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	key, err := auth.ParseSecretKey(string(first))
	if err != nil {
		t.Fatalf("dev-secret-key %q does not parse: %v", first, err)
	}

	skWaitLeader(t, n)
	pid := m[1]
	p := skUser(t, n, pid, "totp@example.com")
	e, _, err := n.Accounts.Enroll(ctx, p)
	if err != nil {
		t.Fatalf("enroll under the dev key: %v", err)
	}
	if _, err := n.Accounts.Confirm(ctx, p, skCode(t, e.Secret, time.Now())); err != nil {
		t.Fatalf("confirm: %v", err)
	}
	if id := skSealedID(t, n, p); id != skKeyID(t, key) {
		t.Fatalf("secret sealed under key %s, the dev key file is key %s", id, skKeyID(t, key))
	}
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}

	n2, _, _ := startDev(t, dir)
	defer func() { _ = n2.Close(ctx) }()
	again, err := os.ReadFile(keyFile)
	if err != nil || !bytes.Equal(again, first) {
		t.Fatalf("restart changed dev-secret-key: %q -> %q (%v)", first, again, err)
	}
	skWaitLeader(t, n2)
	// The next step's code (within the accepted drift, after the one used
	// to confirm) proves the secret sealed before the restart opens.
	if _, err := n2.Accounts.VerifyForReset(ctx, pid, "totp@example.com", skCode(t, e.Secret, time.Now().Add(30*time.Second)), ""); err != nil {
		t.Fatalf("verify after restart (the sealed secret must open under the same key): %v", err)
	}
}

// TestSecretKeyFileIsUsed: the key is read from SecretKeyFile (base64 with
// a trailing newline here) and is the one that seals TOTP secrets.
func TestSecretKeyFileIsUsed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key := bytes.Repeat([]byte{0xfb, 0xef}, 16)
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	n, err := skStartPlain(t, dir, "", file)
	if err != nil {
		t.Fatalf("start with a key file: %v", err)
	}
	defer func() { _ = n.Close(ctx) }()
	skWaitLeader(t, n)
	proj, err := n.Accounts.CreateProject(ctx, "k", "owner@example.com", skPassword)
	if err != nil {
		t.Fatal(err)
	}
	p := skUser(t, n, proj.ProjectID, "a@example.com")
	if _, _, err := n.Accounts.Enroll(ctx, p); err != nil {
		t.Fatalf("enroll with a key file: %v", err)
	}
	if id := skSealedID(t, n, p); id != skKeyID(t, key) {
		t.Fatalf("secret sealed under key %s, the key file holds key %s", id, skKeyID(t, key))
	}
	if _, err := os.Stat(filepath.Join(dir, "dev-secret-key")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a non-dev node made a dev key file: %v", err)
	}
}

// TestBadSecretKeyFailsStart: a key that is set but unusable stops the node
// with an error that says what is wrong, before it serves anything.
func TestBadSecretKeyFailsStart(t *testing.T) {
	t.Parallel()
	hexKey := hex.EncodeToString(bytes.Repeat([]byte{7}, 32))
	write := func(t *testing.T, content string) string {
		p := filepath.Join(t.TempDir(), "key")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name    string
		key     string
		file    func(t *testing.T) string
		message string
	}{
		{name: "garbage key", key: "not a key", message: "secret key"},
		{name: "31-byte hex key", key: hexKey[:62], message: "secret key"},
		{name: "33-byte base64 key", key: base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 33)), message: "secret key"},
		{name: "missing key file", file: func(t *testing.T) string { return filepath.Join(t.TempDir(), "nope") }, message: "secret key file"},
		{name: "garbage in key file", file: func(t *testing.T) string { return write(t, "garbage\n") }, message: "secret key"},
		{name: "blank key file", file: func(t *testing.T) string { return write(t, "\n") }, message: "secret key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			file := ""
			if tc.file != nil {
				file = tc.file(t)
			}
			n, err := skStartPlain(t, t.TempDir(), tc.key, file)
			if err == nil {
				_ = n.Close(context.Background())
				t.Fatalf("node started with key %q / key file %q; want an error", tc.key, file)
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("error %q does not mention %q", err, tc.message)
			}
		})
	}
}

// TestEmptySecretKeyFileFailsStart: an operator who names a key file means
// to use a key; an empty file (a secret mount that did not fill in) must
// stop the node like a blank or garbage one does, not start it silently
// with TOTP off (which locks every TOTP account out with 501s), nor, with
// --dev, silently fall back to the dev key.
func TestEmptySecretKeyFileFailsStart(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := skStartPlain(t, t.TempDir(), "", file)
	if err == nil {
		_ = n.Close(context.Background())
		t.Fatalf("node started with the empty key file %s (TOTP silently off); want an error naming the file", file)
	}
	if !strings.Contains(err.Error(), "secret key") {
		t.Fatalf("error %q does not mention the secret key", err)
	}
}

// TestEnrollWithoutSecretKeyIs501: without a key the authenticator answers
// 501 secret_key_required and the rest of auth works.
func TestEnrollWithoutSecretKeyIs501(t *testing.T) {
	t.Parallel()
	c := nodetest.Start(t, nodetest.Options{NoSecretKey: true})
	p := c.CreateProject(0)
	var body struct {
		Error struct{ Code string } `json:"error"`
	}
	st := c.Do(0, http.MethodPost, "/api/authenticator/enroll",
		map[string]string{"X-Project-Id": p.ID, "X-API-Key": p.APIKey, "Authorization": "Bearer " + p.OwnerToken}, map[string]string{}, &body)
	if st != http.StatusNotImplemented || body.Error.Code != "secret_key_required" {
		t.Fatalf("enroll without a key: %d %+v, want 501 secret_key_required", st, body)
	}
}

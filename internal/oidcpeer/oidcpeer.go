// Package oidcpeer runs the OpenID provider of the OAuth tests: the program
// of the separate module e2e/oidcpeer (zitadel's OP with its example storage
// and login page). Its binary is the one `make test-bins` built into
// $EDGEBASE_TEST_BIN_DIR, or one Binary builds with `go -C e2e/oidcpeer
// build` (the module is outside edgebase's go.mod, so its dependencies are
// resolved with -mod=mod).
package oidcpeer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/repo"
	"github.com/edgebase/edgebase/internal/testbin"
)

// Name is the binary's file name in $EDGEBASE_TEST_BIN_DIR.
const Name = "oidcpeer"

// Binary returns the path of the provider's binary: the prebuilt one when
// $EDGEBASE_TEST_BIN_DIR holds it, else one it builds into dir within ctx.
func Binary(ctx context.Context, dir string) (string, error) {
	if d := os.Getenv(testbin.DirEnv); d != "" {
		p := filepath.Join(d, Name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, Name)
	cmd := exec.CommandContext(ctx, "go", "-C", filepath.Join(root, "e2e", "oidcpeer"), "build", "-trimpath", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go -C e2e/oidcpeer build -o %s: %v\n%s", out, err, b)
	}
	return out, nil
}

// Options are the provider's flags.
type Options struct {
	ClientID, ClientSecret string
	// RedirectURIs the client may use (edgebase's callback URLs).
	RedirectURIs []string
	// UserEmail is the main user's address (and login name);
	// EmailUnverified makes the provider not vouch for it.
	UserEmail       string
	EmailUnverified bool
	// Users are more users: "email" or "email:unverified".
	Users []string
	// Password of every user (default "peer-password").
	Password string
	// IDTokenLifetime of the ID tokens (0: an hour; negative: expired).
	IDTokenLifetime time.Duration
	// Audience puts another audience in the ID tokens than the client id.
	Audience string
}

// Peer is a running provider.
type Peer struct {
	Issuer   string
	Password string
	cmd      *exec.Cmd
	out      *lockedBuffer
}

// Start runs the provider bin on a free loopback port and returns once it
// accepts connections; it is killed when t ends.
func Start(t testing.TB, bin string, o Options) *Peer {
	t.Helper()
	if o.Password == "" {
		o.Password = "peer-password"
	}
	args := []string{"--addr", "127.0.0.1:0", "--client-id", o.ClientID, "--client-secret", o.ClientSecret,
		"--user-email", o.UserEmail, fmt.Sprintf("--email-verified=%t", !o.EmailUnverified), "--user-password", o.Password}
	for _, r := range o.RedirectURIs {
		args = append(args, "--redirect-uri", r)
	}
	for _, u := range o.Users {
		args = append(args, "--user", u)
	}
	if o.IDTokenLifetime != 0 {
		args = append(args, "--id-token-lifetime", o.IDTokenLifetime.String())
	}
	if o.Audience != "" {
		args = append(args, "--audience", o.Audience)
	}
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("oidcpeer: %v", err)
	}
	logs := &lockedBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("oidcpeer: start %s: %v", bin, err)
	}
	p := &Peer{Password: o.Password, cmd: cmd, out: logs}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("---- oidcpeer output ----\n%s", logs.String())
		}
	})
	issuer := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if s, ok := strings.CutPrefix(sc.Text(), "issuer "); ok {
				issuer <- s
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case p.Issuer = <-issuer:
	case <-time.After(30 * time.Second):
		t.Fatalf("oidcpeer did not print its issuer within 30s:\n%s", logs.String())
	}
	return p
}

// ErrNoForm means a page was not the provider's login form.
var ErrNoForm = errors.New("oidcpeer: not the login form")

var formID = regexp.MustCompile(`name="id" value="([^"]+)"`)

// Login fills in the login form page (the body of the provider's page that
// the browser landed on, at pageURL) as a browser would: it posts the
// form's hidden id, the user name email and the peers' password to the
// form's action, with client (which follows the redirects back to the
// relying party, or not, as the caller set it up).
func (p *Peer) Login(ctx context.Context, client *http.Client, pageURL *url.URL, page []byte, email string) (*http.Response, error) {
	m := formID.FindSubmatch(page)
	if m == nil {
		return nil, fmt.Errorf("%w: %s: %.300s", ErrNoForm, pageURL, page)
	}
	action := pageURL.ResolveReference(&url.URL{Path: "/login/username"})
	form := url.Values{"id": {html.UnescapeString(string(m[1]))}, "username": {email}, "password": {p.Password}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, action.String(), strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return client.Do(req)
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

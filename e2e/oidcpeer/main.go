// Command oidcpeer is the OpenID provider edgebase's OAuth tests sign in
// against: zitadel's OP (github.com/zitadel/oidc/v3/pkg/op) with its example
// storage, login page and signing keys, serving one confidential web client.
// It is a module of its own so that the provider's dependencies stay out of
// edgebase's go.mod.
//
// Users log in on the example's form (POST /login/username with the fields
// id, username and password) with their email address as the user name and
// --user-password as the password. Two flags make it misbehave on purpose,
// for the tests of the relying party: --audience re-signs the ID tokens (with
// the provider's key) for another audience than the client, and a short or
// negative --id-token-lifetime issues ID tokens that expire soon or already
// have.
//
// It prints "issuer <url>" on standard output once it accepts connections.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "oidcpeer:", err)
		os.Exit(1)
	}
}

// userList collects --user flags: "email" or "email:unverified".
type userList []string

func (u *userList) String() string     { return strings.Join(*u, ",") }
func (u *userList) Set(v string) error { *u = append(*u, v); return nil }

func run(args []string) error {
	fs := flag.NewFlagSet("oidcpeer", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	issuer := fs.String("issuer", "", "issuer URL (default: http://<listen address>)")
	clientID := fs.String("client-id", "edgebase", "the relying party's client id")
	clientSecret := fs.String("client-secret", "edgebase-secret", "the relying party's client secret")
	var redirects userList
	fs.Var(&redirects, "redirect-uri", "a redirect URI the client may use (repeatable)")
	userEmail := fs.String("user-email", "user@example.com", "email address of the user (also the login name)")
	emailVerified := fs.Bool("email-verified", true, "whether the provider vouches for --user-email")
	var extra userList
	fs.Var(&extra, "user", "another user: email, or email:unverified (repeatable)")
	password := fs.String("user-password", "peer-password", "password of every user")
	lifetime := fs.Duration("id-token-lifetime", time.Hour, "lifetime of ID tokens (negative: issued expired)")
	audience := fs.String("audience", "", "audience of ID tokens (default: the client id)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(redirects) == 0 {
		return errors.New("--redirect-uri is required")
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	iss := strings.TrimSuffix(*issuer, "/")
	if iss == "" {
		iss = "http://" + ln.Addr().String()
	}

	users := peerUsers{byID: map[string]*storage.User{}}
	users.add(*userEmail, *emailVerified, *password)
	for _, u := range extra {
		email, flag, _ := strings.Cut(u, ":")
		users.add(email, flag != "unverified", *password)
	}
	client := storage.WebClient(*clientID, *clientSecret, redirects...)
	base := storage.NewStorageWithClients(users, map[string]*storage.Client{*clientID: client})
	st := &peerStorage{Storage: base, lifetime: *lifetime}

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var handler http.Handler = exampleop.SetupServer(iss, st, logger, false)
	if *audience != "" {
		handler = reaudience(handler, st, *audience)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Printf("issuer %s\n", iss)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shut)
	}
}

// peerUsers is the example's UserStore with users made from the flags: the
// subject is derived from the email, so that a restarted peer names the
// same user the same way.
type peerUsers struct{ byID map[string]*storage.User }

func (u peerUsers) add(email string, verified bool, password string) {
	sum := sha256.Sum256([]byte(strings.ToLower(email)))
	id := "sub-" + hex.EncodeToString(sum[:8])
	first, _, _ := strings.Cut(email, "@")
	u.byID[id] = &storage.User{ID: id, Username: email, Password: password, FirstName: first, LastName: "Peer",
		Email: email, EmailVerified: verified, PreferredLanguage: language.English}
}

func (u peerUsers) GetUserByID(id string) *storage.User { return u.byID[id] }

func (u peerUsers) GetUserByUsername(name string) *storage.User {
	for _, user := range u.byID {
		if user.Username == name {
			return user
		}
	}
	return nil
}

func (u peerUsers) ExampleClientID() string { return storage.ServiceUserID }

// peerStorage is the example storage with the ID token lifetime of the
// flags.
type peerStorage struct {
	*storage.Storage
	lifetime time.Duration
}

func (s *peerStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return lifetimeClient{Client: c, lifetime: s.lifetime}, nil
}

type lifetimeClient struct {
	op.Client
	lifetime time.Duration
}

func (c lifetimeClient) IDTokenLifetime() time.Duration { return c.lifetime }

// reaudience re-signs, with the provider's own key, the ID token of every
// token response so that it is for audience (aud and azp) instead of the
// client that asked: a validly signed token for another client, which a
// relying party must refuse. (zitadel's OP always adds the asking client to
// the audience, so this is done on the wire.)
func reaudience(next http.Handler, st *peerStorage, audience string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/oauth/token" {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		var resp map[string]any
		if rec.Code == http.StatusOK && json.Unmarshal(body, &resp) == nil {
			if raw, ok := resp["id_token"].(string); ok {
				if tok, err := resign(r.Context(), st, raw, audience); err == nil {
					resp["id_token"] = tok
					body, _ = json.Marshal(resp)
				} else {
					slog.Error("re-sign ID token", "err", err)
				}
			}
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	})
}

func resign(ctx context.Context, st *peerStorage, raw, audience string) (string, error) {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return "", errors.New("not a compact JWS")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", err
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		return "", err
	}
	claims["aud"] = []string{audience}
	claims["azp"] = audience
	claims["client_id"] = audience
	key, err := st.SigningKey(ctx)
	if err != nil {
		return "", err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: key.SignatureAlgorithm(), Key: key.Key()},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", key.ID()))
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	sig, err := signer.Sign(b)
	if err != nil {
		return "", err
	}
	return sig.CompactSerialize()
}

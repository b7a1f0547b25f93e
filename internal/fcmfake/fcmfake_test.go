package fcmfake

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	firebase "firebase.google.com/go/v4"
	"firebase.google.com/go/v4/errorutils"
	"firebase.google.com/go/v4/messaging"
	"golang.org/x/oauth2/google"
	"google.golang.org/api/option"
)

const testProject = "edgebase-test"

// Tests share a few RSA keys instead of generating one per service account.
var (
	keyPoolOnce sync.Once
	keyPool     [2]*rsa.PrivateKey
	keyPoolMu   sync.Mutex
	keyPoolNext int
)

func pooledKey(i int) *rsa.PrivateKey {
	keyPoolOnce.Do(func() {
		var wg sync.WaitGroup
		for j := range keyPool {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k, err := rsa.GenerateKey(rand.Reader, 2048)
				if err != nil {
					panic(err)
				}
				keyPool[j] = k
			}()
		}
		wg.Wait()
	})
	return keyPool[i%len(keyPool)]
}

func TestMain(m *testing.M) {
	generateKey = func() (*rsa.PrivateKey, error) {
		keyPoolMu.Lock()
		i := keyPoolNext
		keyPoolNext++
		keyPoolMu.Unlock()
		return pooledKey(i), nil
	}
	os.Exit(m.Run())
}

// otherKey returns a key that is not the private key in saJSON.
func otherKey(t testing.TB, saJSON []byte) *rsa.PrivateKey {
	t.Helper()
	mine := parseKey(t, saJSON)
	for i := 0; ; i++ {
		if k := pooledKey(i); !k.Equal(mine) {
			return k
		}
	}
}

func newServer(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func newClient(t testing.TB, s *Server, project string, credsJSON []byte) *messaging.Client {
	t.Helper()
	ctx := context.Background()
	app, err := firebase.NewApp(ctx, &firebase.Config{ProjectID: project},
		option.WithCredentialsJSON(credsJSON), option.WithEndpoint(s.Endpoint()))
	if err != nil {
		t.Fatal(err)
	}
	c, err := app.Messaging(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func noRejections(t *testing.T, s *Server) {
	t.Helper()
	if rj := s.Rejections(); len(rj) != 0 {
		t.Fatalf("unexpected rejections: %+v", rj)
	}
}

func TestServiceAccountJSON(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	raw := s.ServiceAccountJSON(testProject)
	if again := s.ServiceAccountJSON(testProject); !bytes.Equal(raw, again) {
		t.Fatal("ServiceAccountJSON is not cached")
	}
	var f map[string]string
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	wantKeys := []string{"type", "project_id", "private_key_id", "private_key", "client_email", "client_id",
		"auth_uri", "token_uri", "auth_provider_x509_cert_url", "client_x509_cert_url", "universe_domain"}
	if len(f) != len(wantKeys) {
		t.Errorf("got %d fields, want %d: %v", len(f), len(wantKeys), f)
	}
	last := -1
	for _, k := range wantKeys {
		i := bytes.Index(raw, []byte(`"`+k+`":`))
		if i < 0 {
			t.Fatalf("missing %q", k)
		}
		if i < last {
			t.Errorf("field %q out of Firebase's order", k)
		}
		last = i
	}
	checks := map[string]string{
		"type":            "service_account",
		"project_id":      testProject,
		"token_uri":       s.URL() + "/token",
		"auth_uri":        "https://accounts.google.com/o/oauth2/auth",
		"universe_domain": "googleapis.com",
	}
	for k, want := range checks {
		if f[k] != want {
			t.Errorf("%s = %q, want %q", k, f[k], want)
		}
	}
	if !regexp.MustCompile(`^firebase-adminsdk-[a-z0-9]{5}@` + testProject + `\.iam\.gserviceaccount\.com$`).MatchString(f["client_email"]) {
		t.Errorf("client_email = %q", f["client_email"])
	}
	if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(f["private_key_id"]) {
		t.Errorf("private_key_id = %q", f["private_key_id"])
	}
	if !regexp.MustCompile(`^[1-9][0-9]{20}$`).MatchString(f["client_id"]) {
		t.Errorf("client_id = %q", f["client_id"])
	}
	if want := "https://www.googleapis.com/robot/v1/metadata/x509/" + url.QueryEscape(f["client_email"]); f["client_x509_cert_url"] != want {
		t.Errorf("client_x509_cert_url = %q, want %q", f["client_x509_cert_url"], want)
	}
	if !strings.HasPrefix(f["private_key"], "-----BEGIN PRIVATE KEY-----\n") || !strings.HasSuffix(f["private_key"], "-----END PRIVATE KEY-----\n") {
		t.Errorf("private_key is not a PKCS#8 PEM: %.40q", f["private_key"])
	}
	key := parseKey(t, raw)
	if key.N.BitLen() != 2048 {
		t.Errorf("key is %d bits", key.N.BitLen())
	}
	if other := s.ServiceAccountJSON("other-project"); bytes.Contains(other, []byte(f["private_key_id"])) {
		t.Error("projects share a key")
	}
}

func parseKey(t testing.TB, saJSON []byte) *rsa.PrivateKey {
	t.Helper()
	var f struct {
		PrivateKey string `json:"private_key"`
	}
	if err := json.Unmarshal(saJSON, &f); err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode([]byte(f.PrivateKey))
	if blk == nil || blk.Type != "PRIVATE KEY" {
		t.Fatal("no PRIVATE KEY PEM block")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		t.Fatalf("key is %T", k)
	}
	return rk
}

func TestSendEachDelivers(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	c := newClient(t, s, testProject, s.ServiceAccountJSON(testProject))
	msgs := []*messaging.Message{
		{Token: "tok-a", Notification: &messaging.Notification{Title: "Hello", Body: "World"}, Data: map[string]string{"k": "v", "n": "1"}},
		{Token: "tok-b", Notification: &messaging.Notification{Title: "T2", Body: "B2", ImageURL: "https://example.com/i.png"},
			Android: &messaging.AndroidConfig{Priority: "high", CollapseKey: "ck"}},
		{Token: "tok-c", Data: map[string]string{"only": "data"},
			APNS:    &messaging.APNSConfig{Headers: map[string]string{"apns-priority": "10"}, Payload: &messaging.APNSPayload{Aps: &messaging.Aps{ContentAvailable: true}}},
			Webpush: &messaging.WebpushConfig{Headers: map[string]string{"TTL": "60"}}},
	}
	resp, err := c.SendEach(context.Background(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	if resp.SuccessCount != 3 {
		for i, r := range resp.Responses {
			t.Logf("%d: %+v", i, r)
		}
		t.Fatalf("SuccessCount = %d", resp.SuccessCount)
	}
	noRejections(t, s)
	if s.TokensIssued() < 1 {
		t.Fatal("no OAuth2 token was issued")
	}
	if n := s.SelfSignedBearers(); n != 0 {
		t.Fatalf("SDK used a self-signed JWT bearer %d times", n)
	}
	if s.Total() != 3 {
		t.Fatalf("Total = %d", s.Total())
	}
	byToken := map[string]Delivery{}
	for _, d := range s.Deliveries() {
		byToken[d.Token] = d
	}
	ids := map[string]bool{}
	for i, r := range resp.Responses {
		ids[r.MessageID] = true
		d, ok := byToken[msgs[i].Token]
		if !ok {
			t.Fatalf("no delivery to %s", msgs[i].Token)
		}
		if d.MessageID != r.MessageID {
			t.Errorf("MessageID %q, SDK got %q", d.MessageID, r.MessageID)
		}
		if !regexp.MustCompile(`^projects/` + testProject + `/messages/0:\d+%[0-9a-f]{16}$`).MatchString(r.MessageID) {
			t.Errorf("message id %q", r.MessageID)
		}
		if d.Project != testProject || s.Count(d.Token) != 1 || s.Attempts(d.Token) != 1 || d.At.IsZero() {
			t.Errorf("delivery %+v count %d attempts %d", d, s.Count(d.Token), s.Attempts(d.Token))
		}
	}
	if len(ids) != 3 {
		t.Errorf("message ids not unique: %v", ids)
	}
	a, b, cc := byToken["tok-a"], byToken["tok-b"], byToken["tok-c"]
	if a.Title != "Hello" || a.Body != "World" || a.Data["k"] != "v" || a.Data["n"] != "1" || len(a.Data) != 2 || a.Android != nil {
		t.Errorf("tok-a: %+v", a)
	}
	if b.Title != "T2" || b.Body != "B2" || b.Image != "https://example.com/i.png" || b.Data != nil {
		t.Errorf("tok-b: %+v", b)
	}
	var android struct {
		Priority    string `json:"priority"`
		CollapseKey string `json:"collapse_key"`
	}
	if err := json.Unmarshal(b.Android, &android); err != nil || android.Priority != "high" || android.CollapseKey != "ck" {
		t.Errorf("tok-b android %s: %v", b.Android, err)
	}
	if cc.Title != "" || cc.Data["only"] != "data" || !bytes.Contains(cc.APNS, []byte(`"content-available":1`)) || !bytes.Contains(cc.Webpush, []byte(`"TTL":"60"`)) {
		t.Errorf("tok-c: %+v apns %s webpush %s", cc, cc.APNS, cc.Webpush)
	}

	// The SDK's single Send and dry runs go through the same endpoint.
	if _, err := c.Send(context.Background(), &messaging.Message{Token: "tok-a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendDryRun(context.Background(), &messaging.Message{Token: "tok-a"}); err != nil {
		t.Fatal(err)
	}
	if s.Count("tok-a") != 2 || s.Attempts("tok-a") != 3 || s.Total() != 4 {
		t.Errorf("after Send+SendDryRun: count %d attempts %d total %d", s.Count("tok-a"), s.Attempts("tok-a"), s.Total())
	}
	noRejections(t, s)
}

// The newer auth stack (cloud.google.com/go/auth), which google.golang.org/api
// switches to with an environment variable, must work too.
func TestNewAuthLibrary(t *testing.T) {
	t.Setenv("GOOGLE_API_GO_EXPERIMENTAL_ENABLE_NEW_AUTH_LIB", "true")
	s := newServer(t, Options{})
	c := newClient(t, s, testProject, s.ServiceAccountJSON(testProject))
	if _, err := c.Send(context.Background(), &messaging.Message{Token: "x", Data: map[string]string{"a": "b"}}); err != nil {
		t.Fatal(err)
	}
	noRejections(t, s)
	if s.TokensIssued() != 1 || s.SelfSignedBearers() != 0 || s.Count("x") != 1 {
		t.Fatalf("issued %d self-signed %d count %d", s.TokensIssued(), s.SelfSignedBearers(), s.Count("x"))
	}
}

func TestErrorsSeenBySDK(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	c := newClient(t, s, testProject, s.ServiceAccountJSON(testProject))
	s.SetUnregistered("dead")
	s.SetInvalid("bogus")
	s.FailTransient("quota", 1, http.StatusTooManyRequests, time.Second)
	s.FailTransient("boom", 1, http.StatusInternalServerError, 0)
	resp, err := c.SendEach(context.Background(), []*messaging.Message{
		{Token: "live"}, {Token: "dead"}, {Token: "bogus"}, {Token: "quota"}, {Token: "boom"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.SuccessCount != 1 || resp.FailureCount != 4 || !resp.Responses[0].Success {
		t.Fatalf("success %d failure %d", resp.SuccessCount, resp.FailureCount)
	}
	dead, bogus, quota, boom := resp.Responses[1].Error, resp.Responses[2].Error, resp.Responses[3].Error, resp.Responses[4].Error
	if !messaging.IsUnregistered(dead) || !errorutils.IsNotFound(dead) {
		t.Errorf("dead: %v", dead)
	}
	if !messaging.IsInvalidArgument(bogus) || !errorutils.IsInvalidArgument(bogus) {
		t.Errorf("bogus: %v", bogus)
	}
	if !messaging.IsQuotaExceeded(quota) || !errorutils.IsResourceExhausted(quota) {
		t.Errorf("quota: %v", quota)
	}
	hr := errorutils.HTTPResponse(quota)
	if hr == nil {
		t.Fatal("errorutils.HTTPResponse(quota) = nil")
	}
	if hr.StatusCode != http.StatusTooManyRequests || hr.Header.Get("Retry-After") != "1" {
		t.Errorf("quota response: %d Retry-After %q", hr.StatusCode, hr.Header.Get("Retry-After"))
	}
	if b, err := io.ReadAll(hr.Body); err != nil || !bytes.Contains(b, []byte(`"errorCode":"QUOTA_EXCEEDED"`)) {
		t.Errorf("quota response body %s: %v", b, err)
	}
	if !messaging.IsInternal(boom) || !errorutils.IsInternal(boom) {
		t.Errorf("boom: %v", boom)
	}
	if hr := errorutils.HTTPResponse(boom); hr == nil || hr.Header.Get("Retry-After") != "" {
		t.Errorf("boom response %v", hr)
	}
	for _, tok := range []string{"dead", "bogus", "quota", "boom"} {
		if s.Count(tok) != 0 || s.Attempts(tok) != 1 {
			t.Errorf("%s: count %d attempts %d", tok, s.Count(tok), s.Attempts(tok))
		}
	}
	if s.Total() != 1 || len(s.Deliveries()) != 1 {
		t.Errorf("total %d", s.Total())
	}
	// Behaviours, not protocol errors.
	noRejections(t, s)

	// Unregistered is permanent; the one-shot failures are used up.
	resp, err = c.SendEach(context.Background(), []*messaging.Message{{Token: "dead"}, {Token: "quota"}, {Token: "boom"}})
	if err != nil {
		t.Fatal(err)
	}
	if !messaging.IsUnregistered(resp.Responses[0].Error) || !resp.Responses[1].Success || !resp.Responses[2].Success {
		t.Errorf("second round: %+v %+v %+v", resp.Responses[0], resp.Responses[1], resp.Responses[2])
	}
	// SetInvalid replaces SetUnregistered.
	s.SetInvalid("dead")
	if _, err := c.Send(context.Background(), &messaging.Message{Token: "dead"}); !messaging.IsInvalidArgument(err) {
		t.Errorf("dead after SetInvalid: %v", err)
	}
}

func TestTransientRetriedBySDK(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	c := newClient(t, s, testProject, s.ServiceAccountJSON(testProject))
	s.FailTransient("flaky", 2, http.StatusServiceUnavailable, 0)
	start := time.Now()
	resp, err := c.SendEach(context.Background(), []*messaging.Message{{Token: "flaky", Notification: &messaging.Notification{Title: "t"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Responses[0].Success {
		t.Fatalf("not delivered: %v", resp.Responses[0].Error)
	}
	if s.Attempts("flaky") != 3 || s.Count("flaky") != 1 {
		t.Fatalf("attempts %d count %d", s.Attempts("flaky"), s.Count("flaky"))
	}
	t.Logf("2 x 503 then delivered in %v", time.Since(start))

	// FailAllTransient hits whatever token comes next; 503s exhaust the SDK's retries
	// only after 4 retries, so one failure is retried and delivered.
	s.FailAllTransient(1, http.StatusServiceUnavailable, 0)
	if _, err := c.Send(context.Background(), &messaging.Message{Token: "any"}); err != nil {
		t.Fatal(err)
	}
	if s.Attempts("any") != 2 || s.Count("any") != 1 {
		t.Fatalf("any: attempts %d count %d", s.Attempts("any"), s.Count("any"))
	}
	s.FailAllTransient(2, http.StatusTooManyRequests, 0)
	for _, tok := range []string{"q1", "q2"} {
		_, err := c.Send(context.Background(), &messaging.Message{Token: tok})
		if !messaging.IsQuotaExceeded(err) {
			t.Fatalf("%s: %v", tok, err)
		}
		if hr := errorutils.HTTPResponse(err); hr == nil || hr.Header.Get("Retry-After") != "" {
			t.Fatalf("%s: response %v", tok, hr)
		}
	}
	if _, err := c.Send(context.Background(), &messaging.Message{Token: "q3"}); err != nil {
		t.Fatal(err)
	}
	s.FailTransient("u", 1, http.StatusServiceUnavailable, 0)
	s.FailTransient("u", 0, http.StatusServiceUnavailable, 0) // n <= 0 clears
	if _, err := c.Send(context.Background(), &messaging.Message{Token: "u"}); err != nil || s.Attempts("u") != 1 {
		t.Fatalf("u: %v, attempts %d", err, s.Attempts("u"))
	}
	noRejections(t, s)
}

func TestUnavailableAfterRetriesExhausted(t *testing.T) {
	t.Parallel()
	// With Retry-After 0 the SDK backs off 0s,1s,2s,4s: too slow for a unit
	// test, so only check that the error kind arrives when the context ends.
	s := newServer(t, Options{})
	c := newClient(t, s, testProject, s.ServiceAccountJSON(testProject))
	if _, err := c.Send(context.Background(), &messaging.Message{Token: "warm"}); err != nil {
		t.Fatal(err)
	}
	s.FailTransient("down", 100, http.StatusServiceUnavailable, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Send(ctx, &messaging.Message{Token: "down"})
	if err == nil {
		t.Fatal("delivered")
	}
	if s.Attempts("down") != 2 || s.Count("down") != 0 {
		t.Fatalf("attempts %d", s.Attempts("down"))
	}
	// Without retries in the way, the answer itself is UNAVAILABLE.
	req := rawSend(t, s, bearer(t, s, testProject), `{"message":{"token":"down"}}`)
	res := do(t, req)
	if res.status != 503 || !strings.Contains(res.body, `"errorCode":"UNAVAILABLE"`) || !strings.Contains(res.body, `"status":"UNAVAILABLE"`) {
		t.Fatalf("%d %s", res.status, res.body)
	}
	noRejections(t, s)
}

func TestSwappedPrivateKeyRejected(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	good := s.ServiceAccountJSON(testProject)
	var f map[string]string
	if err := json.Unmarshal(good, &f); err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(otherKey(t, good))
	if err != nil {
		t.Fatal(err)
	}
	f["private_key"] = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	bad, _ := json.Marshal(f)
	c := newClient(t, s, testProject, bad)

	// A failed token fetch is a transport error to the SDK, which it retries
	// with back-off (0s, 1s, ...); the deadline cuts that short.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	resp, err := c.SendEach(ctx, []*messaging.Message{{Token: "tok", Notification: &messaging.Notification{Title: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.FailureCount != 1 || resp.Responses[0].Error == nil {
		t.Fatalf("send with a swapped key succeeded: %+v", resp.Responses[0])
	}
	t.Logf("SDK error: %v", resp.Responses[0].Error)
	if s.TokensIssued() != 0 || s.Total() != 0 || s.Attempts("tok") != 0 {
		t.Fatalf("issued %d total %d attempts %d", s.TokensIssued(), s.Total(), s.Attempts("tok"))
	}
	rj := s.Rejections()
	if len(rj) == 0 {
		t.Fatal("no rejection recorded")
	}
	for _, r := range rj {
		if r.Path != "/token" || !strings.Contains(r.Reason, "signature") {
			t.Errorf("rejection %+v", r)
		}
	}
}

type result struct {
	status int
	header http.Header
	body   string
}

func do(t testing.TB, req *http.Request) result {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return result{res.StatusCode, res.Header, string(b)}
}

// rawSend builds a messages:send request the way the SDK does.
func rawSend(t testing.TB, s *Server, bearer, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.Endpoint()+"/projects/"+testProject+"/messages:send", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GOOG-API-FORMAT-VERSION", "2")
	req.Header.Set("X-Firebase-Client", "fire-admin-go/4.19.0")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	return req
}

// bearer obtains an access token the way golang.org/x/oauth2/google does.
func bearer(t testing.TB, s *Server, project string) string {
	t.Helper()
	creds, err := google.CredentialsFromJSONWithType(context.Background(), s.ServiceAccountJSON(project), google.ServiceAccount, ScopeFirebaseMessaging)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := creds.TokenSource.Token()
	if err != nil {
		t.Fatal(err)
	}
	return tok.AccessToken
}

func TestForgedBearer(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	s.ServiceAccountJSON(testProject)
	for i, authz := range []string{"Bearer ya29.forged", "", "Basic Zm9vOmJhcg==", "Bearer a.b.c"} {
		req := rawSend(t, s, "", `{"message":{"token":"victim","data":{"a":"b"}}}`)
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		res := do(t, req)
		if res.status != http.StatusUnauthorized || !strings.Contains(res.body, `"status":"UNAUTHENTICATED"`) ||
			!strings.HasPrefix(res.header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%q: %d %s", authz, res.status, res.body)
		}
		if got := len(s.Rejections()); got != i+1 {
			t.Fatalf("%q: %d rejections", authz, got)
		}
	}
	if s.Attempts("victim") != 4 || s.Count("victim") != 0 || s.Total() != 0 {
		t.Fatalf("attempts %d count %d", s.Attempts("victim"), s.Count("victim"))
	}
	if s.RejectionCount() != 4 {
		t.Fatalf("RejectionCount %d", s.RejectionCount())
	}

	// A real token for another project is a sender-id mismatch.
	other := bearer(t, s, "other-project")
	res := do(t, rawSend(t, s, other, `{"message":{"token":"victim"}}`))
	if res.status != http.StatusForbidden || !strings.Contains(res.body, `"errorCode":"SENDER_ID_MISMATCH"`) {
		t.Fatalf("%d %s", res.status, res.body)
	}
	if s.RejectionCount() != 5 {
		t.Fatalf("RejectionCount %d", s.RejectionCount())
	}
}

func TestErrorBodiesExact(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	tok := bearer(t, s, testProject)
	s.SetUnregistered("dead")
	s.SetInvalid("bad")
	s.FailTransient("slow", 1, http.StatusTooManyRequests, 1500*time.Millisecond) // Retry-After rounds up
	cases := []struct {
		token, body, retryAfter string
		status                  int
	}{
		{"dead", `{"error":{"code":404,"message":"Requested entity was not found.","status":"NOT_FOUND","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"UNREGISTERED"}]}}`, "", 404},
		{"bad", `{"error":{"code":400,"message":"The registration token is not a valid FCM registration token","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"INVALID_ARGUMENT"}]}}`, "", 400},
		{"slow", `"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"QUOTA_EXCEEDED"}]}}`, "2", 429},
		{"ok", `{"name":"projects/` + testProject + `/messages/0:`, "", 200},
	}
	for _, tc := range cases {
		res := do(t, rawSend(t, s, tok, `{"message":{"token":"`+tc.token+`"}}`))
		if res.status != tc.status || !strings.Contains(res.body, tc.body) || res.header.Get("Retry-After") != tc.retryAfter ||
			!strings.HasPrefix(res.header.Get("Content-Type"), "application/json") {
			t.Errorf("%s: %d %s (Retry-After %q)", tc.token, res.status, res.body, res.header.Get("Retry-After"))
		}
	}
	noRejections(t, s)
}

func TestProtocolViolations(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	tok := bearer(t, s, testProject)
	good := `{"message":{"token":"t1","notification":{"title":"a","body":"b"},"data":{"x":"y"}}}`

	type tc struct {
		name   string
		mutate func(*http.Request)
		body   string
		status int
		want   string // in the rejection reason
	}
	cases := []tc{
		{"no format header", func(r *http.Request) { r.Header.Del("X-GOOG-API-FORMAT-VERSION") }, good, 400, "X-GOOG-API-FORMAT-VERSION"},
		{"no client header", func(r *http.Request) { r.Header.Del("X-Firebase-Client") }, good, 400, "X-Firebase-Client"},
		{"content type", func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, good, 400, "Content-Type"},
		{"unknown message field", nil, `{"message":{"token":"t1","priority":"high"}}`, 400, `Unknown name "priority" at 'message'`},
		{"unknown top-level field", nil, `{"message":{"token":"t1"},"dry_run":true}`, 400, `Unknown name "dry_run"`},
		{"case matters", nil, `{"message":{"Token":"t1"}}`, 400, `Unknown name "Token"`},
		{"unknown notification field", nil, `{"message":{"token":"t1","notification":{"title":"a","sound":"x"}}}`, 400, `"sound"`},
		{"data not strings", nil, `{"message":{"token":"t1","data":{"n":1}}}`, 400, "message.data"},
		{"data not object", nil, `{"message":{"token":"t1","data":["a"]}}`, 400, "message.data"},
		{"android not object", nil, `{"message":{"token":"t1","android":"high"}}`, 400, "message.android"},
		{"two targets", nil, `{"message":{"token":"t1","topic":"news"}}`, 400, "Oneof"},
		{"no target", nil, `{"message":{"data":{"a":"b"}}}`, 400, "Recipient"},
		{"topic", nil, `{"message":{"topic":"news"}}`, 400, "only to registration tokens"},
		{"no message", nil, `{"validate_only":false}`, 400, "invalid argument"},
		{"not json", nil, `{"message":`, 400, "Invalid JSON"},
		{"token not string", nil, `{"message":{"token":7}}`, 400, "message.token"},
		{"empty token", nil, `{"message":{"token":""}}`, 400, "not a valid FCM registration token"},
		{"wrong method", func(r *http.Request) { r.Method = http.MethodPut }, good, 404, "method PUT"},
		{"unknown path", func(r *http.Request) { r.URL.Path = "/v1/projects/" + testProject + "/messages:batchSend" }, good, 404, "unknown path"},
		{"batch endpoint", func(r *http.Request) { r.URL.Path = "/batch" }, good, 404, "unknown path"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s.Reset()
			req := rawSend(t, s, tok, c.body)
			if c.mutate != nil {
				c.mutate(req)
			}
			res := do(t, req)
			if res.status != c.status || !strings.Contains(res.body, `"status":`) {
				t.Errorf("answer %d %s", res.status, res.body)
			}
			rj := s.Rejections()
			if len(rj) != 1 || !strings.Contains(rj[0].Reason, c.want) || rj[0].At.IsZero() {
				t.Errorf("rejections %+v, want one containing %q (answer %s)", rj, c.want, res.body)
			}
			if s.Total() != 0 {
				t.Errorf("delivered")
			}
		})
	}

	// The well-formed variants are accepted.
	s.Reset()
	for _, body := range []string{
		good,
		`{"message":{"token":"t2","fcmOptions":{"analytics_label":"x"}},"validateOnly":false}`,
		`{"message":{"token":"t3","data":null,"notification":null,"name":"ignored"}}`,
	} {
		if res := do(t, rawSend(t, s, tok, body)); res.status != 200 {
			t.Errorf("%s: %d %s", body, res.status, res.body)
		}
	}
	noRejections(t, s)
	if d := s.Deliveries(); len(d) != 3 || string(d[1].FCMOptions) != `{"analytics_label":"x"}` {
		t.Errorf("deliveries %+v", d)
	}
	// validate_only answers like FCM's dry run and delivers nothing.
	res := do(t, rawSend(t, s, tok, `{"message":{"token":"t4"},"validate_only":true}`))
	if res.status != 200 || res.body != `{"name":"projects/`+testProject+`/messages/fake_message_id"}` {
		t.Errorf("validate_only: %d %s", res.status, res.body)
	}
	if s.Count("t4") != 0 || s.Attempts("t4") != 1 || s.Total() != 3 {
		t.Errorf("validate_only counted")
	}
}

func TestTokenEndpointChecks(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	saJSON := s.ServiceAccountJSON(testProject)
	key := parseKey(t, saJSON)
	var f map[string]string
	if err := json.Unmarshal(saJSON, &f); err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix()
	claims := func(mod func(map[string]any)) map[string]any {
		c := map[string]any{"iss": f["client_email"], "aud": s.URL() + "/token", "scope": ScopeCloudPlatform, "iat": now - 10, "exp": now + 3590}
		if mod != nil {
			mod(c)
		}
		return c
	}
	hdr := map[string]any{"alg": "RS256", "typ": "JWT", "kid": f["private_key_id"]}
	post := func(form url.Values) result {
		req, _ := http.NewRequest(http.MethodPost, s.URL()+"/token", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return do(t, req)
	}
	assertion := func(h, c map[string]any, k *rsa.PrivateKey) url.Values {
		return url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"}, "assertion": {signJWT(t, h, c, k)}}
	}

	res := post(assertion(hdr, claims(nil), key))
	var tr struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int    `json:"expires_in"`
	}
	if err := json.Unmarshal([]byte(res.body), &tr); res.status != 200 || err != nil || tr.AccessToken == "" || tr.TokenType != "Bearer" || tr.ExpiresIn != 3599 {
		t.Fatalf("good assertion: %d %s", res.status, res.body)
	}
	if s.TokensIssued() != 1 {
		t.Fatal("TokensIssued")
	}
	noRejections(t, s)

	other := otherKey(t, saJSON)
	bad := []struct {
		name string
		form url.Values
		code string
	}{
		{"wrong key", assertion(hdr, claims(nil), other), "invalid_grant"},
		{"alg none", assertion(map[string]any{"alg": "HS256", "typ": "JWT", "kid": f["private_key_id"]}, claims(nil), key), "invalid_grant"},
		{"wrong kid", assertion(map[string]any{"alg": "RS256", "typ": "JWT", "kid": "nope"}, claims(nil), key), "invalid_grant"},
		{"unknown iss", assertion(hdr, claims(func(c map[string]any) { c["iss"] = "x@y.iam.gserviceaccount.com" }), key), "invalid_grant"},
		{"wrong aud", assertion(hdr, claims(func(c map[string]any) { c["aud"] = "https://oauth2.googleapis.com/token" }), key), "invalid_grant"},
		{"no scope", assertion(hdr, claims(func(c map[string]any) { c["scope"] = "https://www.googleapis.com/auth/datastore" }), key), "invalid_scope"},
		{"expired", assertion(hdr, claims(func(c map[string]any) { c["iat"], c["exp"] = now-7200, now-3600 }), key), "invalid_grant"},
		{"too long", assertion(hdr, claims(func(c map[string]any) { c["exp"] = now + 7200 }), key), "invalid_grant"},
		{"no iat", assertion(hdr, claims(func(c map[string]any) { delete(c, "iat") }), key), "invalid_grant"},
		{"garbage", url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"}, "assertion": {"abc"}}, "invalid_grant"},
		{"grant type", url.Values{"grant_type": {"client_credentials"}, "assertion": {"abc"}}, "unsupported_grant_type"},
	}
	for i, b := range bad {
		res := post(b.form)
		var oe struct {
			Error string `json:"error"`
			Desc  string `json:"error_description"`
		}
		if err := json.Unmarshal([]byte(res.body), &oe); res.status != 400 || err != nil || oe.Error != b.code || oe.Desc == "" {
			t.Errorf("%s: %d %s", b.name, res.status, res.body)
		}
		if n := s.RejectionCount(); n != i+1 {
			t.Errorf("%s: RejectionCount %d", b.name, n)
		}
	}
	if s.TokensIssued() != 1 {
		t.Fatalf("TokensIssued %d", s.TokensIssued())
	}
	req, _ := http.NewRequest(http.MethodPost, s.URL()+"/token", strings.NewReader(`{"grant_type":"x"}`))
	req.Header.Set("Content-Type", "application/json")
	if res := do(t, req); res.status != 400 || s.RejectionCount() != len(bad)+1 {
		t.Errorf("json token request: %d %s", res.status, res.body)
	}
}

func signJWT(t testing.TB, hdr, claims map[string]any, key *rsa.PrivateKey) string {
	t.Helper()
	h, _ := json.Marshal(hdr)
	c, _ := json.Marshal(claims)
	return signRaw(t, h, c, key)
}

// TestSelfSignedJWTBearer covers the flow google.golang.org/api uses outside
// the googleapis.com universe: a self-signed JWT sent directly as the bearer.
func TestSelfSignedJWTBearer(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	saJSON := s.ServiceAccountJSON(testProject)
	ts, err := google.JWTAccessTokenSourceWithScope(saJSON, ScopeCloudPlatform)
	if err != nil {
		t.Fatal(err)
	}
	jwtTok, err := ts.Token()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if res := do(t, rawSend(t, s, jwtTok.AccessToken, `{"message":{"token":"sj"}}`)); res.status != 200 {
			t.Fatalf("%d %s", res.status, res.body)
		}
	}
	// Audience form.
	ats, err := google.JWTAccessTokenSourceFromJSON(saJSON, FCMAudience)
	if err != nil {
		t.Fatal(err)
	}
	audTok, err := ats.Token()
	if err != nil {
		t.Fatal(err)
	}
	if res := do(t, rawSend(t, s, audTok.AccessToken, `{"message":{"token":"sj"}}`)); res.status != 200 {
		t.Fatalf("%d %s", res.status, res.body)
	}
	noRejections(t, s)
	if s.SelfSignedBearers() != 3 || s.Count("sj") != 3 || s.TokensIssued() != 0 {
		t.Fatalf("self-signed %d count %d issued %d", s.SelfSignedBearers(), s.Count("sj"), s.TokensIssued())
	}
	// Wrong audience / tampered signature.
	wrong, err := google.JWTAccessTokenSourceFromJSON(saJSON, "https://storage.googleapis.com/")
	if err != nil {
		t.Fatal(err)
	}
	wt, _ := wrong.Token()
	tampered := jwtTok.AccessToken[:len(jwtTok.AccessToken)-4] + "AAAA"
	for _, b := range []string{wt.AccessToken, tampered} {
		if res := do(t, rawSend(t, s, b, `{"message":{"token":"sj"}}`)); res.status != 401 {
			t.Fatalf("%d %s", res.status, res.body)
		}
	}
	if s.RejectionCount() != 2 {
		t.Fatalf("rejections %+v", s.Rejections())
	}
}

func TestWaitTotal(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	c := newClient(t, s, testProject, s.ServiceAccountJSON(testProject))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	done := make(chan error, 2)
	go func() { done <- s.WaitTotal(ctx, 5) }()
	go func() { done <- s.WaitTotal(ctx, 3) }()
	msgs := make([]*messaging.Message, 5)
	for i := range msgs {
		msgs[i] = &messaging.Message{Token: fmt.Sprintf("w%d", i)}
	}
	if _, err := c.SendEach(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if err := s.WaitTotal(ctx, 5); err != nil {
		t.Fatal(err)
	}

	short, cancelShort := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancelShort()
	if err := s.WaitTotal(short, 6); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitTotal past deadline: %v", err)
	}
	s.mu.Lock()
	left := len(s.waiters)
	s.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d waiters left behind", left)
	}

	go func() { done <- s.WaitTotal(context.Background(), 100) }()
	time.Sleep(10 * time.Millisecond)
	s.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitTotal after Close: %v", err)
	}
}

func TestResetAndLatency(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{Latency: 50 * time.Millisecond})
	c := newClient(t, s, testProject, s.ServiceAccountJSON(testProject))
	s.SetUnregistered("r")
	start := time.Now()
	if _, err := c.Send(context.Background(), &messaging.Message{Token: "a"}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("answer took %v, latency is 50ms", d)
	}
	do(t, rawSend(t, s, "forged", `{"message":{"token":"a"}}`))
	if s.Total() != 1 || s.RejectionCount() != 1 || s.Attempts("a") != 2 {
		t.Fatal("records before reset")
	}
	issued := s.TokensIssued()
	s.Reset()
	if s.Total() != 0 || len(s.Deliveries()) != 0 || s.Count("a") != 0 || s.Attempts("a") != 0 || len(s.Rejections()) != 0 || s.RejectionCount() != 0 {
		t.Fatal("Reset kept records")
	}
	// Keys and issued tokens survive: the same client keeps working without a new exchange.
	if _, err := c.Send(context.Background(), &messaging.Message{Token: "r"}); err != nil {
		t.Fatalf("behaviour survived Reset: %v", err)
	}
	if s.TokensIssued() != issued || s.Count("r") != 1 {
		t.Fatalf("issued %d -> %d", issued, s.TokensIssued())
	}
	noRejections(t, s)
}

func TestDeliveryCap(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	s.mu.Lock()
	s.maxDeliveries = 10
	s.mu.Unlock()
	c := newClient(t, s, testProject, s.ServiceAccountJSON(testProject))
	msgs := make([]*messaging.Message, 25)
	for i := range msgs {
		msgs[i] = &messaging.Message{Token: fmt.Sprintf("d%d", i%5), Data: map[string]string{"i": fmt.Sprint(i)}}
	}
	resp, err := c.SendEach(context.Background(), msgs)
	if err != nil || resp.SuccessCount != 25 {
		t.Fatalf("%v %+v", err, resp)
	}
	if len(s.Deliveries()) != 10 || s.Total() != 25 || s.Count("d3") != 5 {
		t.Fatalf("deliveries %d total %d count %d", len(s.Deliveries()), s.Total(), s.Count("d3"))
	}
	noRejections(t, s)
}

// Many concurrent SDK clients against one server, for the race detector.
func TestConcurrentClients(t *testing.T) {
	t.Parallel()
	s := newServer(t, Options{})
	const clients, perClient = 4, 100
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := 0; i < clients; i++ {
		c := newClient(t, s, testProject, s.ServiceAccountJSON(testProject))
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			msgs := make([]*messaging.Message, perClient)
			for j := range msgs {
				msgs[j] = &messaging.Message{Token: fmt.Sprintf("c%d-%d", i, j%10), Notification: &messaging.Notification{Title: "t"}}
			}
			resp, err := c.SendEach(context.Background(), msgs)
			if err == nil && resp.FailureCount != 0 {
				err = fmt.Errorf("client %d: %d failures, first %v", i, resp.FailureCount, resp.Responses[0].Error)
			}
			errs <- err
		}(i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.WaitTotal(ctx, clients*perClient); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if s.Total() != clients*perClient || s.Count("c2-7") != perClient/10 {
		t.Fatalf("total %d", s.Total())
	}
	noRejections(t, s)
}

// BenchmarkSendEach measures the fake driven by the real SDK (client and
// server share the machine).
func BenchmarkSendEach(b *testing.B) {
	s := newServer(b, Options{})
	c := newClient(b, s, testProject, s.ServiceAccountJSON(testProject))
	msgs := make([]*messaging.Message, 500)
	for i := range msgs {
		msgs[i] = &messaging.Message{Token: fmt.Sprintf("bench-%d", i), Notification: &messaging.Notification{Title: "t", Body: "b"}, Data: map[string]string{"k": "v"}}
	}
	b.ResetTimer()
	start := time.Now()
	sent := 0
	for sent < b.N {
		resp, err := c.SendEach(context.Background(), msgs)
		if err != nil || resp.FailureCount != 0 {
			b.Fatal(err, resp.FailureCount)
		}
		sent += len(msgs)
	}
	b.ReportMetric(float64(sent)/time.Since(start).Seconds(), "msgs/s")
	if s.RejectionCount() != 0 {
		b.Fatal(s.Rejections())
	}
}

func signRaw(t testing.TB, hdr, claims []byte, key *rsa.PrivateKey) string {
	t.Helper()
	signing := base64.RawURLEncoding.EncodeToString(hdr) + "." + base64.RawURLEncoding.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

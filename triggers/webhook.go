package triggers

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/edgebase/edgebase/auth"
)

// Headers of a webhook delivery (the wire contract; docs/triggers.md).
const (
	HeaderSignature = "Edgebase-Signature"
	HeaderTrigger   = "Edgebase-Trigger"
	HeaderRevision  = "Edgebase-Revision"
	HeaderAttempt   = "Edgebase-Attempt"
	// UserAgent is what deliveries identify as.
	UserAgent = "edgebase-webhooks/1"
	// SignatureTolerance is how old a signature's timestamp receivers
	// should still accept.
	SignatureTolerance = 5 * time.Minute
)

// Sign is the Edgebase-Signature header of body sent at t:
// "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>", the
// scheme Stripe uses.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(signature(secret, ts, body))
}

func signature(secret, ts string, body []byte) []byte {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return mac.Sum(nil)
}

// ErrBadSignature means a delivery's signature header does not verify.
var ErrBadSignature = errors.New("triggers: bad webhook signature")

// VerifySignature checks a received Edgebase-Signature header against
// body: a v1 signature made with secret, and a timestamp within tolerance
// of now (either way). It is what a receiver written in Go runs.
func VerifySignature(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return fmt.Errorf("%w: no t= and v1= parts", ErrBadSignature)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: timestamp %d is outside the tolerance", ErrBadSignature, sec)
	}
	want := signature(secret, ts, body)
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			return nil
		}
	}
	return fmt.Errorf("%w: no v1 signature matches", ErrBadSignature)
}

// attemptError is a failed attempt of an action: whether trying again can
// help, and how long the other side asked us to wait (Retry-After).
type attemptError struct {
	permanent  bool
	retryAfter time.Duration // valid when hasRetryAfter
	hasRetry   bool
	err        error
}

func (e *attemptError) Error() string { return e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }

func permanentErr(err error) error { return &attemptError{permanent: true, err: err} }

// isPermanent reports whether err says retrying cannot help.
func isPermanent(err error) bool {
	var ae *attemptError
	return errors.As(err, &ae) && ae.permanent
}

// retryAfterOf is the wait err asks for (ok false: none asked).
func retryAfterOf(err error) (time.Duration, bool) {
	var ae *attemptError
	if errors.As(err, &ae) && ae.hasRetry {
		return ae.retryAfter, true
	}
	return 0, false
}

// webhookClient sends deliveries over one shared transport that dials
// through the operator's host policy.
type webhookClient struct {
	client  *http.Client
	timeout time.Duration
	clock   Clock
}

func newWebhookClient(dial func(ctx context.Context, network, addr string) (net.Conn, error), tu Tuning, clock Clock) *webhookClient {
	tr := &http.Transport{
		// Never a proxy from the environment: it would bypass the host
		// policy the dialler enforces.
		Proxy:                 nil,
		DialContext:           dial,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          2 * tu.InFlight,
		MaxIdleConnsPerHost:   tu.InFlight,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   tu.Timeout,
		ResponseHeaderTimeout: tu.Timeout,
	}
	return &webhookClient{
		client: &http.Client{Transport: tr,
			// A redirect is not followed: the target was judged, its
			// redirect would not be.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		timeout: tu.Timeout,
		clock:   clock,
	}
}

func (w *webhookClient) close() { w.client.CloseIdleConnections() }

// maxErrorBody bounds what of a failed answer's body is kept for lastError.
const maxErrorBody = 256

// send POSTs p to hook once (attempt counts from 1). The error is an
// *attemptError when the receiver answered or the URL was refused.
func (w *webhookClient) send(ctx context.Context, hook *Webhook, secret string, p *Payload, attempt int) error {
	body, err := json.Marshal(p)
	if err != nil {
		return permanentErr(fmt.Errorf("encode payload: %w", err))
	}
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook.URL, bytes.NewReader(body))
	if err != nil {
		return permanentErr(fmt.Errorf("webhook url: %w", err))
	}
	for k, v := range hook.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set("Idempotency-Key", p.ID)
	req.Header.Set(HeaderSignature, Sign(secret, w.clock.Now(), body))
	req.Header.Set(HeaderTrigger, p.Trigger)
	req.Header.Set(HeaderRevision, strconv.FormatUint(p.Revision, 10))
	req.Header.Set(HeaderAttempt, strconv.Itoa(attempt))
	resp, err := w.client.Do(req)
	if err != nil {
		if errors.Is(err, auth.ErrHostNotAllowed) {
			return permanentErr(fmt.Errorf("webhook url refused by the host policy: %w", err))
		}
		return fmt.Errorf("webhook post: %w", err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	// Drain a little more so the connection can be reused.
	_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	e := &attemptError{err: fmt.Errorf("webhook answered %s: %s", resp.Status, strings.TrimSpace(string(snippet)))}
	switch {
	case resp.StatusCode >= 500, resp.StatusCode == http.StatusRequestTimeout,
		resp.StatusCode == http.StatusTooEarly, resp.StatusCode == http.StatusTooManyRequests:
		e.retryAfter, e.hasRetry = parseRetryAfter(resp.Header.Get("Retry-After"), w.clock.Now())
	default:
		// Other 4xx, and 3xx (not followed), will not change by retrying.
		e.permanent = true
	}
	return e
}

// parseRetryAfter reads a Retry-After header: delay seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		return time.Duration(min(n, int64(365*24*3600))) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

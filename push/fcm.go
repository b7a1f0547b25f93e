package push

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	firebase "firebase.google.com/go/v4"
	"firebase.google.com/go/v4/errorutils"
	"firebase.google.com/go/v4/messaging"
	"google.golang.org/api/option"
	htransport "google.golang.org/api/transport/http"
)

// Message is one notification to one device.
type Message struct {
	Token string
	Title string
	Body  string
	Data  map[string]string
}

// Outcome is what became of one message.
type Outcome int

// Outcomes of a message.
const (
	// Delivered: FCM accepted the message.
	Delivered Outcome = iota
	// Failed: FCM refused it, or kept failing after our retries.
	Failed
	// Gone: FCM says the token is unregistered or invalid; it is pruned.
	Gone
)

// Result is the outcome of one message, with FCM's reason when it failed.
type Result struct {
	Outcome Outcome
	Err     string
}

// Sender delivers messages to devices through one project's credentials.
// It returns an error only when ctx ended before the outcomes were known.
type Sender interface {
	Send(ctx context.Context, pid string, creds []byte, credsRev uint64, msgs []Message) ([]Result, error)
}

// The OAuth2 scopes the service account's token asks for.
const (
	scopeFCM   = "https://www.googleapis.com/auth/firebase.messaging"
	scopeCloud = "https://www.googleapis.com/auth/cloud-platform"
)

// FCMSender sends through Firebase Cloud Messaging with the firebase-admin-go
// SDK: one client per project (rebuilt when its credentials change),
// SendEach per batch, our own retries with backoff on transient errors and
// on 429 (the SDK retries only 503), honouring Retry-After.
type FCMSender struct {
	endpoint string
	logger   *slog.Logger
	// MaxAttempts bounds the attempts per message (default 5).
	MaxAttempts int
	// MaxBackoff caps one wait between attempts (default 30 s).
	MaxBackoff time.Duration
	// MaxConns is the idle connection pool to FCM: batches in flight times
	// the SDK's 50 workers per SendEach (default 512).
	MaxConns int

	mu      sync.Mutex
	clients map[string]fcmClient
}

type fcmClient struct {
	rev    uint64
	client *messaging.Client
}

// NewFCMSender builds a sender; endpoint "" is Google's FCM, anything else an
// FCM-compatible endpoint (for development and tests).
func NewFCMSender(endpoint string, logger *slog.Logger) *FCMSender {
	if logger == nil {
		logger = slog.Default()
	}
	return &FCMSender{endpoint: endpoint, logger: logger, MaxAttempts: 5, MaxBackoff: 30 * time.Second, MaxConns: 512, clients: map[string]fcmClient{}}
}

func (f *FCMSender) client(pid string, creds []byte, rev uint64) (*messaging.Client, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.clients[pid]; ok && c.rev == rev {
		return c.client, nil
	}
	var sa struct {
		ProjectID string `json:"project_id"`
		TokenURI  string `json:"token_uri"`
	}
	if err := json.Unmarshal(creds, &sa); err != nil || sa.ProjectID == "" {
		return nil, errors.New("the stored service account has no project_id")
	}
	// Checked again here: credentials stored by an earlier binary were not.
	if err := CheckTokenURI(sa.TokenURI, f.endpoint); err != nil {
		return nil, err
	}
	// The client outlives any one request or leadership term: its token
	// source refreshes with the context it was made with.
	ctx := context.Background()
	// Our own HTTP client: an idle pool as large as the requests we keep in
	// flight (the default keeps 100 and re-dials the rest), and no
	// telemetry wrapper (it splits every request into two writes). Both
	// together cut the leader's CPU per message by about a third (see
	// docs/benchmarks.md).
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConns = f.MaxConns
	base.MaxIdleConnsPerHost = f.MaxConns
	base.ForceAttemptHTTP2 = true
	rt, err := htransport.NewTransport(ctx, base, option.WithCredentialsJSON(creds), option.WithTelemetryDisabled(),
		option.WithScopes(scopeFCM, scopeCloud))
	if err != nil {
		return nil, fmt.Errorf("fcm transport: %w", err)
	}
	opts := []option.ClientOption{option.WithHTTPClient(&http.Client{Transport: rt})}
	if f.endpoint != "" {
		opts = append(opts, option.WithEndpoint(f.endpoint))
	}
	app, err := firebase.NewApp(ctx, &firebase.Config{ProjectID: sa.ProjectID}, opts...)
	if err != nil {
		return nil, fmt.Errorf("firebase app: %w", err)
	}
	mc, err := app.Messaging(ctx)
	if err != nil {
		return nil, fmt.Errorf("firebase messaging client: %w", err)
	}
	f.clients[pid] = fcmClient{rev: rev, client: mc}
	return mc, nil
}

// Send delivers msgs (at most 500) and reports each one's outcome.
func (f *FCMSender) Send(ctx context.Context, pid string, creds []byte, rev uint64, msgs []Message) ([]Result, error) {
	out := make([]Result, len(msgs))
	if len(msgs) == 0 {
		return out, nil
	}
	if len(creds) == 0 {
		for i := range out {
			out[i] = Result{Outcome: Failed, Err: "no FCM credentials are set for this project"}
		}
		return out, nil
	}
	mc, err := f.client(pid, creds, rev)
	if err != nil {
		for i := range out {
			out[i] = Result{Outcome: Failed, Err: err.Error()}
		}
		return out, nil
	}
	pending := make([]int, len(msgs))
	for i := range pending {
		pending[i] = i
	}
	attempts := max(f.MaxAttempts, 1)
	for attempt := 0; len(pending) > 0; attempt++ {
		batch := make([]*messaging.Message, len(pending))
		for i, idx := range pending {
			m := msgs[idx]
			batch[i] = &messaging.Message{Token: m.Token, Data: m.Data,
				Notification: &messaging.Notification{Title: m.Title, Body: m.Body}}
		}
		br, err := mc.SendEach(ctx, batch)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var retry []int
		var wait time.Duration
		if err != nil {
			// The whole call failed (not per message): all are transient.
			for _, idx := range pending {
				out[idx] = Result{Outcome: Failed, Err: err.Error()}
			}
			retry = pending
		} else {
			for i, r := range br.Responses {
				idx := pending[i]
				switch {
				case r.Success:
					out[idx] = Result{Outcome: Delivered}
				case messaging.IsUnregistered(r.Error) || messaging.IsInvalidArgument(r.Error):
					out[idx] = Result{Outcome: Gone, Err: r.Error.Error()}
				case transient(r.Error):
					out[idx] = Result{Outcome: Failed, Err: r.Error.Error()}
					retry = append(retry, idx)
					wait = max(wait, retryAfter(r.Error))
				default:
					out[idx] = Result{Outcome: Failed, Err: r.Error.Error()}
				}
			}
		}
		if len(retry) == 0 || attempt+1 >= attempts {
			return out, nil
		}
		// Exponential backoff with jitter, but never sooner than FCM asked.
		backoff := time.Duration(float64(500*time.Millisecond) * float64(int(1)<<attempt) * (0.5 + rand.Float64()/2))
		wait = min(max(wait, backoff), f.MaxBackoff)
		f.logger.Debug("fcm: retrying transient failures", "project", pid, "messages", len(retry), "wait", wait)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		pending = retry
	}
	return out, nil
}

// transient reports whether a message may succeed if sent again: quota
// (429), internal (500) and unavailable (503, after the SDK's own retries).
// Errors without an HTTP answer (network, a failed token exchange) are not
// retried again here: the SDK has already retried them four times.
func transient(err error) bool {
	return messaging.IsQuotaExceeded(err) || messaging.IsUnavailable(err) || messaging.IsInternal(err) ||
		errorutils.IsResourceExhausted(err) || errorutils.IsUnavailable(err) || errorutils.IsInternal(err)
}

// retryAfter reads the Retry-After seconds of FCM's answer, if any.
func retryAfter(err error) time.Duration {
	resp := errorutils.HTTPResponse(err)
	if resp == nil {
		return 0
	}
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil && secs > 0 {
		return time.Duration(secs) * time.Second
	}
	if t, err := time.Parse(time.RFC1123, v); err == nil {
		return time.Until(t)
	}
	return 0
}

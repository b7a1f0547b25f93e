package push_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/fcmfake"
	"github.com/edgebase/edgebase/push"
)

func TestCheckTokenURI(t *testing.T) {
	const fcm = "http://127.0.0.1:9099/v1"
	for _, tc := range []struct {
		uri, endpoint string
		ok            bool
	}{
		{"", "", true},
		{push.GoogleTokenURI, "", true},
		{"https://OAUTH2.googleapis.com:443/token", "", true},
		{"http://127.0.0.1:9099/token", fcm, true},
		{"http://127.0.0.1:9099/token", "", false},
		{"http://127.0.0.1:9098/token", fcm, false},
		{"https://127.0.0.1:9099/token", fcm, false},
		{"http://localhost:9099/token", fcm, false},
		{"http://169.254.169.254/latest/meta-data", "", false},
		{"http://10.0.0.1/token", "", false},
		{"https://[::1]/token", "", false},
		{"https://oauth2.googleapis.com/other", "", false},
		{"https://oauth2.googleapis.com.evil.example/token", "", false},
		{"https://u:p@oauth2.googleapis.com/token", "", false},
		{"ftp://oauth2.googleapis.com/token", "", false},
		{"token", "", false},
	} {
		if err := push.CheckTokenURI(tc.uri, tc.endpoint); (err == nil) != tc.ok {
			t.Errorf("CheckTokenURI(%q, %q) = %v, want ok %v", tc.uri, tc.endpoint, err, tc.ok)
		}
	}
}

// Credentials stored before the check (by an earlier binary) whose token_uri
// names another host are refused by the sender itself: no assertion leaves
// the leader, and each message fails with the reason.
func TestFCMSender_RefusesAForeignTokenURI(t *testing.T) {
	mine, err := fcmfake.New(fcmfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	other, err := fcmfake.New(fcmfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	s := push.NewFCMSender(mine.Endpoint(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msgs := []push.Message{{Token: "device-1", Title: "t", Body: "b"}}

	res, err := s.Send(ctx, "p1", other.ServiceAccountJSON("fcm-a"), 1, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Outcome != push.Failed || !strings.Contains(res[0].Err, "token_uri") {
		t.Fatalf("send with a foreign token_uri: %+v, want failed naming token_uri", res[0])
	}
	if other.Total() != 0 || len(other.Rejections()) != 0 || len(mine.Rejections()) != 0 {
		t.Fatalf("the foreign host was called: %d messages, %v", other.Total(), other.Rejections())
	}
	res, err = s.Send(ctx, "p2", mine.ServiceAccountJSON("fcm-b"), 1, msgs)
	if err != nil || res[0].Outcome != push.Delivered {
		t.Fatalf("send with the endpoint's own token_uri: %+v, %v", res, err)
	}
}

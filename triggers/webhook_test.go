package triggers

import (
	"errors"
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{"120", 2 * time.Minute, true},
		{"-1", 0, false},
		{"soon", 0, false},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
	} {
		got, ok := parseRetryAfter(c.in, now)
		if got != c.want || ok != c.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestSignVerify(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"id":"t:1:a"}`)
	h := Sign("whsec_abc", now, body)
	if h[:13] != "t=1800000000," {
		t.Fatalf("header %q", h)
	}
	if err := VerifySignature("whsec_abc", h, body, now.Add(time.Minute), SignatureTolerance); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"other secret": VerifySignature("whsec_abd", h, body, now, SignatureTolerance),
		"other body":   VerifySignature("whsec_abc", h, []byte(`{"id":"t:2:a"}`), now, SignatureTolerance),
		"stale":        VerifySignature("whsec_abc", h, body, now.Add(6*time.Minute), SignatureTolerance),
		"garbage":      VerifySignature("whsec_abc", "v1=zz", body, now, SignatureTolerance),
	} {
		if !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s: %v, want ErrBadSignature", name, err)
		}
	}
}

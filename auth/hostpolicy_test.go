package auth

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestHostPolicyRefusesInternalHosts(t *testing.T) {
	p, err := NewHostPolicy(nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, h := range []string{"127.0.0.1", "::1", "[::1]", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254",
		"100.64.0.1", "0.0.0.0", "::", "fe80::1", "::ffff:127.0.0.1", "localhost", ""} {
		if err := p.Check(ctx, h); !errors.Is(err, ErrHostNotAllowed) {
			t.Errorf("Check(%q) = %v, want ErrHostNotAllowed", h, err)
		}
	}
	for _, h := range []string{"8.8.8.8", "2001:4860:4860::8888", "1.1.1.1"} {
		if err := p.Check(ctx, h); err != nil {
			t.Errorf("Check(%q) = %v, want allowed", h, err)
		}
	}
}

func TestHostPolicyOperatorAllowances(t *testing.T) {
	p, err := NewHostPolicy([]string{"127.0.0.1", "10.0.0.0/8", "Mail.Internal."})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, h := range []string{"127.0.0.1", "10.9.8.7"} {
		if err := p.Check(ctx, h); err != nil {
			t.Errorf("Check(%q) = %v, want allowed by the operator", h, err)
		}
	}
	for _, h := range []string{"127.0.0.2", "192.168.0.1", "::1"} {
		if err := p.Check(ctx, h); !errors.Is(err, ErrHostNotAllowed) {
			t.Errorf("Check(%q) = %v, want refused (not in the allowances)", h, err)
		}
	}
	// A named host is allowed whatever it resolves to, at dial time too.
	if !p.allowsAddr("mail.internal", mustAddr(t, "192.168.5.5")) {
		t.Error("mail.internal (allowed by name) refused at its private address")
	}
	for _, bad := range []string{"10.0.0.0/33", "a b", "*"} {
		if _, err := NewHostPolicy([]string{bad}); err == nil {
			t.Errorf("NewHostPolicy(%q) accepted", bad)
		}
	}
}

// TestHostPolicyDialRefusesAfterResolution proves the dial hook judges the
// address actually dialled: a loopback server is unreachable through the
// policy's dialer unless the operator allowed loopback.
func TestHostPolicyDialRefusesAfterResolution(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer srv.Close()
	get := func(p *HostPolicy) error {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: p.DialContext(&net.Dialer{Timeout: 2 * time.Second})}}
		// "localhost" makes the name resolve first: the hook sees 127.0.0.1.
		_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
		resp, err := c.Get("http://localhost:" + port + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	closed, err := NewHostPolicy(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := get(closed); !errors.Is(err, ErrHostNotAllowed) {
		t.Fatalf("dial to loopback with no allowance: %v, want ErrHostNotAllowed", err)
	}
	open, err := NewHostPolicy([]string{"127.0.0.0/8", "::1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := get(open); err != nil {
		t.Fatalf("dial to loopback allowed by the operator: %v", err)
	}
}

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestHostPolicyNamesItsFlag: a refusal tells the operator which setting
// allows the host (webhooks have their own list).
func TestHostPolicyNamesItsFlag(t *testing.T) {
	ctx := context.Background()
	hooks, err := NewHostPolicyFlag([]string{"10.0.0.0/8"}, "--allow-private-webhooks")
	if err != nil {
		t.Fatal(err)
	}
	if err := hooks.Check(ctx, "127.0.0.1"); !errors.Is(err, ErrHostNotAllowed) || !strings.Contains(err.Error(), "--allow-private-webhooks") {
		t.Errorf("webhook policy refusal = %v, want one naming --allow-private-webhooks", err)
	}
	if err := hooks.Check(ctx, "10.1.1.1"); err != nil {
		t.Errorf("allowed 10.1.1.1 refused: %v", err)
	}
	hosts, err := NewHostPolicy(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := hosts.Check(ctx, "127.0.0.1"); err == nil || !strings.Contains(err.Error(), "--allow-private-hosts") {
		t.Errorf("host policy refusal = %v, want one naming --allow-private-hosts", err)
	}
}

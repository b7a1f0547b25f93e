package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runServe runs "edgebase serve" with args on a fresh data dir. Every call
// here must fail before the node listens (a bad secret key does): a serve
// that started would wait for a signal, so a run that does not end within
// the timeout fails the test.
func runServe(t *testing.T, args ...string) (int, string) {
	t.Helper()
	full := append([]string{"serve", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0"}, args...)
	type result struct {
		code int
		errs string
	}
	done := make(chan result, 1)
	go func() {
		code, _, errs := runCLI(t, full...)
		done <- result{code, errs}
	}()
	select {
	case r := <-done:
		return r.code, r.errs
	case <-time.After(30 * time.Second):
		t.Fatalf("serve %v did not stop: it started a node", args)
		return 0, ""
	}
}

// TestServeTrustedProxiesFlag: --trusted-proxies takes a comma-separated
// list of addresses and CIDRs. An accepted value gets serve as far as the
// secret key (which is bad on purpose, so that no node starts); a refused
// one is a usage error naming the flag. (The parsed prefixes themselves are
// not visible from here without starting a node.)
func TestServeTrustedProxiesFlag(t *testing.T) {
	cases := []struct {
		name, value string
		ok          bool
	}{
		{"brief's list", "10.0.0.1, 10.1.0.0/16,::1", true},
		{"one address", "192.0.2.7", true},
		{"cidr with host bits", "10.1.2.3/16", true},
		{"ipv6 cidr", "2001:db8::/32", true},
		{"trailing comma and spaces", " 10.0.0.1 , ", true},
		{"empty", "", true},
		{"garbage", "garbage", false},
		{"garbage in a list", "10.0.0.1,nonsense", false},
		{"prefix too long", "10.0.0.0/33", false},
		{"ipv6 prefix too long", "::1/129", false},
		{"address with port", "10.0.0.1:80", false},
		{"host name", "proxy.example.com", false},
		{"semicolons", "10.0.0.1;10.0.0.2", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, errs := runServe(t, "--trusted-proxies", tc.value, "--secret-key", "not a key")
			if tc.ok {
				if code != 1 || !strings.Contains(errs, "secret key") || strings.Contains(errs, "trusted-proxies") {
					t.Fatalf("--trusted-proxies %q refused: exit %d, stderr %q", tc.value, code, errs)
				}
				return
			}
			if code != 2 || !strings.Contains(errs, "trusted-proxies") {
				t.Fatalf("--trusted-proxies %q: exit %d, stderr %q; want a usage error naming the flag", tc.value, code, errs)
			}
		})
	}
}

func TestServeTrustedProxiesFromEnv(t *testing.T) {
	t.Setenv("EDGEBASE_TRUSTED_PROXIES", "10.0.0.1, 10.1.0.0/16,::1")
	t.Setenv("EDGEBASE_SECRET_KEY", "not a key")
	code, errs := runServe(t)
	if code != 1 || !strings.Contains(errs, "secret key") {
		t.Fatalf("env trusted proxies and a bad env secret key: exit %d, stderr %q", code, errs)
	}
	t.Setenv("EDGEBASE_TRUSTED_PROXIES", "garbage")
	code, errs = runServe(t)
	if code == 0 || !strings.Contains(errs, "EDGEBASE_TRUSTED_PROXIES") {
		t.Fatalf("EDGEBASE_TRUSTED_PROXIES=garbage: exit %d, stderr %q", code, errs)
	}
}

// TestServeSecretKeyFlags: the key flags (and their EDGEBASE_ variables)
// reach the node, whose refusal serve reports with exit status 1.
func TestServeSecretKeyFlags(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-key")
	t.Run("flag", func(t *testing.T) {
		if code, errs := runServe(t, "--secret-key", "0123"); code != 1 || !strings.Contains(errs, "32 bytes") {
			t.Fatalf("--secret-key 0123: exit %d, stderr %q", code, errs)
		}
	})
	t.Run("file flag", func(t *testing.T) {
		if code, errs := runServe(t, "--secret-key-file", missing); code != 1 || !strings.Contains(errs, "secret key file") {
			t.Fatalf("--secret-key-file %s: exit %d, stderr %q", missing, code, errs)
		}
	})
	t.Run("env", func(t *testing.T) {
		t.Setenv("EDGEBASE_SECRET_KEY", "0123")
		if code, errs := runServe(t); code != 1 || !strings.Contains(errs, "32 bytes") {
			t.Fatalf("EDGEBASE_SECRET_KEY=0123: exit %d, stderr %q", code, errs)
		}
	})
	t.Run("file env", func(t *testing.T) {
		t.Setenv("EDGEBASE_SECRET_KEY_FILE", missing)
		if code, errs := runServe(t); code != 1 || !strings.Contains(errs, "secret key file") {
			t.Fatalf("EDGEBASE_SECRET_KEY_FILE: exit %d, stderr %q", code, errs)
		}
	})
	t.Run("session ttl", func(t *testing.T) {
		if code, errs := runServe(t, "--session-ttl", "soon", "--secret-key", "0123"); code != 2 || !strings.Contains(errs, "session-ttl") {
			t.Fatalf("--session-ttl soon: exit %d, stderr %q", code, errs)
		}
		if code, errs := runServe(t, "--session-ttl", "2h", "--secret-key", "0123"); code != 1 || strings.Contains(errs, "session-ttl") {
			t.Fatalf("--session-ttl 2h: exit %d, stderr %q", code, errs)
		}
	})
}

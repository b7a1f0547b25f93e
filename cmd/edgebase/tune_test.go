package main

import (
	"strings"
	"testing"
)

// --connect-to is checked before anything starts: bad syntax or an address
// that is not host:port exits 2 with a message naming the flag.
func TestConnectToFlagErrors(t *testing.T) {
	for _, tc := range []struct{ name, value, msg string }{
		{"no equals", "a:1", `"a:1" is not FROM=TO`},
		{"empty to", "a:1=", "is not FROM=TO"},
		{"from without port", "a=b:2", `"a" is not host:port`},
		{"to without port", "a:1=b", `"b" is not host:port`},
		{"port zero", "a:1=b:0", "port must be a number in 1-65535"},
		{"port too big", "a:1=b:70000", "port must be a number in 1-65535"},
		{"no host", ":7000=b:2", "has no host"},
		{"mapped twice", "a:1=b:2,a:1=c:3", "a:1 is mapped twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := runCLI(t, "serve", "--data-dir", t.TempDir(), "--connect-to", tc.value)
			if code != 2 {
				t.Fatalf("exit %d, want 2 (stderr %q)", code, errs)
			}
			if !strings.Contains(errs, "connect-to") || !strings.Contains(errs, tc.msg) {
				t.Fatalf("stderr %q does not name --connect-to and %q", errs, tc.msg)
			}
		})
	}
	// Repeated flags merge; a FROM given twice with two targets is refused.
	code, _, errs := runCLI(t, "serve", "--data-dir", t.TempDir(), "--connect-to", "a:1=b:2", "--connect-to", "a:1=c:3")
	if code != 2 || !strings.Contains(errs, "a:1 is mapped twice") {
		t.Fatalf("repeated conflicting --connect-to: exit %d, stderr %q", code, errs)
	}
	// From the environment too.
	t.Setenv("EDGEBASE_CONNECT_TO", "a:1=nope")
	code, _, errs = runCLI(t, "serve", "--data-dir", t.TempDir())
	if code == 0 || !strings.Contains(errs, "EDGEBASE_CONNECT_TO") || !strings.Contains(errs, `"nope" is not host:port`) {
		t.Fatalf("bad EDGEBASE_CONNECT_TO: exit %d, stderr %q", code, errs)
	}
}

func TestConnectToFlagMerges(t *testing.T) {
	c := connectToFlag{}
	for _, v := range []string{"a:1=b:2", "c:3=d:4, a:1=b:2"} {
		if err := c.Set(v); err != nil {
			t.Fatalf("Set(%q): %v", v, err)
		}
	}
	if got := c.String(); got != "a:1=b:2,c:3=d:4" {
		t.Fatalf("merged --connect-to = %q", got)
	}
}

package testbin

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestName(t *testing.T) {
	for _, c := range []struct {
		tags []string
		want string
	}{
		{nil, "edgebase"},
		{[]string{"brokenreads"}, "edgebase-brokenreads"},
		{[]string{"a", "b"}, "edgebase-a-b"},
	} {
		if got := Name(c.tags...); got != c.want {
			t.Errorf("Name(%q) = %q, want %q", c.tags, got, c.want)
		}
	}
}

// The prebuilt binary in $EDGEBASE_TEST_BIN_DIR is used in place, or copied
// into Dir with Copy; no build runs (the context is already cancelled).
func TestPrebuilt(t *testing.T) {
	pre := t.TempDir()
	if err := os.WriteFile(filepath.Join(pre, "edgebase-brokenreads"), []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv(DirEnv, pre)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var logged []string
	logf := func(format string, args ...any) { logged = append(logged, format) }

	dir := t.TempDir()
	got, err := Edgebase(ctx, Options{Tags: []string{"brokenreads"}, Dir: dir, Logf: logf})
	if err != nil || got != filepath.Join(pre, "edgebase-brokenreads") {
		t.Fatalf("Edgebase = %q, %v; want the prebuilt one", got, err)
	}
	got, err = Edgebase(ctx, Options{Tags: []string{"brokenreads"}, Dir: dir, Copy: true, GOOS: runtime.GOOS, Logf: logf})
	if err != nil || got != filepath.Join(dir, "edgebase-brokenreads") {
		t.Fatalf("Edgebase with Copy = %q, %v; want it in %s", got, err, dir)
	}
	fi, err := os.Stat(got)
	if err != nil || fi.Mode().Perm() != 0o755 || fi.Size() != int64(len("#!/bin/sh\n")) {
		t.Fatalf("copy: %v, %v; want mode 0755 and the same size", fi, err)
	}
	if len(logged) != 2 {
		t.Errorf("logged %q, want two lines", logged)
	}

	// Absent (no such binary), or for another GOOS: a build, which the
	// cancelled context stops at once.
	other := "plan9"
	if runtime.GOOS == other {
		other = "linux"
	}
	for _, o := range []Options{{Dir: dir}, {Tags: []string{"brokenreads"}, GOOS: other, Dir: dir}} {
		o.Logf = logf
		if got, err := Edgebase(ctx, o); err == nil {
			t.Errorf("Edgebase(%+v) = %q; want a build stopped by the cancelled context", o, got)
		}
	}
}

package deploy_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/repo"
)

// repoRoot is the repository's root directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// mustRead reads a file of the repository.
func mustRead(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// needPromtool returns promtool's path, or skips the test without it unless
// EDGEBASE_REQUIRE_PROMTOOL=1 (as CI sets it), where it fails.
func needPromtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err == nil {
		return p
	}
	if os.Getenv("EDGEBASE_REQUIRE_PROMTOOL") == "1" {
		t.Fatalf("EDGEBASE_REQUIRE_PROMTOOL=1 but promtool is not installed: %v", err)
	}
	t.Skipf("skipping: promtool is not installed (Debian package prometheus; EDGEBASE_REQUIRE_PROMTOOL=1 turns this into a failure): %v", err)
	return ""
}

// promtool runs promtool with args (stdin from in, when not nil) in dir and
// returns its combined output and error.
func promtool(t *testing.T, bin, dir string, in []byte, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	if in != nil {
		cmd.Stdin = bytes.NewReader(in)
	}
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (time limit)", ctx.Err())
	}
	if err != nil {
		return string(out), fmt.Errorf("promtool %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

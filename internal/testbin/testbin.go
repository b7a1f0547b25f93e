// Package testbin gives the process-level tests (e2e/process, robustness,
// the docker-compose image of e2e) the edgebase binary they run: the one
// `make test-bins` built into $EDGEBASE_TEST_BIN_DIR when it is there, else
// one it builds itself.
//
// A build here has no time limit of its own: only the caller's context
// bounds it. In a TestMain that is context.Background(): go test kills a test
// binary a minute after its -timeout, even before m.Run. In a test it is the
// test's deadline (see Context).
package testbin

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/repo"
)

// DirEnv names the directory of prebuilt binaries; `make test` sets it to
// bin/test, which its prerequisite test-bins fills just before.
const DirEnv = "EDGEBASE_TEST_BIN_DIR"

// Options says which binary a caller needs and where to put one it builds.
type Options struct {
	// Tags are build tags ("brokenreads"). The prebuilt binary built with
	// them is Name(Tags...) in $EDGEBASE_TEST_BIN_DIR.
	Tags []string
	// GOOS to build for; "" is the host's. A prebuilt binary is for the
	// host, so it is used only when GOOS is "" or the host's.
	GOOS string
	// Dir is where a binary is built (or a prebuilt one copied, see Copy).
	Dir string
	// Copy copies a prebuilt binary into Dir instead of returning its path
	// in $EDGEBASE_TEST_BIN_DIR (for nodes that run as other users, to whom
	// the repository's directory may be closed).
	Copy bool
	// Logf reports which binary is used and how long a build took; nil
	// writes to standard error.
	Logf func(format string, args ...any)
}

// Name is the file name of the binary built with tags: edgebase, or
// edgebase-<tags joined by "-"> (edgebase-brokenreads).
func Name(tags ...string) string {
	if len(tags) == 0 {
		return "edgebase"
	}
	return "edgebase-" + strings.Join(tags, "-")
}

// Edgebase returns the path of the edgebase binary built with o.Tags: the
// prebuilt one when $EDGEBASE_TEST_BIN_DIR holds it, else one it builds
// into o.Dir from this module's ./cmd/edgebase within ctx.
func Edgebase(ctx context.Context, o Options) (string, error) {
	logf := o.Logf
	if logf == nil {
		logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, "testbin: "+format+"\n", args...) }
	}
	name := Name(o.Tags...)
	out := filepath.Join(o.Dir, name)
	if dir := os.Getenv(DirEnv); dir != "" {
		prebuilt := filepath.Join(dir, name)
		switch fi, err := os.Stat(prebuilt); {
		case o.GOOS != "" && o.GOOS != runtime.GOOS:
			logf("%s=%s holds binaries for %s, not %s: building %s", DirEnv, dir, runtime.GOOS, o.GOOS, name)
		case err != nil:
			logf("%s=%s: %v: building %s", DirEnv, dir, err, name)
		case !fi.Mode().IsRegular():
			logf("%s=%s: %s is not a regular file: building %s", DirEnv, dir, prebuilt, name)
		case o.Copy:
			if err := copyFile(prebuilt, out); err != nil {
				return "", err
			}
			logf("using the prebuilt binary %s (%s), copied to %s", prebuilt, DirEnv, out)
			return out, nil
		default:
			logf("using the prebuilt binary %s (%s)", prebuilt, DirEnv)
			return prebuilt, nil
		}
	}
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	start := time.Now()
	if err := Build(ctx, root, out, o.GOOS, o.Tags...); err != nil {
		return "", err
	}
	logf("built %s in %v", out, time.Since(start).Round(time.Millisecond))
	return out, nil
}

// Build compiles root's ./cmd/edgebase into out: static (CGO_ENABLED=0),
// -trimpath, with tags, for goos ("": the host's). Only ctx bounds it.
func Build(ctx context.Context, root, out, goos string, tags ...string) error {
	args := []string{"build", "-trimpath", "-o", out}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./cmd/edgebase")...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if goos != "" {
		cmd.Env = append(cmd.Env, "GOOS="+goos)
	}
	start := time.Now()
	if b, err := cmd.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return fmt.Errorf("go build -o %s %s./cmd/edgebase in %s: %v after %v\n%s",
			out, tagsArg(tags), root, err, time.Since(start).Round(time.Millisecond), b)
	}
	return nil
}

func tagsArg(tags []string) string {
	if len(tags) == 0 {
		return ""
	}
	return "-tags " + strings.Join(tags, ",") + " "
}

// Context is a context for building within t: it ends at t's deadline (go
// test -timeout), or never when there is none. Cancel it when done.
func Context(t *testing.T) (context.Context, context.CancelFunc) {
	if d, ok := t.Deadline(); ok {
		return context.WithDeadline(context.Background(), d)
	}
	return context.WithCancel(context.Background())
}

// copyFile copies the executable src to dst, mode 0755.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	if err := out.Close(); err != nil {
		return err
	}
	// Independent of the umask: the binary may run as other users.
	return os.Chmod(dst, 0o755)
}

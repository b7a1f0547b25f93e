// Package proctest runs edgebase node processes for tests: one Proc is a
// node slot whose binary, flags, environment, log file and (when the test
// runs as root) user survive restarts, so a test can kill, pause and start
// the same node again. Used by e2e/process and robustness.
package proctest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is one node process slot. Set the exported fields before the first
// Start; they are read again by every Start.
type Proc struct {
	ID      string
	Bin     string   // the edgebase binary
	Args    []string // its arguments ("serve", flags)
	Env     []string // added to the test's environment
	LogPath string   // stdout and stderr of every start, appended
	// UID, when not 0, runs the process as that user (and group) on
	// Linux: the test must run as root.
	UID int

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current process has exited
	waitErr error
	starts  int
	paused  bool
}

// Start launches the process. It fails if the previous one still runs.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("start %s: already running (pid %d)", p.ID, p.cmd.Process.Pid)
		}
	}
	f, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open log of %s: %w", p.ID, err)
	}
	defer func() { _ = f.Close() }() // the child holds its own descriptor
	p.starts++
	fmt.Fprintf(f, "==== start #%d of %s at %s: edgebase %s\n", p.starts, p.ID, time.Now().Format(time.RFC3339Nano), strings.Join(p.Args, " "))
	cmd := exec.Command(p.Bin, p.Args...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr(p.UID)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.ID, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.waitErr, p.paused = cmd, done, nil, false
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// Running reports whether the current process has not exited.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Paused reports whether the process was stopped with SIGSTOP and not
// continued since.
func (p *Proc) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// Done is closed when the current process exits (nil before any Start).
func (p *Proc) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// WaitErr is the exit status of the last process once Done is closed.
func (p *Proc) WaitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// Signal sends sig to the current process.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return fmt.Errorf("signal %s: never started", p.ID)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal %v to %s: %w", sig, p.ID, err)
	}
	switch sig {
	case syscall.SIGSTOP:
		p.paused = true
	case syscall.SIGCONT:
		p.paused = false
	}
	return nil
}

// Kill9 sends SIGKILL and waits until the process is gone.
func (p *Proc) Kill9() error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("kill %s: never started", p.ID)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill -9 %s: %w", p.ID, err)
	}
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("kill -9 %s: still running after 10s", p.ID)
	}
}

// KillIfRunning continues (if paused) and kills a running process: for
// test cleanups.
func (p *Proc) KillIfRunning() {
	if p.Running() {
		_ = p.Signal(syscall.SIGCONT)
		_ = p.Kill9()
	}
}

// LogTail returns the last limit bytes of the node's output.
func (p *Proc) LogTail(limit int64) string {
	f, err := os.Open(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return err.Error()
	}
	off := max(st.Size()-limit, 0)
	b, _ := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	if off > 0 {
		return fmt.Sprintf("(... %d earlier bytes cut ...)\n%s", off, b)
	}
	return string(b)
}

// LogContains reports whether the node's output contains s.
func (p *Proc) LogContains(s string) bool {
	b, err := os.ReadFile(p.LogPath)
	return err == nil && strings.Contains(string(b), s)
}

// LatestSnapshotIndex is the highest Raft index of a complete snapshot in
// raft's file store under dataDir/snapshots (0: none).
func LatestSnapshotIndex(dataDir string) uint64 {
	var maxIndex uint64
	_ = filepath.WalkDir(filepath.Join(dataDir, "snapshots"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "meta.json" || strings.HasSuffix(filepath.Dir(path), ".tmp") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		var meta struct{ Index uint64 }
		if json.Unmarshal(b, &meta) == nil && meta.Index > maxIndex {
			maxIndex = meta.Index
		}
		return nil
	})
	return maxIndex
}

package robustness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// netFaults cuts links between nodes with iptables. Every node runs as its
// own user, so a rule in the OUTPUT chain that matches the owner of a
// connection and the ports of its destination drops exactly the traffic of
// one node to another (Raft and the internal HTTP calls alike), while the
// test's own clients (root) still reach every node. Dropping, not
// rejecting, is what a real partition looks like: connections stall until
// their timeouts.
type netFaults struct {
	chain string
	mu    sync.Mutex
	cut   map[[2]string]bool // {from, to} node ids
}

func iptables(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// -w: wait for the xtables lock (Docker may hold it).
	out, err := exec.CommandContext(ctx, "iptables", append([]string{"-w", "5"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// newNetFaults makes an empty chain of our own and jumps to it from OUTPUT.
func newNetFaults(nodes []*node) (*netFaults, error) {
	for _, n := range nodes {
		if n.uid == 0 {
			return nil, fmt.Errorf("node %s runs as the test's own user", n.id)
		}
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return nil, fmt.Errorf("no iptables: %w", err)
	}
	f := &netFaults{chain: "EBROBUST-" + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(nodes[0].httpPort), cut: map[[2]string]bool{}}
	if err := iptables("-N", f.chain); err != nil {
		return nil, err
	}
	if err := iptables("-I", "OUTPUT", "1", "-j", f.chain); err != nil {
		_ = iptables("-X", f.chain)
		return nil, err
	}
	return f, nil
}

// drop cuts the one-way link from -> to: from's new and established
// connections to to's ports carry nothing.
func (f *netFaults) drop(from, to *node) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := [2]string{from.id, to.id}
	if f.cut[key] {
		return nil
	}
	if err := iptables("-A", f.chain, "-p", "tcp", "-d", "127.0.0.1",
		"-m", "owner", "--uid-owner", strconv.Itoa(from.uid),
		"-m", "multiport", "--dports", fmt.Sprintf("%d,%d", to.httpPort, to.raftPort),
		"-j", "DROP"); err != nil {
		return err
	}
	f.cut[key] = true
	return nil
}

// isolate cuts victim off from every other node, both ways.
func (f *netFaults) isolate(victim *node, all []*node) error {
	for _, n := range all {
		if n == victim {
			continue
		}
		if err := f.drop(victim, n); err != nil {
			return err
		}
		if err := f.drop(n, victim); err != nil {
			return err
		}
	}
	return nil
}

// heal removes every cut.
func (f *netFaults) heal() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := iptables("-F", f.chain); err != nil {
		return err
	}
	clear(f.cut)
	return nil
}

// close removes the chain and the jump to it.
func (f *netFaults) close() error {
	err1 := iptables("-D", "OUTPUT", "-j", f.chain)
	err2 := iptables("-F", f.chain)
	err3 := iptables("-X", f.chain)
	if err1 != nil || err2 != nil || err3 != nil {
		return fmt.Errorf("%v; %v; %v", err1, err2, err3)
	}
	return nil
}

// mountTmpfs mounts a tmpfs of mib MiB owned by uid on dir.
func mountTmpfs(dir string, mib, uid int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	opts := fmt.Sprintf("size=%dm,mode=0700,uid=%d,gid=%d", mib, uid, uid)
	if out, err := exec.CommandContext(ctx, "mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("mount -t tmpfs -o %s %s: %w: %s", opts, dir, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func unmount(dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "umount", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("umount %s: %w: %s", dir, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// fillDisk writes zeros to dir/name until the file system is full and
// returns how many bytes it took.
func fillDisk(dir, name string) (int64, error) {
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return 0, fmt.Errorf("fill %s: %w", dir, err)
	}
	defer func() { _ = f.Close() }()
	buf := make([]byte, 1<<20)
	var total int64
	for {
		n, err := f.Write(buf)
		total += int64(n)
		if errors.Is(err, syscall.ENOSPC) {
			return total, nil
		}
		if err != nil {
			return total, fmt.Errorf("fill %s: %w", dir, err)
		}
	}
}

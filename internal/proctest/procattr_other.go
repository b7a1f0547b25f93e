//go:build !linux

package proctest

import "syscall"

// sysProcAttr: elsewhere nodes run as the test's own user (Proc.UID is
// ignored) and outlive a crashed test binary.
func sysProcAttr(uid int) *syscall.SysProcAttr { return nil }

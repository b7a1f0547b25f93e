package process

import "syscall"

// sysProcAttr kills a node when the test binary dies, so a crashed or
// interrupted test run leaves no edgebase processes behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

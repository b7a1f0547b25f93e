package proctest

import "syscall"

// sysProcAttr kills a node when the test binary dies, so a crashed or
// interrupted test run leaves no edgebase processes behind, and runs it as
// uid when that is not 0.
func sysProcAttr(uid int) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if uid != 0 {
		a.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}
	}
	return a
}

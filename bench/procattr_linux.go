package main

import "syscall"

// sysProcAttr kills a node when the bench dies, so an interrupted run leaves
// no edgebase processes behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

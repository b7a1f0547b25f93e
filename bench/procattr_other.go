//go:build !linux

package main

import "syscall"

// sysProcAttr: outside Linux there is no parent-death signal; nodes are
// stopped explicitly (and CPU/RSS figures are unavailable without /proc).
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

package main

import "syscall"

// setRcvBuf is a net.Dialer Control that sets the socket's receive buffer
// before it connects (so the TCP window is sized from it).
func setRcvBuf(size int) func(network, address string, c syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, size)
		})
		if err != nil {
			return err
		}
		return serr
	}
}

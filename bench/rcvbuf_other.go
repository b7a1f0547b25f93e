//go:build !linux

package main

import "syscall"

// setRcvBuf: outside Linux the receive buffer keeps its default, so the
// slow subscriber (S2) takes longer to stall the node's writes.
func setRcvBuf(int) func(network, address string, c syscall.RawConn) error {
	return nil
}

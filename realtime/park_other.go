//go:build !unix

package realtime

import (
	"net"
	"syscall"
)

// rawReadable: no parking here; the reader waits in the library's Read.
func rawReadable(net.Conn) syscall.RawConn { return nil }

func parkRead(syscall.RawConn) error { return nil }

func peekControl(syscall.RawConn) int { return 0 }

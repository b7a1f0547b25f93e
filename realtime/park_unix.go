//go:build unix

package realtime

import (
	"errors"
	"net"
	"syscall"
)

// rawReadable returns the socket under nc, whose readiness parkRead can
// wait for, or nil when nc is no plain socket (TLS keeps decrypted bytes of
// its own that the socket's readiness would not show).
func rawReadable(nc net.Conn) syscall.RawConn {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	if _, ok := nc.(*net.TCPConn); !ok {
		if _, ok := nc.(*net.UnixConn); !ok {
			return nil
		}
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// parkRead waits until rc has a byte to read (or its end, or an error),
// without taking anything from it: MSG_PEEK leaves the bytes to the
// WebSocket library's reader. It is small on purpose: a goroutine parked in
// it uses so little stack that the runtime shrinks its stack to the minimum
// (2 KiB) at the next GC, where one parked in the library's Read keeps 8.
func parkRead(rc syscall.RawConn) error {
	var b [1]byte
	return rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// Anything but "nothing yet" (data, the peer's end, an error) is
		// for the library's Read to find.
		return !errors.Is(err, syscall.EAGAIN)
	})
}

// peekControl returns the length of the one masked ping or pong frame the
// socket holds, when it holds that and nothing else, and 0 otherwise. It
// only looks (MSG_PEEK): the WebSocket library reads and handles the frame.
// Its buffer is in its own frame, which is not on the stack while the
// reader is parked.
//
//go:noinline
func peekControl(rc syscall.RawConn) int {
	const maxControl = 2 + 4 + 125 // header, mask key, payload
	var b [maxControl + 1]byte
	n := -1
	if err := rc.Read(func(fd uintptr) bool {
		n, _, _ = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	}); err != nil || n < 6 {
		return 0
	}
	// FIN, no reserved bits, opcode ping (9) or pong (10); masked, with a
	// 7-bit length that is all of what the socket holds.
	if (b[0] != 0x89 && b[0] != 0x8a) || b[1]&0x80 == 0 || n != 6+int(b[1]&0x7f) {
		return 0
	}
	return n
}

package realtime

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// corkConn is the server side of a WebSocket's TCP connection. The writer
// corks it while it drains its queue: every frame the library flushes
// meanwhile is appended to a buffer, and uncork sends them all with one
// write. At 10,000 subscribers each write syscall on loopback costs several
// microseconds of the node's CPU, so a connection that has fallen behind
// catches up with one syscall instead of one per message. Frames another
// goroutine flushes (the library's pong and close replies) are ordered with
// the corked ones: the library serialises its flushes, and every flush
// passes through Write under mu.
type corkConn struct {
	net.Conn
	pool *sync.Pool // of *[]byte batch buffers, shared by the connections

	// sent counts the bytes the socket has accepted: it moves while the
	// peer reads, however slowly (see conn.ping).
	sent atomic.Uint64

	mu       sync.Mutex
	corked   bool
	buf      *[]byte   // while corked
	deadline time.Time // the connection's write deadline

	// readMu guards head and the library's reader br between the
	// connection's reader, which looks at them before it parks, and a
	// closing handshake, which reads through them in another goroutine.
	readMu sync.Mutex
	head   []byte        // bytes the HTTP server read past the upgrade request
	br     *bufio.Reader // the library's reader of this connection
	raw    syscall.RawConn
	// controlLeft: the socket held one control frame and nothing else
	// when the reader woke (waitReadable); Read passes on no more than its
	// controlLeft bytes, then fails with errControlOnly, which ends the
	// library's Read at that frame's end instead of leaving the reader
	// parked in the library's deep frames. Only the goroutine holding the
	// library's read lock touches it.
	controlOnly bool
	controlLeft int
}

// errControlOnly ends a library Read that has handled a lone control frame.
// The library passes a failed read of the next frame's first byte on
// without tearing anything down: nothing of that frame was consumed.
var errControlOnly = errors.New("realtime: control frame handled")

// corkBatchMax is where the writer uncorks within a long drain, to bound
// the buffer.
const corkBatchMax = 64 << 10

// Read returns what the HTTP server had buffered first.
func (c *corkConn) Read(p []byte) (int, error) {
	if len(c.head) > 0 {
		n := copy(p, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	if c.controlOnly {
		if c.controlLeft == 0 {
			c.controlOnly = false
			return 0, errControlOnly
		}
		p = p[:min(len(p), c.controlLeft)]
		n, err := c.Conn.Read(p)
		c.controlLeft -= n
		return n, err
	}
	return c.Conn.Read(p)
}

// waitReadable returns when the library's Read has something to read: bytes
// it or the HTTP server buffered, or a socket that became readable (or
// ended). It waits in a shallow frame (parkRead), so an idle connection's
// reader goroutine holds a 2 KiB stack instead of the 8 KiB the library's
// Read keeps parked under it. Sockets it cannot watch (TLS) return at once.
func (c *corkConn) waitReadable() error {
	if c.raw == nil {
		return nil
	}
	c.readMu.Lock()
	ready := len(c.head) > 0 || c.br.Buffered() > 0
	c.readMu.Unlock()
	if ready {
		return nil
	}
	if err := parkRead(c.raw); err != nil {
		return fmt.Errorf("wait for the client: %w", err)
	}
	// A ping's pong alone: let the library's Read handle it and come back
	// (errControlOnly). Anything else goes to the library whole.
	if n := peekControl(c.raw); n > 0 {
		c.readMu.Lock()
		c.controlOnly, c.controlLeft = true, n
		c.readMu.Unlock()
	}
	return nil
}

// lockRead keeps waitReadable from looking at the reader while another
// goroutine reads through it (the close handshake).
func (c *corkConn) lockRead() func() {
	c.readMu.Lock()
	return c.readMu.Unlock
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked {
		*c.buf = append(*c.buf, p...)
		return len(p), nil
	}
	// Frames written through (pings, close): the library bounds them with
	// its own context; the deadline must only not be a stale one.
	if err := c.extendLocked(writeThroughTimeout); err != nil {
		return 0, err
	}
	n, err := c.Conn.Write(p)
	c.sent.Add(uint64(n))
	return n, err
}

// writeThroughTimeout bounds a frame written through while not corked,
// besides the library's own bound.
const writeThroughTimeout = 30 * time.Second

// extendLocked makes sure the write deadline is between timeout/2 and
// timeout away. Setting it costs a timer update, so a connection written
// to many times a second sets it once per timeout/2 instead of per write.
func (c *corkConn) extendLocked(timeout time.Duration) error {
	now := time.Now()
	if c.deadline.Sub(now) >= timeout/2 && c.deadline.Sub(now) <= timeout {
		return nil
	}
	c.deadline = now.Add(timeout)
	return c.Conn.SetWriteDeadline(c.deadline)
}

// cork starts holding flushed frames.
func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked = true
	if c.buf == nil {
		c.buf = c.pool.Get().(*[]byte)
	}
	c.mu.Unlock()
}

// buffered is how many bytes are held.
func (c *corkConn) buffered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf == nil {
		return 0
	}
	return len(*c.buf)
}

// uncork sends what is held, within timeout, and writes through again.
func (c *corkConn) uncork(timeout time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	return c.sendLocked(timeout)
}

func (c *corkConn) sendLocked(timeout time.Duration) error {
	if c.buf == nil {
		return nil
	}
	b := c.buf
	c.buf = nil
	defer func() {
		if cap(*b) <= corkBatchMax*2 {
			*b = (*b)[:0]
			c.pool.Put(b)
		}
	}()
	if len(*b) == 0 {
		return nil
	}
	if err := c.extendLocked(timeout); err != nil {
		return err
	}
	n, err := c.Conn.Write(*b)
	c.sent.Add(uint64(n))
	return err
}

// Close sends what is still held (a close reply the library flushed while
// the writer was corked), briefly, then closes. A write in progress holds
// mu and may be stuck on a peer that does not read: then it closes at once,
// which ends that write.
func (c *corkConn) Close() error {
	if c.mu.TryLock() {
		c.corked = false
		_ = c.sendLocked(time.Second)
		c.mu.Unlock()
	}
	return c.Conn.Close()
}

// corkWriter lets websocket.Accept hijack the connection through a
// corkConn, with small buffers: an idle connection keeps them for life.
type corkWriter struct {
	http.ResponseWriter
	pool *sync.Pool
	conn *corkConn // set by Hijack
}

// connBufSize is the size of the connection's read and write buffers; a
// larger message goes around them. Clients send small messages (subscribe,
// unsubscribe, ping); the writer's frames are corked anyway.
const connBufSize = 256

func (w *corkWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	c := &corkConn{Conn: nc, pool: w.pool}
	if n := brw.Reader.Buffered(); n > 0 {
		b, err := brw.Reader.Peek(n)
		if err != nil {
			_ = nc.Close()
			return nil, nil, fmt.Errorf("hijack: buffered bytes: %w", err)
		}
		c.head = bytes.Clone(b)
	}
	if brw.Writer.Buffered() > 0 {
		if err := brw.Writer.Flush(); err != nil {
			_ = nc.Close()
			return nil, nil, fmt.Errorf("hijack: flush: %w", err)
		}
	}
	c.br = bufio.NewReaderSize(c, connBufSize)
	c.raw = rawReadable(nc)
	w.conn = c
	return c, bufio.NewReadWriter(c.br, bufio.NewWriterSize(c, connBufSize)), nil
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *corkWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

package realtime

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
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
	head     []byte    // bytes the HTTP server read past the upgrade request
}

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
	return c.Conn.Read(p)
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
// larger message goes around them.
const connBufSize = 512

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
	w.conn = c
	return c, bufio.NewReadWriter(bufio.NewReaderSize(c, connBufSize), bufio.NewWriterSize(c, connBufSize)), nil
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *corkWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

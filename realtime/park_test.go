//go:build unix

package realtime

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// parkServer accepts WebSockets through corkWriter, as Server does, and
// echoes every message; between messages its reader waits in waitReadable.
type parkServer struct {
	srv   *httptest.Server
	conns chan *parkConn
}

type parkConn struct {
	ws   *websocket.Conn
	cork *corkConn
	done chan error // the reader's end
	// controls counts the reads that ended after a lone control frame.
	controls atomic.Int64
}

func startParkServer(t *testing.T) *parkServer {
	t.Helper()
	pool := &sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}
	ps := &parkServer{conns: make(chan *parkConn, 16)}
	ps.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := &corkWriter{ResponseWriter: w, pool: pool}
		ws, err := websocket.Accept(cw, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
		if err != nil {
			return
		}
		pc := &parkConn{ws: ws, cork: cw.conn, done: make(chan error, 1)}
		ps.conns <- pc
		go func() {
			for {
				if err := pc.cork.waitReadable(); err != nil {
					pc.done <- err
					return
				}
				typ, b, err := ws.Read(context.Background())
				if errors.Is(err, errControlOnly) {
					pc.controls.Add(1)
					continue
				}
				if err != nil {
					pc.done <- err
					return
				}
				if err := ws.Write(context.Background(), typ, b); err != nil {
					pc.done <- err
					return
				}
			}
		}()
	}))
	t.Cleanup(ps.srv.Close)
	return ps
}

func (ps *parkServer) dial(t *testing.T) (*websocket.Conn, *parkConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ps.srv.URL, "http"), nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = ws.CloseNow() })
	select {
	case pc := <-ps.conns:
		return ws, pc
	case <-ctx.Done():
		t.Fatal("the server did not accept")
		return nil, nil
	}
}

// parkedReaders counts the goroutines parked in parkRead.
func parkedReaders() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return bytes.Count(buf[:n], []byte("realtime.parkRead("))
		}
		buf = make([]byte, 2*len(buf))
	}
}

// waitParked polls until want readers are parked in parkRead.
func waitParked(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for parkedReaders() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d readers parked in parkRead, want %d", parkedReaders(), want)
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

func echo(t *testing.T, ws *websocket.Conn, msgs ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, m := range msgs {
		if err := ws.Write(ctx, websocket.MessageText, []byte(m)); err != nil {
			t.Fatalf("write %q: %v", m, err)
		}
	}
	for _, m := range msgs {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("read the echo of %q: %v", m, err)
		}
		if string(b) != m {
			t.Fatalf("echo %q, want %q", b, m)
		}
	}
}

// TestIdleReaderParks: an idle connection's reader waits in parkRead, not
// in the library's Read; it wakes for every message, also for messages that
// arrive together (the second one waits in the library's buffer, where a
// parked reader would not see it); pings the server sends are answered
// while the reader is parked; and a close handshake started while it is
// parked ends it.
func TestIdleReaderParks(t *testing.T) {
	ps := startParkServer(t)
	ws, pc := ps.dial(t)
	base := parkedReaders() - 1
	waitParked(t, base+1)

	echo(t, ws, "one")
	waitParked(t, base+1)

	// Several messages in one write of the client's: one TCP segment, so
	// all but the first sit in the server's reader buffer.
	big := strings.Repeat("x", 100)
	echo(t, ws, "a", "b", big, "c")
	waitParked(t, base+1)

	// A ping from the server, as conn.ping sends: the pong wakes the
	// parked reader, whose Read delivers it.
	pingDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		pingDone <- pc.ws.Ping(ctx)
	}()
	// The client answers pings while it reads.
	readCtx, stopRead := context.WithCancel(context.Background())
	defer stopRead()
	clientRead := make(chan error, 1)
	go func() {
		_, _, err := ws.Read(readCtx)
		clientRead <- err
	}()
	if err := <-pingDone; err != nil {
		t.Fatalf("ping while the reader is parked: %v", err)
	}
	// The pong came alone: the library handled it and the reader is back
	// in parkRead, not waiting in the library's Read.
	waitParked(t, base+1)
	if n := pc.controls.Load(); n != 1 {
		t.Fatalf("%d reads ended after a lone control frame, want 1", n)
	}

	// A close the server starts while its reader is parked (the writer's
	// flushAndClose): the handshake completes and the reader ends.
	unlock := pc.cork.lockRead()
	err := pc.ws.Close(websocket.StatusGoingAway, "bye")
	unlock()
	if err != nil {
		t.Fatalf("close: %v", err)
	}
	select {
	case err := <-pc.done:
		if err == nil {
			t.Fatal("the reader ended without an error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the reader did not end after the close")
	}
	if err := <-clientRead; websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("client read ended with %v, want close 1001", err)
	}
}

// TestParkedReaderSeesPeerEnd: a client that goes away without a close
// frame wakes the parked reader, whose Read then fails.
func TestParkedReaderSeesPeerEnd(t *testing.T) {
	ps := startParkServer(t)
	ws, pc := ps.dial(t)
	echo(t, ws, "hello")
	_ = ws.CloseNow()
	select {
	case err := <-pc.done:
		if err == nil {
			t.Fatal("the reader ended without an error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the reader did not see the peer's end")
	}
}

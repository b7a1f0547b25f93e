package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// session is one WebSocket connection of a Conn. A read loop dispatches the
// server's messages, a writer sends the client's, a pinger watches for a
// dead peer. Sessions of a Conn never overlap: the next one starts after
// this one's read loop ended.
type session struct {
	c   *Conn
	gen uint64
	ws  *websocket.Conn

	ctx    context.Context // cancelled when the read loop ends
	cancel context.CancelFunc
	out    chan []byte   // to the writer
	done   chan struct{} // closed when the read loop ended
	err    error         // why; written before done is closed

	// blocked is set while the read loop waits for the application to take
	// events; episodes counts such waits (for the pinger).
	blocked  atomic.Bool
	episodes atomic.Uint64

	mu     sync.Mutex
	pongs  []chan struct{}          // Ping callers, in order
	acks   map[string]chan struct{} // Unsubscribe callers by id
	errMsg *Error                   // error message without id: the server is closing
}

func newSession(c *Conn, ws *websocket.Conn, gen uint64) *session {
	ctx, cancel := context.WithCancel(context.Background())
	return &session{
		c:      c,
		gen:    gen,
		ws:     ws,
		ctx:    ctx,
		cancel: cancel,
		out:    make(chan []byte, 16),
		done:   make(chan struct{}),
		acks:   make(map[string]chan struct{}),
	}
}

func (s *session) start() {
	go s.writer()
	go s.pinger()
	go s.readLoop()
}

// send queues v for the writer. It fails when ctx ends or the session ended
// (the message is then lost with the connection).
func (s *session) send(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	select {
	case s.out <- b:
		return nil
	case <-s.ctx.Done():
		return ErrNotConnected
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *session) writer() {
	for {
		var b []byte
		select {
		case <-s.ctx.Done():
			return
		case b = <-s.out:
		}
		ctx, cancel := context.WithTimeout(s.ctx, s.c.cfg.WriteTimeout)
		err := s.ws.Write(ctx, websocket.MessageText, b)
		cancel()
		if err != nil {
			if s.ctx.Err() == nil {
				s.c.log.Warn("realtime write failed, dropping connection", "err", err)
			}
			_ = s.ws.CloseNow() // the read loop ends and reports it
			return
		}
	}
}

// pinger pings the server every PingInterval and drops a connection whose
// pong does not come back within WriteTimeout — unless the read loop was
// waiting for the application meanwhile (then nobody read the pong).
func (s *session) pinger() {
	if s.c.cfg.PingInterval < 0 {
		return
	}
	t := time.NewTicker(s.c.cfg.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		if s.blocked.Load() {
			continue
		}
		ep := s.episodes.Load()
		ctx, cancel := context.WithTimeout(s.ctx, s.c.cfg.WriteTimeout)
		err := s.ws.Ping(ctx)
		cancel()
		if err == nil || s.ctx.Err() != nil || s.blocked.Load() || s.episodes.Load() != ep {
			continue
		}
		s.c.log.Warn("realtime ping unanswered, dropping connection", "err", err)
		_ = s.ws.CloseNow()
		return
	}
}

// readBufKeep is the largest read buffer the read loop keeps between
// messages; a larger one (a big snapshot page) is let go.
const readBufKeep = 64 << 10

func (s *session) readLoop() {
	var err error
	var buf bytes.Buffer // reused: decoding copies what it keeps
	for {
		// Not s.ctx: nothing cancels it before the loop ends, and a
		// cancellable context costs the library a timer registration per
		// message. Closing the socket ends the read.
		var r io.Reader
		if _, r, err = s.ws.Reader(context.Background()); err != nil {
			break
		}
		buf.Reset()
		if _, err = buf.ReadFrom(r); err != nil {
			break
		}
		var f frame
		if !decodeChange(buf.Bytes(), &f) {
			f = frame{}
			if jerr := json.Unmarshal(buf.Bytes(), &f); jerr != nil {
				s.c.log.Warn("realtime: undecodable message from server", "err", jerr)
				continue
			}
		}
		if buf.Cap() > readBufKeep {
			buf = bytes.Buffer{}
		}
		s.dispatch(&f)
	}
	s.mu.Lock()
	if s.errMsg != nil {
		err = fmt.Errorf("%w (%w)", s.errMsg, err)
	}
	s.mu.Unlock()
	s.err = err
	s.cancel()
	close(s.done)
}

func (s *session) dispatch(f *frame) {
	switch f.Op {
	case opPong:
		s.mu.Lock()
		if len(s.pongs) > 0 {
			close(s.pongs[0])
			s.pongs = s.pongs[1:]
		}
		s.mu.Unlock()
		return
	case opNotification:
		s.c.cfg.Session.Observe(f.Revision)
		n := Notification{ID: f.ID, Title: f.Title, Body: f.Body, Data: nullToNil(f.Data), Revision: f.Revision}
		select {
		case s.c.notes <- n:
		default:
			s.c.droppedNotes.Add(1)
			s.c.log.Warn("realtime notification dropped: Notifications channel full", "id", f.ID)
		}
		return
	case opError:
		if f.ID == "" {
			s.mu.Lock()
			s.errMsg = &Error{Code: f.Code, Message: f.Message}
			s.mu.Unlock()
			s.c.log.Warn("realtime error from server", "code", f.Code, "message", f.Message)
			return
		}
	case opReady:
		return
	}
	if sub := s.c.lookup(f.ID); sub != nil {
		if f.Op != opError && f.Op != opUnsubscribed {
			// A snapshot, resume or change: state the client has seen.
			s.c.cfg.Session.Observe(f.Revision)
		}
		sub.handle(s, f)
		return
	}
	if f.Op == opUnsubscribed || f.Op == opError {
		s.mu.Lock()
		if ack, ok := s.acks[f.ID]; ok {
			close(ack)
			delete(s.acks, f.ID)
		}
		s.mu.Unlock()
	}
}

// expectAck registers a waiter for the answer to an unsubscribe.
func (s *session) expectAck(id string) chan struct{} {
	ch := make(chan struct{})
	s.mu.Lock()
	s.acks[id] = ch
	s.mu.Unlock()
	return ch
}

func (s *session) dropAck(id string, ch chan struct{}) {
	s.mu.Lock()
	if s.acks[id] == ch {
		delete(s.acks, id)
	}
	s.mu.Unlock()
}

// waitApp marks the read loop as waiting for the application.
func (s *session) waitApp(waiting bool) {
	if waiting {
		s.episodes.Add(1)
	}
	s.blocked.Store(waiting)
}

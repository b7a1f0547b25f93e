package realtime_test

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/edgebase/edgebase/node/nodetest"
)

// readerStacks counts the node's connection readers (Server.readConn) and
// those of them parked in parkRead, from a dump of every goroutine.
func readerStacks() (readers, parked int) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if !bytes.Contains(g, []byte("realtime.(*Server).readConn(")) {
			continue
		}
		readers++
		if bytes.Contains(g, []byte("realtime.parkRead(")) {
			parked++
		}
	}
	return readers, parked
}

// TestIdleConnectionsPark: the reader of an idle connection waits in
// parkRead (a stack the runtime keeps at 2 KiB), also after it handled a
// message and after a ping of the client's, and the connection still
// works.
func TestIdleConnectionsPark(t *testing.T) {
	h := startHarness(t, nodetest.Options{})
	p := h.newProject(t)
	tok := p.OwnerToken
	const n = 3
	var clients []*client
	for range n {
		c, _ := h.connect(t, p, tok)
		c.subscribe("s", "docs", true)
		c.snapshot("s")
		clients = append(clients, c)
	}
	waitReaders := func(what string) {
		t.Helper()
		deadline := time.Now().Add(msgWait)
		for {
			readers, parked := readerStacks()
			if readers == n && parked == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d connection readers, %d of them parked in parkRead; want %d and %d", what, readers, parked, n, n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitReaders("after subscribing")

	// A ping of the client's library: the node's library answers it.
	ctx, cancel := context.WithTimeout(context.Background(), msgWait)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- clients[0].ws.Ping(ctx) }()
	// The client's library sees the pong only while it reads.
	readErr := make(chan error, 1)
	go func() {
		_, _, err := clients[0].ws.Read(ctx)
		readErr <- err
	}()
	if err := <-done; err != nil {
		t.Fatalf("the node did not answer a ping: %v", err)
	}
	waitReaders("after a ping")

	// Still serving: a change reaches every subscriber.
	h.put(t, tok, "docs/a", map[string]any{"x": 1})
	for _, c := range clients[1:] {
		c.expectChange("s", "docs/a", "set")
	}
	if err := <-readErr; err != nil {
		t.Fatalf("client 0: %v", err)
	}
	waitReaders("after a change")
}

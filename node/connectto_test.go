package node_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/node"
	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/raftstore"
)

// tcpRelay joins every connection accepted on its address to a new
// connection to target, counting the connections.
type tcpRelay struct {
	ln    net.Listener
	conns atomic.Int64
	mu    sync.Mutex
	open  []net.Conn
	wg    sync.WaitGroup
}

func startRelay(t *testing.T, target string) *tcpRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &tcpRelay{ln: ln}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			r.conns.Add(1)
			r.mu.Lock()
			r.open = append(r.open, in, out)
			r.mu.Unlock()
			for _, p := range [][2]net.Conn{{in, out}, {out, in}} {
				r.wg.Add(1)
				go func(dst, src net.Conn) {
					defer r.wg.Done()
					_, _ = io.Copy(dst, src)
					_ = dst.Close()
					_ = src.Close()
				}(p[0], p[1])
			}
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		r.mu.Lock()
		for _, c := range r.open {
			_ = c.Close()
		}
		r.mu.Unlock()
		r.wg.Wait()
	})
	return r
}

// freeAddr returns a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// A node started with ConnectTo (--connect-to) reaches the member it joins
// through the mapped address: the join call and its forwarded node-record
// write go through the relay, while the member keeps its advertised address.
func TestNodeConnectToJoinsThroughTheMappedAddress(t *testing.T) {
	hp := auth.HashParams{Memory: 1024, Iterations: 1, Parallelism: 1, SaltLen: 16, KeyLen: 32}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	base := t.TempDir()
	start := func(cfg node.Config) *node.Node {
		t.Helper()
		cfg.DataDir = filepath.Join(base, cfg.NodeID)
		cfg.ClusterSecret, cfg.AdminToken = "secret", "admin"
		cfg.Logger, cfg.Out, cfg.HashParams, cfg.Tuning = logger, io.Discard, &hp, nodetest.FastTuning()
		n, err := node.Start(cfg)
		if err != nil {
			t.Fatalf("start %s: %v", cfg.NodeID, err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_ = n.Close(ctx)
		})
		return n
	}
	aHTTP, aRaft := freeAddr(t), freeAddr(t)
	a := start(node.Config{NodeID: "a", HTTPAddr: aHTTP, RaftAddr: aRaft})
	nodetest.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		if !a.Store.IsLeader() {
			return errors.New("a does not lead yet")
		}
		return nil
	})

	viaHTTP, viaRaft := startRelay(t, aHTTP), startRelay(t, aRaft)
	b := start(node.Config{NodeID: "b", Edge: true, HTTPAddr: freeAddr(t), RaftAddr: freeAddr(t), Join: []string{"http://" + aHTTP},
		ConnectTo: map[string]string{aHTTP: viaHTTP.ln.Addr().String(), aRaft: viaRaft.ln.Addr().String()}})
	nodetest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		doc, err := a.Store.Get(raftstore.NodeRecordPath("b"))
		if err != nil || doc == nil {
			return fmt.Errorf("b's node record not on a yet (%v)", err)
		}
		if b.Store.LeaderID() != "a" {
			return fmt.Errorf("b sees leader %q", b.Store.LeaderID())
		}
		return nil
	})
	if viaHTTP.conns.Load() == 0 {
		t.Fatal("b joined without a connection through the relay it was told to use for a's HTTP address")
	}
	// b's strong reads ask a through the relay too, on the kept-alive
	// connection.
	before := viaHTTP.conns.Load()
	for i := 0; i < 20; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := b.Store.ReadIndex(ctx)
		cancel()
		if err != nil {
			t.Fatalf("read index on b: %v", err)
		}
	}
	if got := viaHTTP.conns.Load() - before; got > 1 {
		t.Fatalf("20 read-index calls from b opened %d connections through the relay", got)
	}
	t.Logf("relay to a's HTTP: %d connections; to a's Raft: %d (a dials b, not the other way)", viaHTTP.conns.Load(), viaRaft.conns.Load())
}

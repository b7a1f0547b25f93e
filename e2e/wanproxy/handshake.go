package main

import (
	"math/rand/v2"
	"time"

	"github.com/Shopify/toxiproxy/v2/toxics"
)

// HandshakeToxic makes a new connection cost what a TCP handshake costs
// on a real network: toxiproxy accepts a connection and dials its upstream
// at once, so, without it, a new connection through a proxy costs no round
// trip at all and keeping connections alive would buy nothing. On the
// upstream stream it holds the first chunk of each connection (and so
// everything after it) for Latency ± Jitter ms, one round trip, before
// passing it on; later chunks pass untouched. Put it after the latency
// toxic of the same stream (that one measures its delay from when a chunk
// was read, so a handshake before it would overlap with it).
type HandshakeToxic struct {
	Latency int64 `json:"latency"` // ms
	Jitter  int64 `json:"jitter"`  // ms
}

// handshakeState is per connection (it survives the toxic's updates).
type handshakeState struct{ done bool }

// NewState implements toxics.StatefulToxic.
func (t *HandshakeToxic) NewState() any { return &handshakeState{} }

func (t *HandshakeToxic) delay() time.Duration {
	d := t.Latency
	if t.Jitter > 0 {
		d += rand.Int64N(2*t.Jitter) - t.Jitter
	}
	return time.Duration(max(d, 0)) * time.Millisecond
}

// Pipe implements toxics.Toxic.
func (t *HandshakeToxic) Pipe(stub *toxics.ToxicStub) {
	state, _ := stub.State.(*handshakeState)
	if state == nil {
		state = &handshakeState{}
		stub.State = state
	}
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			if !state.done {
				select {
				case <-time.After(t.delay()):
				case <-stub.Interrupt:
					stub.Output <- c // the replacement toxic must not lose it
					state.done = true
					return
				}
				state.done = true
			}
			stub.Output <- c
		}
	}
}

func init() {
	toxics.Register("handshake", new(HandshakeToxic))
}

// Package wan runs an edgebase cluster on a simulated wide-area network:
// node processes on loopback whose node-to-node connections and client
// connections pass through a toxiproxy server (the wanproxy binary of
// e2e/wanproxy) that adds each region pair's latency. Tests (e2e/wan) and
// the bench use it; its API does not depend on package testing.
//
// Every (source region, destination node, port kind) triple has a proxy: a
// node in region R reaches node N's Raft or HTTP port through proxy
// (R, N, raft|http), by `serve --connect-to N.addr=proxy.addr`; a client in
// region R reaches N's HTTP port at URL(R, N), the (R, N, http) proxy. Each
// proxy delays both directions by half the region pair's round trip (the
// whole milliseconds; the odd one goes downstream), each ± Jitter of it,
// and (unless Profile.FreeConnect) holds the first bytes of each new
// connection one more round trip, the cost of a TCP handshake.
package wan

import (
	"fmt"
	"math"
	"time"
)

// Region is a simulated region.
type Region string

// The regions of the default profile.
const (
	US Region = "us"
	EU Region = "eu"
	AP Region = "ap"
)

// Profile is the simulated network: the round trip between every pair of
// regions and the jitter on each one-way latency.
type Profile struct {
	// RTT is symmetric: keys are sorted ([2]Region{"eu", "us"}), the
	// intra-region round trip is under [2]Region{r, r}.
	RTT map[[2]Region]time.Duration
	// Jitter is a fraction of each one-way latency, e.g. 0.10: each chunk
	// of data is delayed by the latency ± up to Jitter × latency.
	Jitter float64
	// FreeConnect makes new connections free, as toxiproxy alone does (it
	// accepts and dials its upstream at once). By default (false) the
	// first bytes of each connection wait one more round trip (± twice
	// the jitter), what a TCP handshake costs, so that reusing a
	// connection pays off as it does on a real network.
	FreeConnect bool
}

// PairKey is the key of RTT for regions a and b (sorted).
func PairKey(a, b Region) [2]Region {
	if b < a {
		a, b = b, a
	}
	return [2]Region{a, b}
}

// DefaultProfile is issue 24's network: us-eu 80 ms, us-ap 150 ms, eu-ap
// 220 ms, 1 ms within a region, ±10% jitter.
func DefaultProfile() Profile {
	return Profile{
		RTT: map[[2]Region]time.Duration{
			PairKey(US, EU): 80 * time.Millisecond,
			PairKey(US, AP): 150 * time.Millisecond,
			PairKey(EU, AP): 220 * time.Millisecond,
			PairKey(US, US): time.Millisecond,
			PairKey(EU, EU): time.Millisecond,
			PairKey(AP, AP): time.Millisecond,
		},
		Jitter: 0.10,
	}
}

// Between is the round trip between regions a and b (0 when the profile
// has none).
func (p Profile) Between(a, b Region) time.Duration {
	return p.RTT[PairKey(a, b)]
}

// OneWay is the latency of one direction from a to b as the proxies apply
// it (the upstream half: see Latency), without jitter.
func (p Profile) OneWay(a, b Region) time.Duration {
	up, _, _ := p.Latency(a, b)
	return time.Duration(up) * time.Millisecond
}

// Latency is what the proxies between a and b apply, in whole milliseconds
// (toxiproxy's unit): upstream (towards the destination) and downstream
// latency, which add up to the round trip rounded to milliseconds, and the
// jitter of each (Jitter × the round trip / 2, rounded).
func (p Profile) Latency(a, b Region) (upMS, downMS, jitterMS int64) {
	rtt := p.Between(a, b).Milliseconds()
	upMS = rtt / 2
	downMS = rtt - upMS
	jitterMS = jitterFor(p.Between(a, b), p.Jitter)
	return upMS, downMS, jitterMS
}

func jitterFor(rtt time.Duration, frac float64) int64 {
	half := float64(rtt) / float64(time.Millisecond) / 2
	return int64(math.Round(frac * half))
}

// validate checks that every pair of regions the nodes live in has a round
// trip and the jitter is a fraction.
func (p Profile) validate(regions []Region) error {
	if p.Jitter < 0 || p.Jitter >= 1 {
		return fmt.Errorf("wan: jitter %v is not in [0, 1)", p.Jitter)
	}
	for _, a := range regions {
		for _, b := range regions {
			if _, ok := p.RTT[PairKey(a, b)]; !ok {
				return fmt.Errorf("wan: the profile has no round trip between %s and %s", a, b)
			}
		}
	}
	for k, d := range p.RTT {
		if d < 0 {
			return fmt.Errorf("wan: negative round trip %v between %s and %s", d, k[0], k[1])
		}
		if k != PairKey(k[0], k[1]) {
			return fmt.Errorf("wan: round trip key %v is not sorted (use PairKey)", k)
		}
	}
	return nil
}

// NodeSpec is one node of the topology.
type NodeSpec struct {
	ID     string
	Region Region
	Edge   bool // a non-voting edge node (serve --edge)
}

// DefaultTopology is issue 24's cluster: voters v-us1 (which bootstraps),
// v-us2 and v-eu1; one edge node per region, e-us, e-eu and e-ap.
func DefaultTopology() []NodeSpec {
	return []NodeSpec{
		{ID: "v-us1", Region: US},
		{ID: "v-us2", Region: US},
		{ID: "v-eu1", Region: EU},
		{ID: "e-us", Region: US, Edge: true},
		{ID: "e-eu", Region: EU, Edge: true},
		{ID: "e-ap", Region: AP, Edge: true},
	}
}

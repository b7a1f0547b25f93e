package raftstore

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Node-to-node dialing. Every outgoing connection this node makes to another
// member (Raft transport dials, and the HTTP calls of internalCall: forwarded
// writes, read index, join, readdress, remove, status, membership, transfer)
// goes through one dial function, which applies Config.ConnectTo: a
// connection to FROM (host:port as the member advertises it) dials TO
// instead. Names are not rewritten: TLS still verifies FROM's host, and the
// Raft configuration keeps FROM. It lets a test put a simulated WAN (a
// proxy per link) between nodes that advertise their real addresses, and an
// operator route one link through a tunnel.

// dialTimeout bounds one TCP dial of an internal HTTP call (the Raft
// transport passes its own).
const dialTimeout = 10 * time.Second

// ParseConnectTo reads "FROM=TO[,FROM=TO...]" (both host:port) into a map.
// An empty string is no mapping. It refuses bad syntax, an address that is
// not host:port with a port in 1-65535, and one FROM mapped to two TOs.
func ParseConnectTo(v string) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		from, to, ok := strings.Cut(f, "=")
		from, to = strings.TrimSpace(from), strings.TrimSpace(to)
		if !ok || from == "" || to == "" {
			return nil, fmt.Errorf("%q is not FROM=TO", f)
		}
		for _, a := range []string{from, to} {
			if err := checkHostPort(a); err != nil {
				return nil, err
			}
		}
		if prev, dup := out[from]; dup && prev != to {
			return nil, fmt.Errorf("%s is mapped twice (to %s and to %s)", from, prev, to)
		}
		out[from] = to
	}
	return out, nil
}

// checkHostPort accepts "host:port" with a non-empty host and a port in
// 1-65535.
func checkHostPort(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %w", a, err)
	}
	if host == "" {
		return fmt.Errorf("%q has no host", a)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("%q: port must be a number in 1-65535", a)
	}
	return nil
}

// FormatConnectTo is the inverse of ParseConnectTo, sorted (logs).
func FormatConnectTo(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for from, to := range m {
		parts = append(parts, from+"="+to)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// connectTo wraps dial so that an address in m dials its mapping instead.
func connectTo(m map[string]string, dial dialFunc) dialFunc {
	if len(m) == 0 {
		return dial
	}
	// Copied: the caller's map may change after Open.
	cp := make(map[string]string, len(m))
	for k, v := range m {
		cp[k] = v
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if to, ok := cp[addr]; ok {
			addr = to
		}
		return dial(ctx, network, addr)
	}
}

// countDials wraps dial so that every connection it opens adds one to n.
func countDials(n *atomic.Uint64, dial dialFunc) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err == nil {
			n.Add(1)
		}
		return c, err
	}
}

// internalClient returns the client of internalCall. The default one keeps
// connections alive (forwarded writes and read-index rounds reuse them: no
// TCP or TLS handshake per call). A given client's *http.Transport is cloned
// with the same dialing applied; another RoundTripper is used as is.
func (s *Store) internalClient() *http.Client {
	base := (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext
	if c := s.cfg.HTTPClient; c != nil {
		t, ok := c.Transport.(*http.Transport)
		if c.Transport == nil {
			t, ok = http.DefaultTransport.(*http.Transport)
		}
		if !ok {
			return c
		}
		t = t.Clone()
		if t.DialContext != nil {
			base = t.DialContext
		}
		t.DialContext = countDials(&s.forwardConns, connectTo(s.cfg.ConnectTo, base))
		cc := *c
		cc.Transport = t
		return &cc
	}
	return &http.Client{Transport: &http.Transport{
		DialContext:         countDials(&s.forwardConns, connectTo(s.cfg.ConnectTo, base)),
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		TLSClientConfig:     s.cfg.HTTPTLS,
		TLSHandshakeTimeout: 10 * time.Second,
	}}
}

// warmLeaderTimeout bounds the call that opens a connection to a new leader.
const warmLeaderTimeout = 2 * time.Second

// warmLeaders opens a kept-alive connection to each new leader as soon as
// this node learns of it (a cheap status call), so that the first forwarded
// write or read index after a failover does not pay the TCP (and TLS)
// handshake across the WAN. It returns when the store stops.
func (s *Store) warmLeaders() {
	defer s.wg.Done()
	ch := make(chan raft.Observation, 4)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	s.raft.RegisterObserver(obs)
	defer s.raft.DeregisterObserver(obs)
	// Calls end when the store stops (the only way this loop returns).
	life, stop := context.WithCancel(context.Background())
	go func() { <-s.stop; stop() }()
	for {
		select {
		case <-s.stop:
			return
		case o := <-ch:
			lo, _ := o.Data.(raft.LeaderObservation)
			id := string(lo.LeaderID)
			if id == "" || id == s.cfg.NodeID {
				continue
			}
			base, err := s.nodeHTTPAddr(id)
			if err != nil || base == "" {
				continue
			}
			ctx, cancel := context.WithTimeout(life, warmLeaderTimeout)
			var st selfStatus
			if _, err := s.internalCall(ctx, base, "status", nil, &st); err != nil {
				s.logger.Debug("could not reach the new leader ahead of forwarding", "leader", id, "err", err)
			}
			cancel()
		}
	}
}

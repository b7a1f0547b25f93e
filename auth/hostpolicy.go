package auth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
)

// ErrHostNotAllowed refuses a host a tenant named (an SMTP server, an OIDC
// issuer) that resolves to a private, loopback, link-local or otherwise
// internal address the operator did not allow: the cluster must not be made
// to call into its own network for a tenant (SSRF).
var ErrHostNotAllowed = errors.New("host not allowed")

// HostPolicy judges the hosts tenants name. Public addresses are always
// allowed; internal ones only when the operator listed them
// (--allow-private-hosts): an IP, a CIDR, or a host name.
type HostPolicy struct {
	prefixes []netip.Prefix
	names    map[string]bool
	resolver *net.Resolver
	// flag names the operator's setting in refusals (--allow-private-hosts
	// unless NewHostPolicyFlag said otherwise).
	flag string
}

// NewHostPolicy parses the operator's allowances: IP addresses, CIDR
// prefixes and host names (compared lowercased, without a trailing dot).
func NewHostPolicy(allowed []string) (*HostPolicy, error) {
	return NewHostPolicyFlag(allowed, "--allow-private-hosts")
}

// NewHostPolicyFlag is NewHostPolicy for a list the operator sets with flag
// (e.g. --allow-private-webhooks), which its refusals name.
func NewHostPolicyFlag(allowed []string, flag string) (*HostPolicy, error) {
	p := &HostPolicy{names: map[string]bool{}, resolver: net.DefaultResolver, flag: flag}
	for _, a := range allowed {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if pfx, err := netip.ParsePrefix(a); err == nil {
			p.prefixes = append(p.prefixes, pfx.Masked())
			continue
		}
		if ip, err := netip.ParseAddr(a); err == nil {
			ip = ip.Unmap()
			p.prefixes = append(p.prefixes, netip.PrefixFrom(ip, ip.BitLen()))
			continue
		}
		if strings.ContainsAny(a, "/:* ") {
			return nil, fmt.Errorf("allowed private host %q is not an IP, a CIDR or a host name", a)
		}
		p.names[strings.TrimSuffix(strings.ToLower(a), ".")] = true
	}
	return p, nil
}

// internal reports whether ip is not a public unicast address.
func internal(ip netip.Addr) bool {
	ip = ip.Unmap()
	return !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() ||
		ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() || ip.IsMulticast() ||
		ip.IsUnspecified() || cgnat.Contains(ip) || ip == netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// cgnat is the shared address space of RFC 6598, internal to carriers.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

func (p *HostPolicy) allowsAddr(host string, ip netip.Addr) bool {
	if !internal(ip) {
		return true
	}
	if p == nil {
		return false
	}
	if p.names[strings.TrimSuffix(strings.ToLower(host), ".")] {
		return true
	}
	for _, pfx := range p.prefixes {
		if pfx.Contains(ip.Unmap()) {
			return true
		}
	}
	return false
}

func (p *HostPolicy) flagName() string {
	if p == nil || p.flag == "" {
		return "--allow-private-hosts"
	}
	return p.flag
}

// Check resolves host (a name or an IP literal, without port) and refuses
// it when any of its addresses is internal and not allowed. A host that does
// not resolve is refused too. DialContext checks again at connect time, so a
// name that resolves elsewhere later (DNS rebinding) gains nothing.
func (p *HostPolicy) Check(ctx context.Context, host string) error {
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if host == "" {
		return fmt.Errorf("%w: empty host", ErrHostNotAllowed)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if !p.allowsAddr(host, ip) {
			return fmt.Errorf("%w: %s is a private or loopback address (the operator may allow it with %s)", ErrHostNotAllowed, host, p.flagName())
		}
		return nil
	}
	r := net.DefaultResolver
	if p != nil && p.resolver != nil {
		r = p.resolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return fmt.Errorf("%w: %s does not resolve", ErrHostNotAllowed, host)
	}
	for _, ip := range addrs {
		if !p.allowsAddr(host, ip) {
			return fmt.Errorf("%w: %s resolves to the private or loopback address %s (the operator may allow it with %s)", ErrHostNotAllowed, host, ip, p.flagName())
		}
	}
	return nil
}

// DialContext returns a dial function for outgoing connections on a
// tenant's behalf: d (a zero Dialer when nil) with a Control hook that
// refuses, after resolution, any internal address the policy does not
// allow. host is what the tenant named; the hook sees only the address.
func (p *HostPolicy) DialContext(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var base net.Dialer
	if d != nil {
		base = *d
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("dial %s: %w", addr, err)
		}
		dd := base
		dd.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: %s", ErrHostNotAllowed, address)
			}
			if !p.allowsAddr(host, ap.Addr()) {
				return fmt.Errorf("%w: %s (%s) is private or loopback", ErrHostNotAllowed, host, ap.Addr())
			}
			return nil
		}
		return dd.DialContext(ctx, network, addr)
	}
}

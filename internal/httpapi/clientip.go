package httpapi

import (
	"fmt"
	"net/netip"
	"strings"
)

// ParseTrustedProxies parses SECKILL_TRUSTED_PROXIES: IP addresses and
// CIDR prefixes separated by commas ("10.0.0.0/8, 192.0.2.7, fd00::/8").
// An empty string trusts no proxy. IPv4-mapped IPv6 forms are read as the
// IPv4 they map.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []netip.Prefix
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		var p netip.Prefix
		var err error
		if strings.Contains(item, "/") {
			p, err = netip.ParsePrefix(item)
		} else {
			var a netip.Addr
			if a, err = netip.ParseAddr(item); err == nil && a.Zone() == "" {
				p = netip.PrefixFrom(a, a.BitLen())
			}
		}
		if err != nil || !p.IsValid() {
			return nil, fmt.Errorf("trusted proxies: %q is not an IP address or CIDR prefix", item)
		}
		out = append(out, normalizePrefix(p))
	}
	return out, nil
}

func normalizePrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() {
		bits := max(p.Bits()-96, 0)
		p = netip.PrefixFrom(a.Unmap(), bits)
	}
	return p.Masked()
}

// maxForwardedHops bounds the X-Forwarded-For entries examined per
// request: no real chain of trusted proxies is longer.
const maxForwardedHops = 32

// clientAddr returns the address a request is rate limited by. It is the
// peer's, unless the peer is a trusted proxy: then it is the right-most
// address of X-Forwarded-For that is not a trusted proxy. Everything left
// of it was written by the client and proves nothing; a client that forges
// the header only adds entries there. If every entry is trusted, the
// left-most is the client; if an entry cannot be read, the last trusted
// address before it is used. ok is false when the peer itself has no IP
// address (a Unix socket).
func clientAddr(remoteAddr string, xff []string, trusted []netip.Prefix) (addr netip.Addr, ok bool) {
	peer, ok := parseHostAddr(remoteAddr)
	if !ok || !isTrusted(peer, trusted) {
		return peer, ok
	}
	client, hops := peer, 0
	for i := len(xff) - 1; i >= 0; i-- {
		rest := xff[i]
		for rest != "" {
			var item string
			if j := strings.LastIndexByte(rest, ','); j >= 0 {
				item, rest = rest[j+1:], rest[:j]
			} else {
				item, rest = rest, ""
			}
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			if hops++; hops > maxForwardedHops {
				return client, true
			}
			a, ok := parseHostAddr(item)
			if !ok {
				return client, true
			}
			client = a
			if !isTrusted(a, trusted) {
				return a, true
			}
		}
	}
	return client, true
}

// parseHostAddr reads "ip", "ip:port" or "[ip]:port", without a zone and
// with IPv4-mapped IPv6 unmapped.
func parseHostAddr(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, perr := netip.ParseAddrPort(s)
		if perr != nil {
			return netip.Addr{}, false
		}
		a = ap.Addr()
	}
	return a.Unmap().WithZone(""), true
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ipRateKey is the rate-limit key of a client address: the address for
// IPv4, the /64 for IPv6, since one subscriber commonly holds a whole /64
// and could otherwise take a fresh address per request.
func ipRateKey(a netip.Addr) string {
	if a.Is4() {
		return "ip:" + a.String()
	}
	p, _ := a.Prefix(64)
	return "ip6:" + p.String()
}

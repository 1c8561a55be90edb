package events

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// blockedPrefixes are the ranges a webhook may not reach unless private targets are
// allowed (SENSORAPI_WEBHOOK_ALLOW_PRIVATE): besides what netip's predicates name
// (loopback, private, link-local, multicast, unspecified), the shared address space
// of carrier-grade NAT, "this network", benchmarking and reserved ranges, and NAT64's
// well-known prefix (which maps to any IPv4 address, private ones included).
var blockedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
}

// Blocked tells whether an address is private, loopback, link-local or otherwise not
// a public unicast address.
func Blocked(a netip.Addr) bool {
	a = a.Unmap()
	if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() || !a.IsValid() {
		return true
	}
	for _, p := range blockedPrefixes {
		if p.Contains(a) {
			return true
		}
	}
	return a.Is4() && a == netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// errBlocked is a dial refused by the guard.
var errBlocked = errors.New("target address is private, loopback or link-local (SENSORAPI_WEBHOOK_ALLOW_PRIVATE is off)")

// dialControl refuses connections to blocked addresses at dial time, after DNS
// resolution: a name that resolved to a public address when the event was created
// and to a private one now (DNS rebinding) is refused here.
func dialControl(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s", errBlocked, address)
	}
	if Blocked(ap.Addr()) {
		return fmt.Errorf("%w: %s", errBlocked, ap.Addr())
	}
	return nil
}

// checkURL validates a webhook URL at create time: absolute http(s), and unless
// private targets are allowed, not a blocked address or a name resolving to one.
func checkURL(ctx context.Context, raw string, allowPrivate bool) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		return "Enter a valid absolute http or https URL."
	}
	if allowPrivate {
		return ""
	}
	host := u.Hostname()
	refused := fmt.Sprintf("The URL %s targets a private, loopback or link-local address; "+
		"such targets are refused unless SENSORAPI_WEBHOOK_ALLOW_PRIVATE=true.", raw)
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		if Blocked(a) {
			return refused
		}
		return ""
	}
	if h := strings.ToLower(strings.TrimSuffix(host, ".")); h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return refused
	}
	// a name: refuse it when it resolves to a blocked address now (the dial-time guard
	// checks again at every attempt); a name that does not resolve yet is accepted
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(rctx, "ip", host)
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if Blocked(a) {
			return refused
		}
	}
	return ""
}

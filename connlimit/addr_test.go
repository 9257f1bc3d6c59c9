package connlimit

import (
	"net"
	"testing"
)

// TestAddrKey_IPv6ByPrefix: addresses of one IPv6 /64 share a key, as one
// client usually holds a whole /64; IPv4 (mapped or not) is keyed by
// address; a Unix socket has no key.
func TestAddrKey_IPv6ByPrefix(t *testing.T) {
	tcp := func(s string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(s), Port: 1} }
	for _, tc := range []struct {
		addr  net.Addr
		key   string
		keyed bool
	}{
		{tcp("192.0.2.7"), "192.0.2.7/32", true},
		{tcp("::ffff:192.0.2.7"), "192.0.2.7/32", true},
		{tcp("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::/64", true},
		{tcp("2001:db8:1:2:bbbb::9"), "2001:db8:1:2::/64", true},
		{&net.UnixAddr{Name: "@", Net: "unix"}, "", false},
	} {
		k, ok := addrKey(tc.addr)
		if ok != tc.keyed || (ok && k.String() != tc.key) {
			t.Errorf("addrKey(%v) = %v, %v; want %s, %v", tc.addr, k, ok, tc.key, tc.keyed)
		}
	}
}

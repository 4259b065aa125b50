package ipform_test

import (
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/ratekeeper/ratekeeper/internal/ipform"
	"github.com/ratekeeper/ratekeeper/keyfunc"
)

// TestKeyFunctionsFormsPass: no identity an IP key function gives is
// refused, for every grouping it can be configured with.
func TestKeyFunctionsFormsPass(t *testing.T) {
	peers := []string{"203.0.113.7", "0.0.0.1", "255.255.255.255", "::ffff:198.51.100.9", "2001:db8:1:2::abcd", "::1", "::", "fe80::1%eth0", "64:ff9b::203.0.113.7", "::1.2.3.4"}
	for v4 := 1; v4 <= 32; v4++ {
		for v6 := 1; v6 <= 128; v6++ {
			c, err := keyfunc.NewClientIP(keyfunc.IPOptions{IPv4Prefix: v4, IPv6Prefix: v6})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range peers {
				r := httptest.NewRequest("GET", "/", nil)
				r.RemoteAddr = netip.AddrPortFrom(netip.MustParseAddr(p), 4000).String()
				id, err := c.Key(r)
				if err != nil {
					t.Fatalf("IPv4Prefix %d, IPv6Prefix %d, peer %s: %v", v4, v6, p, err)
				}
				if err := ipform.Check(id); err != nil {
					t.Fatalf("IPv4Prefix %d, IPv6Prefix %d, peer %s: key %q refused: %v", v4, v6, p, id, err)
				}
			}
		}
	}
}

// Package ipform recognises identities that name a client address in a
// form no IP key function gives, for the tools that take an identity from
// an operator (the admin API, the command-line tool): an override or a
// reset of such an identity would be accepted and never apply.
//
// The IP key functions of package keyfunc name a client by its address or
// masked prefix in netip's one textual form: "203.0.113.7",
// "198.51.100.0/24", "2001:db8:1:2::/64", an IPv4-mapped address as its
// IPv4 address, without a zone. An identity that parses as an address or a
// prefix but is written otherwise ("::ffff:203.0.113.7", "2001:DB8::1",
// "fe80::1%eth0", "198.51.100.7/24") is not one they give.
package ipform

import (
	"fmt"
	"net/netip"
	"strings"
)

// Check returns an error naming the form an IP key function would give,
// when identity is a client address or prefix written in another form;
// nil for any other identity (a JWT subject, a route, an address already
// in that form).
func Check(identity string) error {
	want, ok := canonical(identity)
	if !ok || want == identity {
		return nil
	}
	return fmt.Errorf("identity %q is a client address in a form no IP key function gives; they name it %q", identity, want)
}

// canonical returns the form an IP key function gives the address or
// prefix identity, and whether identity is one.
func canonical(identity string) (string, bool) {
	if !strings.Contains(identity, "/") {
		a, err := netip.ParseAddr(identity)
		if err != nil {
			return "", false
		}
		return a.WithZone("").Unmap().String(), true
	}
	p, err := netip.ParsePrefix(identity)
	if err != nil {
		return "", false
	}
	a, bits := p.Addr(), p.Bits()
	if a.Is4In6() && bits >= 96 {
		a, bits = a.Unmap(), bits-96
	}
	if bits == a.BitLen() {
		return a.String(), true
	}
	return netip.PrefixFrom(a, bits).Masked().String(), true
}

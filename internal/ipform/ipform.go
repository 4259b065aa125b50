// Package ipform recognises identities that name a client address in a
// form no IP key function gives, for the tools that take an identity from
// an operator (the admin API, the command-line tool): an override or a
// reset of such an identity would be accepted and never apply.
//
// The IP key functions of package keyfunc name a client by its address or
// masked prefix in netip's one textual form: "203.0.113.7",
// "198.51.100.0/24", "2001:db8:1:2::/64", an IPv4-mapped address as its
// IPv4 address, without a zone, and a prefix of 1 to 31 bits for IPv4 and
// 1 to 127 for IPv6 (a full-length one is the bare address). An identity
// that reads as an address or a prefix but is written otherwise
// ("::ffff:203.0.113.7", "2001:DB8::1", "fe80::1%eth0", "203.0.113.07",
// "198.51.100.7/24", "0.0.0.0/0") is not one they give.
package ipform

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Check returns an error when identity reads as a client address or
// prefix written in a form no IP key function gives, naming the form
// they give when there is one; nil for any other identity (a JWT
// subject, a route, an address already in that form).
func Check(identity string) error {
	want, ok := canonical(identity)
	switch {
	case !ok || want == identity:
		return nil
	case want == "":
		return fmt.Errorf("identity %q is a client address or prefix that no IP key function gives (they group addresses by 1 to 32 bits for IPv4 and 1 to 128 for IPv6)", identity)
	}
	return fmt.Errorf("identity %q is a client address in a form no IP key function gives; they name it %q", identity, want)
}

// canonical returns the form an IP key function gives the address or
// prefix identity ("" when none gives it), and whether identity reads as
// one.
func canonical(identity string) (string, bool) {
	text, bitsText, isPrefix := strings.Cut(identity, "/")
	a, ok := parseAddr(text)
	if !ok {
		return "", false
	}
	a = a.WithZone("")
	if !isPrefix {
		return a.Unmap().String(), true
	}
	if !digits(bitsText, 3) {
		return "", false
	}
	bits, _ := strconv.Atoi(bitsText)
	if bits > a.BitLen() {
		return "", false
	}
	if a.Is4In6() {
		if bits < 96 {
			return "", true // a prefix of IPv6 addresses, not of the IPv4 client
		}
		a, bits = a.Unmap(), bits-96
	}
	switch {
	case bits == 0:
		return "", true
	case bits == a.BitLen():
		return a.String(), true
	}
	return netip.PrefixFrom(a, bits).Masked().String(), true
}

// parseAddr parses text as netip does, and also an IPv4 address whose
// fields have leading zeros ("203.0.113.07"), which netip refuses but an
// operator may write for the same address.
func parseAddr(text string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(text); err == nil {
		return a, true
	}
	fields := strings.Split(text, ".")
	if len(fields) != 4 {
		return netip.Addr{}, false
	}
	var b [4]byte
	for i, f := range fields {
		if !digits(f, 3) {
			return netip.Addr{}, false
		}
		n, _ := strconv.Atoi(f)
		if n > 255 {
			return netip.Addr{}, false
		}
		b[i] = byte(n)
	}
	return netip.AddrFrom4(b), true
}

// digits reports whether s is 1 to max decimal digits, no sign.
func digits(s string, max int) bool {
	return s != "" && len(s) <= max && strings.Trim(s, "0123456789") == ""
}

package keyfunc

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

// hdr is one header line of a test request.
type hdr struct{ name, value string }

func newRequest(t testing.TB, remote string, headers ...hdr) *http.Request {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = remote
	for _, h := range headers {
		r.Header.Add(h.name, h.value)
	}
	return r
}

func mustIP(t testing.TB, opts IPOptions) KeyFunc {
	t.Helper()
	c, err := NewClientIP(opts)
	if err != nil {
		t.Fatalf("NewClientIP(%+v): %v", opts, err)
	}
	return c.Key
}

var (
	trustTen    = IPOptions{TrustedProxies: []string{"10.0.0.0/8", "2001:db8:ffff::/48"}}
	trustTenFwd = IPOptions{TrustedProxies: []string{"10.0.0.0/8"}, Header: "Forwarded"}
	trustTenXRI = IPOptions{TrustedProxies: []string{"10.0.0.0/8"}, Header: "x-real-ip"}
	trustTenCF  = IPOptions{TrustedProxies: []string{"10.0.0.0/8"}, Header: "CF-Connecting-IP"}
	usePeer     = IPOptions{TrustedProxies: []string{"10.0.0.0/8"}, UsePeerOnMalformed: true}
	oneHop      = IPOptions{TrustedHops: 1}
	twoHops     = IPOptions{TrustedHops: 2}
	twoHopsFwd  = IPOptions{TrustedHops: 2, Header: "Forwarded"}
)

func TestIPKey(t *testing.T) {
	const (
		peer     = "203.0.113.7:5555" // an untrusted client connecting directly
		proxy    = "10.0.0.1:443"     // a trusted proxy
		client   = "198.51.100.9"
		spoofed  = "6.6.6.6"
		peerKey  = "203.0.113.7"
		proxyKey = "10.0.0.1"
	)
	xff := func(v string) hdr { return hdr{"X-Forwarded-For", v} }
	fwd := func(v string) hdr { return hdr{"Forwarded", v} }
	tests := []struct {
		name    string
		opts    IPOptions
		remote  string
		headers []hdr
		want    string
		wantErr error
	}{
		// Attacks: headers of untrusted peers never change the key.
		{"default ignores spoofed XFF", IPOptions{}, peer, []hdr{xff(spoofed)}, peerKey, nil},
		{"default ignores spoofed Forwarded", IPOptions{}, peer, []hdr{fwd("for=" + spoofed)}, peerKey, nil},
		{"default ignores spoofed X-Real-IP", IPOptions{}, peer, []hdr{{"X-Real-IP", spoofed}}, peerKey, nil},
		{"default ignores spoofed CF-Connecting-IP", IPOptions{}, peer, []hdr{{"CF-Connecting-IP", spoofed}}, peerKey, nil},
		{"untrusted peer XFF ignored", trustTen, peer, []hdr{xff(spoofed)}, peerKey, nil},
		{"untrusted peer trusted-looking XFF ignored", trustTen, peer, []hdr{xff("10.0.0.9")}, peerKey, nil},
		{"untrusted peer garbage XFF not parsed", trustTen, peer, []hdr{xff("garbage,,[")}, peerKey, nil},
		{"untrusted peer Forwarded ignored", trustTenFwd, peer, []hdr{fwd("for=" + spoofed)}, peerKey, nil},
		{"untrusted peer broken Forwarded not parsed", trustTenFwd, peer, []hdr{fwd(`for="`)}, peerKey, nil},
		{"untrusted peer X-Real-IP ignored", trustTenXRI, peer, []hdr{{"X-Real-IP", spoofed}}, peerKey, nil},
		{"untrusted peer CF header ignored", trustTenCF, peer, []hdr{{"CF-Connecting-IP", spoofed}}, peerKey, nil},
		{"XFF ignored when Forwarded configured", trustTenFwd, proxy, []hdr{xff(spoofed)}, proxyKey, nil},

		// X-Forwarded-For behind trusted proxies.
		{"client behind proxy", trustTen, proxy, []hdr{xff(client)}, client, nil},
		{"spoof left of client", trustTen, proxy, []hdr{xff(spoofed + ", " + client)}, client, nil},
		{"trusted hops skipped", trustTen, proxy, []hdr{xff(spoofed + ", " + client + ", 10.0.0.2, 10.9.9.9")}, client, nil},
		{"IPv6 trusted hop skipped", trustTen, proxy, []hdr{xff(client + ", 2001:db8:ffff::1")}, client, nil},
		{"several lines read in order", trustTen, proxy, []hdr{xff(spoofed), xff(client + ", 10.0.0.2")}, client, nil},
		{"client on earlier line", trustTen, proxy, []hdr{xff(spoofed + "," + client), xff("10.0.0.2"), xff("10.0.0.3")}, client, nil},
		{"garbage left of client never parsed", trustTen, proxy, []hdr{xff("garbage, ::zz, " + client)}, client, nil},
		{"empty elements skipped", trustTen, proxy, []hdr{xff(" , " + client + " ,,")}, client, nil},
		{"all trusted takes leftmost", trustTen, proxy, []hdr{xff("10.0.0.5, 10.0.0.6")}, "10.0.0.5", nil},
		{"trusted peer without header is the client", trustTen, proxy, nil, proxyKey, nil},
		{"IPv4 with port", trustTen, proxy, []hdr{xff(client + ":4711")}, client, nil},
		{"IPv6 in brackets with port", trustTen, proxy, []hdr{xff("[2001:db8:1:2::99]:443")}, "2001:db8:1:2::/64", nil},
		{"IPv6 bare", trustTen, proxy, []hdr{xff("2001:db8:1:2::99")}, "2001:db8:1:2::/64", nil},
		{"IPv4-mapped becomes IPv4", trustTen, proxy, []hdr{xff("::ffff:" + client)}, client, nil},
		{"zone dropped", trustTen, proxy, []hdr{xff("fe80::1%eth0")}, "fe80::/64", nil},
		{"IPv4-mapped peer is trusted", trustTen, "[::ffff:10.0.0.1]:443", []hdr{xff(client)}, client, nil},
		{"garbage at client position", trustTen, proxy, []hdr{xff("garbage, 10.0.0.2")}, "", errMalformedForwarding},
		{"unknown at client position", trustTen, proxy, []hdr{xff("unknown")}, "", errMalformedForwarding},
		{"obfuscated at client position", trustTen, proxy, []hdr{xff("_hidden")}, "", errMalformedForwarding},
		{"bad port", trustTen, proxy, []hdr{xff(client + ":99999")}, "", errMalformedForwarding},
		{"IPv6 with port needs brackets", trustTen, proxy, []hdr{xff("[2001:db8::1")}, "", errMalformedForwarding},
		{"leading zeros refused", trustTen, proxy, []hdr{xff("010.0.0.1")}, "", errMalformedForwarding},
		{"malformed falls back to peer", usePeer, proxy, []hdr{xff("unknown")}, proxyKey, nil},

		// Forwarded (RFC 7239) behind trusted proxies.
		{"Forwarded client", trustTenFwd, proxy, []hdr{fwd("for=" + client + ";proto=https")}, client, nil},
		{"Forwarded spoof left", trustTenFwd, proxy, []hdr{fwd("for=" + spoofed + ", for=" + client + ", for=10.0.0.2")}, client, nil},
		{"Forwarded quoted IPv6 with port", trustTenFwd, proxy, []hdr{fwd(`for="[2001:db8:cafe::17]:4711"`)}, "2001:db8:cafe::/64", nil},
		{"Forwarded quoted IPv4 with port", trustTenFwd, proxy, []hdr{fwd(`For="198.51.100.9:80";by=10.0.0.1`)}, client, nil},
		{"Forwarded obfuscated port", trustTenFwd, proxy, []hdr{fwd(`for="198.51.100.9:_p1"`)}, client, nil},
		{"Forwarded quoted-pair", trustTenFwd, proxy, []hdr{fwd(`for="198.51.100\.9"`)}, client, nil},
		{"Forwarded comma inside quotes", trustTenFwd, proxy, []hdr{fwd(`host="a,b";for=` + client)}, client, nil},
		{"Forwarded several lines", trustTenFwd, proxy, []hdr{fwd("for=" + spoofed), fwd("for=" + client + ", for=10.0.0.2")}, client, nil},
		{"Forwarded broken line left of client", trustTenFwd, proxy, []hdr{fwd(`for="unterminated`), fwd("for=" + client)}, client, nil},
		{"Forwarded all trusted", trustTenFwd, proxy, []hdr{fwd("for=10.0.0.7;proto=http")}, "10.0.0.7", nil},
		{"Forwarded hidden hop", trustTenFwd, proxy, []hdr{fwd("for=_hidden, for=10.0.0.2")}, "", errMalformedForwarding},
		{"Forwarded unknown hop", trustTenFwd, proxy, []hdr{fwd("for=unknown")}, "", errMalformedForwarding},
		{"Forwarded element without for", trustTenFwd, proxy, []hdr{fwd("for=" + client + ", proto=https")}, "", errMalformedForwarding},
		{"Forwarded repeated for", trustTenFwd, proxy, []hdr{fwd("for=" + client + ";for=10.0.0.2")}, "", errMalformedForwarding},
		{"Forwarded broken line", trustTenFwd, proxy, []hdr{fwd(`for="` + client)}, "", errMalformedForwarding},
		// Read from the right, the proxy's element ends the line and is read
		// whole; the client's unterminated quote on its left is never reached.
		{"Forwarded open quote left of the appended element", trustTenFwd, proxy, []hdr{fwd(`for=6.6.6.6;x=", for=` + client)}, client, nil},
		{"Forwarded quoted comma in the proxy's element", trustTenFwd, proxy, []hdr{fwd(`for=6.6.6.6, for=` + client + `;host="a, for=6.6.6.6"`)}, client, nil},
		{"Forwarded escaped quote in the proxy's element", trustTenFwd, proxy, []hdr{fwd(`for=6.6.6.6, for=` + client + `;host="a\", for=6.6.6.6"`)}, client, nil},
		{"Forwarded escaped closing quote", trustTenFwd, proxy, []hdr{fwd(`for="` + client + `\"`)}, "", errMalformedForwarding},
		{"Forwarded pairs without separator", trustTenFwd, proxy, []hdr{fwd(`for=6.6.6.6 proto=http`)}, "", errMalformedForwarding},
		{"Forwarded text after quoted value", trustTenFwd, proxy, []hdr{fwd(`for="198.51.100.9"x`)}, "", errMalformedForwarding},
		{"Forwarded IPv4 in brackets", trustTenFwd, proxy, []hdr{fwd(`for="[198.51.100.9]"`)}, "", errMalformedForwarding},

		// Single-address headers.
		{"X-Real-IP from trusted peer", trustTenXRI, proxy, []hdr{{"X-Real-IP", client}}, client, nil},
		{"CF-Connecting-IP from trusted peer", trustTenCF, proxy, []hdr{{"Cf-Connecting-Ip", " " + client + " "}}, client, nil},
		{"X-Real-IP absent", trustTenXRI, proxy, nil, proxyKey, nil},
		{"X-Real-IP repeated", trustTenXRI, proxy, []hdr{{"X-Real-IP", client}, {"X-Real-IP", spoofed}}, "", errMalformedForwarding},
		{"X-Real-IP list", trustTenXRI, proxy, []hdr{{"X-Real-IP", client + ", " + spoofed}}, "", errMalformedForwarding},

		// Trusted hop counts.
		{"one hop", oneHop, peer, []hdr{xff(spoofed + ", " + client)}, client, nil},
		{"two hops", twoHops, peer, []hdr{xff(spoofed + ", " + client + ", 192.0.2.1")}, client, nil},
		{"two hops across lines", twoHops, peer, []hdr{xff(spoofed + ", " + client), xff("192.0.2.1")}, client, nil},
		{"two hops Forwarded", twoHopsFwd, peer, []hdr{fwd("for=" + spoofed + ", for=" + client + ", for=_proxy1")}, client, nil},
		{"chain shorter than hops", twoHops, peer, []hdr{xff(client)}, "", errMalformedForwarding},
		{"no header with hops", oneHop, peer, nil, "", errMalformedForwarding},
		{"no single-address header with hops", IPOptions{TrustedHops: 1, Header: "True-Client-IP"}, peer, nil, "", errMalformedForwarding},
		{"single-address header with hops", IPOptions{TrustedHops: 1, Header: "True-Client-IP"}, peer, []hdr{{"True-Client-IP", client}}, client, nil},

		// Grouping.
		{"IPv4 /24", IPOptions{IPv4Prefix: 24}, "198.51.100.9:1", nil, "198.51.100.0/24", nil},
		{"IPv6 /64 default", IPOptions{}, "[2001:db8:1:2:3:4:5:6]:1", nil, "2001:db8:1:2::/64", nil},
		{"IPv6 /128", IPOptions{IPv6Prefix: 128}, "[2001:db8:1:2:3:4:5:6]:1", nil, "2001:db8:1:2:3:4:5:6", nil},
		{"IPv6 /48", IPOptions{IPv6Prefix: 48}, "[2001:db8:1:2:3:4:5:6]:1", nil, "2001:db8:1::/48", nil},
		{"IPv6 canonical text", IPOptions{IPv6Prefix: 128}, "[2001:DB8:0:0:0:0:0:1]:1", nil, "2001:db8::1", nil},
		{"IPv4-mapped peer", IPOptions{}, "[::ffff:198.51.100.9]:1", nil, client, nil},
		{"zoned peer", IPOptions{}, "[fe80::1%eth0]:1", nil, "fe80::/64", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := mustIP(t, tt.opts)
			got, err := k(newRequest(t, tt.remote, tt.headers...))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("got key %q, error %v; want error %v", got, err, tt.wantErr)
				}
				if errors.Is(err, ErrNoIdentity) {
					t.Errorf("error %v wraps ErrNoIdentity; want a malformed-request error", err)
				}
				if !errors.Is(err, ErrMalformedAddress) {
					t.Errorf("error %v does not wrap ErrMalformedAddress", err)
				}
				if got != "" {
					t.Errorf("got key %q with an error, want empty", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want key %q", err, tt.want)
			}
			if got != tt.want {
				t.Errorf("got key %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRemoteIPMalformed(t *testing.T) {
	for _, remote := range []string{
		"", "garbage", "192.0.2.1", "[::1]", "@", "/run/app.sock", "::1",
		"192.0.2.1:", "192.0.2.1:99999", "[192.0.2.1]:80", "[::1]:", ":80", "[]:80",
		"192.0.2.1:80:80", "2001:db8::1:80x",
	} {
		t.Run(remote, func(t *testing.T) {
			for _, k := range []KeyFunc{RemoteIP, mustIP(t, trustTen), mustIP(t, oneHop), mustIP(t, usePeer)} {
				got, err := k(newRequest(t, remote, hdr{"X-Forwarded-For", "198.51.100.9"}))
				if !errors.Is(err, errMalformedRemoteAddr) {
					t.Fatalf("got key %q, error %v; want errMalformedRemoteAddr", got, err)
				}
				if errors.Is(err, ErrNoIdentity) {
					t.Errorf("error %v wraps ErrNoIdentity", err)
				}
				if !errors.Is(err, ErrMalformedAddress) || errors.Is(err, errMalformedForwarding) {
					t.Errorf("error %v: want ErrMalformedAddress by its RemoteAddr case only", err)
				}
			}
		})
	}
}

func TestRemoteIPValid(t *testing.T) {
	tests := []struct{ remote, want string }{
		{"192.0.2.1:80", "192.0.2.1"},
		{"192.0.2.1:0", "192.0.2.1"},
		{"[::1]:80", "::/64"},
		{"[2001:db8::1]:65535", "2001:db8::/64"},
		{"[::ffff:192.0.2.1]:80", "192.0.2.1"},
		{"[fe80::1%eth0]:80", "fe80::/64"},
		{"255.255.255.255:65535", "255.255.255.255"},
	}
	var zero ClientIP
	var none *ClientIP
	for _, tt := range tests {
		t.Run(tt.remote, func(t *testing.T) {
			got, err := RemoteIP(newRequest(t, tt.remote))
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v; want %q, nil", got, err, tt.want)
			}
			// The zero ClientIP and a nil one key as RemoteIP does.
			for name, c := range map[string]*ClientIP{"zero": &zero, "nil": none} {
				if got, err := c.Key(newRequest(t, tt.remote)); err != nil || got != tt.want {
					t.Errorf("%s ClientIP: got %q, %v; want %q, nil", name, got, err, tt.want)
				}
			}
		})
	}
}

func TestIPv6RotationStaysOneKey(t *testing.T) {
	k := mustIP(t, IPOptions{})
	first, err := k(newRequest(t, "[2001:db8:aa:bb::1]:1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"2001:db8:aa:bb::2", "2001:db8:aa:bb:ffff:ffff:ffff:ffff", "2001:db8:aa:bb:1234:5678:9abc:def0"} {
		got, err := k(newRequest(t, "["+a+"]:1"))
		if err != nil || got != first {
			t.Errorf("%s: got %q, %v; want %q", a, got, err, first)
		}
	}
	other, err := k(newRequest(t, "[2001:db8:aa:bc::1]:1"))
	if err != nil || other == first {
		t.Errorf("next /64: got %q, %v; want a key other than %q", other, err, first)
	}
	// The same holds behind a trusted proxy.
	kp := mustIP(t, trustTen)
	a, _ := kp(newRequest(t, "10.0.0.1:1", hdr{"X-Forwarded-For", "2001:db8:aa:bb::1"}))
	b, _ := kp(newRequest(t, "10.0.0.1:1", hdr{"X-Forwarded-For", "2001:db8:aa:bb::9999"}))
	if a != first || b != first {
		t.Errorf("behind proxy: got %q and %q, want %q", a, b, first)
	}
}

func TestNewClientIPErrors(t *testing.T) {
	tests := []struct {
		name     string
		opts     IPOptions
		contains string
	}{
		{"bad CIDR", IPOptions{TrustedProxies: []string{"10.0.0.0/8", "10.0.0.0/33"}}, "TrustedProxies[1]"},
		{"garbage proxy", IPOptions{TrustedProxies: []string{"proxy.internal"}}, "TrustedProxies[0]"},
		{"empty proxy", IPOptions{TrustedProxies: []string{""}}, "TrustedProxies[0]"},
		{"trust all v4", IPOptions{TrustedProxies: []string{"0.0.0.0/0"}}, "every address"},
		{"trust all v6", IPOptions{TrustedProxies: []string{"::/0"}}, "every address"},
		{"trust all mapped", IPOptions{TrustedProxies: []string{"::ffff:0.0.0.0/96"}}, "every address"},
		{"negative hops", IPOptions{TrustedHops: -1}, "TrustedHops"},
		{"negative MaxHops", IPOptions{TrustedProxies: []string{"10.0.0.0/8"}, MaxHops: -1}, "MaxHops"},
		{"hops above MaxHops", IPOptions{TrustedHops: 3, MaxHops: 2}, "above MaxHops"},
		{"hops above the default MaxHops", IPOptions{TrustedHops: 17}, "above MaxHops (16)"},
		{"hops and proxies", IPOptions{TrustedHops: 1, TrustedProxies: []string{"10.0.0.0/8"}}, "not both"},
		{"header without trust", IPOptions{Header: "X-Forwarded-For"}, "Header"},
		{"bad header name", IPOptions{TrustedHops: 1, Header: "X Real IP"}, "Header"},
		{"single header with two hops", IPOptions{TrustedHops: 2, Header: "X-Real-IP"}, "TrustedHops"},
		{"IPv4 prefix too long", IPOptions{IPv4Prefix: 33}, "IPv4Prefix"},
		{"IPv4 prefix negative", IPOptions{IPv4Prefix: -1}, "IPv4Prefix"},
		{"IPv6 prefix too long", IPOptions{IPv6Prefix: 129}, "IPv6Prefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewClientIP(tt.opts)
			if err == nil {
				t.Fatalf("got %+v, nil; want an error", c)
			}
			if !strings.Contains(err.Error(), tt.contains) {
				t.Errorf("got error %q, want it to name %q", err, tt.contains)
			}
		})
	}
}

func TestTrustedProxyForms(t *testing.T) {
	opts := IPOptions{TrustedProxies: []string{" 10.1.2.3 ", "192.0.2.77/24", "::ffff:172.16.0.0/108", "fe80::1%eth0"}}
	c, err := NewClientIP(opts)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		addr string
		want bool
	}{
		{"10.1.2.3", true}, {"10.1.2.4", false}, {"192.0.2.200", true}, {"192.0.3.1", false},
		{"172.16.5.5", true}, {"172.32.0.1", false}, {"fe80::1", true},
	}
	for _, tt := range tests {
		if got := c.isTrusted(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("isTrusted(%s): got %v, want %v", tt.addr, got, tt.want)
		}
	}
	if opts.TrustedProxies[0] != " 10.1.2.3 " {
		t.Errorf("options modified: got %q", opts.TrustedProxies[0])
	}
}

func TestClientIPAddr(t *testing.T) {
	c, err := NewClientIP(trustTen)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Addr(newRequest(t, "10.0.0.1:1", hdr{"X-Forwarded-For", "2001:db8:1:2::99"}))
	if err != nil || got != netip.MustParseAddr("2001:db8:1:2::99") {
		t.Errorf("got %v, %v; want 2001:db8:1:2::99, nil", got, err)
	}
}

func TestParseNode(t *testing.T) {
	tests := []struct {
		node string
		want string // "" means rejected
	}{
		{"192.0.2.1", "192.0.2.1"},
		{"192.0.2.1:80", "192.0.2.1"},
		{"192.0.2.1:_abc", "192.0.2.1"},
		{"[2001:db8::1]", "2001:db8::1"},
		{"[2001:db8::1]:8080", "2001:db8::1"},
		{"[::ffff:192.0.2.1]:1", "192.0.2.1"},
		{"2001:db8::1", "2001:db8::1"},
		{"fe80::1%25eth0", "fe80::1"},
		{"", ""},
		{"unknown", ""},
		{"UNKNOWN", ""},
		{"_hidden", ""},
		{"192.0.2.1:", ""},
		{"192.0.2.1:+80", ""},
		{"192.0.2.1:-1", ""},
		{"192.0.2.1:123456", ""},
		{"192.0.2.1:_", ""},
		{"192.0.2.1:_a b", ""},
		{"[2001:db8::1]80", ""},
		{"[2001:db8::1", ""},
		{"[192.0.2.1]", ""},
		{"host:80", ""},
		{"2001:db8::1:80:1:2:3:4:5", ""},
		{"1.2.3", ""},
	}
	for _, tt := range tests {
		t.Run(tt.node, func(t *testing.T) {
			a, reason := parseNode(tt.node)
			if tt.want == "" {
				if reason == "" {
					t.Errorf("got %v, want rejection", a)
				}
				return
			}
			if reason != "" || a.String() != tt.want {
				t.Errorf("got %v (%q), want %s", a, reason, tt.want)
			}
		})
	}
}

// The peer-address identity of an IPv4 client is a slice of RemoteAddr:
// keying the common request allocates nothing.
func TestRemoteIPDoesNotAllocate(t *testing.T) {
	r := newRequest(t, "203.0.113.7:51000")
	allocs := testing.AllocsPerRun(100, func() {
		if k, err := RemoteIP(r); err != nil || k != "203.0.113.7" {
			t.Fatalf("got %q, %v", k, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("got %.1f allocations, want 0", allocs)
	}
}

// TestTrustedClientNamesItsKey pins what the docs warn of: a client whose
// own address lies in a trusted prefix is skipped as a proxy would be, so
// the entries it sends name its key; a client outside the prefixes is
// keyed by the address its proxy appended, whatever it sent.
func TestTrustedClientNamesItsKey(t *testing.T) {
	ip := mustIP(t, trustTen)
	tests := []struct {
		name, remote, xff, want string
	}{
		{"internal client straight to the service", "10.9.9.9:4000", "203.0.113.9", "203.0.113.9"},
		{"internal client through a trusted proxy", "10.0.0.5:4000", "203.0.113.9, 10.9.9.9", "203.0.113.9"},
		{"outside client through a trusted proxy", "10.0.0.5:4000", "203.0.113.9, 198.51.100.4", "198.51.100.4"},
	}
	for _, tt := range tests {
		got, err := ip(newRequest(t, tt.remote, hdr{"X-Forwarded-For", tt.xff}))
		if err != nil || got != tt.want {
			t.Errorf("%s: got %q, %v, want %q", tt.name, got, err, tt.want)
		}
	}
}

package keyfunc

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// checkIPKey fails unless key is an address or a masked prefix in
// canonical text.
func checkIPKey(t *testing.T, key string) {
	t.Helper()
	if p, err := netip.ParsePrefix(key); err == nil {
		if p.Masked() != p || p.String() != key {
			t.Fatalf("key %q is not a canonical masked prefix", key)
		}
		return
	}
	a, err := netip.ParseAddr(key)
	if err != nil || a.String() != key || a.Is4In6() || a.Zone() != "" {
		t.Fatalf("key %q is not a canonical address", key)
	}
}

// checkMalformed fails unless err is a malformed-forwarding error that
// does not claim a missing identity.
func checkMalformed(t *testing.T, key string, err error) {
	t.Helper()
	if !errors.Is(err, errMalformedForwarding) || errors.Is(err, ErrNoIdentity) || key != "" {
		t.Fatalf("got %q, %v; want an error wrapping only errMalformedForwarding", key, err)
	}
}

var forwardingSeeds = []string{
	"", "6.6.6.6", "10.0.0.2", "6.6.6.6, 10.0.0.2", "unknown", "_hidden", "UNKNOWN",
	"garbage,,[", "::ffff:10.0.0.1", "fe80::1%eth0", "203.0.113.1:80",
	"[2001:db8::1]:443", "[2001:db8::1", "2001:db8::1]", ",,,", " , ",
	"010.0.0.1", "1.2.3.4:99999", "1.2.3.4:_obf", "\x00", "\xff\xfe", "a\nb",
	strings.Repeat("10.0.0.3,", 50),
	`for="`, `for="\`, `for=_x;proto=https`, `for="[::1]:80", for=unknown`,
	`for=6.6.6.6;x="`, `x="a,b";for=1.1.1.1`, `for=1.1.1.1;for=2.2.2.2`, `;;,;`,
	`for="198.51.100.9"x`, `for=`, `=`, `for=a b`,
}

const realClient = "198.51.100.9"

func FuzzXForwardedFor(f *testing.F) {
	for _, s := range forwardingSeeds {
		f.Add(s)
	}
	proxies := mustIP(f, trustTen)
	hops := mustIP(f, oneHop)
	def := mustIP(f, IPOptions{})
	f.Fuzz(func(t *testing.T, spoof string) {
		// The header of an untrusted peer changes nothing.
		for _, kf := range []KeyFunc{proxies, def} {
			got, err := kf(newRequest(t, "203.0.113.7:1", hdr{"X-Forwarded-For", spoof}))
			if err != nil || got != "203.0.113.7" {
				t.Fatalf("untrusted peer: got %q, %v; want 203.0.113.7", got, err)
			}
		}
		// Whatever the client wrote, a trusted proxy's entry decides.
		for _, hs := range [][]hdr{
			{{"X-Forwarded-For", spoof + ", " + realClient}},
			{{"X-Forwarded-For", spoof}, {"X-Forwarded-For", realClient}},
			{{"X-Forwarded-For", spoof + "," + realClient}, {"X-Forwarded-For", "10.0.0.2"}},
		} {
			got, err := proxies(newRequest(t, "10.0.0.1:1", hs...))
			if err != nil || got != realClient {
				t.Fatalf("trusted proxy %q: got %q, %v; want %s", hs, got, err, realClient)
			}
		}
		got, err := hops(newRequest(t, "203.0.113.7:1", hdr{"X-Forwarded-For", spoof + "," + realClient}))
		if err != nil || got != realClient {
			t.Fatalf("one hop: got %q, %v; want %s", got, err, realClient)
		}
		// The raw header from a trusted peer gives a canonical key or a
		// malformed-forwarding error.
		var hs []hdr
		for _, line := range strings.Split(spoof, "\n") {
			hs = append(hs, hdr{"X-Forwarded-For", line})
		}
		for _, kf := range []KeyFunc{proxies, hops} {
			got, err := kf(newRequest(t, "10.0.0.1:1", hs...))
			if err != nil {
				checkMalformed(t, got, err)
				continue
			}
			checkIPKey(t, got)
		}
	})
}

func FuzzForwarded(f *testing.F) {
	for _, s := range forwardingSeeds {
		f.Add(s)
	}
	proxies := mustIP(f, trustTenFwd)
	hops := mustIP(f, IPOptions{TrustedHops: 1, Header: "Forwarded"})
	f.Fuzz(func(t *testing.T, spoof string) {
		got, err := proxies(newRequest(t, "203.0.113.7:1", hdr{"Forwarded", spoof}))
		if err != nil || got != "203.0.113.7" {
			t.Fatalf("untrusted peer: got %q, %v; want 203.0.113.7", got, err)
		}
		appended := []string{"for=" + realClient, `for="` + realClient + `:4711"`, `For="[2001:db8::9]:1";proto=https`}
		wants := []string{realClient, realClient, "2001:db8::/64"}
		for i, own := range appended {
			// On its own line, the proxy's element always decides.
			for _, kf := range []KeyFunc{proxies, hops} {
				got, err := kf(newRequest(t, "10.0.0.1:1", hdr{"Forwarded", spoof}, hdr{"Forwarded", own}))
				if err != nil || got != wants[i] {
					t.Fatalf("own line %q: got %q, %v; want %s", own, got, err, wants[i])
				}
			}
			// Appended to the client's line, the client can at most make
			// the line unreadable, never choose the address.
			got, err := proxies(newRequest(t, "10.0.0.1:1", hdr{"Forwarded", spoof + ", " + own}))
			if err != nil {
				checkMalformed(t, got, err)
			} else if got != wants[i] {
				t.Fatalf("same line %q: got %q; want %s", spoof+", "+own, got, wants[i])
			}
		}
		for _, kf := range []KeyFunc{proxies, hops} {
			got, err := kf(newRequest(t, "10.0.0.1:1", hdr{"Forwarded", spoof}))
			if err != nil {
				checkMalformed(t, got, err)
				continue
			}
			checkIPKey(t, got)
		}
	})
}

func FuzzJWTExtraction(f *testing.F) {
	k := keys()
	c := validClaims()
	valid := sign(f, jwt.SigningMethodHS256, hmacSecret, c, "hmac")
	for _, s := range []string{
		"", "Bearer", "Bearer ", "Basic YWxpY2U6cHc=", "Bearer " + valid, "bearer  " + valid,
		"Bearer " + valid + " extra", "Bearer " + tamper(valid),
		"Bearer " + noneToken(`{"sub":"alice","exp":4102444800}`),
		"Bearer " + sign(f, jwt.SigningMethodHS256, otherSecret, c, "hmac"),
		"Bearer " + sign(f, jwt.SigningMethodHS256, rsaPEM(), c, "rsa"),
		"Bearer " + sign(f, jwt.SigningMethodHS256, rsaPEM(), c, "rsa-pem"),
		"Bearer " + sign(f, jwt.SigningMethodRS256, k.rsa, c, "hmac"),
		"Bearer " + sign(f, jwt.SigningMethodRS256, k.rsa, c, "rsa"),
		"Bearer " + sign(f, jwt.SigningMethodHS256, hmacSecret, with(c, "exp", int64(0)), "hmac"),
		"Bearer " + sign(f, jwt.SigningMethodHS256, hmacSecret, with(c, "sub", nil), "hmac"),
		"Bearer a.b.c", "Bearer ...", "Bearer " + strings.Repeat("A", 9000),
	} {
		f.Add(s)
	}
	static := mustJWT(f, JWTOptions{Algorithms: []string{"HS256"}, Key: hmacSecret})
	mixed := mustJWT(f, JWTOptions{Algorithms: []string{"HS256", "RS256"}, Keyfunc: familyLookup})
	f.Fuzz(func(t *testing.T, auth string) {
		for _, kf := range []KeyFunc{static, mixed} {
			got, err := kf(newRequest(t, "192.0.2.1:1", hdr{"Authorization", auth}))
			if err != nil {
				if got != "" || !errors.Is(err, ErrNoIdentity) {
					t.Fatalf("got %q, %v; want an error wrapping ErrNoIdentity", got, err)
				}
				continue
			}
			// Only the genuine tokens, signed for "alice", verify.
			if got != "alice" {
				t.Fatalf("Authorization %q: got identity %q, want alice", auth, got)
			}
		}
	})
}

func FuzzJoin(f *testing.F) {
	for _, s := range [][4]string{
		{"a:b", "c", "a", "b:c"},
		{"1:a,", "b", "1:a", ",b"},
		{"2:ab,1:c,", "", "2:ab,", "1:c,"},
		{"{x}", "y", "%7Bx%7D", "y"},
		{"\x00", "a", "%00", "a"},
		{"caf\u00e9", "x", "cafe\u0301", "x"},
		{strings.Repeat("k", 300), "a", strings.Repeat("k", 300), "b"},
		{"#", "x", "%23", "x"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	r := newRequest(f, "192.0.2.1:1")
	f.Fuzz(func(t *testing.T, a, b, c, d string) {
		k1, err1 := Join(constFn(a), constFn(b))(r)
		k2, err2 := Join(constFn(c), constFn(d))(r)
		for _, x := range []struct {
			parts [2]string
			key   string
			err   error
		}{{[2]string{a, b}, k1, err1}, {[2]string{c, d}, k2, err2}} {
			if x.parts[0] == "" || x.parts[1] == "" {
				if !errors.Is(x.err, errEmptyKey) || x.key != "" {
					t.Fatalf("parts %q: got %q, %v; want errEmptyKey", x.parts, x.key, x.err)
				}
				continue
			}
			if x.err != nil || x.key == "" {
				t.Fatalf("parts %q: got %q, %v", x.parts, x.key, x.err)
			}
		}
		if err1 == nil && err2 == nil && (a != c || b != d) && k1 == k2 {
			t.Fatalf("(%q, %q) and (%q, %q) share identity %q", a, b, c, d, k1)
		}
	})
}

// FuzzCanonicalIPv4Host: the single-pass reading of a peer address agrees
// with netip.ParseAddrPort: it accepts only what netip accepts as IPv4,
// with the same host, and declines nothing netip accepts but ports written
// with more than five digits (which the general path then parses).
func FuzzCanonicalIPv4Host(f *testing.F) {
	for _, s := range []string{
		"192.0.2.1:5000", "0.0.0.0:0", "255.255.255.255:65535", "1.2.3.4:65536",
		"01.2.3.4:1", "1.2.3.4:080", "1.2.3.4:000080", "1.2.3.4:", "1.2.3.4",
		"256.1.1.1:1", "1.2.3:4", "1.2.3.4.5:6", "1.2.3.4:+1", "1.2.3.4:1_0",
		"[::1]:80", "[::ffff:1.2.3.4]:80", "1.2.3.4%eth0:1", " 1.2.3.4:1", "1.2.3.4:1 ",
		"1111.2.3.4:1", "1.2.3.4:99999", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, remote string) {
		host, ok := canonicalIPv4Host(remote)
		ap, err := netip.ParseAddrPort(remote)
		want := err == nil && ap.Addr().Is4()
		if ok && !want {
			t.Fatalf("canonicalIPv4Host(%q): got host %q, want a refusal as netip's (%v)", remote, host, err)
		}
		if ok && host != ap.Addr().String() {
			t.Fatalf("canonicalIPv4Host(%q): got host %q, want %q", remote, host, ap.Addr().String())
		}
		if want && !ok && len(remote)-strings.LastIndexByte(remote, ':')-1 <= 5 {
			t.Fatalf("canonicalIPv4Host(%q): got a refusal, want %q as netip reads it", remote, ap.Addr().String())
		}
	})
}

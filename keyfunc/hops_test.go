package keyfunc

import (
	"errors"
	"net/http"
	"runtime"
	"strings"
	"testing"
)

// Forwarding headers of about 1 MB that a trusted proxy may pass on.
var (
	// A client's 53,000-element Forwarded line with its proxy's element
	// appended: the client is the rightmost entry.
	fwdAppended = strings.Repeat("for=6.6.6.6, ", 53000) + "for=198.51.100.9"
	// 53,000 trusted Forwarded elements: a client inside the trusted
	// network.
	fwdTrusted = strings.Repeat("for=10.0.0.3, ", 53000) + "for=10.0.0.4"
	// 90,000 trusted X-Forwarded-For entries.
	xffTrusted = strings.Repeat("10.0.0.3, ", 90000) + "10.0.0.4"
	// 90,000 entries a client wrote, then its own address.
	xffAppended = strings.Repeat("6.6.6.6, ", 90000) + "198.51.100.9"
	// Trusted entries padded to the longest element read, 512 bytes: the
	// most bytes a walk may read.
	xffPadded = strings.Repeat(strings.Repeat(" ", 512-len("10.0.0.3,"))+"10.0.0.3,", 2000) + "10.0.0.4"
	fwdPadded = strings.Repeat(`for=10.0.0.3;host="`+strings.Repeat("h", 512-len(`for=10.0.0.3;host="",`))+`",`, 2000) + "for=10.0.0.4"
)

// headerCase is a request behind a trusted proxy and what its key must be:
// want, or an error wrapping errMalformedForwarding when want is "".
type headerCase struct {
	name    string
	opts    IPOptions
	headers []hdr
	want    string
}

func xffLines(v string, n int) []hdr {
	hs := make([]hdr, n)
	for i := range hs {
		hs[i] = hdr{"X-Forwarded-For", v}
	}
	return hs
}

// trusted returns n trusted addresses, comma-separated, for a header of
// the given kind.
func trusted(n int, forwarded bool) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = "10.0.0.3"
		if forwarded {
			parts[i] = "for=" + parts[i]
		}
	}
	return strings.Join(parts, ", ")
}

func TestMaxHops(t *testing.T) {
	const client = "198.51.100.9"
	xff := func(v string) []hdr { return []hdr{{"X-Forwarded-For", v}} }
	fwd := func(v string) []hdr { return []hdr{{"Forwarded", v}} }
	maxTwo := IPOptions{TrustedProxies: []string{"10.0.0.0/8"}, MaxHops: 2}
	maxTwoFwd := IPOptions{TrustedProxies: []string{"10.0.0.0/8"}, Header: "Forwarded", MaxHops: 2}
	tests := []headerCase{
		// The default bound, 16.
		{"client at 16", trustTen, xff(client + ", " + trusted(15, false)), client},
		{"client at 17", trustTen, xff(client + ", " + trusted(16, false)), ""},
		{"16 trusted", trustTen, xff(trusted(16, false)), "10.0.0.3"},
		{"17 trusted", trustTen, xff(trusted(17, false)), ""},
		{"Forwarded client at 16", trustTenFwd, fwd("for=" + client + ", " + trusted(15, true)), client},
		{"Forwarded client at 17", trustTenFwd, fwd("for=" + client + ", " + trusted(16, true)), ""},
		{"16 lines", trustTen, append(xffLines("10.0.0.3", 15), xff(client)...), client},
		{"17 lines", trustTen, append(xffLines(client, 1), xffLines("10.0.0.3", 16)...), ""},

		// A set bound.
		{"client within MaxHops", maxTwo, xff("6.6.6.6, " + client + ", 10.0.0.2"), client},
		{"client beyond MaxHops", maxTwo, xff(client + ", 10.0.0.2, 10.0.0.3"), ""},
		{"empty elements count", maxTwo, xff(client + ", , 10.0.0.2"), ""},
		{"empty lines count", maxTwo, []hdr{{"X-Forwarded-For", client}, {"X-Forwarded-For", ""}, {"X-Forwarded-For", "10.0.0.2"}}, ""},
		{"Forwarded client within MaxHops", maxTwoFwd, fwd("for=6.6.6.6, for=" + client + ", for=10.0.0.2"), client},
		{"Forwarded client beyond MaxHops", maxTwoFwd, fwd("for=" + client + ", for=10.0.0.2, for=10.0.0.3"), ""},
		{"Forwarded empty elements count", maxTwoFwd, fwd("for=" + client + ", , for=10.0.0.2"), ""},
		{"hops within MaxHops", IPOptions{TrustedHops: 2, MaxHops: 2}, xff("6.6.6.6, " + client + ", 192.0.2.1"), client},
		{"hops beyond MaxHops with empty elements", IPOptions{TrustedHops: 2, MaxHops: 2}, xff(client + ", , 192.0.2.1"), ""},
		{"malformed beyond MaxHops falls back to peer", IPOptions{TrustedProxies: []string{"10.0.0.0/8"}, MaxHops: 2, UsePeerOnMalformed: true}, xff(client + ", 10.0.0.2, 10.0.0.3"), "10.0.0.1"},

		// The client's own entries are never read, however many.
		{"90k client entries", trustTen, xff(xffAppended), client},
		{"53k client elements", trustTenFwd, fwd(fwdAppended), client},
		{"90k client lines", trustTen, append(xffLines("6.6.6.6", 90000), xff(client)...), client},

		// Element length.
		{"entry of 512 bytes", trustTen, xff("6.6.6.6," + strings.Repeat(" ", 512-len(client)) + client), client},
		{"entry of 513 bytes", trustTen, xff("6.6.6.6," + strings.Repeat(" ", 513-len(client)) + client), ""},
		{"line entry of 513 bytes", trustTen, xff(strings.Repeat(" ", 513-len(client)) + client), ""},
		{"Forwarded element of 512 bytes", trustTenFwd, fwd(`for=6.6.6.6,for=` + client + `;host="` + strings.Repeat("h", 512-len(`for=`+client+`;host=""`)) + `"`), client},
		{"Forwarded element of 513 bytes", trustTenFwd, fwd(`for=6.6.6.6,for=` + client + `;host="` + strings.Repeat("h", 513-len(`for=`+client+`;host=""`)) + `"`), ""},
		{"Forwarded unquoted element of 513 bytes", trustTenFwd, fwd(`for=` + client + `;host=` + strings.Repeat("h", 513-len(`for=`+client+`;host=`))), ""},
		{"single-address header of 513 bytes", trustTenXRI, []hdr{{"X-Real-IP", strings.Repeat(" ", 513-len(client)) + client}}, ""},

		// About 1 MB of trusted entries.
		{"90k trusted", trustTen, xff(xffTrusted), ""},
		{"53k trusted Forwarded", trustTenFwd, fwd(fwdTrusted), ""},
		{"padded trusted", trustTen, xff(xffPadded), ""},
		{"padded trusted Forwarded", trustTenFwd, fwd(fwdPadded), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mustIP(t, tt.opts)(newRequest(t, "10.0.0.1:443", tt.headers...))
			if tt.want == "" {
				if !errors.Is(err, errMalformedForwarding) || errors.Is(err, ErrNoIdentity) || got != "" {
					t.Fatalf("got %q, %v; want an error wrapping only errMalformedForwarding", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// The refusal says why, with numbers an operator can act on.
func TestMaxHopsError(t *testing.T) {
	k := mustIP(t, IPOptions{TrustedProxies: []string{"10.0.0.0/8"}, MaxHops: 3})
	_, err := k(newRequest(t, "10.0.0.1:443", hdr{"X-Forwarded-For", trusted(4, false)}))
	if want := "X-Forwarded-For has more than 3 entries to read (MaxHops)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got error %v, want it to contain %q", err, want)
	}
}

// allocsPerKey returns the allocations and bytes allocated by one call of
// k on r, averaged over runs and rounded down as [testing.AllocsPerRun]
// does, so that a stray allocation elsewhere in the process does not
// count.
func allocsPerKey(t *testing.T, k KeyFunc, r *http.Request) (allocs, bytes uint64) {
	t.Helper()
	const runs = 100
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	k(r) // warm up
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		k(r)
	}
	runtime.ReadMemStats(&after)
	return (after.Mallocs - before.Mallocs) / runs, (after.TotalAlloc - before.TotalAlloc) / runs
}

// HeaderParsingAmplification: a 1 MB forwarding header from a trusted
// proxy once cost milliseconds and megabytes per request. The walk reads a
// bounded prefix from the right, so allocation does not grow with the
// header.
func TestHeaderParsingAmplification(t *testing.T) {
	tests := []struct {
		name      string
		opts      IPOptions
		headers   []hdr
		maxAllocs uint64 // 1 for the key; a refusal allocates nothing
	}{
		{"normal XFF", trustTen, []hdr{{"X-Forwarded-For", "198.51.100.9, 10.0.0.2"}}, 1},
		{"90k client XFF entries", trustTen, []hdr{{"X-Forwarded-For", xffAppended}}, 1},
		{"90k trusted XFF entries", trustTen, []hdr{{"X-Forwarded-For", xffTrusted}}, 0},
		{"50k trusted XFF lines", trustTen, xffLines("10.0.0.3", 50000), 0},
		{"padded trusted XFF", trustTen, []hdr{{"X-Forwarded-For", xffPadded}}, 0},
		{"normal Forwarded", trustTenFwd, []hdr{{"Forwarded", "for=198.51.100.9;proto=https, for=10.0.0.2"}}, 1},
		{"53k client Forwarded elements", trustTenFwd, []hdr{{"Forwarded", fwdAppended}}, 1},
		{"53k trusted Forwarded elements", trustTenFwd, []hdr{{"Forwarded", fwdTrusted}}, 0},
		{"padded trusted Forwarded", trustTenFwd, []hdr{{"Forwarded", fwdPadded}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			allocs, bytes := allocsPerKey(t, mustIP(t, tt.opts), newRequest(t, "10.0.0.1:443", tt.headers...))
			t.Logf("%d allocations, %d bytes per request", allocs, bytes)
			if allocs > tt.maxAllocs {
				t.Errorf("got %d allocations per request, want at most %d", allocs, tt.maxAllocs)
			}
			if bytes > 1024 {
				t.Errorf("got %d bytes allocated per request, want at most 1024", bytes)
			}
		})
	}
}

func BenchmarkClientIPHeaders(b *testing.B) {
	benches := []struct {
		name    string
		opts    IPOptions
		headers []hdr
	}{
		{"XFF/normal", trustTen, []hdr{{"X-Forwarded-For", "198.51.100.9, 10.0.0.2"}}},
		{"XFF/90k-client", trustTen, []hdr{{"X-Forwarded-For", xffAppended}}},
		{"XFF/90k-trusted", trustTen, []hdr{{"X-Forwarded-For", xffTrusted}}},
		{"XFF/50k-lines", trustTen, xffLines("10.0.0.3", 50000)},
		{"XFF/padded", trustTen, []hdr{{"X-Forwarded-For", xffPadded}}},
		{"Forwarded/normal", trustTenFwd, []hdr{{"Forwarded", "for=198.51.100.9;proto=https, for=10.0.0.2"}}},
		{"Forwarded/53k-client", trustTenFwd, []hdr{{"Forwarded", fwdAppended}}},
		{"Forwarded/53k-trusted", trustTenFwd, []hdr{{"Forwarded", fwdTrusted}}},
		{"Forwarded/padded", trustTenFwd, []hdr{{"Forwarded", fwdPadded}}},
	}
	for _, bb := range benches {
		b.Run(bb.name, func(b *testing.B) {
			c, err := NewClientIP(bb.opts)
			if err != nil {
				b.Fatal(err)
			}
			r := newRequest(b, "10.0.0.1:443", bb.headers...)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_, _ = c.Key(r)
				}
			})
		})
	}
}

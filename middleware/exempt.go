package middleware

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/ratekeeper/ratekeeper/internal/clientaddr"
	"github.com/ratekeeper/ratekeeper/keyfunc"
)

// ExemptPaths returns an exemption for requests whose URL path equals one
// of paths, or starts with it when it ends in "/*" (so "/static/*" covers
// "/static/app.js" and "/static/"). It compares the request's URL.Path as
// received, not cleaned: mount exemptions on the paths your router serves.
// Use in [Options].Exempt; health checks are the usual case.
func ExemptPaths(paths ...string) func(*http.Request) bool {
	exact := map[string]bool{}
	var prefixes []string
	for _, p := range paths {
		if pre, ok := strings.CutSuffix(p, "/*"); ok {
			prefixes = append(prefixes, pre+"/")
		} else {
			exact[p] = true
		}
	}
	return func(r *http.Request) bool {
		p := r.URL.Path
		if exact[p] {
			return true
		}
		for _, pre := range prefixes {
			if strings.HasPrefix(p, pre) {
				return true
			}
		}
		return false
	}
}

// ExemptCIDRs returns an exemption for clients whose address, as ip finds
// it (so trusted proxies are honoured exactly as for identities), lies in
// one of cidrs; a nil ip means the peer address. A request whose address
// cannot be determined is not exempt, even with
// [keyfunc.IPOptions.UsePeerOnMalformed], which would key it by its proxy:
// a client that breaks the chain is not judged by the proxy's address. An
// IPv4-mapped entry ("::ffff:192.0.2.0/120") is read as the IPv4 one, as
// clients' addresses are. It returns an error naming the first entry that
// is not a CIDR prefix or an address.
func ExemptCIDRs(ip *keyfunc.ClientIP, cidrs ...string) (func(*http.Request) bool, error) {
	if ip == nil {
		var err error
		if ip, err = keyfunc.NewClientIP(keyfunc.IPOptions{}); err != nil {
			return nil, err
		}
	}
	prefixes := make([]netip.Prefix, 0, len(cidrs))
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(strings.TrimSpace(c))
		if err != nil {
			a, aerr := netip.ParseAddr(strings.TrimSpace(c))
			if aerr != nil {
				return nil, fmt.Errorf("ratekeeper: middleware: exempt CIDR %q: %w", c, err)
			}
			a = a.WithZone("")
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		prefixes = append(prefixes, p.Masked())
	}
	return func(r *http.Request) bool {
		a, err := clientaddr.Strict(ip, r)
		if err != nil {
			return false
		}
		for _, p := range prefixes {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}, nil
}

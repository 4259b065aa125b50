package keyfunc

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/ratekeeper/ratekeeper/internal/clientaddr"
)

// ErrMalformedAddress reports a request whose client address cannot be
// determined. Either its RemoteAddr is not an "IP:port" pair as net/http
// sets it for TCP connections (empty, garbage, an address without a port
// such as "192.0.2.1" or "[::1]", a Unix socket peer such as "@" or a
// path), or a forwarding header sent by a trusted proxy cannot name the
// client: an entry that is not an address, an "unknown" or obfuscated
// ("_hidden") node where an address is needed, a Forwarded element without
// "for", a Forwarded element that does not parse, a repeated
// single-address header, a chain whose client lies beyond
// [IPOptions.MaxHops] entries, an entry longer than 512 bytes, or, with
// [IPOptions.TrustedHops], a chain shorter than the hop count or a missing
// header. It does not wrap [ErrNoIdentity]: such a request cannot be keyed
// by address, and the middleware answers 400. See
// [IPOptions.UsePeerOnMalformed] for keying a broken chain by its proxy
// instead.
var ErrMalformedAddress = errors.New("ratekeeper: malformed client address")

// errMalformedRemoteAddr and errMalformedForwarding are the two cases of
// [ErrMalformedAddress]: a RemoteAddr that is not "IP:port", and a trusted
// forwarding header that cannot name the client.
var (
	errMalformedRemoteAddr error = &kindError{msg: "ratekeeper: malformed remote address", kind: ErrMalformedAddress}
	errMalformedForwarding error = &kindError{msg: "ratekeeper: malformed forwarding header", kind: ErrMalformedAddress}
)

// Canonical names of the forwarding headers with their own syntax.
const (
	headerXFF       = "X-Forwarded-For"
	headerForwarded = "Forwarded"
)

type headerKind int

const (
	kindNone headerKind = iota
	kindXFF
	kindForwarded
	kindSingle
)

// IPOptions configures [NewClientIP]. The zero value keys requests
// by their peer address (RemoteAddr) and reads no header at all.
type IPOptions struct {
	// TrustedProxies lists the reverse proxies whose forwarding headers are
	// believed, as CIDR prefixes ("10.0.0.0/8", "2001:db8::/32") or single
	// addresses ("192.0.2.10"). Headers are read only when the peer itself
	// is in this list. A prefix of length 0 ("0.0.0.0/0") is refused: it
	// would let any client choose its own key. Any client inside a listed
	// prefix can do the same, since its address is skipped as a proxy's:
	// list the proxies, not the networks their clients share with them.
	// Mutually exclusive with TrustedHops.
	TrustedProxies []string

	// TrustedHops is the number of reverse proxies that every request
	// passes through, the nearest being the peer. Each proxy appends the
	// address it saw, so the client is the TrustedHops-th entry of the
	// header counted from the right (the rightmost for 1). Use it only
	// when the application cannot be reached except through those proxies:
	// the peer is not checked. Zero (the default) disables it; negative is
	// an error. Mutually exclusive with TrustedProxies.
	TrustedHops int

	// Header names the header the trusted proxies set. The default, when
	// TrustedProxies or TrustedHops is set, is "X-Forwarded-For";
	// "Forwarded" selects RFC 7239 parsing. Any other name ("X-Real-IP",
	// "CF-Connecting-IP", "True-Client-IP", ...) is a single-address
	// header: its one value is the client address, read only when the peer
	// is trusted (with TrustedHops, which must then be 1, the peer is
	// trusted by assumption). Setting Header without TrustedProxies or
	// TrustedHops is an error.
	Header string

	// IPv4Prefix groups IPv4 clients by this many leading bits; the
	// default 32 keys each address alone, 24 keys by /24. Range 1 to 32.
	IPv4Prefix int

	// IPv6Prefix groups IPv6 clients by this many leading bits; the
	// default 64 keys each /64, the block usually handed to one
	// subscriber, so that rotating through its addresses does not escape
	// the limit. Range 1 to 128.
	IPv6Prefix int

	// MaxHops bounds the walk through the forwarding header, so that the
	// work per request stays small whatever the header holds: at most
	// MaxHops list elements are read, counted from the right across all
	// lines of the header, empty elements and empty lines included, and
	// each element may be at most 512 bytes long. A request whose client
	// lies further left (a chain of more than MaxHops trusted entries) or
	// whose element is longer fails with [ErrMalformedAddress], which
	// the middleware answers with 400. Entries left of the client are never
	// read, so a client that writes many entries of its own costs nothing
	// and is not refused. Zero (the default) means 16; negative is an
	// error, and so is a TrustedHops above it.
	MaxHops int

	// UsePeerOnMalformed keys a request whose trusted forwarding header
	// cannot name the client by the peer address (the trusted proxy)
	// instead of failing: every client whose chain is broken then shares
	// that proxy's bucket, and no request is refused for its header. By
	// default such a request fails with [ErrMalformedAddress], which
	// the middleware answers with 400: a broken chain comes from a
	// misconfigured proxy and should be loud.
	UsePeerOnMalformed bool
}

// ClientIP finds the client address of a request according to
// [IPOptions]. Build it with [NewClientIP]; it is immutable and safe for
// concurrent use. A zero ClientIP (and a nil *ClientIP) is the one of zero
// options: it keys by the peer address, as [RemoteIP] does.
type ClientIP struct {
	trusted     []netip.Prefix
	hops        int
	maxHops     int
	errMaxHops  error // built once: a refusal allocates nothing
	header      string
	kind        headerKind
	v4bits      int
	v6bits      int
	usePeerOnly bool // UsePeerOnMalformed
}

// Bounds of the walk through a forwarding header.
const (
	// defaultMaxHops is the MaxHops of zero options.
	defaultMaxHops = 16
	// maxElementBytes bounds one list element of a forwarding header (an
	// X-Forwarded-For entry, a Forwarded element with all its pairs) and
	// the value of a single-address header, whitespace included.
	maxElementBytes = 512
)

// defaultClientIP keys by peer address with the default prefixes.
var defaultClientIP = &ClientIP{v4bits: 32, v6bits: 64}

// NewClientIP validates opts and returns a [ClientIP]. Errors name the
// offending field, for example an entry of TrustedProxies that is not a
// CIDR prefix or an address; opts is not modified.
func NewClientIP(opts IPOptions) (*ClientIP, error) {
	c := &ClientIP{v4bits: 32, v6bits: 64, usePeerOnly: opts.UsePeerOnMalformed}
	if err := c.setHops(opts); err != nil {
		return nil, err
	}
	for i, s := range opts.TrustedProxies {
		p, err := parseTrustedProxy(s)
		if err != nil {
			return nil, fmt.Errorf("keyfunc: IPOptions.TrustedProxies[%d]: %w", i, err)
		}
		c.trusted = append(c.trusted, p)
	}
	if err := c.setHeader(opts.Header); err != nil {
		return nil, err
	}
	if err := c.setPrefixes(opts); err != nil {
		return nil, err
	}
	c.errMaxHops = fmt.Errorf("keyfunc: %s has more than %d entries to read (MaxHops): %w", c.header, c.maxHops, errMalformedForwarding)
	return c, nil
}

// setHops checks and sets TrustedHops and MaxHops.
func (c *ClientIP) setHops(opts IPOptions) error {
	if opts.TrustedHops < 0 {
		return fmt.Errorf("keyfunc: IPOptions.TrustedHops is %d, want >= 0", opts.TrustedHops)
	}
	if opts.TrustedHops > 0 && len(opts.TrustedProxies) > 0 {
		return errors.New("keyfunc: IPOptions: set TrustedProxies or TrustedHops, not both")
	}
	c.hops = opts.TrustedHops
	switch {
	case opts.MaxHops < 0:
		return fmt.Errorf("keyfunc: IPOptions.MaxHops is %d, want >= 0", opts.MaxHops)
	case opts.MaxHops == 0:
		c.maxHops = defaultMaxHops
	default:
		c.maxHops = opts.MaxHops
	}
	if c.hops > c.maxHops {
		return fmt.Errorf("keyfunc: IPOptions.TrustedHops is %d, above MaxHops (%d)", c.hops, c.maxHops)
	}
	return nil
}

// setHeader checks and sets the forwarding header and its kind; the
// trusted proxies and hops must be set.
func (c *ClientIP) setHeader(name string) error {
	trust := c.hops > 0 || len(c.trusted) > 0
	switch {
	case name == "" && trust:
		c.header, c.kind = headerXFF, kindXFF
		return nil
	case name == "":
		c.kind = kindNone
		return nil
	case !trust:
		return fmt.Errorf("keyfunc: IPOptions.Header %q needs TrustedProxies or TrustedHops: headers of untrusted peers are never read", name)
	case !isToken(name):
		return fmt.Errorf("keyfunc: IPOptions.Header %q is not a valid header name", name)
	}
	c.header = http.CanonicalHeaderKey(name)
	switch c.header {
	case headerXFF:
		c.kind = kindXFF
	case headerForwarded:
		c.kind = kindForwarded
	default:
		c.kind = kindSingle
		if c.hops > 1 {
			return fmt.Errorf("keyfunc: IPOptions.TrustedHops is %d, but the single-address header %s is set by the nearest proxy: want 1", c.hops, c.header)
		}
	}
	return nil
}

// setPrefixes checks and sets IPv4Prefix and IPv6Prefix.
func (c *ClientIP) setPrefixes(opts IPOptions) error {
	switch {
	case opts.IPv4Prefix == 0:
	case opts.IPv4Prefix < 1 || opts.IPv4Prefix > 32:
		return fmt.Errorf("keyfunc: IPOptions.IPv4Prefix is %d, want 1 to 32", opts.IPv4Prefix)
	default:
		c.v4bits = opts.IPv4Prefix
	}
	switch {
	case opts.IPv6Prefix == 0:
	case opts.IPv6Prefix < 1 || opts.IPv6Prefix > 128:
		return fmt.Errorf("keyfunc: IPOptions.IPv6Prefix is %d, want 1 to 128", opts.IPv6Prefix)
	default:
		c.v6bits = opts.IPv6Prefix
	}
	return nil
}

// parseTrustedProxy parses a CIDR prefix or a single address into a masked,
// canonical prefix.
func parseTrustedProxy(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		p, err = netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not a CIDR prefix", s)
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not a CIDR prefix or an IP address", s)
		}
		a = a.WithZone("")
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	if p.Bits() == 0 {
		return netip.Prefix{}, fmt.Errorf("%q trusts every address, which lets any client choose its key", s)
	}
	return p.Masked(), nil
}

// RemoteIP is the [ClientIP.Key] of a ClientIP with zero options: it keys
// a request by its peer address (RemoteAddr), IPv4 addresses alone and IPv6
// addresses by /64, and reads no header, so a client cannot change its key
// by sending X-Forwarded-For, Forwarded or X-Real-IP. Behind a reverse
// proxy every client then shares the proxy's key: use [NewClientIP] with
// TrustedProxies there. It fails with an error wrapping
// [ErrMalformedAddress] when RemoteAddr is not "IP:port". Safe for
// concurrent use.
func RemoteIP(r *http.Request) (string, error) {
	return defaultClientIP.Key(r)
}

// Key is a [KeyFunc] that keys a request by its client address, as [Addr]
// finds it, grouped by [IPOptions.IPv4Prefix] and [IPOptions.IPv6Prefix].
// The identity is the canonical text of the address ("203.0.113.7") or of
// its masked prefix ("203.0.113.0/24", "2001:db8:1:2::/64").
//
// It trusts the peer address (RemoteAddr) and, only when the options name
// trusted proxies or a hop count, the forwarding header of those proxies.
// It fails with an error wrapping [ErrMalformedAddress], never with
// [ErrNoIdentity]: every TCP request has an address. Safe for concurrent
// use.
//
// [Addr]: https://pkg.go.dev/github.com/ratekeeper/ratekeeper/keyfunc#ClientIP.Addr
func (c *ClientIP) Key(r *http.Request) (string, error) {
	c = c.orDefault()
	if c.kind == kindNone && c.v4bits == 32 {
		// The common case, keyed by the peer: an IPv4 RemoteAddr that
		// netip accepts is already canonical (it refuses leading zeros),
		// so its host part is the identity and nothing is allocated.
		if host, ok := canonicalIPv4Host(r.RemoteAddr); ok {
			return host, nil
		}
	}
	a, err := c.Addr(r)
	if err != nil {
		return "", err
	}
	return c.keyOf(a), nil
}

// canonicalIPv4Host returns the host part of an "a.b.c.d:port" remote
// address when it is an IPv4 address in canonical form (four decimal
// fields of at most 255, without leading zeros) and a port of at most
// five digits and 65535: remotes that netip.ParseAddrPort accepts as
// IPv4, read in a single pass. It reports false for anything else,
// which the general path then parses (a port written with more than
// five digits, say).
func canonicalIPv4Host(remote string) (string, bool) {
	i := 0
	for field := range 4 {
		if field > 0 {
			if i == len(remote) || remote[i] != '.' {
				return "", false
			}
			i++
		}
		start, v := i, 0
		for i < len(remote) && i-start < 3 && '0' <= remote[i] && remote[i] <= '9' {
			v = v*10 + int(remote[i]-'0')
			i++
		}
		if n := i - start; n == 0 || v > 255 || n > 1 && remote[start] == '0' {
			return "", false
		}
	}
	host := i
	if i == len(remote) || remote[i] != ':' || len(remote)-i-1 > 5 || len(remote)-i-1 == 0 {
		return "", false
	}
	port := 0
	for _, c := range []byte(remote[i+1:]) {
		if c < '0' || c > '9' {
			return "", false
		}
		port = port*10 + int(c-'0')
	}
	if port > 65535 {
		return "", false
	}
	return remote[:host], true
}

func (c *ClientIP) keyOf(a netip.Addr) string {
	bits := c.v6bits
	if a.Is4() {
		bits = c.v4bits
	}
	if bits >= a.BitLen() {
		return a.String()
	}
	p, err := a.Prefix(bits)
	if err != nil { // unreachable: bits is within 1..BitLen
		return a.String()
	}
	return p.String()
}

// Addr returns the client address of r in canonical form: IPv4-mapped IPv6
// addresses become IPv4 and zones are removed.
//
// Without trusted proxies or hops it is the peer address. With
// TrustedProxies, when the peer is trusted, the chain of the configured
// header (every line of it, in order, then the peer) is walked from the
// right, skipping trusted addresses, and the first untrusted address is the
// client; if every address is trusted, the leftmost one is. Entries to the
// left of the client, which the client itself may have written, are never
// read, not even to find where they end. With TrustedHops n, the client is
// the n-th entry from the right. The walk reads at most
// [IPOptions.MaxHops] list elements of at most 512 bytes each, so the cost
// of a request does not grow with its header: at most MaxHops × 512 bytes
// are read, and nothing is allocated but the identity or the error.
// A single-address header gives the client directly. A peer in
// TrustedProxies that sends no header at all is itself the client (a
// health check from the load balancer, say); with TrustedHops a missing
// header is malformed, since every request should come through the
// proxies.
//
// Addr fails with an error wrapping [ErrMalformedAddress] when RemoteAddr
// is not "IP:port", and when a trusted header cannot name the client
// within those bounds, unless [IPOptions.UsePeerOnMalformed] is set.
func (c *ClientIP) Addr(r *http.Request) (netip.Addr, error) {
	c = c.orDefault()
	return c.addr(r, c.usePeerOnly)
}

// orDefault is c, or for a nil or zero ClientIP (NewClientIP sets 1 to 32
// IPv4 bits) the one of zero options.
func (c *ClientIP) orDefault() *ClientIP {
	if c == nil || c.v4bits == 0 {
		return defaultClientIP
	}
	return c
}

func init() {
	clientaddr.Strict = func(c any, r *http.Request) (netip.Addr, error) {
		return c.(*ClientIP).orDefault().addr(r, false)
	}
}

// addr is Addr, keying a request whose trusted header cannot name the
// client by its peer only when usePeer is set.
func (c *ClientIP) addr(r *http.Request, usePeer bool) (netip.Addr, error) {
	peer, err := peerAddr(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, err
	}
	if c.kind == kindNone || (c.hops == 0 && !c.isTrusted(peer)) {
		return peer, nil
	}
	var client netip.Addr
	switch c.kind {
	case kindSingle:
		client, err = c.fromSingle(r.Header.Values(c.header), peer)
	default:
		lines := r.Header.Values(c.header)
		w := chain{lines: lines, header: c.header, forwarded: c.kind == kindForwarded,
			line: len(lines), end: -1, budget: c.maxHops, errBudget: c.errMaxHops}
		client, err = c.fromChain(&w, peer)
	}
	if err != nil {
		if usePeer {
			return peer, nil
		}
		return netip.Addr{}, err
	}
	return client, nil
}

func (c *ClientIP) isTrusted(a netip.Addr) bool {
	for _, p := range c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// fromChain picks the client from the entries w reads, right to left.
func (c *ClientIP) fromChain(w *chain, peer netip.Addr) (netip.Addr, error) {
	if c.hops > 0 {
		for n := 1; ; n++ {
			node, ok, err := w.next()
			if err != nil {
				return netip.Addr{}, err
			}
			if !ok {
				return netip.Addr{}, fmt.Errorf("keyfunc: %s has %d entries, TrustedHops is %d: %w", c.header, n-1, c.hops, errMalformedForwarding)
			}
			if n == c.hops {
				return c.parseHop(node)
			}
		}
	}
	leftmost := peer
	for {
		node, ok, err := w.next()
		if err != nil {
			return netip.Addr{}, err
		}
		if !ok {
			return leftmost, nil
		}
		a, err := c.parseHop(node)
		if err != nil {
			return netip.Addr{}, err
		}
		if !c.isTrusted(a) {
			return a, nil
		}
		leftmost = a
	}
}

// chain reads the entries of a forwarding header from right to left, last
// line first: the trimmed non-empty entries of X-Forwarded-For, or the
// "for" values of Forwarded elements ("" for an element without one). It
// reads at most budget list elements, empty ones included, of at most
// maxElementBytes each, and never looks left of the last entry it returns.
type chain struct {
	lines     []string
	header    string
	forwarded bool
	line      int   // the line being read; len(lines) before the first
	end       int   // lines[line][:end] is unread; -1 when the line is read
	budget    int   // list elements that may still be read
	errBudget error // returned when the budget is spent
}

// next returns the next entry, or ok false when the header is read.
func (w *chain) next() (string, bool, error) {
	for {
		for w.line >= 0 && w.end < 0 {
			w.line--
			if w.line >= 0 {
				w.end = len(w.lines[w.line])
			}
		}
		if w.line < 0 {
			return "", false, nil
		}
		if w.budget == 0 {
			return "", false, w.errBudget
		}
		w.budget--
		// The element and the ',' before it lie in s[lo:end].
		s, end := w.lines[w.line], w.end
		lo := max(0, end-maxElementBytes-1)
		var (
			entry string
			empty bool
			sep   int
		)
		if w.forwarded {
			var msg string
			var pos int
			entry, empty, sep, msg, pos = prevForwarded(s, lo, end)
			if msg != "" {
				return "", false, w.syntaxError(msg, pos)
			}
		} else if sep = strings.LastIndexByte(s[lo:end], ','); sep >= 0 {
			sep += lo
		}
		if end-sep-1 > maxElementBytes {
			return "", false, w.syntaxError(errTooLong, sep+1)
		}
		if !w.forwarded {
			entry = strings.Trim(s[sep+1:end], " \t")
			empty = entry == ""
		}
		w.end = sep
		if !empty {
			return entry, true, nil
		}
	}
}

// syntaxError reports an element of the line being read that does not
// parse; pos is a byte offset in that line.
func (w *chain) syntaxError(msg string, pos int) error {
	if msg == errTooLong {
		msg = fmt.Sprintf("element longer than %d bytes", maxElementBytes)
	}
	return fmt.Errorf("keyfunc: %s line %d: %s at byte %d: %w", w.header, w.line+1, msg, pos, errMalformedForwarding)
}

func (c *ClientIP) fromSingle(values []string, peer netip.Addr) (netip.Addr, error) {
	switch len(values) {
	case 0:
		if c.hops > 0 {
			return netip.Addr{}, fmt.Errorf("keyfunc: no %s header from the proxy: %w", c.header, errMalformedForwarding)
		}
		return peer, nil
	case 1:
		if len(values[0]) > maxElementBytes {
			return netip.Addr{}, fmt.Errorf("keyfunc: %s is longer than %d bytes: %w", c.header, maxElementBytes, errMalformedForwarding)
		}
		return c.parseHop(strings.Trim(values[0], " \t"))
	default:
		return netip.Addr{}, fmt.Errorf("keyfunc: %s appears %d times: %w", c.header, len(values), errMalformedForwarding)
	}
}

func (c *ClientIP) parseHop(node string) (netip.Addr, error) {
	a, reason := parseNode(node)
	if reason != "" {
		return netip.Addr{}, fmt.Errorf("keyfunc: %s entry %s: %s: %w", c.header, quoteShort(node), reason, errMalformedForwarding)
	}
	return a, nil
}

// peerAddr parses RemoteAddr, which must be "IP:port" or "[IPv6]:port".
func peerAddr(remote string) (netip.Addr, error) {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("keyfunc: RemoteAddr %s is not IP:port: %w", quoteShort(remote), errMalformedRemoteAddr)
	}
	return canonicalAddr(ap.Addr()), nil
}

func canonicalAddr(a netip.Addr) netip.Addr {
	return a.Unmap().WithZone("")
}

// parseNode parses one hop of a forwarding header: an IPv4 address, an IPv6
// address (bare or in brackets), either with an optional port after a colon
// (IPv6 only in brackets). It returns a non-empty reason when node is not
// such an address, including the "unknown" and obfuscated ("_x")
// identifiers of RFC 7239, which name no address.
func parseNode(node string) (netip.Addr, string) {
	switch {
	case node == "":
		return netip.Addr{}, "no address"
	case strings.EqualFold(node, "unknown"):
		return netip.Addr{}, "unknown hop"
	case node[0] == '_':
		return netip.Addr{}, "obfuscated hop"
	}
	if node[0] == '[' {
		end := strings.IndexByte(node, ']')
		if end < 0 {
			return netip.Addr{}, "unclosed bracket"
		}
		a, err := netip.ParseAddr(node[1:end])
		if err != nil || !a.Is6() {
			return netip.Addr{}, "not an IPv6 address in brackets"
		}
		if rest := node[end+1:]; rest != "" {
			if rest[0] != ':' || !validPort(rest[1:]) {
				return netip.Addr{}, "bad port"
			}
		}
		return canonicalAddr(a), ""
	}
	if a, err := netip.ParseAddr(node); err == nil {
		return canonicalAddr(a), ""
	}
	host, port, ok := strings.Cut(node, ":")
	if !ok {
		return netip.Addr{}, "not an IP address"
	}
	a, err := netip.ParseAddr(host)
	if err != nil || !a.Is4() {
		return netip.Addr{}, "not an IP address"
	}
	if !validPort(port) {
		return netip.Addr{}, "bad port"
	}
	return a, ""
}

// validPort accepts a decimal port up to 65535 or an RFC 7239 obfuscated
// port ("_" followed by letters, digits, '.', '_' or '-').
func validPort(p string) bool {
	if p == "" {
		return false
	}
	if p[0] == '_' {
		if len(p) == 1 {
			return false
		}
		for i := 1; i < len(p); i++ {
			c := p[i]
			if !isAlnum(c) && c != '.' && c != '_' && c != '-' {
				return false
			}
		}
		return true
	}
	if len(p) > 5 {
		return false
	}
	n, err := strconv.Atoi(p)
	return err == nil && n >= 0 && n <= 65535 && p[0] != '+' && p[0] != '-'
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// isTchar reports whether c may appear in an HTTP token (RFC 9110).
func isTchar(c byte) bool {
	return isAlnum(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTchar(s[i]) {
			return false
		}
	}
	return true
}

// quoteShort quotes s for an error message, cut to 64 bytes.
func quoteShort(s string) string {
	const max = 64
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}
	return strconv.Quote(s)
}

// Package peers holds what the benchmarks build by hand for the peers they
// compare with: the peer-address key and the usual per-client middleware
// on golang.org/x/time/rate.
package peers

import (
	"net"
	"net/http"
	"sync"

	"golang.org/x/time/rate"
)

// RemoteHost keys a request by its peer address without the port, as the
// peers' own IP key functions do.
func RemoteHost(r *http.Request) (string, error) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	return host, err
}

// XRateKeys is x/time/rate as a user writes per-client limiting: one
// rate.Limiter per key in a map under a mutex, never evicted.
type XRateKeys struct {
	mu    sync.Mutex
	m     map[string]*rate.Limiter
	limit rate.Limit
	burst int
}

// NewXRateKeys returns an XRateKeys admitting limit per second with the
// given burst per key.
func NewXRateKeys(limit rate.Limit, burst int) *XRateKeys {
	return &XRateKeys{m: make(map[string]*rate.Limiter), limit: limit, burst: burst}
}

// Allow reports whether key's bucket admits one more event now.
func (x *XRateKeys) Allow(key string) bool {
	x.mu.Lock()
	l, ok := x.m[key]
	if !ok {
		l = rate.NewLimiter(x.limit, x.burst)
		x.m[key] = l
	}
	x.mu.Unlock()
	return l.Allow()
}

// XRate is the usual hand-written per-client middleware on
// golang.org/x/time/rate: an [XRateKeys] keyed by the client address, and
// no headers.
type XRate struct {
	keys *XRateKeys
	next http.Handler
}

// NewXRate returns an XRate admitting limit per second with the given
// burst per client, in front of next.
func NewXRate(limit rate.Limit, burst int, next http.Handler) *XRate {
	return &XRate{keys: NewXRateKeys(limit, burst), next: next}
}

// ServeHTTP answers 400 without a peer address, 429 when the client's
// bucket is empty, and otherwise passes the request on.
func (x *XRate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host, err := RemoteHost(r)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if !x.keys.Allow(host) {
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	x.next.ServeHTTP(w, r)
}

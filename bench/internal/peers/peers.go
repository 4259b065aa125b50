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

// XRate is the usual hand-written per-client middleware on
// golang.org/x/time/rate: one token bucket per client address in a map
// under a mutex, never evicted, and no headers.
type XRate struct {
	mu    sync.Mutex
	m     map[string]*rate.Limiter
	limit rate.Limit
	burst int
	next  http.Handler
}

// NewXRate returns an XRate admitting limit per second with the given
// burst per client, in front of next.
func NewXRate(limit rate.Limit, burst int, next http.Handler) *XRate {
	return &XRate{m: make(map[string]*rate.Limiter), limit: limit, burst: burst, next: next}
}

// ServeHTTP answers 400 without a peer address, 429 when the client's
// bucket is empty, and otherwise passes the request on.
func (x *XRate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host, err := RemoteHost(r)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	x.mu.Lock()
	l, ok := x.m[host]
	if !ok {
		l = rate.NewLimiter(x.limit, x.burst)
		x.m[host] = l
	}
	x.mu.Unlock()
	if !l.Allow() {
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	x.next.ServeHTTP(w, r)
}

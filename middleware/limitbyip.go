package middleware

import (
	"fmt"
	"net/http"
	"time"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// LimitByIP returns middleware that admits n requests per period per
// client IP address: the one-line start for the common case,
//
//	r.Use(middleware.LimitByIP(100, time.Minute))
//
// It is a [Limiter] built by [New] with [keyfunc.RemoteIP] (the peer
// address; behind a reverse proxy use New with [keyfunc.NewClientIP] and
// the proxies you trust) and a GCRA limit of n per period with a burst of
// n: a fresh client may send n requests at once, then n per period, evenly
// spread. It counts on a memory store of its own, so each call has its own
// counters and each replica its own limit; [WithStore] counts on another
// store instead (a Redis store, to share one limit across replicas). Every
// other [Option] of New applies.
//
// LimitByIP panics, at setup and never at request time, when n or per is
// not a valid limit ([store.Limit.Validate]) or an option is invalid, with
// the error New would return; build the limiter with New to get the error
// instead.
func LimitByIP(n int64, per time.Duration, opts ...Option) func(http.Handler) http.Handler {
	lim, err := limitByIP(n, per, opts)
	if err != nil {
		panic(fmt.Sprintf("ratekeeper: middleware: LimitByIP(%d, %s): %v", n, per, err))
	}
	return lim.Handler
}

// limitByIP builds LimitByIP's limiter.
func limitByIP(n int64, per time.Duration, opts []Option) (*Limiter, error) {
	c, err := collect(opts)
	if err != nil {
		return nil, err
	}
	st := c.store
	c.store = nil
	if st == nil {
		if st, err = memstore.New(memstore.Options{}); err != nil {
			return nil, err
		}
	}
	limits := append([]store.Limit{{Rate: n, Period: per}}, c.extraLimits...)
	classify := func(r *http.Request) (string, string, error) {
		id, err := keyfunc.RemoteIP(r)
		return "", id, err
	}
	return build(st, c, classify, []Tier{{Limits: limits}})
}

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
// counters and each replica its own limit; [Options].Store counts on
// another store instead (a Redis store, to share one limit across
// replicas). Every other field of [Options] applies; give at most one
// Options.
//
// LimitByIP panics, at setup and never at request time, when n or per is
// not a valid limit ([store.Limit.Validate]), an option is invalid or
// more than one Options is given, with the error New would return; build
// the limiter with New to get the error instead.
func LimitByIP(n int64, per time.Duration, opts ...Options) func(http.Handler) http.Handler {
	lim, err := limitByIP(n, per, opts)
	if err != nil {
		panic(fmt.Sprintf("ratekeeper: middleware: LimitByIP(%d, %s): %v", n, per, err))
	}
	return lim.Handler
}

// limitByIP builds LimitByIP's limiter.
func limitByIP(n int64, per time.Duration, opts []Options) (*Limiter, error) {
	var o Options
	switch len(opts) {
	case 0:
	case 1:
		o = opts[0]
	default:
		return nil, fmt.Errorf("ratekeeper: middleware: at most one Options, got %d", len(opts))
	}
	st := o.Store
	o.Store = nil
	if st == nil {
		var err error
		if st, err = memstore.New(memstore.Options{}); err != nil {
			return nil, err
		}
	}
	limits := append([]store.Limit{{Rate: n, Period: per}}, o.Limits...)
	classify := func(r *http.Request) (string, string, error) {
		id, err := keyfunc.RemoteIP(r)
		return "", id, err
	}
	return build(st, &o, classify, limits, nil)
}

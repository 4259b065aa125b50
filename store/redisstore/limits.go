package redisstore

import (
	"sync"
	"sync/atomic"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// limitInfo is what the store derives from one [store.Limit] once: script
// arguments boxed for go-redis (no allocation per call), the limit's ID and
// the state key suffix. Equal limits share one *limitInfo while the cache
// holds it, which the deny cache relies on: a changed limit is a different
// pointer.
type limitInfo struct {
	rate, period, capacity any // int64 values
	limit                  int64
	l                      store.Limit
	id                     string
	suffix                 string // "<algorithm tag>:<limitKey>"
}

func newLimitInfo(l store.Limit) *limitInfo {
	id := l.ID()
	return &limitInfo{
		rate:     l.Rate,
		period:   contract.Span(l).Microseconds(),
		capacity: l.Capacity(),
		limit:    l.Capacity(),
		l:        l,
		id:       id,
		suffix:   algorithmTags[l.Algorithm] + ":" + limitKey(l),
	}
}

// maxCachedLimits bounds the limit cache: a limits function that invents
// a new limit per request must not grow memory without bound. Limits past
// the cap are derived per call.
const maxCachedLimits = 4096

// limitCache maps limits to their *limitInfo. Reads take no lock: the map
// is replaced, never modified, when a limit is added.
type limitCache struct {
	m atomic.Pointer[map[store.Limit]*limitInfo]
	// last is the limit added last, looked at before the map: a service
	// with one limit finds it with a comparison instead of a hash. It is
	// written only when a limit is added, so that callers of different
	// limits do not contend for it.
	last atomic.Pointer[limitInfo]
	mu   sync.Mutex // serializes additions
}

// get returns the info of a validated limit.
func (c *limitCache) get(l store.Limit) *limitInfo {
	if li := c.last.Load(); li != nil && li.l == l {
		return li
	}
	if m := c.m.Load(); m != nil {
		if li, ok := (*m)[l]; ok {
			return li
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if li, ok := (*old)[l]; ok {
			return li
		}
		if len(*old) >= maxCachedLimits {
			return newLimitInfo(l)
		}
	}
	next := make(map[store.Limit]*limitInfo, 1+lenOf(old))
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	li := newLimitInfo(l)
	next[l] = li
	c.m.Store(&next)
	c.last.Store(li)
	return li
}

func lenOf(m *map[store.Limit]*limitInfo) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

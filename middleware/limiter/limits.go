package limiter

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/store"
)

// limitSet is a policy's limits, validated and compiled once: the header
// values that depend only on the limits are formatted here, not per
// request.
type limitSet struct {
	limits   []store.Limit
	capacity int64           // the smallest capacity, for the cost-exceeded body
	fields   *headers.Policy // the values of the rate-limit header fields
}

// compileLimits validates limits as every store would and prepares their
// header values for the limiter named name and its tier ("" for none).
func compileLimits(o headers.Options, name, tier string, limits []store.Limit, countDenied bool) (*limitSet, error) {
	probe := store.Request{Key: "probe", Limits: limits, CountDenied: countDenied}
	if err := probe.Validate(); err != nil {
		return nil, err
	}
	fields, err := headers.NewPolicy(o, name, tier, limits)
	if err != nil {
		return nil, err
	}
	set := &limitSet{limits: slices.Clone(limits), capacity: limits[0].Capacity(), fields: fields}
	for _, l := range limits[1:] {
		set.capacity = min(set.capacity, l.Capacity())
	}
	return set, nil
}

// maxDynamicSets bounds the distinct LimitsFunc results kept per tier.
const maxDynamicSets = 64

// limitCache holds the compiled distinct results of a limits function:
// lookups are lock-free, additions copy the list under a lock.
type limitCache struct {
	mu   sync.Mutex
	sets atomic.Pointer[[]*limitSet]
}

func (c *limitCache) find(limits []store.Limit) *limitSet {
	if p := c.sets.Load(); p != nil {
		for _, s := range *p {
			if slices.Equal(s.limits, limits) {
				return s
			}
		}
	}
	return nil
}

// add keeps set unless the cache is full, and returns the cached set equal
// to it.
func (c *limitCache) add(set *limitSet) *limitSet {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.find(set.limits); s != nil {
		return s
	}
	var old []*limitSet
	if p := c.sets.Load(); p != nil {
		old = *p
	}
	if len(old) >= maxDynamicSets {
		return set
	}
	next := append(slices.Clip(old), set)
	c.sets.Store(&next)
	return set
}

// sets returns the tier's configured limits and every cached result of the
// limits function.
func (t *tierState) sets() []*limitSet {
	out := []*limitSet{t.limits}
	if p := t.dynamic.sets.Load(); p != nil {
		out = append(out, *p...)
	}
	return out
}

// limitsFor returns the compiled limits of a request in tier t: explicit
// when the request names its limits, else the limits function's result,
// else the tier's configured limits. Results seen before come from the
// tier's cache.
func (l *Limiter) limitsFor(ctx context.Context, t *tierState, explicit []store.Limit) (*limitSet, error) {
	limits := explicit
	if len(limits) == 0 {
		if l.limitsFunc == nil {
			return t.limits, nil
		}
		var err error
		if limits, err = l.limitsFunc(ctx, t.name); err != nil {
			return nil, fmt.Errorf("%w: limits function: %w", errMisconfigured, err)
		}
		if len(limits) == 0 {
			return t.limits, nil
		}
	}
	if &limits[0] == &t.limits.limits[0] || slices.Equal(limits, t.limits.limits) {
		return t.limits, nil
	}
	if set := t.dynamic.find(limits); set != nil {
		return set, nil
	}
	set, err := compileLimits(l.headerOpts, l.name, t.name, limits, l.countDenied)
	if err != nil {
		return nil, fmt.Errorf("%w: limits: %w", errMisconfigured, err)
	}
	return t.dynamic.add(set), nil
}

package memstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// maxOverrides is the most live overrides a store holds (65,536; see
// [memStore.SetOverride]).
const maxOverrides = 1 << 16

// overrideEntry is a stored override: its kind and factor, and its expiry
// in µs on the store's clock.
type overrideEntry struct {
	kind  store.OverrideKind
	scale float64
	exp   int64
}

// overrides are a shard's overrides, by request key. The map is made on
// the first override. live counts entries after the last pruning.
type overrides struct {
	m    map[string]overrideEntry
	live int
}

// override returns key's live override; an expired one is dropped when drop is
// set (a take or an override call, never a peek).
func (sh *shard) override(key string, now int64, drop bool, count *atomic.Int64) (overrideEntry, bool) {
	e, ok := sh.ov.m[key]
	if !ok {
		return e, false
	}
	if e.exp > now {
		return e, true
	}
	if drop {
		delete(sh.ov.m, key)
		count.Add(-1)
	}
	return e, false
}

// leftMS returns the time an override has left, rounded up to whole
// milliseconds as the Redis store's PTTL reports it, never shorter.
func leftMS(exp, now int64) time.Duration {
	us := exp - now
	return time.Duration((us+999)/1000) * time.Millisecond
}

// SetOverride implements [store.OverrideStore]: it stores o for key, replacing
// any override the key has, until o.TTL has passed on the store's clock.
// Requests with [store.Request.ApplyOverride] apply it. It returns o.Validate's
// error for an invalid override or an empty key. Overrides are set by
// operators, not by traffic, and are not evicted: a store holding 65,536
// live overrides refuses new ones with an error wrapping
// [store.ErrTooManyKeys] until some expire or are cleared.
func (s *memStore) SetOverride(_ context.Context, key string, o store.Override) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", store.ErrInvalidRequest)
	}
	if err := o.Validate(); err != nil {
		return err
	}
	sh := s.shardFor(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := sh.clock(s.now())
	if _, ok := sh.override(key, now, true, &s.overrides); !ok {
		if len(sh.ov.m) > 2*sh.ov.live+16 {
			sh.pruneOverrides(now, &s.overrides)
		}
		if s.overrides.Add(1) > maxOverrides {
			s.overrides.Add(-1)
			return fmt.Errorf("memstore: override of %q: %w (%d live overrides)", key, store.ErrTooManyKeys, maxOverrides)
		}
		if sh.ov.m == nil {
			sh.ov.m = make(map[string]overrideEntry)
		}
	}
	sh.ov.m[key] = overrideEntry{kind: o.Kind, scale: o.Scale, exp: now + o.TTL.Microseconds()}
	return nil
}

// pruneOverrides drops the shard's expired overrides.
func (sh *shard) pruneOverrides(now int64, count *atomic.Int64) {
	for k, e := range sh.ov.m {
		if e.exp <= now {
			delete(sh.ov.m, k)
			count.Add(-1)
		}
	}
	sh.ov.live = len(sh.ov.m)
}

// GetOverride implements [store.OverrideStore]: key's live override with the
// time it has left (in whole milliseconds, rounded up), or an error
// wrapping [store.ErrNotFound].
func (s *memStore) GetOverride(_ context.Context, key string) (store.Override, error) {
	if key == "" {
		return store.Override{}, fmt.Errorf("%w: empty key", store.ErrInvalidRequest)
	}
	sh := s.shardFor(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := sh.clock(s.now())
	e, ok := sh.override(key, now, true, &s.overrides)
	if !ok {
		return store.Override{}, fmt.Errorf("memstore: override of %q: %w", key, store.ErrNotFound)
	}
	return store.Override{Kind: e.kind, Scale: e.scale, TTL: leftMS(e.exp, now)}, nil
}

// ClearOverride implements [store.OverrideStore]: it removes key's override.
func (s *memStore) ClearOverride(_ context.Context, key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", store.ErrInvalidRequest)
	}
	sh := s.shardFor(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := sh.clock(s.now())
	if _, ok := sh.override(key, now, true, &s.overrides); !ok {
		return fmt.Errorf("memstore: override of %q: %w", key, store.ErrNotFound)
	}
	delete(sh.ov.m, key)
	s.overrides.Add(-1)
	return nil
}

// applyOverride applies the key's override to the request under the
// shard's lock: it scales o.req's limits (into lim) and returns
// OverrideNone or OverrideScale, or, for exempt and suspend, the kind and
// the decision the request gets, which records nothing.
func (o *op) applyOverride(take bool, lim *[store.MaxLimits]store.Limit) (store.OverrideKind, store.Decision) {
	e, ok := o.sh.override(o.req.Key, o.now, take, &o.s.overrides)
	if !ok {
		return store.OverrideNone, store.Decision{}
	}
	limits := o.req.Limits
	switch e.kind {
	case store.OverrideScale:
		for i, l := range limits {
			lim[i] = contract.ScaleLimit(l, e.scale, o.cost)
		}
		o.req.Limits = lim[:len(limits)]
		return e.kind, store.Decision{}
	case store.OverrideExempt:
		d := store.Decision{Allowed: true, Capacity: limits[0].Capacity(), Remaining: limits[0].Capacity(), LimitID: limits[0].ID(), Override: e.kind}
		if len(limits) > 1 {
			d.PerLimit = make([]store.LimitState, len(limits))
			for i, l := range limits {
				d.PerLimit[i].Remaining = l.Capacity()
			}
		}
		return e.kind, d
	default: // suspend
		left := leftMS(e.exp, o.now)
		d := store.Decision{Capacity: limits[0].Capacity(), ResetAfter: left, NextAfter: left, RetryAfter: left, LimitID: limits[0].ID(), Override: e.kind}
		if len(limits) > 1 {
			d.PerLimit = make([]store.LimitState, len(limits))
			for i := range limits {
				d.PerLimit[i].ResetAfter, d.PerLimit[i].NextAfter = left, left
			}
		}
		return e.kind, d
	}
}

var _ store.OverrideStore = (*memStore)(nil)

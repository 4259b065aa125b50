package hybrid

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// The capabilities of package store that a Store forwards to its backend
// (see "Capabilities" in the package documentation).
var (
	_ store.BlockLister            = (*hybridStore)(nil)
	_ store.EvictionCounter        = (*hybridStore)(nil)
	_ store.EvictionPolicyReporter = (*hybridStore)(nil)
	_ store.Refunder               = (*hybridStore)(nil)
	_ store.SlotStore              = (*hybridStore)(nil)
)

// Blocks implements [store.BlockLister] with the backend's listing: blocks
// are only ever started and kept by the backend, since a request with a
// blocking limit is never decided locally. For a backend that does not
// list its blocks it returns an error wrapping [errors.ErrUnsupported].
func (s *hybridStore) Blocks(ctx context.Context, keyPrefix, cursor string, count int) ([]store.Block, string, error) {
	bl, ok := s.backend.(store.BlockLister)
	if !ok {
		return nil, "", fmt.Errorf("hybrid: the backend (%T) does not list its blocks: %w", s.backend, errors.ErrUnsupported)
	}
	return bl.Blocks(ctx, keyPrefix, cursor, count)
}

// Evictions implements [store.EvictionCounter] with the backend's count,
// or 0 for a backend that does not evict. The local leases are not
// bounded by a key count and are never evicted, only forgotten when idle.
func (s *hybridStore) Evictions() uint64 {
	if ec, ok := s.backend.(store.EvictionCounter); ok {
		return ec.Evictions()
	}
	return 0
}

// EvictionPolicy implements [store.EvictionPolicyReporter] with the
// backend's policy, or "" for a backend that has none.
func (s *hybridStore) EvictionPolicy() string {
	if ep, ok := s.backend.(store.EvictionPolicyReporter); ok {
		return ep.EvictionPolicy()
	}
	return ""
}

// Refunds implements [store.Refunder] with the backend's count, or 0 for
// a backend that never refunds. The stacked decisions it counts are the
// ones made on the backend directly: a Store makes none.
func (s *hybridStore) Refunds() uint64 {
	if r, ok := s.backend.(store.Refunder); ok {
		return r.Refunds()
	}
	return 0
}

// Unrefunded implements [store.Refunder] with the backend's count, or 0
// for a backend that never refunds.
func (s *hybridStore) Unrefunded() uint64 {
	if r, ok := s.backend.(store.Refunder); ok {
		return r.Unrefunded()
	}
	return 0
}

// Settle implements [store.Refunder] by passing the settlement to the
// backend unchanged, or returns an error wrapping
// [store.ErrInvalidRequest] when the backend cannot settle. The key's
// units taken locally and not yet committed are not touched: the
// settlement's units apply to the backend's state at once.
func (s *hybridStore) Settle(ctx context.Context, req store.Request, taken store.Decision, actual int64) error {
	if r, ok := s.backend.(store.Refunder); ok {
		return r.Settle(ctx, req, taken, actual)
	}
	return fmt.Errorf("%w: the hybrid store's backend does not settle costs", store.ErrInvalidRequest)
}

// slotStore returns the backend as a [store.SlotStore], or an error
// wrapping [errors.ErrUnsupported].
func (s *hybridStore) slotStore() (store.SlotStore, error) {
	if ss, ok := s.backend.(store.SlotStore); ok {
		return ss, nil
	}
	return nil, fmt.Errorf("hybrid: the backend (%T) keeps no in-flight caps: %w", s.backend, errors.ErrUnsupported)
}

// Acquire implements [store.SlotStore] with the backend's slots: a cap
// holds across every instance only where its slots are kept, so none are
// kept locally. For a backend that keeps none it returns an error
// wrapping [errors.ErrUnsupported], which the middleware's limiter treats
// as a configuration mistake (the request is rejected), not as a failing
// store.
func (s *hybridStore) Acquire(ctx context.Context, slot store.Slot, max int64, lease time.Duration) (bool, int64, error) {
	ss, err := s.slotStore()
	if err != nil {
		return false, 0, err
	}
	return ss.Acquire(ctx, slot, max, lease)
}

// Release implements [store.SlotStore] with the backend's slots.
func (s *hybridStore) Release(ctx context.Context, slot store.Slot) error {
	ss, err := s.slotStore()
	if err != nil {
		return err
	}
	return ss.Release(ctx, slot)
}

// Renew implements [store.SlotStore] with the backend's slots.
func (s *hybridStore) Renew(ctx context.Context, slots []store.Slot, lease time.Duration) (int, error) {
	ss, err := s.slotStore()
	if err != nil {
		return 0, err
	}
	return ss.Renew(ctx, slots, lease)
}

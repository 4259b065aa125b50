package suppressed

import (
	"context"
	"errors"
	"fmt"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// Options configures the store [New] returns.
type Options struct {
	// Soft returns the soft limit of a counting limit of a request: the
	// units per Period from which requests are shed, from 1 to the limit's
	// Rate (its hard limit). It is called for every limit of every request
	// and must be cheap and safe for concurrent use. Nil means half the
	// hard limit, rounded down, at least 1.
	Soft func(l store.Limit) int64
}

// New returns a store that decides every request on s with the
// suppressed strategy (see the package documentation): each limit of a
// request must be a [store.SlidingWindowCounter], whose Rate is the hard
// limit, and opts.Soft gives its soft limit. s must be a store that
// decides the strategy in one atomic step: one from memstore.New or
// redisstore.New. New returns an error for any other store (the hybrid
// store included, since the strategy needs every instance's offered
// load).
//
// Besides [store.Store] the value implements [store.OverrideStore],
// [store.BlockLister], [store.EvictionCounter],
// [store.EvictionPolicyReporter] and [store.NodeLocator] with s's (zero
// values, or an error wrapping [errors.ErrUnsupported], where s has none),
// and Name with s's name; it is not a [store.MultiStore]: a stacked
// decision does not take the suppressed strategy.
func New(s store.Store, opts Options) (store.Store, error) {
	sup, ok := s.(contract.Suppressor)
	if !ok {
		return nil, fmt.Errorf("suppressed: the store (%T) does not decide the suppressed strategy; use one from memstore.New or redisstore.New", s)
	}
	soft := opts.Soft
	if soft == nil {
		soft = half
	}
	return &suppressedStore{backend: s, sup: sup, soft: soft}, nil
}

// half is the default soft limit: half the hard limit, at least 1.
func half(l store.Limit) int64 { return max(l.Rate/2, 1) }

// suppressedStore is the store [New] returns.
type suppressedStore struct {
	backend store.Store
	sup     contract.Suppressor
	soft    func(store.Limit) int64
}

// Take implements [store.Store]: it decides req with the suppressed
// strategy and records it as offered, and as accepted when admitted.
// Errors for an invalid request wrap [store.ErrInvalidRequest],
// [store.ErrInvalidLimit] or [store.ErrCostExceedsCapacity].
func (s *suppressedStore) Take(ctx context.Context, req store.Request) (store.Decision, error) {
	return s.do(ctx, req, contract.Take)
}

// Peek implements [store.Store]: the decision Take would make now with a
// draw of its own, writing nothing.
func (s *suppressedStore) Peek(ctx context.Context, req store.Request) (store.Decision, error) {
	return s.do(ctx, req, contract.Peek)
}

// Reset implements [store.Store]: it forgets req.Key's accepted and
// offered units and cached factor under req.Limits, and the key's
// remembered de-duplication ids. It returns an error wrapping
// [store.ErrNotFound] when none was live.
func (s *suppressedStore) Reset(ctx context.Context, req store.Request) error {
	req.Cost = 0
	_, err := s.do(ctx, req, contract.Reset)
	return err
}

// do checks req, turns its counting limits into suppressed ones and has
// the backend decide them in mode.
func (s *suppressedStore) do(ctx context.Context, req store.Request, mode contract.Mode) (store.Decision, error) {
	var limits [store.MaxLimits]store.Limit
	n, err := s.limits(&req, &limits)
	if err != nil {
		return store.Decision{}, err
	}
	req.Limits = limits[:n]
	return s.sup.Suppress(ctx, req, mode)
}

// limits checks req as the suppressed strategy takes it and writes the
// suppressed form of its limits into out: the soft limit in Rate, the
// hard limit in Burst, the counting limit's ID for a name.
func (s *suppressedStore) limits(req *store.Request, out *[store.MaxLimits]store.Limit) (int, error) {
	if err := req.Validate(); err != nil {
		return 0, err
	}
	if req.CountDenied {
		return 0, fmt.Errorf("%w: CountDenied: the suppressed strategy counts every request as offered load already", store.ErrInvalidRequest)
	}
	if req.Partial || req.Reserve {
		return 0, fmt.Errorf("%w: Partial or Reserve: the suppressed strategy admits by random draws, not by the units that fit", store.ErrInvalidRequest)
	}
	for i, l := range req.Limits {
		switch {
		case l.Algorithm != store.SlidingWindowCounter:
			return 0, fmt.Errorf("limit %d: %w: Algorithm: the suppressed strategy layers over %s, got %s", i, store.ErrInvalidLimit, store.SlidingWindowCounter, l.Algorithm)
		case l.Block != 0:
			return 0, fmt.Errorf("limit %d: %w: Block is not supported by the suppressed strategy, which sheds load rather than punish it", i, store.ErrInvalidLimit)
		}
		soft := s.soft(l)
		if soft < 1 || soft > l.Rate {
			return 0, fmt.Errorf("limit %d: %w: the soft limit of %q must be 1 to its Rate %d (the hard limit), got %d", i, store.ErrInvalidLimit, l.ID(), l.Rate, soft)
		}
		out[i] = store.Limit{Name: l.ID(), Algorithm: contract.Suppressed, Rate: soft, Burst: l.Rate, Period: l.Period}
	}
	return len(req.Limits), nil
}

// Name returns the backend's name, the backend label of metrics.
func (s *suppressedStore) Name() string {
	if n, ok := s.backend.(interface{ Name() string }); ok {
		return n.Name()
	}
	return ""
}

var (
	_ store.OverrideStore          = (*suppressedStore)(nil)
	_ store.BlockLister            = (*suppressedStore)(nil)
	_ store.EvictionCounter        = (*suppressedStore)(nil)
	_ store.EvictionPolicyReporter = (*suppressedStore)(nil)
	_ store.NodeLocator            = (*suppressedStore)(nil)
)

// errNoOverrides is returned by the override methods of a store whose
// backend keeps none.
var errNoOverrides = fmt.Errorf("suppressed: the backend keeps no overrides: %w", errors.ErrUnsupported)

// SetOverride implements [store.OverrideStore] with the backend's.
func (s *suppressedStore) SetOverride(ctx context.Context, key string, o store.Override) error {
	if ov, ok := s.backend.(store.OverrideStore); ok {
		return ov.SetOverride(ctx, key, o)
	}
	return errNoOverrides
}

// GetOverride implements [store.OverrideStore] with the backend's.
func (s *suppressedStore) GetOverride(ctx context.Context, key string) (store.Override, error) {
	if ov, ok := s.backend.(store.OverrideStore); ok {
		return ov.GetOverride(ctx, key)
	}
	return store.Override{}, errNoOverrides
}

// ClearOverride implements [store.OverrideStore] with the backend's.
func (s *suppressedStore) ClearOverride(ctx context.Context, key string) error {
	if ov, ok := s.backend.(store.OverrideStore); ok {
		return ov.ClearOverride(ctx, key)
	}
	return errNoOverrides
}

// Blocks implements [store.BlockLister] with the backend's listing (the
// blocks of the backend's other limits: suppressed limits never block).
func (s *suppressedStore) Blocks(ctx context.Context, keyPrefix, cursor string, count int) ([]store.Block, string, error) {
	if bl, ok := s.backend.(store.BlockLister); ok {
		return bl.Blocks(ctx, keyPrefix, cursor, count)
	}
	return nil, "", fmt.Errorf("suppressed: the backend (%T) does not list its blocks: %w", s.backend, errors.ErrUnsupported)
}

// Evictions implements [store.EvictionCounter] with the backend's count,
// or 0.
func (s *suppressedStore) Evictions() uint64 {
	if ec, ok := s.backend.(store.EvictionCounter); ok {
		return ec.Evictions()
	}
	return 0
}

// EvictionPolicy implements [store.EvictionPolicyReporter] with the
// backend's policy, or "".
func (s *suppressedStore) EvictionPolicy() string {
	if ep, ok := s.backend.(store.EvictionPolicyReporter); ok {
		return ep.EvictionPolicy()
	}
	return ""
}

// NodeFor implements [store.NodeLocator] with the backend's answer, or "".
func (s *suppressedStore) NodeFor(ctx context.Context, req store.Request) string {
	if nl, ok := s.backend.(store.NodeLocator); ok {
		return nl.NodeFor(ctx, req)
	}
	return ""
}

package limiter

import (
	"context"
	"errors"
	"fmt"

	"github.com/ratekeeper/ratekeeper/store"
)

// Reset forgets everything the store holds for identity under this policy
// and tier ("" for a limiter without tiers): counters, an active block,
// repeat-offence strikes and remembered de-duplication ids. identity is
// the identity as the caller gives it to [Limiter.Decide]: the address
// "203.0.113.7", the subject "alice". Use it to unblock a client by hand.
// With Options.LimitsFunc, the state under every limit set the limiter has
// seen for the tier is forgotten.
//
// Reset returns an error wrapping [store.ErrNotFound] when nothing was
// stored for identity (a mistyped identity, the wrong tier, or a tier
// that stores nothing), and an error for an unknown tier, an empty
// identity or a store failure.
func (l *Limiter) Reset(ctx context.Context, tier, identity string) error {
	if identity == "" {
		return errEmptyKey
	}
	i, ok := l.tierIndex[tier]
	if !ok {
		return fmt.Errorf("ratekeeper: limiter: Reset: unknown tier %q", tier)
	}
	t := l.tiers[i]
	if t.limits == nil {
		return fmt.Errorf("ratekeeper: limiter: Reset: tier %q stores nothing: %w", tier, store.ErrNotFound)
	}
	var notFound error
	found := false
	for _, set := range t.sets() {
		err := l.store.Reset(ctx, store.Request{Key: StoreKey(l.name, t.name, identity), Limits: set.limits})
		switch {
		case err == nil:
			found = true
		case errors.Is(err, store.ErrNotFound):
			notFound = err
		default:
			return err
		}
	}
	if !found {
		return notFound
	}
	return nil
}

// SetOverride gives identity, under this policy and tier ("" for a
// limiter without tiers), the override o until o.TTL has passed: a scaled
// (raised or cut) limit, an exemption or a suspension; see
// [store.Override]. It replaces any override the client has, and applies
// to every replica sharing the store from the client's next request. It
// returns an error when the limiter was built without Options.Overrides,
// for an unknown tier, an empty identity, an invalid override or a store
// failure.
func (l *Limiter) SetOverride(ctx context.Context, tier, identity string, o store.Override) error {
	key, ov, err := l.overrideKey(tier, identity)
	if err != nil {
		return err
	}
	return ov.SetOverride(ctx, key, o)
}

// ClearOverride removes identity's override under this policy and tier.
// It returns an error wrapping [store.ErrNotFound] when the client had
// none, and the errors of [Limiter.SetOverride] otherwise.
func (l *Limiter) ClearOverride(ctx context.Context, tier, identity string) error {
	key, ov, err := l.overrideKey(tier, identity)
	if err != nil {
		return err
	}
	return ov.ClearOverride(ctx, key)
}

// overrideKey returns the store key of identity under tier and the store's
// overrides.
func (l *Limiter) overrideKey(tier, identity string) (string, store.OverrideStore, error) {
	if !l.overrides {
		return "", nil, fmt.Errorf("ratekeeper: limiter: policy %q does not apply overrides (Options.Overrides)", l.name)
	}
	if identity == "" {
		return "", nil, errEmptyKey
	}
	if _, ok := l.tierIndex[tier]; !ok {
		return "", nil, fmt.Errorf("ratekeeper: limiter: unknown tier %q", tier)
	}
	return StoreKey(l.name, tier, identity), l.store.(store.OverrideStore), nil
}

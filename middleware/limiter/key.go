package limiter

import (
	"context"
	"strings"
	"time"
	"unsafe"

	"github.com/ratekeeper/ratekeeper/internal/keybuf"
)

// policyLabel is the policy's name as bodies, metrics and logs show it:
// the limiter's name, followed by "/" and the tier for a limiter with
// tiers ("api/authenticated"). "/" is outside the name alphabet, so "api"
// with tier "authenticated" never meets a policy named
// "api.authenticated".
func policyLabel(name, tier string) string {
	if tier == "" {
		return name
	}
	return name + "/" + tier
}

// StoreKey returns the key under which a store keeps the state of identity
// for a policy ([Options].Name) and tier (a [Tier]'s Name; ""
// for a limiter without tiers): "<policy>:<identity>", or
// "<policy>/<tier>:<identity>" with a tier. It is the one place that
// builds the key: the limiter gives it to every store call, and tools
// that read or change a client's state directly ([store.Store.Peek], the
// store's overrides) use it too. Limiters that share a name and tier share
// the key, which is how a quota is shared on purpose.
//
// "/" and ":" are outside the alphabet of policy and tier names, so two
// policies or tiers never share a key; identity is used as it is, and the
// store encodes the whole key for its backend.
func StoreKey(policy, tier, identity string) string {
	if tier == "" {
		return policy + ":" + identity
	}
	return policy + "/" + tier + ":" + identity
}

// storeKey is [StoreKey] for a request of l, decided at now: built in the
// memory the request's context lends (see package internal/keybuf) when
// the limiter's stores copy the keys they keep and the key fits, else in a
// string of its own. The lent memory carries now when it is a reading of
// the real clock.
func (l *Limiter) storeKey(ctx context.Context, now time.Time, tier, identity string) string {
	if !l.lendKeys {
		return StoreKey(l.name, tier, identity)
	}
	lender, ok := ctx.(keybuf.Lender)
	if !ok {
		return StoreKey(l.name, tier, identity)
	}
	kb := lender.KeyBuffer()
	if l.stamp {
		kb.Stamp(now)
	}
	b := kb.Lend()
	n := len(l.name) + 1 + len(identity)
	if tier != "" {
		n += 1 + len(tier)
	}
	if n > cap(b) {
		return StoreKey(l.name, tier, identity)
	}
	b = append(b, l.name...)
	if tier != "" {
		b = append(append(b, '/'), tier...)
	}
	b = append(append(b, ':'), identity...)
	// The lent memory is written here once and never again.
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// SplitStoreKey takes a key built by [StoreKey] apart into its policy,
// tier ("" for a limiter without tiers) and identity; ok is false for a
// key StoreKey cannot have built. It is the one place that reads a store
// key, for tools that list what a store holds (a store's blocked keys).
func SplitStoreKey(key string) (policy, tier, identity string, ok bool) {
	label, identity, ok := strings.Cut(key, ":")
	policy, tier, tiered := strings.Cut(label, "/")
	if !ok || policy == "" || tiered && tier == "" {
		return "", "", "", false
	}
	return policy, tier, identity, true
}

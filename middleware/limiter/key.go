package limiter

import "strings"

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

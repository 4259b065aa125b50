package middleware

// StoreKey returns the key under which a store keeps the state of identity
// for a policy (the limiter's [WithName]) and tier (a [Tier]'s Name; ""
// for a limiter built with [New]): "<policy>:<identity>", or
// "<policy>/<tier>:<identity>" with a tier. It is the key the middleware
// gives every store call, for tools that read or change a client's state
// directly: [store.Store.Peek] and the store's overrides.
//
// "/" and ":" are outside the alphabet of policy and tier names, so two
// policies or tiers never share a key; identity is used as it is, and the
// store encodes the whole key for its backend.
func StoreKey(policy, tier, identity string) string {
	return storeKeyPrefix(policy, tier) + identity
}

// storeKeyPrefix returns the part of a store key before the identity:
// "<policy>:" or "<policy>/<tier>:". A limiter computes it once per tier.
func storeKeyPrefix(policy, tier string) string {
	if tier == "" {
		return policy + ":"
	}
	return policy + "/" + tier + ":"
}

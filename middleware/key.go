package middleware

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

// storeKey is the one place that builds a client's store key: the policy
// label, ":" and the identity as the key function or classifier returned
// it ("api/authenticated:alice"). Limiters that share a name and tier
// share the key, which is how a quota is shared on purpose.
func storeKey(name, tier, identity string) string {
	if tier == "" {
		return name + ":" + identity
	}
	return name + "/" + tier + ":" + identity
}

package admin

import (
	"fmt"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"slices"
	"strconv"
	"strings"

	"github.com/ratekeeper/ratekeeper/middleware/policy"
	"github.com/ratekeeper/ratekeeper/store"
)

// target is where one client of a policy keeps its state: the policy
// whose limiter and counters serve it (the shared one, for a policy with
// "share"), the tier, and the limits.
type target struct {
	owner     string
	tiered    bool
	tier      string
	limits    []store.Limit
	unlimited bool
	suspended bool
	overrides bool // the policy applies per-client overrides
	// soft gives the soft limits of a policy that sheds load, whose state
	// the store of package store/suppressed keeps; nil for other policies.
	soft func(store.Limit) int64
}

// key returns the store key of identity, as the middleware builds it.
func (t *target) key(identity string) string {
	return limiter.StoreKey(t.owner, t.tier, identity)
}

// resolve finds where the clients of p in tier keep their state, from the
// policy as package policy decoded it. The target's owner and tiered are
// set even when it returns an error.
func (a *api) resolve(p policy.Policy, tier string) (target, error) {
	t := target{owner: p.Name, tiered: p.Tiers != nil, overrides: p.Overrides, soft: p.Soft}
	if p.Share != "" {
		t.owner = p.Share
	}
	if !t.tiered {
		if tier != "" {
			return t, fmt.Errorf("policy %q has no tiers; leave tier out", p.Name)
		}
		t.limits = p.Limits
		return t, nil
	}
	i := slices.IndexFunc(p.Tiers, func(mt limiter.Tier) bool { return mt.Name == tier })
	if i < 0 {
		names := make([]string, len(p.Tiers))
		for j, mt := range p.Tiers {
			names[j] = strconv.Quote(mt.Name)
		}
		slices.Sort(names)
		return t, fmt.Errorf("policy %q has tiers: tier must be one of %s", p.Name, strings.Join(names, ", "))
	}
	mt := p.Tiers[i]
	t.tier, t.limits, t.unlimited, t.suspended = tier, mt.Limits, mt.Unlimited, mt.Suspended
	return t, nil
}

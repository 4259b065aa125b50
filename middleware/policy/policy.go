package policy

import (
	"encoding/json"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"

	"github.com/ratekeeper/ratekeeper/store"
)

// Policy is one policy of a policy file, decoded and validated: the one
// form in which the file reaches code. [Parse] returns the policies of a
// file, [Set.Status] those of the running configuration; the admin API and
// the command-line tool read them to find a client's limits and its store
// key ([limiter.StoreKey] of the policy that owns the quota, the tier
// and the identity). A threshold N in the file is rate N-1 in Limits.
//
// For a policy with share, Key, Classifier, Limits, Tiers and Overrides
// are those of the shared policy, whose limiter and counters serve it;
// Share names that policy. Config is the policy as its file wrote it.
type Policy struct {
	// Name is the policy's name.
	Name string
	// Mode is the mode requests run under now; from [Parse], the file's.
	Mode Mode
	// Configured is the mode the file gives the policy.
	Configured Mode
	// Overridden reports that Mode was set with [Set.SetMode] and is kept
	// across reloads until SetMode clears it.
	Overridden bool
	// Share names the policy whose quota this one uses; "" for a policy
	// with a quota of its own.
	Share string
	// Cost is the units a request costs (1 unless the file sets cost).
	Cost int64
	// Key names the key function of a policy with limits, Classifier the
	// classifier of one with tiers: exactly one is set.
	Key, Classifier string
	// Limits are the limits of a policy with key, in file order; nil for
	// one with tiers.
	Limits []store.Limit
	// Tiers are the tiers of a policy with classifier, in file order; nil
	// for one with key. A tier has Limits, or is Unlimited or Suspended.
	Tiers []limiter.Tier
	// Soft gives, for a policy that sheds load (algorithm suppressed), the
	// soft limit of each of its counting limits, as the store of package
	// store/suppressed takes it ([suppressed.Options]); nil for other
	// policies.
	Soft func(store.Limit) int64
	// Overrides reports that the policy applies per-client overrides
	// ("overrides: true").
	Overrides bool
	// Config is the policy as JSON in the file's schema, with the fields
	// the file set, durations as "1m" and limits with their algorithm.
	Config json.RawMessage
}

// Parse decodes and validates the policy file data, named name in
// messages (YAML, or JSON when name ends in ".json"), as far as it can
// without the application: key function and classifier names, the tiers
// a classifier needs and the fallback store are not checked. It returns
// the file's policies in file order, or the problems found, as [Load]
// does: a CI step or a command-line tool checks a file with it.
func Parse(name string, data []byte) ([]Policy, error) {
	p := &problems{file: name}
	sp := parse(p, name, data)
	if err := p.err(); err != nil {
		return nil, err
	}
	out := make([]Policy, len(sp.policies))
	for i, ps := range sp.policies {
		out[i] = ps.public(ps.mode, false)
	}
	return out, nil
}

// public returns the exported form of ps, running in mode m.
func (ps *policySpec) public(m Mode, overridden bool) Policy {
	p := Policy{Name: ps.name, Mode: m, Configured: ps.mode, Overridden: overridden, Share: ps.share, Cost: max(ps.cost, 1), Config: ps.marshal()}
	q := ps
	if ps.owner != nil {
		q = ps.owner
	}
	p.Key, p.Classifier, p.Overrides, p.Soft = q.key, q.classifier, q.overrides, q.soft()
	if q.key != "" {
		p.Limits = storeLimits(q.limits)
	}
	if len(q.tiers) > 0 {
		p.Tiers = make([]limiter.Tier, len(q.tiers))
		for i, t := range q.tiers {
			p.Tiers[i] = t.middlewareTier()
		}
	}
	return p
}

// middlewareTier returns the tier as middleware.NewTiered takes it.
func (t *tierSpec) middlewareTier() limiter.Tier {
	mt := limiter.Tier{Name: t.name, Unlimited: t.unlimited, Suspended: t.suspended}
	if t.limits != nil {
		mt.Limits = storeLimits(t.limits)
	}
	return mt
}

package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

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
}

// key returns the store key of identity, as the middleware builds it:
// the policy name, "/" and the tier for a policy with tiers, ":" and the
// identity.
func (t *target) key(identity string) string {
	ns := t.owner
	if t.tier != "" {
		ns += "/" + t.tier
	}
	return ns + ":" + identity
}

// configJSON is the part of a policy's configuration (in the file's
// schema, as policy.PolicyStatus.Config holds it) that locates its state.
type configJSON struct {
	Share     string              `json:"share"`
	Limits    []limitJSON         `json:"limits"`
	Tiers     map[string]tierJSON `json:"tiers"`
	Overrides bool                `json:"overrides"`
}

type tierJSON struct {
	Limits    []limitJSON `json:"limits"`
	Unlimited bool        `json:"unlimited"`
	Suspended bool        `json:"suspended"`
}

type limitJSON struct {
	Name      string `json:"name"`
	Algorithm string `json:"algorithm"`
	Rate      int64  `json:"rate"`
	Threshold int64  `json:"threshold"`
	Period    string `json:"period"`
	Burst     int64  `json:"burst"`
	Block     string `json:"block"`
	BlockMax  string `json:"block_max"`
}

// resolve finds where the clients of p in tier keep their state. The
// target's owner and tiered are set even when it returns an error.
func (a *api) resolve(p policy.PolicyStatus, tier string) (target, error) {
	var c configJSON
	if err := json.Unmarshal(p.Config, &c); err != nil {
		return target{owner: p.Name}, fmt.Errorf("policy %q: unreadable configuration", p.Name)
	}
	t := target{owner: p.Name}
	if c.Share != "" {
		t.owner = c.Share
		c = configJSON{}
		for _, o := range a.set.Status().Policies {
			if o.Name == t.owner {
				if err := json.Unmarshal(o.Config, &c); err != nil {
					return t, fmt.Errorf("policy %q: unreadable configuration", o.Name)
				}
			}
		}
	}
	t.tiered = len(c.Tiers) > 0
	t.overrides = c.Overrides
	if !t.tiered {
		if tier != "" {
			return t, fmt.Errorf("policy %q has no tiers; leave tier out", p.Name)
		}
		limits, err := toLimits(c.Limits)
		t.limits = limits
		return t, err
	}
	ts, ok := c.Tiers[tier]
	if !ok {
		names := make([]string, 0, len(c.Tiers))
		for n := range c.Tiers {
			names = append(names, strconv.Quote(n))
		}
		sort.Strings(names)
		return t, fmt.Errorf("policy %q has tiers: tier must be one of %s", p.Name, strings.Join(names, ", "))
	}
	t.tier, t.unlimited, t.suspended = tier, ts.Unlimited, ts.Suspended
	if t.unlimited || t.suspended {
		return t, nil // nothing stored
	}
	limits, err := toLimits(ts.Limits)
	t.limits = limits
	return t, err
}

// toLimits converts limits written in the file's schema.
func toLimits(ls []limitJSON) ([]store.Limit, error) {
	if len(ls) == 0 {
		return nil, errors.New("the policy has no limits")
	}
	out := make([]store.Limit, 0, len(ls))
	for i, l := range ls {
		lim, err := l.limit()
		if err != nil {
			return nil, fmt.Errorf("limits[%d]: %w", i, err)
		}
		out = append(out, lim)
	}
	return out, nil
}

// limit converts one limit; a threshold N is rate N-1.
func (l limitJSON) limit() (store.Limit, error) {
	alg := store.GCRA
	if l.Algorithm != "" {
		var err error
		if alg, err = store.ParseAlgorithm(l.Algorithm); err != nil {
			return store.Limit{}, err
		}
	}
	lim := store.Limit{Name: l.Name, Algorithm: alg, Rate: l.Rate, Burst: l.Burst}
	if l.Threshold > 0 {
		lim.Rate = l.Threshold - 1
	}
	for _, d := range []struct {
		s   string
		dst *time.Duration
	}{{l.Period, &lim.Period}, {l.Block, &lim.Block}, {l.BlockMax, &lim.BlockMax}} {
		if d.s == "" {
			continue
		}
		v, err := time.ParseDuration(d.s)
		if err != nil {
			return store.Limit{}, err
		}
		*d.dst = v
	}
	return lim, lim.Validate()
}

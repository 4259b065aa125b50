package policy

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/suppressed"
)

// entry is one policy of a running configuration.
type entry struct {
	spec *policySpec
	mode Mode // effective: the file's mode or an override
	// lim serves the policy's requests: the limiter of its quota in the
	// effective mode (the enforcing one when "off"), at the policy's cost.
	lim *middleware.Limiter
}

// baseKey names a built limiter of a quota: the policy that owns it and
// whether it runs in dry-run mode. Policies that share a quota in the same
// mode share one limiter, so a request passing several of them is charged
// once and one circuit breaker guards them.
type baseKey struct {
	owner *policySpec
	dry   bool
}

// builder turns specs into limiters for one store and set of options.
type builder struct {
	st    store.Store
	opts  *Options
	bases map[baseKey]*middleware.Limiter
}

// checkApp checks what the file names of the application: key functions,
// classifiers and the fallback store.
func checkApp(p *problems, sp *spec, opts *Options) {
	for _, ps := range sp.policies {
		switch {
		case ps.key != "":
			if kf, ok := opts.Keys[ps.key]; !ok || kf == nil {
				p.add(ps.at["key"], join(ps.path, "key"), fmt.Sprintf("unknown key function %q (the application registers: %s)", ps.key, registered(opts.Keys)))
			}
		case ps.classifier != "":
			c, ok := opts.Classifiers[ps.classifier]
			if !ok || c == nil {
				p.add(ps.at["classifier"], join(ps.path, "classifier"), fmt.Sprintf("unknown classifier %q (the application registers: %s)", ps.classifier, registered(opts.Classifiers)))
				continue
			}
			for _, name := range authTiers(c) {
				if !slices.ContainsFunc(ps.tiers, func(t tierSpec) bool { return t.name == name }) {
					p.add(ps.at["tiers"], join(ps.path, "tiers"), fmt.Sprintf("no tier %q, which classifier %q can give a request", name, ps.classifier))
				}
			}
		}
		if ps.fallback && opts.Fallback == nil {
			p.add(ps.at["local_fallback"], join(ps.path, "local_fallback"), "needs a fallback store, which the application did not supply (Options.Fallback)")
		}
	}
}

func registered[V any](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}

// authTiers lists the tiers an AuthOptions classifier can return, as
// middleware.NewTiered checks them; nil for other classifiers.
func authTiers(c middleware.Classifier) []string {
	var a *middleware.AuthOptions
	switch v := c.(type) {
	case middleware.AuthOptions:
		a = &v
	case *middleware.AuthOptions:
		a = v
	}
	if a == nil {
		return nil
	}
	names := []string{"anonymous", "authenticated"}
	if a.Trusted != nil {
		names = append(names, "trusted")
	}
	if a.Suspended != nil {
		names = append(names, "suspended")
	}
	return names
}

// entry builds the limiter that serves ps in mode m.
func (b *builder) entry(ps *policySpec, m Mode) (*entry, error) {
	owner := ps
	if ps.owner != nil {
		owner = ps.owner
	}
	k := baseKey{owner: owner, dry: m == modeDryRun}
	base, ok := b.bases[k]
	if !ok {
		var err error
		if base, err = b.base(owner, k.dry); err != nil {
			return nil, err
		}
		b.bases[k] = base
	}
	lim := base
	if ps.cost > 1 {
		var err error
		if lim, err = base.WithCost(ps.cost); err != nil {
			return nil, err
		}
	}
	return &entry{spec: ps, mode: m, lim: lim}, nil
}

// base builds the limiter of the quota ps owns. Settings the file leaves
// out keep the middleware's defaults, or what Options.Middleware chose.
func (b *builder) base(ps *policySpec, dry bool) (*middleware.Limiter, error) {
	o := b.opts.Middleware
	if o.Logger == nil {
		o.Logger = b.opts.logger()
	}
	o.Name = ps.name
	o.Exempt = slices.Clone(o.Exempt)
	if ps.headers != nil {
		o.Headers = ps.headers.w
	}
	st := b.st
	if soft := ps.soft(); soft != nil {
		var err error
		if st, err = suppressed.New(st, suppressed.Options{Soft: soft}); err != nil {
			return nil, fmt.Errorf("policy %q: %w", ps.name, err)
		}
		o.Headers.Suppression = true
	}
	b.failureSettings(ps, &o)
	o.ProblemDetails = o.ProblemDetails || ps.problem
	o.CountDenied = o.CountDenied || ps.countDenied
	o.Overrides = o.Overrides || ps.overrides
	if ps.maxWait > 0 {
		o.MaxWait = ps.maxWait
	}
	exempt, err := b.exemptions(ps.exempt)
	if err != nil {
		return nil, err
	}
	o.Exempt = append(o.Exempt, exempt...)
	o.DryRun = dry
	if c := ps.inFlight; c != nil {
		o.InFlight = limiter.InFlight{Max: c.max, Lease: c.lease}
		o.InFlightStatus = c.status
	}
	if ps.key != "" {
		if len(ps.limits) == 0 {
			o.Limits = nil
			return middleware.New(st, b.opts.Keys[ps.key], store.Limit{}, o) // in_flight alone
		}
		limits := storeLimits(ps.limits)
		o.Limits = limits[1:]
		return middleware.New(st, b.opts.Keys[ps.key], limits[0], o)
	}
	o.Limits = nil
	tiers := make([]limiter.Tier, len(ps.tiers))
	for i := range ps.tiers {
		tiers[i] = ps.tiers[i].middlewareTier()
	}
	return middleware.NewTiered(st, b.opts.Classifiers[ps.classifier], tiers, o)
}

// failureSettings applies what ps says of store failures to o: the
// failure mode, the fallback store and the breaker.
func (b *builder) failureSettings(ps *policySpec, o *middleware.Options) {
	if ps.has("failure") {
		o.FailureMode = ps.failure
	}
	if ps.fallback {
		o.Fallback = b.opts.Fallback
	}
	if ps.breaker != nil {
		o.BreakerThreshold, o.BreakerCooldown = ps.breaker.threshold, ps.breaker.cooldown
		if o.BreakerThreshold == 0 {
			o.BreakerThreshold = -1 // the file's 0 turns the breaker off
		}
	}
}

// exemptions builds the exemption functions of a policy's exempt block
// (nil when it has none).
func (b *builder) exemptions(e *exemptSpec) ([]func(*http.Request) bool, error) {
	if e == nil {
		return nil, nil
	}
	var out []func(*http.Request) bool
	if len(e.paths) > 0 {
		out = append(out, middleware.ExemptPaths(e.paths...))
	}
	if len(e.cidrs) > 0 {
		f, err := middleware.ExemptCIDRs(b.opts.ClientIP, e.cidrs...)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	if len(e.methods) > 0 {
		methods := slices.Clone(e.methods)
		out = append(out, func(r *http.Request) bool { return slices.Contains(methods, r.Method) })
	}
	return out, nil
}

func storeLimits(specs []limitSpec) []store.Limit {
	out := make([]store.Limit, len(specs))
	for i, s := range specs {
		out[i] = s.limit
	}
	return out
}

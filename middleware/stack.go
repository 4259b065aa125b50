package middleware

import (
	"fmt"
	"net/http"

	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/store"
)

// NewStack returns middleware that decides each request under the
// policies of several limiters at once, each with its own identity (a
// per-client limit and a route-wide one, say), as one decision: the
// request is admitted only if every policy admits it, and a refusal
// charges none of them. Chaining the limiters' Handlers instead decides
// them one after the other: a request the second refuses has already been
// charged by the first, and the headers describe whichever ran last. The
// decision is a [limiter.Stack]'s, whose documentation states how the
// deciding (most restrictive) policy is chosen and what the limiters must
// share. The middleware's shape is that of [Limiter.Handler]; it panics if
// given a nil handler, at setup, never at request time.
//
// The headers, the 429 body (its policy, limit and reset), Retry-After,
// [DecisionFrom] and the observer's event describe the deciding policy.
// Each limiter keeps its key function or classifier, tiers, limits, cost
// ([Limiter.WithCost]), exemptions, headers, 429 body or denied handler,
// observer and refusal hook. A limiter whose exemption matches, or whose
// tier is unlimited, takes no part in the request's decision; a suspended
// tier answers 403 as alone. A limiter nested inside another of the same
// quota is charged only the rest of its cost, as alone. The middleware is
// safe for concurrent use.
//
// The limiters are decided in the given order (the order breaks ties, and
// on a Redis Cluster is the order of the steps). NewStack returns an error
// when there are no limiters or more than [store.MaxParts], one is nil,
// has no key function or de-duplicates ([Options].Dedup: an id belongs to
// one identity), and for the reasons [limiter.NewStack] gives: two share a
// name or a quota ([Limiter.WithCost] variants of one limiter), their
// stores, fallback stores, failure modes or dry-run settings differ, the
// store does not implement [store.MultiStore], or one applies overrides or
// uses the suppressed strategy.
func NewStack(limiters ...*Limiter) (func(http.Handler) http.Handler, error) {
	if len(limiters) == 0 || len(limiters) > store.MaxParts {
		return nil, fmt.Errorf("ratekeeper: middleware: a stack takes 1 to %d limiters, got %d", store.MaxParts, len(limiters))
	}
	cores := make([]*limiter.Limiter, len(limiters))
	for i, l := range limiters {
		switch {
		case l == nil:
			return nil, fmt.Errorf("ratekeeper: middleware: stack: limiter %d is nil", i)
		case l.h.classify == nil:
			return nil, fmt.Errorf("ratekeeper: middleware: stack: limiter %d (%q) has no key function", i, l.h.name)
		case l.h.dedup != nil:
			return nil, fmt.Errorf("ratekeeper: middleware: stack: limiter %d (%q) de-duplicates (Options.Dedup), which a stack cannot: an id belongs to one identity", i, l.h.name)
		}
		cores[i] = l.Limiter
	}
	for _, l := range limiters {
		// A request may pass the quota here and in the limiter's own
		// Handler: both then attach what they charged.
		l.h.uses.Add(1)
	}
	core, err := limiter.NewStack(cores...)
	if err != nil {
		return nil, err
	}
	s := &stack{ls: limiters, core: core}
	return func(next http.Handler) http.Handler {
		if next == nil {
			panic("ratekeeper: middleware: stack called with nil next")
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.serve(w, r, next)
		})
	}, nil
}

// stack is the state of a NewStack middleware.
type stack struct {
	ls   []*Limiter
	core *limiter.Stack
}

// serve is a request's path through a stack: resolve every limiter,
// decide them together, finish with the deciding one.
func (s *stack) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	var buf [4]limiter.Request
	reqs := buf[:0]
	// The decisions' context, which carries r to log lines and limits
	// functions. It lends no memory for the store keys: the memory store
	// would copy such keys of a stack, and the decisions that go on with
	// the request may hold them.
	ctx := &requestContext{r}
	prev := stateFrom(r.Context())
	for i, l := range s.ls {
		if l.h.exempted(r) {
			reqs = append(reqs, limiter.Request{Exempt: true})
			continue
		}
		tier, id, err := l.h.classify(r)
		if err == nil && id == "" {
			err = errEmptyKey
		}
		if err != nil {
			for j, req := range reqs[:i] {
				if req.Exempt {
					_, _ = s.ls[j].Decide(ctx, req)
				}
			}
			l.rejectIdentity(ctx, w, err)
			return
		}
		reqs = append(reqs, limiter.Request{Tier: tier, Identity: id, Cost: l.cost, Charged: prev.chargedFor(l.Limiter, tier, id)})
	}
	ds, k, err := s.core.Decide(ctx, reqs)
	if k < 0 {
		next.ServeHTTP(w, r)
		return
	}
	d := ds[k]
	if d.Outcome == limiter.OutcomeAllowed || d.Outcome == limiter.OutcomeDryRun {
		// One state per policy, chained, the deciding one innermost so
		// that DecisionFrom returns its decision.
		for i := range ds {
			if i == k || ds[i].Limits == nil {
				continue
			}
			st := newState(r, s.ls[i].Limiter)
			st.identity, st.dec, st.charged = reqs[i].Identity, ds[i], reqs[i].Charged
			if d.Outcome == limiter.OutcomeAllowed {
				st.charged = ds[i].Cost
			}
			r = &st.req
		}
	}
	s.ls[k].finish(w, r, next, nil, &reqs[k], decided{d, err})
}

package middleware

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// Stack decides a request under the policies of several limiters at once,
// each with its own identity (a per-client limit and a route-wide one,
// say), as one decision: the request is admitted only if every policy
// admits it, and a refusal charges none of them. Chaining the limiters'
// Handlers instead decides them one after the other: a request the second
// refuses has already been charged by the first, and the headers describe
// whichever ran last.
//
// Build it with [NewStack]; wrap handlers with [Stack.Handler]. A Stack is
// safe for concurrent use.
//
// # Decision and headers
//
// The store decides the parts together ([store.MultiStore]): in one atomic
// step on the memory store and on a single Redis node; on a Redis Cluster,
// one step per hash slot, refunding earlier steps when a later one refuses
// (see the Redis store's TakeMulti for that guarantee). The headers, the
// 429 body (its policy, limit and reset), Retry-After, [DecisionFrom] and
// the observer's event describe the most restrictive policy: for an
// admission the one with the fewest units remaining, counted in units, not
// as a share of its limit (10 left of 100 is more restrictive than 11 left
// of 20); for a refusal the refusing policy with the longest retry time,
// so that a retry at Retry-After passes every policy that refused. Ties go
// to the earlier limiter. The event is reported by that policy's limiter
// alone: one event per request, under the deciding policy's name.
//
// # What each limiter keeps
//
// Each limiter keeps its key function or classifier, tiers, limits (a
// limits function included), cost ([Limiter.WithCost]), exemptions,
// headers, 429 body or denied handler, observer and refusal hook. A
// limiter whose exemption matches, or whose tier is unlimited, takes no
// part in the request's decision; a suspended tier answers 403 as alone.
// A limiter nested inside another of the same quota is charged only the
// rest of its cost, as alone. Blocks work per policy: a refusing policy
// that blocks starts its block, which refuses the later requests of its
// identity. [WithCountDenied] makes a policy count every attempt the stack
// refuses, whichever policy refused it. When one policy alone remains for
// a request, the stack decides it exactly as that limiter would.
//
// Each policy keeps its own counters: those its limiter's Handler,
// [Limiter.Allow] and [Limiter.Reset] use, so a stack and its limiters
// used alone elsewhere count against the same quota.
//
// The limiters must share one store (which implements
// [store.MultiStore]: the memory store and the Redis store do, the hybrid
// store does not), one fallback store ([WithLocalFallback]) or none,
// one failure mode and one dry-run setting: those decide the stack as a
// whole. The circuit breaker of the first limiter guards the stack's
// store calls. [WithDedup] cannot be stacked: a de-duplication id belongs
// to one identity; nor can [WithOverrides]. A store of package
// store/suppressed is no MultiStore: load shedding is not stacked.
type Stack struct {
	ls    []*Limiter
	ms    store.MultiStore
	local store.MultiStore // nil without a fallback
}

// NewStack returns a Stack of limiters, decided in the given order (the
// order breaks ties, and on a Redis Cluster is the order of the steps).
// It returns an error when there are no limiters or more than
// [store.MaxParts], one is nil or has no key function, two share a name
// (their keys would collide) or a quota ([Limiter.WithCost] variants of
// one limiter), their stores, fallback stores, failure modes or dry-run
// settings differ, the store or fallback store does not implement
// [store.MultiStore], or one uses [WithDedup], [WithOverrides] or the
// suppressed strategy.
func NewStack(limiters ...*Limiter) (*Stack, error) {
	if len(limiters) == 0 || len(limiters) > store.MaxParts {
		return nil, fmt.Errorf("ratekeeper: middleware: a stack takes 1 to %d limiters, got %d", store.MaxParts, len(limiters))
	}
	for i, l := range limiters {
		if l == nil {
			return nil, fmt.Errorf("ratekeeper: middleware: stack: limiter %d is nil", i)
		}
	}
	first := limiters[0].quota
	ms, ok := first.store.(store.MultiStore)
	if !ok {
		return nil, fmt.Errorf("ratekeeper: middleware: stack: store %s cannot decide several keys at once (no TakeMulti method)", first.storeName)
	}
	st := &Stack{ls: limiters, ms: ms}
	if first.local != nil {
		if st.local, ok = first.local.(store.MultiStore); !ok {
			return nil, errors.New("ratekeeper: middleware: stack: the fallback store cannot decide several keys at once (no TakeMulti method)")
		}
	}
	for i, l := range limiters {
		q := l.quota
		switch {
		case q.classify == nil:
			return nil, fmt.Errorf("ratekeeper: middleware: stack: limiter %d (%q) has no key function", i, q.name)
		case q.dedup != nil:
			return nil, fmt.Errorf("ratekeeper: middleware: stack: limiter %d (%q) de-duplicates (WithDedup), which a stack cannot: an id belongs to one identity", i, q.name)
		case q.overrides:
			return nil, fmt.Errorf("ratekeeper: middleware: stack: limiter %d (%q) applies per-client overrides (WithOverrides), which a stack does not", i, q.name)
		case !sameStore(q.store, first.store):
			return nil, fmt.Errorf("ratekeeper: middleware: stack: limiter %d (%q) uses another store than limiter 0 (%q)", i, q.name, first.name)
		case !sameStore(q.local, first.local):
			return nil, fmt.Errorf("ratekeeper: middleware: stack: limiter %d (%q) uses another fallback store than limiter 0 (%q)", i, q.name, first.name)
		case q.failure != first.failure:
			return nil, fmt.Errorf("ratekeeper: middleware: stack: limiter %d (%q) fails %s, limiter 0 (%q) %s", i, q.name, q.failure, first.name, first.failure)
		case q.dryRun != first.dryRun:
			return nil, fmt.Errorf("ratekeeper: middleware: stack: limiter %d (%q) and limiter 0 (%q) disagree on dry-run", i, q.name, first.name)
		}
		for j, o := range limiters[:i] {
			if o.quota == q {
				return nil, fmt.Errorf("ratekeeper: middleware: stack: limiters %d and %d share one quota (%q)", j, i, q.name)
			}
			if o.name == q.name {
				return nil, fmt.Errorf("ratekeeper: middleware: stack: limiters %d and %d share the name %q; name them apart (WithName)", j, i, q.name)
			}
		}
	}
	return st, nil
}

// sameStore reports whether a and b are the same store (both nil
// included), without the panic of comparing values of a type that is not
// comparable.
func sameStore(a, b store.Store) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	ta := reflect.TypeOf(a)
	return ta == reflect.TypeOf(b) && ta.Comparable() && a == b
}

// Handler wraps next so that every request is decided by the stack before
// it reaches next. Its shape fits chi's r.Use and r.With and
// http.ServeMux. Handler panics if next is nil; that happens at setup,
// never at request time.
func (s *Stack) Handler(next http.Handler) http.Handler {
	if next == nil {
		panic("ratekeeper: middleware: Stack.Handler called with nil next")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.serve(w, r, next)
	})
}

// stackPart is one limiter's share of a request.
type stackPart struct {
	l    *Limiter
	res  resolved
	need int64
}

// serve is a request's path through a stack: resolve every limiter,
// decide them together, finish with the deciding one.
func (s *Stack) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	var buf [4]stackPart
	parts, answered := s.resolve(w, r, next, buf[:0])
	if answered {
		return
	}
	switch len(parts) {
	case 0:
		next.ServeHTTP(w, r)
		return
	case 1:
		// One policy left: decided as its limiter alone decides.
		p := &parts[0]
		q := p.l.quota
		sd, call, err := q.decide(r, &p.res, p.need)
		if err != nil {
			q.fail(w, r, next, &p.res, err, call)
			return
		}
		q.finish(w, r, next, &p.res, sd, call)
		return
	}
	reqs := make([]store.Request, len(parts))
	for i := range parts {
		p := &parts[i]
		q := p.l.quota
		reqs[i] = store.Request{Key: p.res.key, Limits: p.res.set.limits, Cost: p.need, CountDenied: q.countDenied}
		if err := reqs[i].Validate(); err != nil {
			q.fail(w, r, next, &p.res, err, storeCall{})
			return
		}
	}
	for i := range parts {
		parts[i].res.now = parts[i].l.now()
	}
	md, call, err := s.call(r.Context(), reqs, parts[0].res.now)
	if err != nil {
		p := &parts[0]
		p.l.fail(w, r, next, &p.res, err, call)
		return
	}
	s.finish(w, r, next, parts, &md, call)
}

// resolve appends to parts the share of r of every limiter that takes
// part in its decision: not exempt, not unlimited, and not already charged
// in full by an enclosing limiter of its quota. It reports whether a
// limiter answered the request itself (a rejected identity, a suspended
// tier): the request then ends there.
func (s *Stack) resolve(w http.ResponseWriter, r *http.Request, next http.Handler, parts []stackPart) ([]stackPart, bool) {
	for _, l := range s.ls {
		q := l.quota
		if q.exempted(r) {
			if q.watching(r.Context()) {
				q.report(r, &Event{Decision: Decision{Policy: q.name}, Outcome: OutcomeExempt}, "")
			}
			continue
		}
		p := stackPart{l: l}
		if err := l.resolve(r, &p.res); err != nil {
			q.fail(w, r, next, &p.res, err, storeCall{})
			return parts, true
		}
		switch t := p.res.t; {
		case t.suspended:
			if q.watching(r.Context()) {
				q.report(r, &Event{Decision: Decision{Policy: t.policy, Tier: t.name}, Outcome: OutcomeSuspended}, p.res.identity)
			}
			writeJSON(w, http.StatusForbidden, contentTypeJSON, bodySuspended)
			return parts, true
		case t.unlimited:
			continue
		}
		if p.need = p.res.cost - p.res.charged; p.need > 0 {
			parts = append(parts, p)
		}
	}
	return parts, false
}

// exempted reports whether one of the limiter's exemptions matches r.
func (q *quota) exempted(r *http.Request) bool {
	for _, ex := range q.exempt {
		if ex(r) {
			return true
		}
	}
	return false
}

// finish writes the deciding policy's headers and answer. When the request
// goes on, every policy that admitted it is recorded in its context, so
// that a limiter of the same quota nested inside charges only the rest.
func (s *Stack) finish(w http.ResponseWriter, r *http.Request, next http.Handler, parts []stackPart, md *store.MultiDecision, call storeCall) {
	k := md.Part
	for i := range parts {
		p := &parts[i]
		q := p.l.quota
		d := md.Parts[i]
		if d.Repaired {
			q.repaired(r.Context(), &d)
		}
		if i != k && d.BlockStarted {
			q.blockStarted(r, &p.res, &Decision{Decision: d, Policy: p.res.t.policy, Tier: p.res.t.name})
		}
	}
	dk := &parts[k]
	if md.Allowed || dk.l.dryRun {
		// One state per policy, chained, the deciding one innermost so
		// that DecisionFrom returns its decision.
		var prev *reqState
		for i := range parts {
			p := &parts[i]
			if i == k {
				continue
			}
			charged := p.res.charged
			if md.Allowed {
				charged = p.res.cost
			}
			if prev != nil {
				p.res.outer = prev
			}
			d := Decision{Decision: md.Parts[i], Policy: p.res.t.policy, Tier: p.res.t.name, Reset: p.res.now.Add(resetAfter(&md.Parts[i])), t: p.res.t, set: p.res.set}
			prev = newState(r, p.l.quota, &p.res, d, charged)
			r = &prev.req
		}
		if prev != nil {
			dk.res.outer = prev
		}
	}
	dk.l.quota.finish(w, r, next, &dk.res, md.Decision, call)
}

// call decides the stack in the store, through the first limiter's
// circuit breaker, then in the fallback store if the store failed. Its
// errors are classified as the single-limiter path classifies them.
func (s *Stack) call(ctx context.Context, reqs []store.Request, now time.Time) (store.MultiDecision, storeCall, error) {
	q := s.ls[0].quota
	var c storeCall
	node := q.nodeFor(ctx, reqs[0])
	b := q.breaker.of(node)
	ok, probe := b.allow(now)
	var md store.MultiDecision
	err := error(&storeFailure{err: errBreakerOpen, skipped: true})
	if ok {
		var start time.Time
		if q.watching(ctx) {
			start = time.Now()
		}
		md, err = s.ms.TakeMulti(ctx, reqs)
		if !start.IsZero() {
			c.latency = time.Since(start)
		}
		err = q.settle(ctx, b, probe, node, err)
	} else {
		c.skipped = true
	}
	if err == nil {
		err = wellFormed(&md, len(reqs))
	}
	if err == nil || s.local == nil || !isStoreFailure(err) {
		return md, c, err
	}
	lmd, lerr := s.local.TakeMulti(ctx, reqs)
	if lerr == nil {
		lerr = wellFormed(&lmd, len(reqs))
	}
	if lerr != nil {
		return md, c, err
	}
	c.fallback, c.cause = true, err
	return lmd, c, nil
}

// wellFormed checks that a store's stacked decision has one decision per
// part and names one of them, so that no request can panic on a store
// that breaks the contract; a store failure otherwise.
func wellFormed(md *store.MultiDecision, n int) error {
	if len(md.Parts) != n || md.Part < 0 || md.Part >= n {
		return &storeFailure{err: &store.BackendError{Op: "take", Kind: "other",
			Err: fmt.Errorf("stacked decision of %d parts names part %d of %d", n, md.Part, len(md.Parts))}}
	}
	return nil
}

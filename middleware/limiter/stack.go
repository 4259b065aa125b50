package limiter

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// Stack decides a request under the policies of several limiters at once,
// each with its own identity (a per-client limit and a route-wide one,
// say), as one decision: the request is admitted only if every policy
// admits it, and a refusal charges none of them. Deciding with the
// limiters one after the other instead charges the first for requests the
// second refuses.
//
// The store decides the parts together ([store.MultiStore]): in one atomic
// step on the memory store and on a single Redis node; on a Redis Cluster,
// one step per hash slot, refunding earlier steps when a later one refuses
// (see the Redis store's TakeMulti for that guarantee). The deciding
// policy is the most restrictive: for an admission the one with the fewest
// units remaining, counted in units, not as a share of its limit (10 left
// of 100 is more restrictive than 11 left of 20); for a refusal the
// refusing policy with the longest retry time, so that a retry after its
// RetryAfter passes every policy that refused. Ties go to the earlier
// limiter. The event is reported by the deciding policy's limiter alone:
// one event per request, under the deciding policy's name.
//
// Each limiter keeps its tiers, limits (a limits function included),
// observer and refusal hook, and its own counters: those [Limiter.Decide]
// and [Limiter.Reset] use. An exempt request ([Request].Exempt) or one of
// an unlimited tier takes no part; a suspended tier refuses the request
// as alone; a request already charged in full by an enclosing decision
// ([Request].Charged) takes no part either. Blocks work per policy:
// a refusing policy that blocks starts its block. Options.CountDenied
// makes a policy count every attempt the stack refuses, whichever policy
// refused it, and the stack's RetryAfter counts those attempts (as a
// limiter's does). When one policy alone takes part, the stack decides it
// exactly as its limiter would.
//
// The limiters must share one store (which implements [store.MultiStore]:
// the memory store and the Redis store do, the hybrid store does not), one
// fallback store or none, one failure mode and one dry-run setting: those
// decide the stack as a whole. The circuit breaker of the first limiter
// guards the stack's store calls. De-duplication ids and overrides cannot
// be stacked, nor can a store of package store/suppressed, which is no
// MultiStore. A Stack is safe for concurrent use.
type Stack struct {
	ls    []*Limiter
	ms    store.MultiStore
	local store.MultiStore // nil without a fallback
}

// NewStack returns a Stack of limiters, decided in the given order (the
// order breaks ties, and on a Redis Cluster is the order of the steps).
// It returns an error when there are no limiters or more than
// [store.MaxParts], one is nil, two are the same limiter or share a name
// (their keys would collide), their stores, fallback stores, failure modes
// or dry-run settings differ, the store or fallback store does not
// implement [store.MultiStore], or one applies overrides or uses the
// suppressed strategy.
func NewStack(limiters ...*Limiter) (*Stack, error) {
	if len(limiters) == 0 || len(limiters) > store.MaxParts {
		return nil, fmt.Errorf("ratekeeper: limiter: a stack takes 1 to %d limiters, got %d", store.MaxParts, len(limiters))
	}
	for i, l := range limiters {
		if l == nil {
			return nil, fmt.Errorf("ratekeeper: limiter: stack: limiter %d is nil", i)
		}
	}
	first := limiters[0]
	ms, ok := first.store.(store.MultiStore)
	if !ok {
		return nil, fmt.Errorf("ratekeeper: limiter: stack: store %s cannot decide several keys at once (no TakeMulti method)", first.storeName)
	}
	st := &Stack{ls: limiters, ms: ms}
	if first.local != nil {
		if st.local, ok = first.local.(store.MultiStore); !ok {
			return nil, errors.New("ratekeeper: limiter: stack: the fallback store cannot decide several keys at once (no TakeMulti method)")
		}
	}
	for i, l := range limiters {
		if err := first.stackable(i, l); err != nil {
			return nil, err
		}
		for j, o := range limiters[:i] {
			if o == l {
				return nil, fmt.Errorf("ratekeeper: limiter: stack: limiters %d and %d share one quota (%q)", j, i, l.name)
			}
			if o.name == l.name {
				return nil, fmt.Errorf("ratekeeper: limiter: stack: limiters %d and %d share the name %q; name them apart (Options.Name)", j, i, l.name)
			}
		}
	}
	return st, nil
}

// stackable checks that l, limiter i of a stack whose first limiter is
// first, can be stacked with it.
func (first *Limiter) stackable(i int, l *Limiter) error {
	switch {
	case l.overrides:
		return fmt.Errorf("ratekeeper: limiter: stack: limiter %d (%q) applies per-client overrides (Options.Overrides), which a stack does not", i, l.name)
	case l.slots != nil:
		return fmt.Errorf("ratekeeper: limiter: stack: limiter %d (%q) has an in-flight cap (Options.InFlight), which a stack does not take", i, l.name)
	case !sameStore(l.store, first.store):
		return fmt.Errorf("ratekeeper: limiter: stack: limiter %d (%q) uses another store than limiter 0 (%q)", i, l.name, first.name)
	case !sameStore(l.local, first.local):
		return fmt.Errorf("ratekeeper: limiter: stack: limiter %d (%q) uses another fallback store than limiter 0 (%q)", i, l.name, first.name)
	case l.failure != first.failure:
		return fmt.Errorf("ratekeeper: limiter: stack: limiter %d (%q) fails %s, limiter 0 (%q) %s", i, l.name, l.failure.name(), first.name, first.failure.name())
	case l.dryRun != first.dryRun:
		return fmt.Errorf("ratekeeper: limiter: stack: limiter %d (%q) and limiter 0 (%q) disagree on dry-run", i, l.name, first.name)
	}
	return nil
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

// stackPart is one limiter's share of a stacked request.
type stackPart struct {
	i   int // the limiter's index
	req *Request
	d   Decision
	set *limitSet
}

// Decide decides reqs[i] with limiter i of the stack, for every limiter,
// as one decision. It returns one Decision per limiter and the index of
// the deciding one, or -1 when no limiter took part (every request exempt,
// of an unlimited tier or already charged; the request may go on). The
// deciding Decision says whether the request may go on and why, and the
// error is that of [Limiter.Decide] for it; the others describe their own
// policies (their Outcome is empty when they took no part). A request
// without an identity, with a negative cost or with a de-duplication id
// is refused with an error before anything is decided.
func (s *Stack) Decide(ctx context.Context, reqs []Request) ([]Decision, int, error) {
	if len(reqs) != len(s.ls) {
		return nil, -1, fmt.Errorf("ratekeeper: limiter: stack of %d limiters given %d requests", len(s.ls), len(reqs))
	}
	ds := make([]Decision, len(reqs))
	var buf [4]stackPart
	parts := buf[:0]
	for i, l := range s.ls {
		req := &reqs[i]
		switch {
		case req.Exempt:
			ds[i], _ = l.Decide(ctx, *req)
			continue
		case req.Identity == "" || req.Cost < 0 || req.DedupID != "":
			return ds, i, fmt.Errorf("ratekeeper: limiter: stack: request %d: an identity, a cost >= 0 and no de-duplication id are required", i)
		}
		cost := max(req.Cost, 1)
		t, err := l.tier(req.Tier)
		if err != nil {
			ds[i], err = l.fail(ctx, req, Decision{Policy: l.name, Tier: req.Tier, Cost: cost}, err, storeCall{})
			return ds, i, err
		}
		d := Decision{Policy: t.policy, Tier: t.name, Cost: cost}
		switch {
		case t.suspended:
			d.Outcome = OutcomeSuspended
			l.reportUnlessPeek(ctx, req, &Event{Decision: d})
			ds[i] = d
			return ds, i, nil
		case t.unlimited:
			d.Allowed = true
			ds[i] = d
			continue
		case req.Charged >= cost:
			d.Allowed = true
			ds[i] = d
			continue
		}
		set, err := l.limitsFor(ctx, t, req.Limits)
		if err != nil {
			ds[i], err = l.fail(ctx, req, d, err, storeCall{})
			return ds, i, err
		}
		ds[i] = d
		parts = append(parts, stackPart{i: i, req: req, d: d, set: set})
	}
	switch len(parts) {
	case 0:
		return ds, -1, nil
	case 1:
		// One policy left: decided as its limiter alone decides.
		p := &parts[0]
		ds[p.i] = p.d
		err := s.ls[p.i].decide(ctx, p.req, &ds[p.i], p.set)
		return ds, p.i, err
	}
	return s.decideAll(ctx, ds, parts)
}

// decideAll decides parts together in the store.
func (s *Stack) decideAll(ctx context.Context, ds []Decision, parts []stackPart) ([]Decision, int, error) {
	sreqs := make([]store.Request, len(parts))
	var nowsBuf [store.MaxParts]time.Time
	nows := nowsBuf[:len(parts)]
	for n := range parts {
		nows[n] = s.ls[parts[n].i].now()
	}
	for n := range parts {
		p := &parts[n]
		l := s.ls[p.i]
		l.storeRequest(ctx, p.req, &p.d, p.set, p.d.Cost-max(p.req.Charged, 0), nows[n], &sreqs[n])
		if err := sreqs[n].Validate(); err != nil {
			ds[p.i], err = l.fail(ctx, p.req, p.d, err, storeCall{})
			return ds, p.i, err
		}
	}
	md, call, err := s.call(ctx, sreqs, nows[0])
	if err != nil {
		p := &parts[0]
		ds[p.i], err = s.ls[p.i].fail(ctx, p.req, p.d, err, call)
		return ds, p.i, err
	}
	if !md.Allowed {
		s.countedRefusals(ctx, sreqs, &md, call)
	}
	k := md.Part
	for n := range parts {
		p := &parts[n]
		l := s.ls[p.i]
		sd := md.Parts[n]
		if sd.Repaired {
			l.repaired(ctx, &sd)
		}
		if n == k {
			continue
		}
		d := &ds[p.i]
		*d = p.d
		d.Limits, d.Headers, d.Decision = p.set.limits, p.set.fields, sd
		// Described without reporting, as a peek is.
		l.finish(ctx, &Request{Peek: true}, d, nows[n], &storeCall{})
		if sd.BlockStarted {
			l.blockStarted(ctx, p.req.Identity, &ds[p.i])
		}
	}
	p := &parts[k]
	d := &ds[p.i]
	*d = p.d
	d.Limits, d.Headers, d.Decision = p.set.limits, p.set.fields, md.Decision
	s.ls[p.i].finish(ctx, p.req, d, nows[k], &call)
	return ds, p.i, nil
}

// countedRefusals is Limiter.countedRefusal for a refused stack: each part
// that recorded the attempt (CountDenied) is peeked after it, and a part
// whose wait with the attempt is longer than the stack's becomes the
// deciding one, with that wait, so that a client that stops and retries
// then passes every part. A failed peek leaves the part as it was.
func (s *Stack) countedRefusals(ctx context.Context, reqs []store.Request, md *store.MultiDecision, call storeCall) {
	var st store.Store = s.ms
	if call.fallback {
		st = s.local
	}
	for n, r := range reqs {
		if !r.CountDenied || !attemptMayOutlast(r.Limits) {
			continue
		}
		d := md.Parts[n]
		d.RetryAfter = max(d.RetryAfter, md.RetryAfter) // only a longer wait counts
		if p, longer := peekCounted(ctx, st, r, d); longer {
			md.Parts[n] = p
			md.Decision, md.Part = p, n
		}
	}
}

// call decides the stack in the store, through the first limiter's
// circuit breaker, then in the fallback store if the store failed. Its
// errors are classified as a single limiter's are.
func (s *Stack) call(ctx context.Context, reqs []store.Request, now time.Time) (store.MultiDecision, storeCall, error) {
	l := s.ls[0]
	var c storeCall
	node := l.nodeFor(ctx, reqs[0])
	b := l.breaker.of(node)
	ok, probe := b.allow(now)
	var md store.MultiDecision
	var err error
	if ok {
		var start time.Time
		if l.watching(ctx) {
			start = time.Now()
		}
		md, err = s.ms.TakeMulti(ctx, reqs)
		if !start.IsZero() {
			c.latency = time.Since(start)
		}
		err = l.settle(ctx, b, probe, node, err)
	} else {
		c.skipped = true
		err = &storeFailure{err: errBreakerOpen, skipped: true}
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

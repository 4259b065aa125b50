package middleware

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/store"
)

// Decision is a limiter's answer about one request: the store's decision
// and the policy and tier it was taken under. The wrapped handler finds it
// with [DecisionFrom]; [Limiter.Allow] returns it.
type Decision struct {
	store.Decision
	// Policy is the policy's name as 429 bodies and metrics show it: the
	// limiter's name, followed by "/" and the tier for a limiter with tiers
	// ("api/authenticated").
	Policy string
	// Tier is the request's tier; "" for a limiter built with [New].
	Tier string
	// Reset is when the deciding limit is back to full capacity, or, for a
	// refusal, when the request may be retried: the instant
	// X-RateLimit-Reset names. Zero when no limit applied (an unlimited
	// tier).
	Reset time.Time

	t        *tierState
	set      *limitSet
	exceeded int64 // a cost no limit of the policy can hold (AllowN), or 0
}

// DecisionFrom returns the decision of the innermost limiter that admitted
// the request ctx belongs to (with [WithDryRun], also one it would have
// refused), and whether there is one. Call it in a handler wrapped by
// [Limiter.Handler] with r.Context(), to log the decision, show it, or
// write headers of your own.
func DecisionFrom(ctx context.Context) (Decision, bool) {
	if s := stateFrom(ctx); s != nil {
		return s.dec, true
	}
	return Decision{}, false
}

// ctxKey finds a request's state in its context.
type ctxKey struct{}

// reqState is what a limiter attaches to a request it lets through. It is
// the request's new context and holds the shallow copy of the request that
// carries it, the decision, the storage for the header values and what was
// charged, all in one allocation.
type reqState struct {
	context.Context // the request's context before this limiter
	prev            *reqState
	q               *quota
	key             string
	charged         int64 // units of q charged for key on this request
	dec             Decision
	req             http.Request
	hb              headers.Buffer
}

// Value implements context.Context.
func (s *reqState) Value(k any) any {
	if _, ok := k.(ctxKey); ok {
		return s
	}
	return s.Context.Value(k)
}

func stateFrom(ctx context.Context) *reqState {
	s, _ := ctx.Value(ctxKey{}).(*reqState)
	return s
}

// chargedFor returns how many units of q this request was charged for key
// by the limiters it passed, 0 if none.
func (s *reqState) chargedFor(q *quota, key string) int64 {
	for ; s != nil; s = s.prev {
		if s.q == q && s.key == key {
			return s.charged
		}
	}
	return 0
}

// newState returns the state carrying d for the request, with the copy of r
// to pass on.
func newState(r *http.Request, q *quota, res *resolved, d Decision, charged int64) *reqState {
	st := &reqState{Context: r.Context(), prev: res.outer, q: q, key: res.key, charged: charged, dec: d}
	st.req = *r.WithContext(st)
	return st
}

// Allow takes the limiter's cost (1, or n for a limiter made with
// [Limiter.WithCost]) for identity, as the middleware would for a request
// with that identity, and returns the decision. Use it for identities known
// only inside a handler, such as the e-mail address of a sign-up request:
//
//	d, err := lim.Allow(r.Context(), email)
//	if err != nil {
//		// the store failed, and no fallback store decided
//	}
//	if !lim.Enforce(w, r, d) {
//		return // refused: the 429 is written
//	}
//
// identity is what a key function would return: the same identity shares
// the same counters with the middleware. For a limiter built with
// [NewTiered], the tier is the one the limiter's own Handler gave the
// request ctx belongs to, and Allow fails if it did not handle it. The
// limits are those the middleware applied to that request, else the
// tier's configured ones. Allow charges in full even when the request
// already passed the limiter's Handler. The breaker and the fallback store
// apply as in the middleware; a store failure is returned as an error
// wrapping [store.ErrStoreUnavailable], a cost above a limit's capacity as
// one wrapping [store.ErrCostExceedsCapacity].
func (l *Limiter) Allow(ctx context.Context, identity string) (Decision, error) {
	return l.decideFor(ctx, identity, l.cost, false)
}

// AllowN is [Limiter.Allow] for n units, for a cost known only inside the
// handler (the number of items of a bulk request). n must be at least 1.
// When n exceeds the capacity of a limit of the policy, no wait can admit
// the request: AllowN returns an error wrapping
// [store.ErrCostExceedsCapacity] together with a refusing Decision that
// [Limiter.Enforce] answers as the middleware does, with a 429 that says
// the cost can never fit and no Retry-After.
func (l *Limiter) AllowN(ctx context.Context, identity string, n int64) (Decision, error) {
	if n < 1 {
		return Decision{}, fmt.Errorf("ratekeeper: middleware: AllowN: n must be >= 1, got %d", n)
	}
	return l.decideFor(ctx, identity, n, false)
}

// Peek returns the decision [Limiter.Allow] would return now, recording
// nothing and reporting nothing to the observer.
func (l *Limiter) Peek(ctx context.Context, identity string) (Decision, error) {
	return l.decideFor(ctx, identity, l.cost, true)
}

var errNoTier = errors.New("ratekeeper: middleware: a limiter with tiers decides from a handler only for requests its own Handler classified")

func (l *Limiter) decideFor(ctx context.Context, identity string, n int64, peek bool) (Decision, error) {
	q := l.quota
	if identity == "" {
		return Decision{}, errEmptyKey
	}
	t, set, err := q.tierFor(ctx)
	if err != nil {
		return Decision{}, err
	}
	switch {
	case t.suspended:
		return Decision{Policy: t.policy, Tier: t.name, t: t}, nil
	case t.unlimited:
		return Decision{Decision: store.Decision{Allowed: true}, Policy: t.policy, Tier: t.name, t: t}, nil
	}
	req := store.Request{Key: StoreKey(q.name, t.name, identity), Limits: set.limits, Cost: n, CountDenied: q.countDenied, ApplyOverride: q.overrides}
	now := q.now()
	sd, call, err := q.call(ctx, req, now, peek)
	if errors.Is(err, store.ErrCostExceedsCapacity) {
		return Decision{Policy: t.policy, Tier: t.name, t: t, set: set, exceeded: n}, err
	}
	if err != nil {
		return Decision{}, err
	}
	d := Decision{Decision: sd, Policy: t.policy, Tier: t.name, Reset: now.Add(resetAfter(&sd)), t: t, set: set}
	if sd.Override == store.OverrideExempt {
		d.set, d.Reset = nil, time.Time{}
	}
	if peek {
		return d, nil
	}
	if call.fallback {
		q.warn(ctx, t.policy, call.cause)
	}
	if sd.BlockStarted {
		q.blockStartedCtx(ctx, nil, identity, &d)
	}
	if q.watching(ctx) {
		outcome := OutcomeAllowed
		switch {
		case sd.Override == store.OverrideExempt:
			outcome = OutcomeExempt
		case sd.Override == store.OverrideSuspend && !q.dryRun:
			outcome = OutcomeSuspended
		case sd.Blocked:
			outcome = OutcomeBlocked
		case !sd.Allowed && q.dryRun:
			outcome = OutcomeDryRun
		case !sd.Allowed:
			outcome = OutcomeLimited
		}
		q.reportCtx(ctx, nil, &Event{Decision: d, Outcome: outcome, Latency: call.latency, Fallback: call.fallback, Err: call.cause}, identity)
	}
	return d, nil
}

// tierFor returns the tier and limits for a decision asked from a handler:
// those the limiter's Handler applied to the request ctx belongs to, else,
// for a limiter without tiers, its one tier and configured limits.
func (q *quota) tierFor(ctx context.Context) (*tierState, *limitSet, error) {
	for s := stateFrom(ctx); s != nil; s = s.prev {
		if s.q == q {
			t, set := s.dec.t, s.dec.set
			if set == nil {
				set = t.limits
			}
			return t, set, nil
		}
	}
	if len(q.tiers) > 1 {
		return nil, nil, errNoTier
	}
	return q.tiers[0], q.tiers[0].limits, nil
}

// Enforce writes the rate-limit headers for d, a decision of this limiter
// from [Limiter.Allow] or [DecisionFrom], and, when d refuses the request,
// the refusal: the same 429 (or [WithDeniedHandler] response) the
// middleware writes, Retry-After included. It reports whether the handler
// may go on: d.Allowed, or true for a refusal in dry-run mode, which gets
// the headers without Retry-After. A decision for a suspended tier gets
// the middleware's 403, and one whose cost can never fit ([Limiter.AllowN])
// a 429 that says so, without Retry-After.
func (l *Limiter) Enforce(w http.ResponseWriter, r *http.Request, d Decision) bool {
	q := l.quota
	switch {
	case d.exceeded > 0 && d.t != nil && d.set != nil:
		writeJSON(w, http.StatusTooManyRequests, q.contentType(), costBody(d.exceeded, d.set.capacity, d.t.policyJSON, q.problem))
		return false
	case d.t != nil && d.t.suspended, d.Override == store.OverrideSuspend && !q.dryRun:
		writeJSON(w, http.StatusForbidden, contentTypeJSON, bodySuspended)
		return false
	case d.t == nil || d.set == nil:
		if d.Allowed {
			return true // no limit applied: no headers
		}
		d.t, d.set = q.tiers[0], q.tiers[0].limits
		if d.set == nil {
			writeJSON(w, http.StatusForbidden, contentTypeJSON, bodySuspended)
			return false
		}
	}
	refuse := !d.Allowed && !q.dryRun
	writeHeaders(w.Header(), &d, new(headers.Buffer), refuse)
	if !refuse {
		return true
	}
	q.deny(w, r, &d)
	return false
}

// deny writes the refusal of d: the denied handler's response, or 429 with
// the JSON body.
func (q *quota) deny(w http.ResponseWriter, r *http.Request, d *Decision) {
	if q.denied != nil {
		q.denied(w, r, *d)
		return
	}
	writeJSON(w, http.StatusTooManyRequests, q.contentType(), q.limitedBody(d))
}

// Reset forgets everything the store holds for identity under this policy
// and tier ("" for a limiter built with [New]): counters, an active block,
// repeat-offence strikes and remembered de-duplication ids. identity is
// the identity as the key function or classifier returns it: the address
// "203.0.113.7" from [keyfunc.RemoteIP], the subject "alice" from
// [keyfunc.JWTSubject]. Use it to unblock a client by hand. With
// [WithLimitsFunc], the state under every limit set the limiter has seen
// for the tier is forgotten.
//
// Reset returns an error wrapping [store.ErrNotFound] when nothing was
// stored for identity (a mistyped identity, the wrong tier, or a tier
// that stores nothing), and an error for an unknown tier, an empty
// identity or a store failure.
//
// [keyfunc.RemoteIP]: https://pkg.go.dev/github.com/ratekeeper/ratekeeper/keyfunc#RemoteIP
// [keyfunc.JWTSubject]: https://pkg.go.dev/github.com/ratekeeper/ratekeeper/keyfunc#JWTSubject
func (l *Limiter) Reset(ctx context.Context, tier, identity string) error {
	q := l.quota
	if identity == "" {
		return errEmptyKey
	}
	i, ok := q.tierIndex[tier]
	if !ok {
		return fmt.Errorf("ratekeeper: middleware: Reset: unknown tier %q", tier)
	}
	t := q.tiers[i]
	if t.limits == nil {
		return fmt.Errorf("ratekeeper: middleware: Reset: tier %q stores nothing: %w", tier, store.ErrNotFound)
	}
	var notFound error
	found := false
	for _, set := range t.sets() {
		err := q.store.Reset(ctx, store.Request{Key: StoreKey(q.name, t.name, identity), Limits: set.limits})
		switch {
		case err == nil:
			found = true
		case errors.Is(err, store.ErrNotFound):
			notFound = err
		default:
			return err
		}
	}
	if !found {
		return notFound
	}
	return nil
}

// SetOverride gives identity, under this policy and tier ("" for a
// limiter built with [New]), the override o until o.TTL has passed: a
// scaled (raised or cut) limit, an exemption or a suspension; see
// [store.Override]. It replaces any override the client has, and applies
// to every replica sharing the store from the client's next request. It
// returns an error when the limiter was built without [WithOverrides], for
// an unknown tier, an empty identity, an invalid override or a store
// failure.
func (l *Limiter) SetOverride(ctx context.Context, tier, identity string, o store.Override) error {
	key, ov, err := l.overrideKey(tier, identity)
	if err != nil {
		return err
	}
	return ov.SetOverride(ctx, key, o)
}

// ClearOverride removes identity's override under this policy and tier.
// It returns an error wrapping [store.ErrNotFound] when the client had
// none, and the errors of [Limiter.SetOverride] otherwise.
func (l *Limiter) ClearOverride(ctx context.Context, tier, identity string) error {
	key, ov, err := l.overrideKey(tier, identity)
	if err != nil {
		return err
	}
	return ov.ClearOverride(ctx, key)
}

// overrideKey returns the store key of identity under tier and the store's
// overrides.
func (l *Limiter) overrideKey(tier, identity string) (string, store.OverrideStore, error) {
	q := l.quota
	if !q.overrides {
		return "", nil, fmt.Errorf("ratekeeper: middleware: policy %q does not apply overrides (build it WithOverrides)", q.name)
	}
	if identity == "" {
		return "", nil, errEmptyKey
	}
	_, ok := q.tierIndex[tier]
	if !ok {
		return "", nil, fmt.Errorf("ratekeeper: middleware: unknown tier %q", tier)
	}
	return StoreKey(q.name, tier, identity), q.store.(store.OverrideStore), nil
}

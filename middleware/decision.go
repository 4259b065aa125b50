package middleware

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/internal/keybuf"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/store"
)

// DecisionFrom returns the decision of the innermost limiter built with
// [Options].DecisionInContext that admitted the request ctx belongs to
// (with [Options].DryRun, also one it would have refused), and whether
// there is one. Call it in a handler wrapped by [Limiter.Handler] with
// r.Context(), to log the decision, show it, or write headers of your
// own. A limiter without DecisionInContext leaves no decision to find,
// unless it must carry one for its own sake (see the option).
func DecisionFrom(ctx context.Context) (limiter.Decision, bool) {
	for s := stateFrom(ctx); s != nil; s = s.prev {
		if s.dec.Outcome != "" {
			return s.dec, true
		}
	}
	return limiter.Decision{}, false
}

// ctxKey finds a request's state in its context; reqKey finds the request
// a context was made for, in a state or a light state.
type (
	ctxKey struct{}
	reqKey struct{}
)

// reqState is what a limiter attaches to a request. It is the request's
// new context and holds the shallow copy of the request that carries it,
// the decision, the storage for the header values and what was charged,
// all in one allocation. It is made before the decision, so that the
// limiter's log lines and limits function see the request.
type reqState struct {
	context.Context // the request's context before this limiter
	prev            *reqState
	lim             *limiter.Limiter // nil for a stack's own state
	identity        string
	charged         int64 // units of lim charged for identity on this request
	dec             limiter.Decision
	actual          int64 // the cost the handler reported (ReportCost), -1 for none, -2 when nothing settles
	req             http.Request
	hb              headers.Buffer
}

// Value implements context.Context.
func (s *reqState) Value(k any) any {
	switch k.(type) {
	case ctxKey:
		return s
	case reqKey:
		return &s.req
	}
	return s.Context.Value(k)
}

// lightState is what a limiter that attaches nothing to the request (see
// [Options].DecisionInContext) needs for one request: the context of its
// decision, which carries the request to log lines, the storage for the
// header values and the memory of its store key. When nobody watches the
// limiter's decisions (no observer, refusal hook or debug log, which are
// handed the context), a request's state comes from lightStates and goes
// back there once its decision is answered: nothing refers to it by then
// but the header values, which its Buffer never writes over (the next
// requests' values go after them); the stores copy the keys they keep,
// and a call that outlives its answer keeps the request's own context,
// not the state (see package internal/keybuf, Unlent).
//
// The state is the request's context by delegation: each method asks
// the request for its context when called. A decision that needs none of
// it (no deadline, no cancellation, no value, as the memory store's)
// never reads the request's context field, a memory line of its own that
// a request built long before its decision no longer has in cache.
type lightState struct {
	requestContext
	hb  headers.Buffer
	key keybuf.Buffer
}

// requestContext is a context for the decisions of request req, which
// it carries to log lines and limits functions: req's context, asked for
// when needed (see lightState), and req for reqKey. It lends no memory.
type requestContext struct {
	req *http.Request
}

// lightStates keeps the states of answered requests for the next ones.
var lightStates = sync.Pool{New: func() any { return new(lightState) }}

// lightStateFor returns the state of request r and whether it goes back
// to lightStates when answered (see lightState).
func (l *Limiter) lightStateFor(r *http.Request) (*lightState, bool) {
	if l.h.watched {
		return &lightState{requestContext: requestContext{r}}, false
	}
	st := lightStates.Get().(*lightState)
	st.req = r
	if l.h.logger.Enabled(st, slog.LevelDebug) {
		st.giveBack()
		return &lightState{requestContext: requestContext{r}}, false
	}
	return st, true
}

// giveBack returns a state of lightStates there, emptied but for its
// header Buffer, which goes on where it stopped.
func (st *lightState) giveBack() {
	st.req, st.key = nil, keybuf.Buffer{}
	lightStates.Put(st)
}

// KeyBuffer implements keybuf.Lender: the core builds the request's store
// key in the state's memory.
func (s *lightState) KeyBuffer() *keybuf.Buffer { return &s.key }

// Unlent implements keybuf.Lender: the request's own context, which a
// store may keep past the call where the state, pooled, may not.
func (s *lightState) Unlent() context.Context { return s.req.Context() }

// Deadline implements context.Context: the request context's.
func (s *requestContext) Deadline() (time.Time, bool) { return s.req.Context().Deadline() }

// Done implements context.Context: the request context's.
func (s *requestContext) Done() <-chan struct{} { return s.req.Context().Done() }

// Err implements context.Context: the request context's.
func (s *requestContext) Err() error { return s.req.Context().Err() }

// Value implements context.Context: the request for reqKey, else the
// request context's value.
func (s *requestContext) Value(k any) any {
	if _, ok := k.(reqKey); ok {
		return s.req
	}
	return s.req.Context().Value(k)
}

// requestFrom returns the request a decision's context was made for, or
// nil.
func requestFrom(ctx context.Context) *http.Request {
	r, _ := ctx.Value(reqKey{}).(*http.Request)
	return r
}

func stateFrom(ctx context.Context) *reqState {
	s, _ := ctx.Value(ctxKey{}).(*reqState)
	return s
}

// chargedFor returns how many units of lim this request was charged for
// identity in tier by the limiters it passed, 0 if none.
func (s *reqState) chargedFor(lim *limiter.Limiter, tier, identity string) int64 {
	for ; s != nil; s = s.prev {
		if s.lim == lim && s.dec.Tier == tier && s.identity == identity && s.dec.Outcome != "" {
			return s.charged
		}
	}
	return 0
}

// newState returns a state for r under lim, with the copy of r to pass on.
func newState(r *http.Request, lim *limiter.Limiter) *reqState {
	st := &reqState{Context: r.Context(), prev: stateFrom(r.Context()), lim: lim, actual: -2}
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
// apply as in the middleware, and the decision is reported as the
// middleware's are. A store failure is returned as an error wrapping
// [store.ErrStoreUnavailable] with a decision of the failure mode, a cost
// above a limit's capacity as one wrapping [store.ErrCostExceedsCapacity];
// see [limiter.Limiter.Decide].
func (l *Limiter) Allow(ctx context.Context, identity string) (limiter.Decision, error) {
	return l.decideFor(ctx, identity, l.cost, false, false)
}

// AllowN is [Limiter.Allow] for n units, for a cost known only inside the
// handler (the number of items of a bulk request). n must be at least 1.
// When n exceeds the capacity of a limit of the policy, no wait can admit
// the request: AllowN returns an error wrapping
// [store.ErrCostExceedsCapacity] together with a refusing Decision that
// [Limiter.Enforce] answers as the middleware does, with a 429 that says
// the cost can never fit and no Retry-After.
func (l *Limiter) AllowN(ctx context.Context, identity string, n int64) (limiter.Decision, error) {
	if n < 1 {
		return limiter.Decision{}, fmt.Errorf("ratekeeper: middleware: AllowN: n must be >= 1, got %d", n)
	}
	return l.decideFor(ctx, identity, n, false, false)
}

// AllowAtMost is [Limiter.AllowN] for up to n units: it takes as many as
// fit now, at least 1, and the Decision's Granted says how many (serve
// that many items of a batch); it is refused, with a RetryAfter until one
// unit fits, only when none does. n may exceed the limits' capacity. Not
// for a policy with CountDenied, Overrides or a calendar quota (package
// store, "Partial grants"); [Limiter.Enforce] answers its refusals as
// AllowN's.
func (l *Limiter) AllowAtMost(ctx context.Context, identity string, n int64) (limiter.Decision, error) {
	if n < 1 {
		return limiter.Decision{}, fmt.Errorf("ratekeeper: middleware: AllowAtMost: n must be >= 1, got %d", n)
	}
	return l.decideFor(ctx, identity, n, false, true)
}

// Peek returns the decision [Limiter.Allow] would return now, recording
// nothing and reporting nothing to the observer.
func (l *Limiter) Peek(ctx context.Context, identity string) (limiter.Decision, error) {
	return l.decideFor(ctx, identity, l.cost, true, false)
}

var errNoTier = errors.New("ratekeeper: middleware: a limiter with tiers decides from a handler only for requests its own Handler classified")

func (l *Limiter) decideFor(ctx context.Context, identity string, n int64, peek, partial bool) (limiter.Decision, error) {
	if identity == "" {
		return limiter.Decision{}, errEmptyKey
	}
	tier, limits, err := l.tierFor(ctx)
	if err != nil {
		return limiter.Decision{}, err
	}
	return l.Decide(ctx, limiter.Request{Tier: tier, Identity: identity, Cost: n, Limits: limits, Peek: peek, Partial: partial})
}

// tierFor returns the tier and limits for a decision asked from a handler:
// those the limiter's Handler applied to the request ctx belongs to, else,
// for a limiter without tiers, its one tier and configured limits.
func (l *Limiter) tierFor(ctx context.Context) (string, []store.Limit, error) {
	for s := stateFrom(ctx); s != nil; s = s.prev {
		if s.lim == l.Limiter && s.dec.Outcome != "" {
			if s.dec.Limits != nil {
				return s.dec.Tier, s.dec.Limits, nil
			}
			for _, t := range l.h.tiers {
				if t.Name == s.dec.Tier {
					return t.Name, t.Limits, nil
				}
			}
		}
	}
	if len(l.h.tiers) > 1 {
		return "", nil, errNoTier
	}
	return l.h.tiers[0].Name, l.h.tiers[0].Limits, nil
}

// Enforce writes the rate-limit headers for d, a decision of this limiter
// from [Limiter.Allow] or [DecisionFrom], and, when d refuses the request,
// the refusal: the same 429 (or [Options].DeniedHandler response) the
// middleware writes, Retry-After included. It reports whether the handler
// may go on: d.Allowed, or true for a refusal in dry-run mode, which gets
// the headers without Retry-After. A decision for a suspended client gets
// the middleware's 403, one whose cost can never fit ([Limiter.AllowN]) a
// 429 that says so, without Retry-After, and a failed closed one the 503.
func (l *Limiter) Enforce(w http.ResponseWriter, r *http.Request, d limiter.Decision) bool {
	switch {
	case d.Outcome == limiter.OutcomeLimited && d.Limits != nil && d.Cost > d.Capacity:
		writeJSON(w, http.StatusTooManyRequests, l.h.contentType(), costBody(d.Cost, d.Capacity, d.Policy, l.h.problem))
		return false
	case d.Outcome == limiter.OutcomeSuspended:
		writeJSON(w, http.StatusForbidden, contentTypeJSON, bodySuspended)
		return false
	case d.Outcome == limiter.OutcomeFailedClosed:
		headers.WriteRetryAfter(w.Header(), d.RetryAfter)
		writeJSON(w, http.StatusServiceUnavailable, contentTypeJSON, bodyUnavailable)
		return false
	}
	refuse := !d.Allowed && !l.h.dryRun
	writeHeaders(w.Header(), &d, new(headers.Buffer), refuse)
	if !refuse {
		return true
	}
	if d.Policy == "" {
		d.Policy = policyLabel(l.h.name, d.Tier)
	}
	l.deny(w, r, &d)
	return false
}

// deny writes the refusal of d: the denied handler's response, or 429 with
// the JSON body.
func (l *Limiter) deny(w http.ResponseWriter, r *http.Request, d *limiter.Decision) {
	if l.h.denied != nil {
		l.h.denied(w, r, *d)
		return
	}
	l.h.writeLimited(w, d)
}

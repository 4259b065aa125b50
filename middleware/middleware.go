package middleware

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync/atomic"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/store"
)

// Limiter is a rate-limiting HTTP middleware for one policy: a decision
// core ([limiter.Limiter], embedded, whose Decide, Reset, SetOverride
// and ClearOverride it offers), a way to derive each request's
// identity (and, with [NewTiered], its tier), and what to answer. Build
// it once with [New] or [NewTiered], wrap any number of handlers with
// [Limiter.Handler], and decide from inside a handler with
// [Limiter.Allow]. A Limiter is safe for concurrent use.
type Limiter struct {
	*limiter.Limiter
	h    *policy
	cost int64
}

// policy is the HTTP part a Limiter shares with its [Limiter.WithCost]
// variants.
type policy struct {
	classify    func(*http.Request) (tier, identity string, err error)
	tiers       []limiter.Tier // as configured, for the handler-side decisions
	dedup       func(*http.Request) string
	exempt      []func(*http.Request) bool
	countDenied bool
	dryRun      bool
	problem     bool
	denied      func(http.ResponseWriter, *http.Request, limiter.Decision)
	logger      *slog.Logger
	name        string
	// inFlight is the status of an in-flight refusal, 0 without a cap;
	// rateless is set for a cap without rate limits (inflight.go).
	inFlight int
	rateless bool
	// attach is set when every request carries its state (the decision
	// and what it was charged) in its context: Options.DecisionInContext,
	// tiers or a limits function (Allow reads the request's tier and
	// limits). uses counts the Handler and WithCost calls on the quota:
	// once it is above 1, a request may pass the quota twice, and the
	// states tell the inner limiter what the outer one charged.
	attach bool
	// reserve is set with Options.DecisionInContext: every request's
	// cost is a reservation that ReportCost may settle.
	reserve bool
	uses    atomic.Int32
	// watched is set when an observer or a refusal hook is told about
	// decisions, with their contexts.
	watched bool
}

// New builds a Limiter that derives each request's identity with key and
// admits requests under limit (plus any [Options].Limits) in store s. It
// returns an error, never a half-built limiter, when s is nil, a limit is
// invalid, the limits mix algorithms, or an option is out of range; the
// message names the field. key may be nil for a limiter used only from
// handlers ([Limiter.Allow]); [Limiter.Handler] then panics at setup.
func New(s store.Store, key keyfunc.KeyFunc, limit store.Limit, o Options) (*Limiter, error) {
	if o.Store != nil {
		return nil, errors.New("ratekeeper: middleware: Options.Store is for LimitByIP; New and NewTiered take the store as their first argument")
	}
	var classify func(*http.Request) (string, string, error)
	if key != nil {
		classify = func(r *http.Request) (string, string, error) {
			id, err := key(r)
			return "", id, err
		}
	}
	limits := append([]store.Limit{limit}, o.Limits...)
	if limit == (store.Limit{}) && o.InFlight.Max != 0 {
		limits = o.Limits // an in-flight cap alone, or with Options.Limits
	}
	return build(s, &o, classify, limits, nil)
}

// build builds the limiter of limits or tiers in store s.
func build(s store.Store, o *Options, classify func(*http.Request) (string, string, error), limits []store.Limit, tiers []limiter.Tier) (*Limiter, error) {
	for i, f := range o.Exempt {
		if f == nil {
			return nil, fmt.Errorf("ratekeeper: middleware: Options.Exempt[%d] is nil", i)
		}
	}
	inFlight, err := inFlightStatus(o)
	if err != nil {
		return nil, err
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = slog.New(requestLog{logger.Handler()})
	core, err := limiter.New(s, o.core(limits, tiers, logger))
	if err != nil {
		return nil, err
	}
	if tiers == nil && len(limits) > 0 {
		tiers = []limiter.Tier{{Limits: limits}}
	}
	h := &policy{
		classify:    classify,
		tiers:       slices.Clone(tiers),
		dedup:       o.Dedup,
		exempt:      slices.Clone(o.Exempt),
		countDenied: o.CountDenied,
		dryRun:      o.DryRun,
		problem:     o.ProblemDetails,
		denied:      o.DeniedHandler,
		logger:      logger,
		name:        cmpOr(o.Name, "default"),
		attach:      o.DecisionInContext || len(tiers) > 1 || o.LimitsFunc != nil,
		inFlight:    inFlight,
		rateless:    len(tiers) == 0,
		reserve:     o.DecisionInContext,
		watched:     o.Observer != nil || o.RefusalHook != nil,
	}
	if h.rateless {
		h.tiers = []limiter.Tier{{Unlimited: true}} // as the core sees it
	}
	return &Limiter{Limiter: core, h: h, cost: 1}, nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// WithCost returns a Limiter that shares l's quota, store, tiers and
// breaker but charges n units per request: wrap a costly route with it so
// that, for example, a search takes 5 units of the same per-client quota a
// ping takes 1 of. When a request passes several limiters of one quota
// (a costly route inside a group that already uses the quota), it is
// charged once, at the largest cost. WithCost returns an error when n is
// below 1 or above a configured limit's capacity. For a cost known only
// inside the handler, use [Limiter.AllowN].
func (l *Limiter) WithCost(n int64) (*Limiter, error) {
	if n <= 0 {
		return nil, fmt.Errorf("ratekeeper: middleware: cost must be > 0, got %d", n)
	}
	for _, t := range l.h.tiers {
		if len(t.Limits) == 0 {
			continue
		}
		probe := store.Request{Key: "probe", Limits: t.Limits, Cost: n, CountDenied: l.h.countDenied}
		if err := probe.Validate(); err != nil {
			return nil, fmt.Errorf("ratekeeper: middleware: policy %q: %w", policyLabel(l.h.name, t.Name), err)
		}
	}
	l.h.uses.Add(1)
	return &Limiter{Limiter: l.Limiter, h: l.h, cost: n}, nil
}

func policyLabel(name, tier string) string {
	if tier == "" {
		return name
	}
	return name + "/" + tier
}

// Handler wraps next so that every request is rate limited before it
// reaches next. Its shape fits chi's r.Use and r.With and http.ServeMux
// (mux.Handle(pattern, l.Handler(h))). Handler panics if next is nil or the
// limiter has no key function; that happens at setup, never at request
// time.
func (l *Limiter) Handler(next http.Handler) http.Handler {
	if next == nil {
		panic("ratekeeper: middleware: Handler called with nil next")
	}
	if l.h.classify == nil {
		panic("ratekeeper: middleware: Handler called on a limiter built without a key function")
	}
	l.h.uses.Add(1)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.serve(w, r, next)
	})
}

var errEmptyKey = errors.New("ratekeeper: empty identity")

// serve is a request's path: resolve (exemptions, tier, identity, cost),
// decide (the core), finish (headers, the answer).
func (l *Limiter) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if l.h.exempted(r) {
		ctx := r.Context()
		if l.h.logger.Enabled(ctx, slog.LevelDebug) {
			ctx = newState(r, nil) // the log line names the request
		}
		_, _ = l.Decide(ctx, limiter.Request{Exempt: true})
		next.ServeHTTP(w, r)
		return
	}
	if l.h.inFlight != 0 {
		l.serveInFlight(w, r, next)
		return
	}
	l.serveRate(w, r, next)
}

// serveRate is the rate-limit part of serve, after the exemptions and
// the in-flight cap.
func (l *Limiter) serveRate(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if !l.h.attach && l.h.uses.Load() <= 1 {
		l.serveLight(w, r, next)
		return
	}
	st := newState(r, l.Limiter)
	req, ok := l.resolve(w, st)
	if !ok {
		return
	}
	d, err := l.Wait(st, req)
	l.finish(w, r, next, st, &req, decided{d, err})
}

// serveLight is serve for a request that carries nothing on to next: the
// limiter has no reason to attach its decision (see [Options].
// DecisionInContext), and no other limiter of its quota can be below.
func (l *Limiter) serveLight(w http.ResponseWriter, r *http.Request, next http.Handler) {
	st, pooled := l.lightStateFor(r)
	tier, id, err := l.h.classify(r)
	if err == nil && id == "" {
		err = errEmptyKey
	}
	if err != nil {
		l.rejectIdentity(st, w, err)
		if pooled {
			st.giveBack()
		}
		return
	}
	req := limiter.Request{Tier: tier, Identity: id, Cost: l.cost}
	if l.h.dedup != nil {
		req.DedupID = l.h.dedup(r)
	}
	d, err := l.Wait(st, req)
	switch d.Outcome {
	case limiter.OutcomeAllowed:
		writeHeaders(w.Header(), &d, &st.hb, false)
		if pooled {
			st.giveBack() // before next: its decision is answered
		}
		next.ServeHTTP(w, r)
		return
	case limiter.OutcomeLimited, limiter.OutcomeBlocked:
		if err == nil {
			writeHeaders(w.Header(), &d, &st.hb, true)
			if pooled {
				st.giveBack()
			}
			l.deny(w, r, &d)
			return
		}
	}
	// Any other answer may carry its decision on in the request's
	// context: the state is not given back.
	l.finish(w, r, next, nil, &req, decided{d, err})
}

// resolve derives the request's tier and identity and what an enclosing
// limiter of this quota already charged it. It answers the request itself
// when there is no identity.
func (l *Limiter) resolve(w http.ResponseWriter, st *reqState) (limiter.Request, bool) {
	r := &st.req
	tier, id, err := l.h.classify(r)
	if err == nil && id == "" {
		err = errEmptyKey
	}
	if err != nil {
		l.rejectIdentity(st, w, err)
		return limiter.Request{}, false
	}
	st.identity = id
	req := limiter.Request{Tier: tier, Identity: id, Cost: l.cost, Charged: st.prev.chargedFor(l.Limiter, tier, id), Reserve: l.h.reserve}
	if l.h.dedup != nil {
		req.DedupID = l.h.dedup(r)
	}
	return req, true
}

// rejectIdentity answers a request whose identity could not be derived:
// 401 when it has none, 400 when it is malformed.
func (l *Limiter) rejectIdentity(ctx context.Context, w http.ResponseWriter, err error) {
	_, _ = l.Decide(ctx, limiter.Request{IdentityErr: err})
	if errors.Is(err, keyfunc.ErrNoIdentity) {
		writeJSON(w, http.StatusUnauthorized, contentTypeJSON, bodyUnauthorized)
	} else {
		writeJSON(w, http.StatusBadRequest, contentTypeJSON, bodyBadRequest)
	}
}

// decided is what the core answered for one request: its decision, and
// the error that came with it.
type decided struct {
	d   limiter.Decision
	err error
}

// finish answers the request as the decision says: r is the request as
// it reached the limiter, st its state (nil to make one) for a request
// that goes on with the decision in its context.
func (l *Limiter) finish(w http.ResponseWriter, r *http.Request, next http.Handler, st *reqState, req *limiter.Request, out decided) {
	d, err := out.d, out.err
	if st == nil {
		st = newState(r, l.Limiter)
		st.identity = req.Identity
	}
	st.dec = d
	switch d.Outcome {
	case "", limiter.OutcomeFailedOpen:
		// Charged in full by an enclosing limiter of this quota (its
		// decision and headers stand), or the store failed open.
		next.ServeHTTP(w, r)
	case limiter.OutcomeUnlimited, limiter.OutcomeExempt:
		if d.Outcome == limiter.OutcomeExempt {
			st.charged = d.Cost
		}
		next.ServeHTTP(w, &st.req)
	case limiter.OutcomeAllowed, limiter.OutcomeDryRun:
		st.charged = req.Charged
		if d.Outcome == limiter.OutcomeAllowed {
			st.charged = d.Cost
		}
		if st.prev != nil && st.prev.lim != st.lim {
			writeNestedHeaders(w.Header(), st)
		} else {
			writeHeaders(w.Header(), &st.dec, &st.hb, false)
		}
		if d.Outcome == limiter.OutcomeAllowed {
			l.serveSettling(w, st, next)
			return
		}
		next.ServeHTTP(w, &st.req)
	case limiter.OutcomeSuspended:
		writeJSON(w, http.StatusForbidden, contentTypeJSON, bodySuspended)
	case limiter.OutcomeLimited, limiter.OutcomeBlocked:
		if errors.Is(err, store.ErrCostExceedsCapacity) {
			l.costExceeded(st, w, req, &d)
			return
		}
		writeHeaders(w.Header(), &d, new(headers.Buffer), true)
		l.deny(w, r, &d)
	case limiter.OutcomeRejected:
		writeJSON(w, http.StatusInternalServerError, contentTypeJSON, bodyInternal)
	case limiter.OutcomeFailedClosed:
		headers.WriteRetryAfter(w.Header(), d.RetryAfter)
		writeJSON(w, http.StatusServiceUnavailable, contentTypeJSON, bodyUnavailable)
	case limiter.OutcomeCanceled:
		// The client went away: nobody reads an answer.
	}
}

// costExceeded answers a request whose cost no limit can hold: 429 with
// the X-RateLimit-* state of the limits (read with a peek at cost 1) but
// without Retry-After, since no wait can admit it.
func (l *Limiter) costExceeded(ctx context.Context, w http.ResponseWriter, req *limiter.Request, d *limiter.Decision) {
	p, err := l.Decide(ctx, limiter.Request{Tier: req.Tier, Identity: req.Identity, Limits: d.Limits, Cost: 1, Peek: true})
	// An override that changed since the store refused the cost
	// (exempt, suspend) has no limit state to describe.
	if err == nil && p.Headers != nil && (p.Override == store.OverrideNone || p.Override == store.OverrideScale) {
		if p.Allowed {
			p.Remaining++ // a peek reports what would be left after it
			if p.Remaining >= p.Capacity {
				p.NextAfter = 0 // a full limit: no more quota to come
			}
		} else {
			p.Reset = p.Reset.Add(p.ResetAfter - p.RetryAfter)
		}
		p.Allowed = true // describe the state, not a refusal
		writeHeaders(w.Header(), &p, new(headers.Buffer), false)
	}
	writeJSON(w, http.StatusTooManyRequests, l.h.contentType(), costBody(d.Cost, d.Capacity, d.Policy, l.h.problem))
}

// exempted reports whether one of the limiter's exemptions matches r.
func (h *policy) exempted(r *http.Request) bool {
	for _, ex := range h.exempt {
		if ex(r) {
			return true
		}
	}
	return false
}

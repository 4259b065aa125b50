package middleware

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/store"
)

// Limiter is a rate-limiting HTTP middleware for one policy: a store, a way
// to derive each request's identity (and, with [NewTiered], its tier) and
// the limits it is held to. Build it once with [New] or [NewTiered], wrap
// any number of handlers with [Limiter.Handler], and decide from inside a
// handler with [Limiter.Allow]. A Limiter is safe for concurrent use.
type Limiter struct {
	*quota
	cost int64
}

// quota is the state a Limiter shares with its [Limiter.WithCost]
// variants: they use the same counters.
type quota struct {
	store       store.Store
	local       store.Store // fallback store, or nil
	storeName   string
	classify    func(*http.Request) (tier, identity string, err error)
	tiers       []*tierState
	tierIndex   map[string]int
	limitsFunc  func(*http.Request, string) ([]store.Limit, error)
	dedup       func(*http.Request) string
	dedupMax    int
	dedupTTL    time.Duration
	exempt      []func(*http.Request) bool
	countDenied bool
	overrides   bool
	dryRun      bool
	problem     bool
	name        string
	failure     FailureMode
	headerOpts  headers.Options
	logger      *slog.Logger
	logSecret   []byte
	now         func() time.Time
	denied      func(http.ResponseWriter, *http.Request, Decision)
	observer    func(Event)
	refused     func(ctx context.Context, d Decision, identity string)
	breaker     breakers
	locate      store.NodeLocator // the store's, when it has one
	lastWarn    atomic.Int64      // unix nanos of the last store-failure warning
	lastError   atomic.Int64      // unix nanos of the last misconfiguration error
	lastRepair  atomic.Int64      // unix nanos of the last repaired-state warning
}

// tierState is a tier compiled at construction.
type tierState struct {
	name       string // "" for a limiter built with New
	policy     string // metrics and body label: the name, or name/tier
	policyJSON []byte // policy as a JSON string
	unlimited  bool
	suspended  bool
	limits     *limitSet  // the configured limits; nil when unlimited or suspended
	dynamic    limitCache // compiled results of WithLimitsFunc
}

// New builds a Limiter that derives each request's identity with key and
// admits requests under limit (plus any [WithLimits]) in store s. It
// returns an error, never a half-built limiter, when s is nil, a limit is
// invalid, the limits mix algorithms, or an option is out of range; the
// message names the field. key may be nil for a limiter used only from
// handlers ([Limiter.Allow]); [Limiter.Handler] then panics at setup.
func New(s store.Store, key keyfunc.KeyFunc, limit store.Limit, opts ...Option) (*Limiter, error) {
	c, err := collect(opts)
	if err != nil {
		return nil, err
	}
	limits := append([]store.Limit{limit}, c.extraLimits...)
	var classify func(*http.Request) (string, string, error)
	if key != nil {
		classify = func(r *http.Request) (string, string, error) {
			id, err := key(r)
			return "", id, err
		}
	}
	return build(s, c, classify, []Tier{{Limits: limits}})
}

func collect(opts []Option) (config, error) {
	c := config{
		name:             defaultName,
		breakerThreshold: defaultBreakerThreshold,
		breakerCooldown:  defaultBreakerCooldown,
		now:              time.Now,
	}
	for _, o := range opts {
		if o == nil {
			return c, errors.New("ratekeeper: middleware: nil option")
		}
		o(&c)
	}
	return c, nil
}

// build validates c and builds the limiter of tiers in store s.
func build(s store.Store, c config, classify func(*http.Request) (string, string, error), tiers []Tier) (*Limiter, error) {
	if err := c.validate(s); err != nil {
		return nil, err
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	if len(c.logSecret) == 0 {
		c.logSecret = processSecret
	}
	q := newQuota(s, &c, classify)
	if err := q.compileTiers(&c, tiers); err != nil {
		return nil, err
	}
	if !c.named {
		if err := claimUnnamed(q, s, c.local); err != nil {
			return nil, err
		}
	}
	return &Limiter{quota: q, cost: 1}, nil
}

// validate checks the options for a limiter on store s; the message of
// its error names the field.
func (c *config) validate(s store.Store) error {
	if s == nil {
		return errors.New("ratekeeper: middleware: nil store")
	}
	if c.store != nil {
		return errors.New("ratekeeper: middleware: WithStore is for LimitByIP; New and NewTiered take the store as their first argument")
	}
	if err := validName("name", c.name); err != nil {
		return err
	}
	switch {
	case c.failure != FailOpen && c.failure != FailClosed:
		return fmt.Errorf("ratekeeper: middleware: unknown failure mode %d", int(c.failure))
	case c.dedupReplays < 0 || int64(c.dedupReplays) > math.MaxInt32 || c.dedupWindow < 0:
		return fmt.Errorf("ratekeeper: middleware: dedup bound must be 0 to 2³¹−1 replays and a window >= 0, got %d and %s", c.dedupReplays, c.dedupWindow)
	case c.breakerThreshold > maxBreakerThreshold:
		return fmt.Errorf("ratekeeper: middleware: breaker threshold must be <= %d, got %d", maxBreakerThreshold, c.breakerThreshold)
	case c.breakerThreshold < 0:
		return fmt.Errorf("ratekeeper: middleware: breaker threshold must be >= 0, got %d", c.breakerThreshold)
	case c.breakerThreshold > 0 && c.breakerCooldown <= 0:
		return fmt.Errorf("ratekeeper: middleware: breaker cooldown must be > 0, got %s", c.breakerCooldown)
	case c.now == nil:
		return errors.New("ratekeeper: middleware: nil clock")
	}
	if c.overrides {
		if _, ok := s.(store.OverrideStore); !ok {
			return fmt.Errorf("ratekeeper: middleware: WithOverrides needs a store that keeps overrides (store.OverrideStore); %T does not", s)
		}
	}
	for i, f := range c.exempt {
		if f == nil {
			return fmt.Errorf("ratekeeper: middleware: exemption %d is nil", i)
		}
	}
	return nil
}

// newQuota returns the state of a limiter on store s with the validated
// options c, without its tiers.
func newQuota(s store.Store, c *config, classify func(*http.Request) (string, string, error)) *quota {
	q := &quota{
		store:       s,
		local:       c.local,
		storeName:   storeName(s),
		classify:    classify,
		limitsFunc:  c.limitsFunc,
		dedup:       c.dedup,
		dedupMax:    c.dedupReplays,
		dedupTTL:    c.dedupWindow,
		exempt:      c.exempt,
		countDenied: c.countDenied,
		overrides:   c.overrides,
		dryRun:      c.dryRun,
		problem:     c.problem,
		name:        c.name,
		failure:     c.failure,
		headerOpts:  c.headers,
		logger:      c.logger,
		logSecret:   c.logSecret,
		now:         c.now,
		denied:      c.denied,
		observer:    c.observer,
		refused:     c.refused,
		breaker:     breakers{breaker: breaker{threshold: int32(c.breakerThreshold), cooldown: c.breakerCooldown}},
	}
	q.locate, _ = s.(store.NodeLocator)
	return q
}

// compileTiers compiles tiers into q: their policy labels and, for tiers
// with limits, the validated limits and their header values.
func (q *quota) compileTiers(c *config, tiers []Tier) error {
	q.tierIndex = make(map[string]int, len(tiers))
	for i, t := range tiers {
		if _, dup := q.tierIndex[t.Name]; dup {
			return fmt.Errorf("ratekeeper: middleware: tier %q configured twice", t.Name)
		}
		q.tierIndex[t.Name] = i
		ts := &tierState{name: t.Name, policy: policyLabel(c.name, t.Name), unlimited: t.Unlimited, suspended: t.Suspended}
		ts.policyJSON = strconv.AppendQuote(nil, ts.policy) // names are plain ASCII: Go quoting is JSON quoting
		if !t.Unlimited && !t.Suspended {
			set, err := compileLimits(c.headers, c.name, t.Name, t.Limits, c.countDenied)
			if err != nil {
				return fmt.Errorf("ratekeeper: middleware: policy %q: %w", ts.policy, err)
			}
			ts.limits = set
		}
		q.tiers = append(q.tiers, ts)
	}
	return nil
}

func validName(field, n string) error {
	if n == "" || len(n) > 64 {
		return fmt.Errorf("ratekeeper: middleware: %s must be 1 to 64 characters, got %q", field, n)
	}
	for i := 0; i < len(n); i++ {
		b := n[i]
		if !('a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '_' || b == '-' || b == '.') {
			return fmt.Errorf("ratekeeper: middleware: %s %q: only [A-Za-z0-9_.-] allowed", field, n)
		}
	}
	return nil
}

// storeName returns the backend name used in metrics labels: the store's
// Name method when it has one ("redis", "memory"), else its Go type.
func storeName(s store.Store) string {
	if n, ok := s.(interface{ Name() string }); ok {
		return n.Name()
	}
	return fmt.Sprintf("%T", s)
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
	for _, t := range l.tiers {
		if t.limits == nil {
			continue
		}
		probe := store.Request{Key: "probe", Limits: t.limits.limits, Cost: n, CountDenied: l.countDenied}
		if err := probe.Validate(); err != nil {
			return nil, fmt.Errorf("ratekeeper: middleware: policy %q: %w", t.policy, err)
		}
	}
	return &Limiter{quota: l.quota, cost: n}, nil
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
	if l.classify == nil {
		panic("ratekeeper: middleware: Handler called on a limiter built without a key function")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.serve(w, r, next)
	})
}

var (
	errEmptyKey      = errors.New("ratekeeper: empty identity")
	errMisconfigured = errors.New("ratekeeper: misconfigured policy")
	errBreakerOpen   = fmt.Errorf("%w: skipped: circuit breaker open", store.ErrStoreUnavailable)
	errClientGone    = errors.New("ratekeeper: client went away")
)

// identityError marks a request whose identity could not be derived.
type identityError struct{ err error }

func (e *identityError) Error() string { return e.err.Error() }
func (e *identityError) Unwrap() error { return e.err }

// storeFailure marks a backend failure; skipped means the breaker kept the
// store from being called at all.
type storeFailure struct {
	err     error
	skipped bool
}

func (e *storeFailure) Error() string { return e.err.Error() }
func (e *storeFailure) Unwrap() error { return e.err }

func isStoreFailure(err error) bool {
	var sf *storeFailure
	return errors.As(err, &sf)
}

// resolved is what the limiter knows about a request before deciding.
type resolved struct {
	t        *tierState
	set      *limitSet
	identity string
	key      string // storage key (see storeKey)
	cost     int64
	charged  int64     // units an enclosing limiter of this quota charged
	outer    *reqState // the innermost enclosing limiter's state, or nil
	now      time.Time // when the decision was asked for, on the limiter's clock
}

// policy returns the policy label for reports about the request.
func (res *resolved) policy(q *quota) string {
	if res.t != nil {
		return res.t.policy
	}
	return q.name
}

// serve is a request's path: resolve (policy, tier, identity, cost),
// decide, finish.
func (l *Limiter) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	q := l.quota
	if q.exempted(r) {
		if q.watching(r.Context()) {
			q.report(r, &Event{Decision: Decision{Policy: q.name}, Outcome: OutcomeExempt}, "")
		}
		next.ServeHTTP(w, r)
		return
	}
	var res resolved
	if err := l.resolve(r, &res); err != nil {
		q.fail(w, r, next, &res, err, storeCall{})
		return
	}
	switch t := res.t; {
	case t.suspended:
		if q.watching(r.Context()) {
			q.report(r, &Event{Decision: Decision{Policy: t.policy, Tier: t.name}, Outcome: OutcomeSuspended}, res.identity)
		}
		writeJSON(w, http.StatusForbidden, contentTypeJSON, bodySuspended)
		return
	case t.unlimited:
		st := newState(r, q, &res, Decision{Decision: store.Decision{Allowed: true}, Policy: t.policy, Tier: t.name, t: t}, 0)
		if q.watching(r.Context()) {
			q.report(r, &Event{Decision: st.dec, Outcome: OutcomeUnlimited}, res.identity)
		}
		next.ServeHTTP(w, &st.req)
		return
	}
	need := res.cost - res.charged
	if need <= 0 {
		// An enclosing limiter of this quota already charged the request
		// at least this much: its decision and headers stand.
		next.ServeHTTP(w, r)
		return
	}
	sd, call, err := q.decide(r, &res, need)
	if err != nil {
		q.fail(w, r, next, &res, err, call)
		return
	}
	q.finish(w, r, next, &res, sd, call)
}

// resolve classifies r and finds its tier, limits, storage key and cost,
// and how much an enclosing limiter of the same quota already charged it.
func (l *Limiter) resolve(r *http.Request, res *resolved) error {
	q := l.quota
	tier, id, err := q.classify(r)
	if err == nil && id == "" {
		err = errEmptyKey
	}
	if err != nil {
		return &identityError{err}
	}
	res.identity = id
	var t *tierState
	if len(q.tiers) == 1 && q.tiers[0].name == tier {
		t = q.tiers[0]
	} else if i, ok := q.tierIndex[tier]; ok {
		t = q.tiers[i]
	} else {
		return fmt.Errorf("%w: classifier returned the unknown tier %q", errMisconfigured, tier)
	}
	res.t = t
	if t.unlimited || t.suspended {
		return nil
	}
	res.set = t.limits
	if q.limitsFunc != nil {
		set, err := q.dynamicLimits(r, t)
		if err != nil {
			return err
		}
		res.set = set
	}
	res.key = StoreKey(q.name, t.name, id)
	res.cost = l.cost
	if outer := stateFrom(r.Context()); outer != nil {
		res.outer = outer
		res.charged = outer.chargedFor(q, res.key)
	}
	return nil
}

// storeCall describes how a decision was reached.
type storeCall struct {
	latency  time.Duration
	skipped  bool  // the breaker kept the main store from being called
	fallback bool  // the local fallback store decided
	cause    error // the main store's failure, when the fallback decided
}

// decide takes need units for the request. When an enclosing limiter of
// the same quota already charged part of the cost and the rest is refused,
// the decision describes a retry of the whole request (see nestedRefusal).
func (q *quota) decide(r *http.Request, res *resolved, need int64) (store.Decision, storeCall, error) {
	req := store.Request{Key: res.key, Limits: res.set.limits, Cost: need, CountDenied: q.countDenied, ApplyOverride: q.overrides}
	if q.dedup != nil {
		req.DedupID = q.dedup(r)
		req.DedupReplays, req.DedupWindow = q.dedupMax, q.dedupTTL
	}
	ctx := r.Context()
	res.now = q.now()
	d, call, err := q.call(ctx, req, res.now, false)
	if err == nil && !d.Allowed && res.charged > 0 && !d.Blocked && d.Override != store.OverrideSuspend {
		d = q.nestedRefusal(ctx, req, res.cost, d, call)
	}
	return d, call, err
}

// nestedRefusal turns the refusal of the rest of a cost (cost minus what
// an enclosing limiter charged) into the decision for the whole request: a
// retry passes the enclosing limiter again, which charges its part first,
// so the request fits only when the full cost does. A peek at the full
// cost gives that time; if the peek fails the refusal stands as it is.
func (q *quota) nestedRefusal(ctx context.Context, req store.Request, cost int64, d store.Decision, call storeCall) store.Decision {
	s := q.store
	if call.fallback {
		s = q.local
	}
	req.Cost, req.DedupID = cost, ""
	p, err := s.Peek(ctx, req)
	if err != nil {
		return d
	}
	p.Allowed = false
	p.RetryAfter = max(p.RetryAfter, d.RetryAfter)
	return p
}

// call runs one store operation, then the fallback store if the main store
// failed. Its errors are the store's invalid-request errors, errClientGone
// or a *storeFailure.
func (q *quota) call(ctx context.Context, req store.Request, now time.Time, peek bool) (store.Decision, storeCall, error) {
	d, c, err := q.callMain(ctx, req, now, peek)
	if err == nil && d.Repaired {
		q.repaired(ctx, &d)
	}
	if err == nil || q.local == nil || !isStoreFailure(err) {
		return d, c, err
	}
	var lerr error
	if peek {
		d, lerr = q.local.Peek(ctx, req)
	} else {
		d, lerr = q.local.Take(ctx, req)
	}
	if lerr != nil {
		if errors.Is(lerr, store.ErrCostExceedsCapacity) || errors.Is(lerr, store.ErrInvalidRequest) {
			// The fallback could decide, and found the request itself
			// wrong (a cost the main store checks only once it has read
			// the client's override): that answer stands.
			return d, c, lerr
		}
		return d, c, err
	}
	c.fallback, c.cause = true, err
	return d, c, nil
}

// callMain calls the main store through the breaker, with the caller's
// context: the time budget of a decision is the store's (the Redis store's
// Options.Timeout), not the middleware's. For a store that tells which node
// serves the request (a Redis Cluster master) the breaker is that node's:
// a failing shard is skipped, the others are still called.
func (q *quota) callMain(ctx context.Context, req store.Request, now time.Time, peek bool) (d store.Decision, c storeCall, err error) {
	node := q.nodeFor(ctx, req)
	b := q.breaker.of(node)
	ok, probe := b.allow(now)
	if !ok {
		c.skipped = true
		return d, c, &storeFailure{err: errBreakerOpen, skipped: true}
	}
	settled := false
	if probe {
		defer func() {
			if !settled { // the store panicked
				b.release()
			}
		}()
	}
	// Latency is only reported in events: do not read the clock twice
	// more per request when nobody watches.
	var start time.Time
	timed := q.watching(ctx)
	if timed {
		start = time.Now()
	}
	if peek {
		d, err = q.store.Peek(ctx, req)
	} else {
		d, err = q.store.Take(ctx, req)
	}
	if timed {
		c.latency = time.Since(start)
	}
	settled = true
	return d, c, q.settle(ctx, b, probe, node, err)
}

// nodeFor returns the node that serves req, for a store that tells (see
// store.NodeLocator) and a limiter with a breaker; "" otherwise.
func (q *quota) nodeFor(ctx context.Context, req store.Request) string {
	if q.locate == nil || q.breaker.threshold == 0 {
		return ""
	}
	return q.locate.NodeFor(ctx, req)
}

// settle tells breaker b how a store call ended and classifies its error:
// the store's invalid-request errors as they are, a client that went away
// as errClientGone, and the rest as a *storeFailure. Only failures that
// say something about the store's health count towards the breaker; a
// probe that says nothing is released.
func (q *quota) settle(ctx context.Context, b *breaker, probe bool, node string, err error) error {
	switch {
	case err == nil:
		if b.success(probe) {
			q.logger.LogAttrs(ctx, slog.LevelInfo, "ratekeeper: store answers again; circuit breaker closed",
				slog.String("policy", q.name), slog.String("store", q.storeName), slog.String("node", node))
		}
		return nil
	case errors.Is(err, store.ErrCostExceedsCapacity) || errors.Is(err, store.ErrInvalidRequest) || errors.Is(err, store.ErrInvalidLimit):
		err = releasing(b, probe, err)
	case errors.Is(ctx.Err(), context.Canceled):
		// The client went away; that says nothing about the store.
		err = releasing(b, probe, fmt.Errorf("%w: %w", errClientGone, err))
	case ctx.Err() != nil || keyScoped(err) || store.KindOf(err) == "capacity":
		// The request's own deadline ran out first, the store answered
		// about this key's data alone, or a bounded store refused a new
		// key: the failure mode applies to this request, but the breaker,
		// which stands for every key, is not told.
		err = releasing(b, probe, &storeFailure{err: err})
	default:
		if b.failure(q.now(), probe) {
			q.logger.LogAttrs(ctx, slog.LevelInfo, "ratekeeper: store failing; circuit breaker opened",
				slog.String("policy", q.name), slog.String("store", q.storeName), slog.String("node", node),
				slog.String("kind", store.KindOf(err)), slog.Duration("cooldown", q.breaker.cooldown),
				slog.String("failure_mode", q.failure.String()))
		}
		err = &storeFailure{err: err}
	}
	return err
}

// releasing gives a probe's slot back when its call said nothing about
// the store, and returns err.
func releasing(b *breaker, probe bool, err error) error {
	if probe {
		b.release()
	}
	return err
}

// finish writes the decision's headers and calls next or refuses.
func (q *quota) finish(w http.ResponseWriter, r *http.Request, next http.Handler, res *resolved, sd store.Decision, call storeCall) {
	t := res.t
	d := Decision{Decision: sd, Policy: t.policy, Tier: t.name, Reset: res.now.Add(resetAfter(&sd)), t: t, set: res.set}
	if call.fallback {
		q.warn(r.Context(), t.policy, call.cause)
	}
	if sd.BlockStarted {
		q.blockStarted(r, res, &d)
	}
	switch sd.Override {
	case store.OverrideExempt:
		// An exempt client has no limit to describe: no headers, as for
		// an unlimited tier.
		d.set = nil
		st := newState(r, q, res, d, res.cost)
		if q.watching(r.Context()) {
			q.report(r, &Event{Decision: d, Outcome: OutcomeExempt, Latency: call.latency, Fallback: call.fallback, Err: call.cause}, res.identity)
		}
		next.ServeHTTP(w, &st.req)
		return
	case store.OverrideSuspend:
		if !q.dryRun {
			if q.watching(r.Context()) {
				q.report(r, &Event{Decision: d, Outcome: OutcomeSuspended, Latency: call.latency, Fallback: call.fallback, Err: call.cause}, res.identity)
			}
			writeJSON(w, http.StatusForbidden, contentTypeJSON, bodySuspended)
			return
		}
	}
	if sd.Allowed || q.dryRun {
		charged := res.charged
		outcome := OutcomeDryRun
		if sd.Allowed {
			charged, outcome = res.cost, OutcomeAllowed
		}
		st := newState(r, q, res, d, charged)
		writeHeaders(w.Header(), &st.dec, &st.hb, false)
		if q.watching(r.Context()) {
			q.report(r, &Event{Decision: d, Outcome: outcome, Latency: call.latency, Fallback: call.fallback, Err: call.cause}, res.identity)
		}
		next.ServeHTTP(w, &st.req)
		return
	}
	writeHeaders(w.Header(), &d, new(headers.Buffer), true)
	if q.watching(r.Context()) {
		outcome := OutcomeLimited
		if sd.Blocked {
			outcome = OutcomeBlocked
		}
		q.report(r, &Event{Decision: d, Outcome: outcome, Latency: call.latency, Fallback: call.fallback, Err: call.cause}, res.identity)
	}
	q.deny(w, r, &d)
}

// fail answers a request the limiter could not decide. It is the one place
// that classifies failures: a missing or malformed identity (401, 400), a
// configuration mistake found at request time (500), a cost no limit can
// hold (429 without Retry-After), a client that went away (nothing
// written), and store failures (the failure mode).
func (q *quota) fail(w http.ResponseWriter, r *http.Request, next http.Handler, res *resolved, err error, call storeCall) {
	ctx := r.Context()
	e := Event{Decision: Decision{Policy: res.policy(q)}, Err: err, Latency: call.latency, Skipped: call.skipped}
	if res.t != nil {
		e.Tier = res.t.name
	}
	var idErr *identityError
	switch {
	case errors.As(err, &idErr):
		e.Outcome = OutcomeRejected
		q.reportIfWatched(r, &e, "")
		if errors.Is(err, keyfunc.ErrNoIdentity) {
			writeJSON(w, http.StatusUnauthorized, contentTypeJSON, bodyUnauthorized)
		} else {
			writeJSON(w, http.StatusBadRequest, contentTypeJSON, bodyBadRequest)
		}
	case errors.Is(err, store.ErrCostExceedsCapacity):
		e.Outcome = OutcomeLimited
		q.reportIfWatched(r, &e, res.identity)
		q.costExceeded(w, r, res)
	case errors.Is(err, errMisconfigured) || errors.Is(err, store.ErrInvalidRequest) || errors.Is(err, store.ErrInvalidLimit):
		// Throttled like store warnings: a limits function that parses
		// client input could otherwise log once per request.
		if q.throttle(&q.lastError) {
			q.logger.LogAttrs(ctx, slog.LevelError, "ratekeeper: misconfigured policy",
				slog.String("policy", e.Policy), slog.String("error", err.Error()))
		}
		e.Outcome = OutcomeRejected
		q.reportIfWatched(r, &e, res.identity)
		writeJSON(w, http.StatusInternalServerError, contentTypeJSON, bodyInternal)
	case errors.Is(err, errClientGone):
		e.Outcome = OutcomeCanceled
		q.reportIfWatched(r, &e, res.identity)
	default:
		q.warn(ctx, e.Policy, err)
		if q.failure == FailClosed {
			e.Outcome = OutcomeFailedClosed
			q.reportIfWatched(r, &e, res.identity)
			headers.WriteRetryAfter(w.Header(), q.breaker.cooldown)
			writeJSON(w, http.StatusServiceUnavailable, contentTypeJSON, bodyUnavailable)
			return
		}
		e.Outcome = OutcomeFailedOpen
		q.reportIfWatched(r, &e, res.identity)
		next.ServeHTTP(w, r)
	}
}

// costExceeded answers a request whose cost no limit can hold: 429 with
// the X-RateLimit-* state of the limits (read with a peek at cost 1) but
// without Retry-After, since no wait can admit it.
func (q *quota) costExceeded(w http.ResponseWriter, r *http.Request, res *resolved) {
	now := q.now()
	req := store.Request{Key: res.key, Limits: res.set.limits, Cost: 1, ApplyOverride: q.overrides}
	// An override that changed since the store refused the cost
	// (exempt, suspend) has no limit state to describe.
	p, _, err := q.call(r.Context(), req, now, true)
	if err == nil && (p.Override == store.OverrideNone || p.Override == store.OverrideScale) {
		if p.Allowed {
			p.Remaining++ // a peek reports what would be left after it
		}
		p.Allowed = true // describe the state, not a refusal
		d := Decision{Decision: p, Policy: res.t.policy, Tier: res.t.name, Reset: now.Add(p.ResetAfter), t: res.t, set: res.set}
		writeHeaders(w.Header(), &d, new(headers.Buffer), false)
	}
	writeJSON(w, http.StatusTooManyRequests, q.contentType(), costBody(res.cost, res.set.capacity, res.t.policyJSON, q.problem))
}

// throttle reports whether a log line may be written now: at most one per
// second per counter.
func (q *quota) throttle(last *atomic.Int64) bool {
	now := time.Now().UnixNano()
	prev := last.Load()
	return now-prev >= int64(time.Second) && last.CompareAndSwap(prev, now)
}

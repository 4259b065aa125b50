package limiter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/internal/keybuf"
	"github.com/ratekeeper/ratekeeper/store"
)

// Limiter decides, for one policy, whether a client (an identity in a
// tier) may spend some units of its quota: through the circuit breaker of
// the store's node, then the fallback store when the store fails, under
// the failure mode, overrides and dry run, and tells the observer, the
// refusal hook and the log. Build it once with [New]; it is safe for
// concurrent use.
type Limiter struct {
	store       store.Store
	local       store.Store // fallback store, or nil
	storeName   string
	tiers       []*tierState
	tierIndex   map[string]int
	limitsFunc  func(context.Context, string) ([]store.Limit, error)
	dedupMax    int
	dedupTTL    time.Duration
	countDenied bool
	overrides   bool
	dryRun      bool
	maxWait     time.Duration
	name        string
	failure     FailureMode
	headerOpts  headers.Options
	logger      *slog.Logger
	logSecret   []byte
	now         func() time.Time
	observer    func(context.Context, Event)
	refused     func(ctx context.Context, d Decision, identity string)
	breaker     breakers
	locate      store.NodeLocator // the store's, when it has one
	slots       *slots            // the in-flight cap, nil without one (inflight.go)
	lendKeys    bool              // the stores copy lent keys they keep (keybuf.Copier)
	stamp       bool              // lendKeys, and now is the real clock: lent memory carries its reading
	lastWarn    atomic.Int64      // unix nanos of the last store-failure warning
	lastError   atomic.Int64      // unix nanos of the last misconfiguration error
	lastRepair  atomic.Int64      // unix nanos of the last repaired-state warning
}

// tierState is a tier compiled at construction.
type tierState struct {
	name      string // "" for a limiter without tiers
	policy    string // metrics and refusal label: the name, or name/tier
	unlimited bool
	suspended bool
	limits    *limitSet  // the configured limits; nil when unlimited or suspended
	dynamic   limitCache // compiled results of LimitsFunc and Request.Limits
}

// Request asks a [Limiter] for a decision about one client.
type Request struct {
	// Tier is the client's tier: one of Options.Tiers, or "" for a limiter
	// without tiers.
	Tier string
	// Identity is the client as the application knows it ("203.0.113.7",
	// "alice"). Required: an empty identity is refused, never shared.
	Identity string
	// Cost is the number of units the request takes; 0 means 1.
	Cost int64
	// Limits, when set, are the limits to decide under instead of the
	// tier's (or Options.LimitsFunc's), such as those of an earlier
	// [Decision] of the same request.
	Limits []store.Limit
	// DedupID is a de-duplication id (an idempotency key), or "" for none;
	// see Options.DedupReplays.
	DedupID string
	// Charged is the part of Cost that an enclosing decision of this
	// limiter already took for the same request (a costly route inside a
	// group of the same quota): only the rest is taken. When nothing is
	// left, Decide takes and reports nothing and returns an admitting
	// Decision without an Outcome. If the rest is refused, the Decision's
	// RetryAfter is the time when the whole Cost fits.
	Charged int64
	// Peek reads the decision Decide would take now, recording, logging
	// and reporting nothing.
	Peek bool
	// Exempt marks a request its caller exempted (a health check): nothing
	// is decided; Decide reports [OutcomeExempt] and admits it.
	Exempt bool
	// IdentityErr is why the caller could not derive the client's identity
	// (no credential, a malformed address): nothing is decided; Decide
	// reports [OutcomeRejected] with this error, without an identity, and
	// returns it.
	IdentityErr error
	// Partial admits as much of Cost as fits now instead of all or none:
	// the Decision's Granted is the units taken, and it is refused only
	// when not even one unit fits (package store, "Partial grants"). Not
	// with Charged, a DedupID, Options.CountDenied or Options.Overrides.
	Partial bool

	wait bool // set by Wait: the store may admit it later (Options.MaxWait)
	// Reserve takes Cost as an estimate that [Limiter.Settle] may settle
	// once the actual cost is known. Limits of the window algorithms need
	// it to settle (their store then reports when it took the units; on
	// Redis a reservation runs the full decision script); GCRA and
	// token-bucket limits settle without it and ignore it, as do peeks
	// and partial requests.
	Reserve bool
}

// Decision is a limiter's answer about one request: the store's decision
// for the deciding limit (Allowed, Capacity, Remaining, ResetAfter,
// RetryAfter, LimitID, Blocked, Override...), the policy and tier it was
// taken under, and what the limiter made of it.
type Decision struct {
	store.Decision
	// Policy is the policy's name as refusals and metrics show it: the
	// limiter's name, followed by "/" and the tier for a limiter with tiers
	// ("api/authenticated").
	Policy string
	// Tier is the request's tier; "" for a limiter without tiers.
	Tier string
	// Reset is when the deciding limit is back to full capacity, or, for a
	// refusal, when the request may be retried: the instant
	// X-RateLimit-Reset names. Zero when no limit applied.
	Reset time.Time
	// Outcome is what the limiter made of the request. The request may go
	// on when Allowed is true ([OutcomeAllowed], [OutcomeUnlimited],
	// [OutcomeExempt], [OutcomeFailedOpen]) or the outcome is
	// [OutcomeDryRun]: a dry-run refusal keeps the store's Allowed false.
	// A refusal whose cost no limit can hold is [OutcomeLimited] with
	// Capacity, the smallest capacity of its limits, below Cost and no
	// RetryAfter. A failed closed decision carries the breaker's cooldown
	// as RetryAfter.
	Outcome Outcome
	// Cost is the number of units the request asked for.
	Cost int64
	// Limits are the limits the decision applied, nil when none did (an
	// unlimited or suspended tier, an exempt client, a failure). They are
	// shared: do not modify them.
	Limits []store.Limit
	// Headers holds the rate-limit header values of Limits, formatted once
	// per limit set (Options.Headers): write them with
	// Headers.Write(h, &d.Decision, d.Reset, &buf, retry), to an HTTP
	// header or gRPC metadata. Nil when Limits is.
	Headers *headers.Policy

	key      string // the store key units were taken under, for Settle
	reserved int64  // the units taken under key
	local    bool   // the fallback store took them
}

// New builds a Limiter on store s. It returns an error, never a
// half-built limiter, when s is nil, a limit is invalid, the limits mix
// algorithms, or an option is out of range; the message names the field.
func New(s store.Store, o Options) (*Limiter, error) {
	if err := o.validate(s); err != nil {
		return nil, err
	}
	l := &Limiter{
		store:       s,
		local:       o.Fallback,
		storeName:   storeName(s),
		limitsFunc:  o.LimitsFunc,
		dedupMax:    o.DedupReplays,
		dedupTTL:    o.DedupWindow,
		countDenied: o.CountDenied,
		overrides:   o.Overrides,
		dryRun:      o.DryRun,
		maxWait:     o.MaxWait,
		name:        cmpOr(o.Name, defaultName),
		failure:     o.FailureMode,
		headerOpts:  o.Headers,
		logger:      o.Logger,
		logSecret:   slices.Clone(o.LogSecret),
		now:         o.Clock,
		observer:    o.Observer,
		refused:     o.RefusalHook,
	}
	l.breaker = newBreakers(o.BreakerThreshold, o.BreakerCooldown)
	if l.logger == nil {
		l.logger = slog.Default()
	}
	if len(l.logSecret) == 0 {
		l.logSecret = processSecret
	}
	if l.now == nil {
		l.now = defaultNow
	}
	l.locate, _ = s.(store.NodeLocator)
	l.lendKeys = copiesKeys(s) && (o.Fallback == nil || copiesKeys(o.Fallback))
	l.stamp = l.lendKeys && o.Clock == nil
	tiers := o.Tiers
	rateless := len(tiers) == 0 && len(o.Limits) == 0
	switch {
	case rateless:
		tiers = []Tier{{Unlimited: true}} // a cap alone
	case len(tiers) == 0:
		tiers = []Tier{{Limits: o.Limits}}
	}
	l.slots = newSlots(o.InFlight, rateless)
	if err := l.compileTiers(tiers); err != nil {
		return nil, err
	}
	if o.Name == "" {
		if err := claimUnnamed(l, s, o.Fallback); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// newBreakers returns the per-node breakers of Options.BreakerThreshold
// and BreakerCooldown: zero means the default, a negative threshold no
// breaker.
func newBreakers(threshold int, cooldown time.Duration) breakers {
	switch {
	case threshold == 0:
		threshold = defaultBreakerThreshold
	case threshold < 0:
		threshold = 0
	}
	if cooldown == 0 {
		cooldown = defaultBreakerCooldown
	}
	return breakers{breaker: breaker{threshold: int32(threshold), cooldown: cooldown}}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// compileTiers compiles tiers into l: their policy labels and, for tiers
// with limits, the validated limits and their header values.
func (l *Limiter) compileTiers(tiers []Tier) error {
	l.tierIndex = make(map[string]int, len(tiers))
	for i, t := range tiers {
		if _, dup := l.tierIndex[t.Name]; dup {
			return fmt.Errorf("ratekeeper: limiter: tier %q configured twice", t.Name)
		}
		l.tierIndex[t.Name] = i
		ts := &tierState{name: t.Name, policy: policyLabel(l.name, t.Name), unlimited: t.Unlimited, suspended: t.Suspended}
		if !t.Unlimited && !t.Suspended {
			set, err := compileLimits(l.headerOpts, l.name, t.Name, t.Limits, l.countDenied)
			if err != nil {
				return fmt.Errorf("ratekeeper: limiter: policy %q: %w", ts.policy, err)
			}
			ts.limits = set
		}
		l.tiers = append(l.tiers, ts)
	}
	return nil
}

// copiesKeys reports whether s copies a key in lent memory before keeping
// it (see package internal/keybuf).
func copiesKeys(s store.Store) bool {
	_, ok := s.(keybuf.Copier)
	return ok
}

// storeName returns the backend name used in metrics labels: the store's
// Name method when it has one ("redis", "memory"), else its Go type.
func storeName(s store.Store) string {
	if n, ok := s.(interface{ Name() string }); ok {
		return n.Name()
	}
	return fmt.Sprintf("%T", s)
}

var (
	errEmptyKey      = errors.New("ratekeeper: empty identity")
	errMisconfigured = errors.New("ratekeeper: misconfigured policy")
	errBreakerOpen   = fmt.Errorf("%w: skipped: circuit breaker open", store.ErrStoreUnavailable)
	errClientGone    = errors.New("ratekeeper: client went away")
)

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

// storeCall describes how a decision was reached.
type storeCall struct {
	latency  time.Duration
	skipped  bool  // the breaker kept the main store from being called
	fallback bool  // the fallback store decided
	cause    error // the main store's failure, when the fallback decided
}

// Decide takes req.Cost units (1 by default) of req.Identity's quota in
// req.Tier and returns the decision, which says in Allowed whether the
// request may go on and in Outcome why. The same Decision is reported to
// the observer and, for a refusal, to the refusal hook (not for a peek).
//
// The error is nil for every answer of the store, admissions and refusals
// alike. It is not nil when the limiter could not decide as asked, and the
// Decision then still carries the outcome: a store failure (an error
// wrapping [store.ErrStoreUnavailable], with [OutcomeFailedOpen] or
// [OutcomeFailedClosed] as the failure mode says, unless the fallback
// store decided), a cost above a limit's capacity (wrapping
// [store.ErrCostExceedsCapacity], [OutcomeLimited] with a Capacity below Cost:
// no wait can admit it; [OutcomeDryRun] in dry-run mode), a context canceled during the store call
// ([OutcomeCanceled]), an unknown tier or invalid limits from
// Options.LimitsFunc ([OutcomeRejected], logged at error level), and an
// empty identity or negative cost (no Outcome, nothing reported).
func (l *Limiter) Decide(ctx context.Context, req Request) (d Decision, err error) {
	// Small enough to inline: the decision is built in the caller's
	// variable, not copied out of Decide's.
	err = l.decideTo(ctx, &req, &d)
	return d, err
}

// decideTo is Decide writing its decision to d, which is zero on entry:
// the decision is built where the caller keeps it, never copied on the
// way (a Decision is a few hundred bytes, and the path is every
// request's).
func (l *Limiter) decideTo(ctx context.Context, req *Request, d *Decision) (err error) {
	if req.Exempt {
		*d = Decision{Decision: store.Decision{Allowed: true}, Policy: l.name, Outcome: OutcomeExempt}
		if !req.Peek && l.watching(ctx) {
			l.report(ctx, &Event{Decision: *d}, "")
		}
		return nil
	}
	if req.IdentityErr != nil {
		d.Policy, d.Tier, d.Outcome = l.name, req.Tier, OutcomeRejected
		if !req.Peek && l.watching(ctx) {
			l.report(ctx, &Event{Decision: *d, Err: req.IdentityErr}, "")
		}
		return req.IdentityErr
	}
	cost := req.Cost
	switch {
	case cost == 0:
		cost = 1
	case cost < 0:
		d.Policy = l.name
		return fmt.Errorf("ratekeeper: limiter: cost must be >= 0, got %d", cost)
	}
	if req.Identity == "" {
		d.Policy = l.name
		return errEmptyKey
	}
	if req.Partial {
		if err := l.partialRequest(req); err != nil {
			d.Policy = l.name
			return err
		}
	}
	t, err := l.tier(req.Tier)
	if err != nil {
		*d, err = l.fail(ctx, req, Decision{Policy: l.name, Tier: req.Tier, Cost: cost}, err, storeCall{})
		return err
	}
	d.Policy, d.Tier, d.Cost = t.policy, t.name, cost
	switch {
	case t.suspended:
		d.Outcome = OutcomeSuspended
		l.reportUnlessPeek(ctx, req, &Event{Decision: *d})
		return nil
	case t.unlimited:
		d.Allowed, d.Outcome = true, OutcomeUnlimited
		l.reportUnlessPeek(ctx, req, &Event{Decision: *d})
		return nil
	case req.Charged >= cost:
		// An enclosing decision of this quota already took at least this
		// much: its decision stands.
		d.Allowed = true
		return nil
	}
	set, err := l.limitsFor(ctx, t, req.Limits)
	if err != nil {
		*d, err = l.fail(ctx, req, *d, err, storeCall{})
		return err
	}
	return l.decide(ctx, req, d, set)
}

// tier returns the tier named name.
func (l *Limiter) tier(name string) (*tierState, error) {
	if len(l.tiers) == 1 && l.tiers[0].name == name {
		return l.tiers[0], nil
	}
	if i, ok := l.tierIndex[name]; ok {
		return l.tiers[i], nil
	}
	return nil, fmt.Errorf("%w: unknown tier %q", errMisconfigured, name)
}

func (l *Limiter) reportUnlessPeek(ctx context.Context, req *Request, e *Event) {
	if !req.Peek && l.watching(ctx) {
		l.report(ctx, e, req.Identity)
	}
}

// storeRequest is the store request for req under set, taking need units,
// decided at now.
func (l *Limiter) storeRequest(ctx context.Context, req *Request, d *Decision, set *limitSet, need int64, now time.Time, sr *store.Request) {
	*sr = store.Request{Key: l.storeKey(ctx, now, d.Tier, req.Identity), Limits: set.limits, Cost: need, CountDenied: l.countDenied, ApplyOverride: l.overrides, Partial: req.Partial}
	if req.wait {
		sr.MaxWait = l.maxWait
	}
	if alg := set.limits[0].Algorithm; req.Reserve && !req.Peek && !req.Partial && alg != store.GCRA && alg != store.TokenBucket {
		sr.Reserve = true
	}
	if req.DedupID != "" && !req.Peek {
		sr.DedupID, sr.DedupReplays, sr.DedupWindow = req.DedupID, l.dedupMax, l.dedupTTL
	}
}

// decide takes the rest of the request's cost under set. When an
// enclosing decision of the same quota already charged part of the cost
// and the rest is refused, the decision describes a retry of the whole
// request (see nestedRefusal).
func (l *Limiter) decide(ctx context.Context, req *Request, d *Decision, set *limitSet) error {
	d.Limits, d.Headers = set.limits, set.fields
	var sr store.Request
	now := l.now()
	l.storeRequest(ctx, req, d, set, d.Cost-max(req.Charged, 0), now, &sr)
	sd := &d.Decision
	call, err := l.call(ctx, &sr, now, req.Peek, sd)
	if err == nil && sd.Duplicate {
		*sd, call, err = l.chargeReplay(ctx, sr, now, call)
	}
	if err != nil {
		*d, err = l.fail(ctx, req, *d, err, call)
		return err
	}
	if !req.Peek && !sd.Allowed && req.Charged > 0 && !sd.Blocked && sd.Override != store.OverrideSuspend {
		*sd = l.nestedRefusal(ctx, sr, d.Cost, *sd, call)
	}
	if !req.Peek && !sd.Allowed && sr.CountDenied && sd.Override != store.OverrideSuspend && attemptMayOutlast(sr.Limits) {
		*sd = l.countedRefusal(ctx, sr, *sd, call)
	}
	if !req.Peek && sd.Allowed {
		d.key, d.reserved, d.local = sr.Key, sr.Cost, call.fallback
		if sr.Partial {
			d.reserved = sd.Granted
		}
	}
	l.finish(ctx, req, d, now, &call)
	return nil
}

// finish completes d, whose Decision holds the store's answer taken at
// now, and reports it.
func (l *Limiter) finish(ctx context.Context, req *Request, d *Decision, now time.Time, call *storeCall) {
	sd := &d.Decision
	d.Reset = now.Add(resetAfter(sd))
	switch {
	case sd.Override == store.OverrideExempt:
		// An exempt client has no limit to describe.
		d.Limits, d.Headers, d.Reset = nil, nil, time.Time{}
		d.Outcome = OutcomeExempt
	case sd.Override == store.OverrideSuspend && !l.dryRun:
		d.Allowed = false
		d.Outcome = OutcomeSuspended
	case sd.Allowed:
		d.Outcome = OutcomeAllowed
	case l.dryRun:
		d.Outcome = OutcomeDryRun
	case sd.Blocked:
		d.Outcome = OutcomeBlocked
	default:
		d.Outcome = OutcomeLimited
	}
	if req.Peek {
		return
	}
	if call.fallback {
		l.warn(ctx, d.Policy, call.cause)
	}
	if sd.BlockStarted {
		l.blockStarted(ctx, req.Identity, d)
	}
	if l.watching(ctx) {
		l.report(ctx, &Event{Decision: *d, Latency: call.latency, Fallback: call.fallback, Err: call.cause, Skipped: call.skipped}, req.Identity)
	}
}

// resetAfter is the wait X-RateLimit-Reset names: until the deciding limit
// is full again, or for a refusal until the request may be retried.
func resetAfter(d *store.Decision) time.Duration {
	if d.Allowed {
		return d.ResetAfter
	}
	return d.RetryAfter
}

// fail completes d for a request the limiter could not decide. It is the
// one place that classifies failures: a configuration mistake found at
// request time, a cost no limit can hold, a client that went away, and
// store failures (the failure mode).
func (l *Limiter) fail(ctx context.Context, req *Request, d Decision, err error, call storeCall) (Decision, error) {
	d.Decision = store.Decision{}
	if !errors.Is(err, store.ErrCostExceedsCapacity) {
		d.Limits, d.Headers = nil, nil
	}
	misconfigured := errors.Is(err, errMisconfigured) || errors.Is(err, store.ErrInvalidRequest) || errors.Is(err, store.ErrInvalidLimit)
	switch {
	case errors.Is(err, store.ErrCostExceedsCapacity) && l.dryRun:
		// Shadow mode refuses nothing, this neither: reported as a
		// dry-run refusal, with no limit state to describe (none was
		// read).
		d.Outcome = OutcomeDryRun
		d.Limits, d.Headers = nil, nil
	case errors.Is(err, store.ErrCostExceedsCapacity):
		d.Outcome = OutcomeLimited
		if d.Limits != nil {
			d.Capacity = d.Limits[0].Capacity()
			for _, lim := range d.Limits[1:] {
				d.Capacity = min(d.Capacity, lim.Capacity())
			}
		}
	case misconfigured:
		d.Outcome = OutcomeRejected
	case errors.Is(err, errClientGone):
		d.Outcome = OutcomeCanceled
	case l.failure == FailClosed:
		d.Outcome = OutcomeFailedClosed
		d.RetryAfter = l.breaker.cooldown
	default:
		d.Allowed = true
		d.Outcome = OutcomeFailedOpen
	}
	if req.Peek {
		return d, err
	}
	switch {
	case misconfigured:
		// Throttled like store warnings: a limits function that parses
		// client input could otherwise log once per request.
		if l.throttle(&l.lastError) {
			l.logger.LogAttrs(ctx, slog.LevelError, "ratekeeper: misconfigured policy",
				slog.String("policy", d.Policy), slog.String("error", err.Error()))
		}
	case d.Outcome == OutcomeFailedOpen || d.Outcome == OutcomeFailedClosed:
		l.warn(ctx, d.Policy, err)
	}
	if l.watching(ctx) {
		l.report(ctx, &Event{Decision: d, Err: err, Latency: call.latency, Skipped: call.skipped}, req.Identity)
	}
	return d, err
}

// chargeReplay charges a replay of a de-duplication id (a store decision
// with Duplicate set, which recorded nothing) like any request, so that
// replays never run the handler beyond the client's limit whatever ids it
// sends: the store bounds replays per id only, and a client choosing a
// fresh id every few requests would otherwise be served 1 + DedupReplays
// times its limit. The replay keeps Duplicate when the limits admit it and
// is refused like any request when they do not. first is the call that
// found the duplicate; the returned call adds both latencies.
func (l *Limiter) chargeReplay(ctx context.Context, req store.Request, now time.Time, first storeCall) (store.Decision, storeCall, error) {
	req.DedupID = ""
	var d store.Decision
	c, err := l.call(ctx, &req, now, false, &d)
	c.latency += first.latency
	if err == nil && d.Allowed {
		d.Duplicate = true
	}
	return d, c, err
}

// nestedRefusal turns the refusal of the rest of a cost (cost minus what
// an enclosing decision charged) into the decision for the whole request:
// a retry passes the enclosing decision again, which charges its part
// first, so the request fits only when the full cost does. A peek at the
// full cost gives that time; if the peek fails the refusal stands as it is.
func (l *Limiter) nestedRefusal(ctx context.Context, req store.Request, cost int64, d store.Decision, call storeCall) store.Decision {
	s := l.store
	if call.fallback {
		s = l.local
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

// countedRefusal turns a refusal the store recorded (CountDenied) into one
// whose RetryAfter a client that stops may rely on. The store reports the
// waits as the limits stood without the refused attempt, but the attempt
// now counts: in a limit that admitted it, which it may have filled (a
// login's daily limit beside its per-minute one), and in a sliding window,
// which holds it after the wait. A peek of the same request after it
// gives the wait with the attempt; the longer of the two stands, with the
// limit state the peek read. If the peek fails the refusal stands as it
// is.
func (l *Limiter) countedRefusal(ctx context.Context, req store.Request, d store.Decision, call storeCall) store.Decision {
	s := l.store
	if call.fallback {
		s = l.local
	}
	d, _ = peekCounted(ctx, s, req, d)
	return d
}

// peekCounted peeks at req in s after d, its counted refusal, and returns
// the peek's refusal (with d's block flags) when it waits longer, and
// whether it did; else d.
func peekCounted(ctx context.Context, s store.Store, req store.Request, d store.Decision) (store.Decision, bool) {
	p, err := s.Peek(ctx, req)
	if err != nil || p.Allowed || p.RetryAfter <= d.RetryAfter {
		return d, false
	}
	p.Blocked = p.Blocked || d.Blocked
	p.BlockStarted = d.BlockStarted
	if p.Blocked {
		p.ResetAfter = max(p.ResetAfter, p.RetryAfter)
	}
	return p, true
}

// attemptMayOutlast reports whether a counted refusal under limits may
// still count against a retry at the RetryAfter the store reports: always
// but for a single fixed window, whose attempts all leave it when the
// window the refusal waits for ends.
func attemptMayOutlast(limits []store.Limit) bool {
	return len(limits) > 1 || limits[0].Algorithm != store.FixedWindow
}

// call runs one store operation, then the fallback store if the main store
// failed, and writes the decision to d. Its errors are the store's
// invalid-request errors, errClientGone or a *storeFailure.
func (l *Limiter) call(ctx context.Context, req *store.Request, now time.Time, peek bool, d *store.Decision) (storeCall, error) {
	c, err := l.callMain(ctx, req, now, peek, d)
	if err == nil && d.Repaired {
		l.repaired(ctx, d)
	}
	if err == nil || l.local == nil || !isStoreFailure(err) {
		return c, err
	}
	var lerr error
	if peek {
		*d, lerr = l.local.Peek(ctx, *req)
	} else {
		*d, lerr = l.local.Take(ctx, *req)
	}
	if lerr != nil {
		if errors.Is(lerr, store.ErrCostExceedsCapacity) || errors.Is(lerr, store.ErrInvalidRequest) {
			// The fallback could decide, and found the request itself
			// wrong (a cost the main store checks only once it has read
			// the client's override): that answer stands.
			return c, lerr
		}
		return c, err
	}
	c.fallback, c.cause = true, err
	return c, nil
}

// callMain calls the main store through the breaker, with the caller's
// context, and writes its decision to d: the time budget of a decision is
// the store's (the Redis store's Options.Timeout), not the limiter's. For
// a store that tells which node serves the request (a Redis Cluster
// master) the breaker is that node's: a failing shard is skipped, the
// others are still called.
func (l *Limiter) callMain(ctx context.Context, req *store.Request, now time.Time, peek bool, d *store.Decision) (c storeCall, err error) {
	node := l.nodeFor(ctx, *req)
	b := l.breaker.of(node)
	ok, probe := b.allow(now)
	if !ok {
		c.skipped = true
		return c, &storeFailure{err: errBreakerOpen, skipped: true}
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
	timed := l.watching(ctx)
	if timed {
		start = time.Now()
	}
	if peek {
		*d, err = l.store.Peek(ctx, *req)
	} else {
		*d, err = l.store.Take(ctx, *req)
	}
	if timed {
		c.latency = time.Since(start)
	}
	settled = true
	return c, l.settle(ctx, b, probe, node, err)
}

// nodeFor returns the node that serves req, for a store that tells (see
// store.NodeLocator) and a limiter with a breaker; "" otherwise.
func (l *Limiter) nodeFor(ctx context.Context, req store.Request) string {
	if l.locate == nil || l.breaker.threshold == 0 {
		return ""
	}
	return l.locate.NodeFor(ctx, req)
}

// settle tells breaker b how a store call ended and classifies its error:
// the store's invalid-request errors as they are, a client that went away
// as errClientGone, and the rest as a *storeFailure. Only failures that
// say something about the store's health count towards the breaker; a
// probe that says nothing is released.
func (l *Limiter) settle(ctx context.Context, b *breaker, probe bool, node string, err error) error {
	switch {
	case err == nil:
		if b.success(probe) {
			l.logger.LogAttrs(ctx, slog.LevelInfo, "ratekeeper: store answers again; circuit breaker closed",
				slog.String("policy", l.name), slog.String("store", l.storeName), slog.String("node", node))
		}
		return nil
	case errors.Is(err, store.ErrCostExceedsCapacity) || errors.Is(err, store.ErrInvalidRequest) || errors.Is(err, store.ErrInvalidLimit):
		err = releasing(b, probe, err)
	case errors.Is(ctx.Err(), context.Canceled):
		// The client went away; that says nothing about the store.
		err = releasing(b, probe, fmt.Errorf("%w: %w", errClientGone, err))
	case ctx.Err() != nil || keyScoped(err) || answered(err):
		// The request's own deadline ran out first, the store answered
		// about this key's data alone, a bounded store refused a new
		// key, or the node answered that it cannot decide for now: the
		// failure mode applies to this request, but the breaker, which
		// stands for the node's health, is not told.
		err = releasing(b, probe, &storeFailure{err: err})
	default:
		if b.failure(l.now(), probe) {
			l.logger.LogAttrs(ctx, slog.LevelInfo, "ratekeeper: store failing; circuit breaker opened",
				slog.String("policy", l.name), slog.String("store", l.storeName), slog.String("node", node),
				slog.String("kind", store.KindOf(err)), slog.Duration("cooldown", l.breaker.cooldown),
				slog.String("failure_mode", l.failure.name()))
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

package middleware

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/store"
)

// Limiter is a rate-limiting HTTP middleware for one policy: a store, a way
// to derive each request's key (and, with [NewTiered], its tier) and the
// limits it is held to. Build it once with [New] or [NewTiered] and wrap
// any number of handlers with [Limiter.Handler]; a Limiter is safe for
// concurrent use.
type Limiter struct {
	*shared
	cost int64
}

// shared is the state common to a Limiter and its [Limiter.WithCost]
// variants: they use the same quota.
type shared struct {
	store      store.Store
	classify   Classifier
	tiers      []tierState
	tierIndex  map[string]int
	costFunc   func(*http.Request) (int64, error)
	limitsFunc func(*http.Request) ([]store.Limit, error)
	dedup      func(*http.Request) string
	exempt     []func(*http.Request) bool
	countDeny  bool
	dryRun     bool
	name       string
	failure    FailureMode
	timeout    time.Duration
	hdr        headers.Writer
	body       BodyFormat
	logger     *slog.Logger
	now        func() time.Time
	denied     DeniedHandler
	observer   Observer
	breaker    breaker
	lastWarn   atomic.Int64 // unix nanos of the last store-failure warning
	lastError  atomic.Int64 // unix nanos of the last misconfiguration error
	local      store.Store  // local fallback store, or nil
	storeName  string
	localStore bool // the store never blocks: no deadline needed
}

// tierState is a tier compiled at construction.
type tierState struct {
	Tier
	policy   string // metrics and body label: the name, or name/tier
	nameJSON []byte // JSON string of policy
	prefix   string // storage key namespace
	fields   *headers.Fields
}

// New builds a Limiter that keys requests with key and admits them under
// limit (plus any [WithLimits]) in store s. It returns an error, never a
// half-built limiter, when s or key is nil, a limit is invalid, the limits
// mix algorithms, the cost does not fit, or an option is out of range; the
// message names the field.
func New(s store.Store, key keyfunc.KeyFunc, limit store.Limit, opts ...Option) (*Limiter, error) {
	if key == nil {
		return nil, errors.New("ratekeeper: middleware: nil key function")
	}
	c, err := collect(opts)
	if err != nil {
		return nil, err
	}
	limits := append([]store.Limit{limit}, c.extraLimits...)
	fallback := c.fallbackKey
	classify := func(r *http.Request) (string, string, error) {
		k, err := key(r)
		if err != nil && fallback != nil && errors.Is(err, keyfunc.ErrNoIdentity) {
			k, err = fallback(r)
		}
		return "", k, err
	}
	return build(s, c, classify, []Tier{{Limits: limits}})
}

func collect(opts []Option) (config, error) {
	c := config{
		name:             DefaultName,
		cost:             1,
		timeout:          DefaultTimeout,
		breakerThreshold: DefaultBreakerThreshold,
		breakerCooldown:  DefaultBreakerCooldown,
		now:              time.Now,
	}
	for _, o := range opts {
		if o == nil {
			return c, errors.New("ratekeeper: middleware: nil option")
		}
		o(&c)
	}
	return c, c.err
}

func build(s store.Store, c config, classify Classifier, tiers []Tier) (*Limiter, error) {
	if s == nil {
		return nil, errors.New("ratekeeper: middleware: nil store")
	}
	if err := validName("name", c.name); err != nil {
		return nil, err
	}
	if c.cost <= 0 {
		return nil, fmt.Errorf("ratekeeper: middleware: cost must be > 0, got %d", c.cost)
	}
	if c.failure != FailOpen && c.failure != FailClosed {
		return nil, fmt.Errorf("ratekeeper: middleware: unknown failure mode %d", int(c.failure))
	}
	if c.body != BodyJSON && c.body != BodyProblem {
		return nil, fmt.Errorf("ratekeeper: middleware: unknown body format %d", int(c.body))
	}
	if c.timeout <= 0 {
		return nil, fmt.Errorf("ratekeeper: middleware: timeout must be > 0, got %s", c.timeout)
	}
	if c.breakerThreshold > maxBreakerThreshold {
		return nil, fmt.Errorf("ratekeeper: middleware: breaker threshold must be <= %d, got %d", maxBreakerThreshold, c.breakerThreshold)
	}
	if c.breakerThreshold < 0 {
		return nil, fmt.Errorf("ratekeeper: middleware: breaker threshold must be >= 0, got %d", c.breakerThreshold)
	}
	if c.breakerThreshold > 0 && c.breakerCooldown <= 0 {
		return nil, fmt.Errorf("ratekeeper: middleware: breaker cooldown must be > 0, got %s", c.breakerCooldown)
	}
	if c.now == nil {
		return nil, errors.New("ratekeeper: middleware: nil clock")
	}
	for i, f := range c.exempt {
		if f == nil {
			return nil, fmt.Errorf("ratekeeper: middleware: exemption %d is nil", i)
		}
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	sh := &shared{
		store:      s,
		classify:   classify,
		tierIndex:  make(map[string]int, len(tiers)),
		costFunc:   c.costFunc,
		limitsFunc: c.limitsFunc,
		dedup:      c.dedup,
		exempt:     c.exempt,
		countDeny:  c.countDenied,
		dryRun:     c.dryRun,
		name:       c.name,
		failure:    c.failure,
		timeout:    c.timeout,
		hdr:        c.headers,
		body:       c.body,
		logger:     c.logger,
		now:        c.now,
		denied:     c.denied,
		observer:   c.observer,
		local:      c.local,
		breaker:    breaker{threshold: int32(c.breakerThreshold), cooldown: c.breakerCooldown},
		storeName:  storeName(s),
		localStore: isLocal(s),
	}
	for i, t := range tiers {
		ts := tierState{Tier: t, policy: c.name, prefix: c.name + ":"}
		if t.Name != "" {
			// "/" is outside the name alphabet, so "api" with tier
			// "authenticated" never meets a policy named
			// "api.authenticated".
			ts.policy = c.name + "/" + t.Name
			ts.prefix = c.name + "/" + t.Name + ":"
		}
		ts.nameJSON = strconv.AppendQuote(nil, ts.policy) // policy names are plain ASCII: Go quoting is JSON quoting
		if _, dup := sh.tierIndex[t.Name]; dup {
			return nil, fmt.Errorf("ratekeeper: middleware: tier %q configured twice", t.Name)
		}
		sh.tierIndex[t.Name] = i
		if !t.Unlimited && !t.Suspended {
			probe := store.Request{Key: "probe", Limits: t.Limits, Cost: c.cost, CountDenied: c.countDenied}
			if err := probe.Validate(); err != nil {
				return nil, fmt.Errorf("ratekeeper: middleware: policy %q: %w", ts.policy, err)
			}
			f, err := c.headers.Compile(ts.policy, t.Limits)
			if err != nil {
				return nil, fmt.Errorf("ratekeeper: middleware: policy %q: %w", ts.policy, err)
			}
			ts.fields = f
			ts.Limits = append([]store.Limit(nil), t.Limits...)
		}
		sh.tiers = append(sh.tiers, ts)
	}
	return &Limiter{shared: sh, cost: c.cost}, nil
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

// Name returns the policy name.
func (l *Limiter) Name() string { return l.name }

// WithCost returns a Limiter that shares l's quota, store, tiers and
// breaker but charges n units per request: wrap a costly route with it so
// that, for example, a search takes 5 units of the same per-client quota a
// ping takes 1 of. It returns an error when n is below 1 or above a limit's
// capacity.
func (l *Limiter) WithCost(n int64) (*Limiter, error) {
	if n <= 0 {
		return nil, fmt.Errorf("ratekeeper: middleware: cost must be > 0, got %d", n)
	}
	for _, t := range l.tiers {
		if t.Unlimited || t.Suspended {
			continue
		}
		probe := store.Request{Key: "probe", Limits: t.Limits, Cost: n, CountDenied: l.countDeny}
		if err := probe.Validate(); err != nil {
			return nil, fmt.Errorf("ratekeeper: middleware: policy %q: %w", t.policy, err)
		}
	}
	return &Limiter{shared: l.shared, cost: n}, nil
}

// Handler wraps next so that every request is rate limited before it
// reaches next. Its shape fits chi's r.Use and r.With and http.ServeMux
// (mux.Handle(pattern, l.Handler(h))). Handler panics if next is nil; that
// happens at setup, never at request time.
func (l *Limiter) Handler(next http.Handler) http.Handler {
	if next == nil {
		panic("ratekeeper: middleware: Handler called with nil next")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.serve(w, r, next)
	})
}

var (
	errEmptyKey    = errors.New("ratekeeper: key function returned an empty key")
	errBreakerOpen = errors.New("ratekeeper: store skipped: circuit breaker open")
	errUnknownTier = errors.New("ratekeeper: classifier returned an unknown tier")
	errBadCost     = errors.New("ratekeeper: cost function returned a cost below 1")
)

func (l *Limiter) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	for _, ex := range l.exempt {
		if ex(r) {
			l.observe(Event{Policy: l.name, Outcome: OutcomeExempt})
			next.ServeHTTP(w, r)
			return
		}
	}
	tierName, key, err := l.classify(r)
	if err == nil && key == "" {
		err = errEmptyKey
	}
	if err != nil {
		l.observe(Event{Policy: l.name, Outcome: OutcomeRejected, Err: err})
		if errors.Is(err, keyfunc.ErrNoIdentity) {
			writeJSON(w, http.StatusUnauthorized, contentTypeJSON, bodyUnauthorized)
		} else {
			writeJSON(w, http.StatusBadRequest, contentTypeJSON, bodyBadRequest)
		}
		return
	}
	ti, ok := l.tierIndex[tierName]
	if !ok {
		l.internalError(w, Event{Policy: l.name, Outcome: OutcomeRejected, Err: fmt.Errorf("%w: %q", errUnknownTier, tierName)})
		return
	}
	t := &l.tiers[ti]
	switch {
	case t.Suspended:
		l.observe(Event{Policy: t.policy, key: key, Outcome: OutcomeSuspended})
		writeJSON(w, http.StatusForbidden, contentTypeJSON, bodySuspended)
		return
	case t.Unlimited:
		l.observe(Event{Policy: t.policy, key: key, Outcome: OutcomeUnlimited})
		next.ServeHTTP(w, r)
		return
	}

	req := store.Request{Key: t.prefix + key, Limits: t.Limits, Cost: l.cost, CountDenied: l.countDeny}
	fields := t.fields
	if l.limitsFunc != nil {
		lim, err := l.limitsFunc(r)
		if err == nil {
			req.Limits = lim
			fields, err = l.hdr.Compile(t.policy, lim)
		}
		if err != nil {
			l.internalError(w, Event{Policy: t.policy, key: key, Outcome: OutcomeRejected, Err: fmt.Errorf("limits function: %w", err)})
			return
		}
	}
	if l.costFunc != nil {
		c, err := l.costFunc(r)
		if err == nil && c < 1 {
			err = fmt.Errorf("%w: %d", errBadCost, c)
		}
		if err != nil {
			l.internalError(w, Event{Policy: t.policy, key: key, Outcome: OutcomeRejected, Err: fmt.Errorf("cost function: %w", err)})
			return
		}
		req.Cost = c
	}
	if l.dedup != nil {
		req.DedupID = l.dedup(r)
	}

	now := l.now()
	d, latency, err := l.decide(r, req, now)
	if err != nil {
		switch {
		case errors.Is(err, store.ErrCostExceedsCapacity):
			l.observe(Event{Policy: t.policy, key: key, Outcome: OutcomeLimited, Err: err, Latency: latency})
			l.writeCostExceeded(w, req, t)
		case errors.Is(err, store.ErrInvalidRequest) || errors.Is(err, store.ErrInvalidLimit):
			l.internalError(w, Event{Policy: t.policy, key: key, Outcome: OutcomeRejected, Err: err, Latency: latency})
		case errors.Is(err, errClientGone):
			l.observe(Event{Policy: t.policy, key: key, Outcome: OutcomeCanceled, Err: err, Latency: latency})
		default:
			var se *storeErr
			skipped := errors.As(err, &se) && se.skipped
			if l.local != nil {
				if d, lerr := l.local.Take(r.Context(), req); lerr == nil {
					l.warn(t.policy, err)
					l.respond(w, r, next, t, fields, d, now, Event{Policy: t.policy, key: key, Latency: latency, Err: err, Skipped: skipped, Fallback: true})
					return
				}
			}
			l.fail(w, r, next, Event{Policy: t.policy, key: key, Err: err, Latency: latency, Skipped: skipped})
		}
		return
	}
	l.respond(w, r, next, t, fields, d, now, Event{Policy: t.policy, key: key, Latency: latency})
}

var errClientGone = errors.New("ratekeeper: client went away")

// storeErr marks a store failure; skipped means the breaker kept the store
// from being called at all.
type storeErr struct {
	err     error
	skipped bool
}

func (e *storeErr) Error() string { return e.err.Error() }
func (e *storeErr) Unwrap() error { return e.err }

// decide runs the store call within the budget and feeds the breaker. Its
// errors are the store's invalid-request errors, errClientGone, or a
// *storeErr for backend failures.
func (l *Limiter) decide(r *http.Request, req store.Request, now time.Time) (d store.Decision, latency time.Duration, err error) {
	ok, probe := l.breaker.allow(now)
	if !ok {
		return d, 0, &storeErr{err: errBreakerOpen, skipped: true}
	}
	resolved := false
	if probe {
		defer func() {
			if !resolved { // an invalid request, a gone client, or a panic
				l.breaker.release()
			}
		}()
	}
	start := time.Now()
	if l.localStore {
		d, err = l.store.Take(r.Context(), req)
	} else {
		ctx, cancel := context.WithTimeout(r.Context(), l.timeout)
		d, err = l.store.Take(ctx, req)
		cancel()
	}
	latency = time.Since(start)
	switch {
	case err == nil:
		l.breaker.success(probe)
		resolved = true
		return d, latency, nil
	case errors.Is(err, store.ErrCostExceedsCapacity) || errors.Is(err, store.ErrInvalidRequest) || errors.Is(err, store.ErrInvalidLimit):
		return d, latency, err
	case errors.Is(r.Context().Err(), context.Canceled):
		// The client went away; that says nothing about the store.
		return d, latency, fmt.Errorf("%w: %w", errClientGone, err)
	case r.Context().Err() != nil:
		// The request's own deadline, shorter than the budget, ran out:
		// apply the failure mode, but do not blame the store for it.
		return d, latency, &storeErr{err: err}
	case store.KindOf(err) == store.KindCapacity:
		// A bounded store refused a new key: the store is healthy, and
		// opening the breaker would stop limiting the keys it holds.
		return d, latency, &storeErr{err: err}
	}
	l.breaker.failure(l.now(), probe)
	resolved = true
	return d, latency, &storeErr{err: err}
}

// respond writes the headers for d and either calls next or refuses.
func (l *Limiter) respond(w http.ResponseWriter, r *http.Request, next http.Handler, t *tierState, fields *headers.Fields, d store.Decision, now time.Time, e Event) {
	e.Decision = d
	fields.Write(w.Header(), d, now)
	if d.Allowed {
		e.Outcome = OutcomeAllowed
		l.observe(e)
		next.ServeHTTP(w, r)
		return
	}
	if l.dryRun {
		// Shadow mode: a Retry-After on a 200 would make polite clients
		// back off from a limit that is not enforced yet.
		delete(w.Header(), headers.RetryAfter)
		e.Outcome = OutcomeDryRun
		l.observe(e)
		next.ServeHTTP(w, r)
		return
	}
	e.Outcome = OutcomeLimited
	if d.Blocked {
		e.Outcome = OutcomeBlocked
	}
	l.observe(e)
	if l.denied != nil {
		l.denied(w, r, d)
		return
	}
	l.writeLimited(w, t, fields, d, now)
}

// fail applies the failure mode.
func (l *Limiter) fail(w http.ResponseWriter, r *http.Request, next http.Handler, e Event) {
	l.warn(e.Policy, e.Err)
	if l.failure == FailClosed {
		e.Outcome = OutcomeFailedClosed
		l.observe(e)
		w.Header()[headers.RetryAfter] = []string{strconv.FormatInt(headers.RetryAfterSeconds(l.breaker.cooldown), 10)}
		writeJSON(w, http.StatusServiceUnavailable, contentTypeJSON, bodyUnavailable)
		return
	}
	e.Outcome = OutcomeFailedOpen
	l.observe(e)
	next.ServeHTTP(w, r)
}

// internalError answers 500 for configuration mistakes detected at request
// time (a classifier naming an unknown tier, a cost function returning 0).
// The log line is throttled like store warnings, since a cost function that
// parses client input could otherwise log once per request.
func (l *Limiter) internalError(w http.ResponseWriter, e Event) {
	if l.throttle(&l.lastError) {
		l.logger.Error("ratekeeper: misconfigured policy", slog.String("policy", e.Policy), slog.String("error", e.Err.Error()))
	}
	l.observe(e)
	writeJSON(w, http.StatusInternalServerError, contentTypeJSON, bodyInternal)
}

// warn logs a store failure at most once per second; the error text goes to
// the log only, never to the client.
func (l *Limiter) warn(policy string, err error) {
	if !l.throttle(&l.lastWarn) {
		return
	}
	l.logger.Warn("ratekeeper: store failure",
		slog.String("policy", policy),
		slog.String("failure_mode", l.failure.String()),
		slog.String("kind", string(store.KindOf(err))),
		slog.String("error", err.Error()))
}

// throttle reports whether a log line may be written now: at most one per
// second per counter.
func (l *Limiter) throttle(last *atomic.Int64) bool {
	now := time.Now().UnixNano()
	prev := last.Load()
	return now-prev >= int64(time.Second) && last.CompareAndSwap(prev, now)
}

// logKey is the per-process secret that keys the hashes of keys in debug
// logs: the hashes correlate one client's lines within a process, but
// cannot be reversed by hashing every IPv4 address.
var logKey = func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}()

// debug logs one event at debug level, with the key hashed (keyed by a
// per-process secret) so logs never hold client addresses, subjects or API
// keys in clear.
func (l *Limiter) debug(e Event) {
	ctx := context.Background()
	if !l.logger.Enabled(ctx, slog.LevelDebug) {
		return
	}
	attrs := make([]slog.Attr, 0, 9)
	attrs = append(attrs, slog.String("policy", e.Policy), slog.String("outcome", string(e.Outcome)))
	if e.key != "" {
		mac := hmac.New(sha256.New, logKey)
		mac.Write([]byte(e.key))
		attrs = append(attrs, slog.String("key_hash", hex.EncodeToString(mac.Sum(nil)[:8])))
	}
	if e.Decision.Limit != 0 {
		attrs = append(attrs,
			slog.Int64("remaining", e.Decision.Remaining),
			slog.Duration("retry_after", e.Decision.RetryAfter),
			slog.String("limit", e.Decision.LimitID))
	}
	if e.Fallback {
		attrs = append(attrs, slog.Bool("fallback", true))
	}
	if e.Latency > 0 {
		attrs = append(attrs, slog.Duration("latency", e.Latency))
	}
	l.logger.LogAttrs(ctx, slog.LevelDebug, "ratekeeper: decision", attrs...)
}

func (l *Limiter) observe(e Event) {
	l.debug(e)
	if l.observer != nil {
		e.Store = l.storeName
		e.StoreDown = l.breaker.down()
		l.observer.Observe(e)
	}
}

// isLocal reports whether s declares it never blocks ([store.Local]).
func isLocal(s store.Store) bool {
	l, ok := s.(store.Local)
	return ok && l.Local()
}

// storeName returns the backend name used in metrics labels.
func storeName(s store.Store) string {
	if n, ok := s.(Named); ok {
		return n.Name()
	}
	return fmt.Sprintf("%T", s)
}

// Reset forgets everything the store holds for key under this policy (and,
// for a [NewTiered] limiter, under the named tier; "" for a limiter built
// with [New]): counters, an active block, repeat-offence strikes and
// remembered de-duplication ids. key is what the key function or
// classifier returns, for example "203.0.113.7" from [keyfunc.RemoteIP].
// Use it to unblock a client by hand. It returns an error for an unknown
// tier, an empty key, or a store failure.
func (l *Limiter) Reset(ctx context.Context, tier, key string) error {
	if key == "" {
		return errEmptyKey
	}
	ti, ok := l.tierIndex[tier]
	if !ok {
		return fmt.Errorf("%w: %q", errUnknownTier, tier)
	}
	t := &l.tiers[ti]
	if t.Unlimited || t.Suspended {
		return nil // nothing is stored for such tiers
	}
	return l.store.Reset(ctx, store.Request{Key: t.prefix + key, Limits: t.Limits})
}

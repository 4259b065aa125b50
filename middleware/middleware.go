package middleware

import (
	"context"
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

// Limiter is a rate-limiting HTTP middleware for one policy: a store, a
// key function and one or more limits. Build it once with [New] and wrap
// any number of handlers with [Limiter.Handler]; a Limiter is safe for
// concurrent use.
type Limiter struct {
	store     store.Store
	key       keyfunc.KeyFunc
	fallback  keyfunc.KeyFunc
	limits    []store.Limit
	cost      int64
	name      string
	nameJSON  []byte // JSON-encoded name, for bodies
	failure   FailureMode
	timeout   time.Duration
	headers   *headers.Fields
	logger    *slog.Logger
	now       func() time.Time
	denied    DeniedHandler
	observer  Observer
	breaker   breaker
	lastWarn  atomic.Int64 // unix nanos of the last store-failure warning
	storeName string
}

// New builds a Limiter that keys requests with key and admits them under
// limit (plus any [WithLimits]) in store s. It returns an error, never a
// half-built limiter, when s or key is nil, a limit is invalid, the limits
// mix algorithms, the cost does not fit, or an option is out of range.
func New(s store.Store, key keyfunc.KeyFunc, limit store.Limit, opts ...Option) (*Limiter, error) {
	if s == nil {
		return nil, errors.New("ratekeeper: middleware: nil store")
	}
	if key == nil {
		return nil, errors.New("ratekeeper: middleware: nil key function")
	}
	c := config{
		name:             DefaultName,
		limits:           []store.Limit{limit},
		cost:             1,
		timeout:          DefaultTimeout,
		breakerThreshold: DefaultBreakerThreshold,
		breakerCooldown:  DefaultBreakerCooldown,
		now:              time.Now,
	}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("ratekeeper: middleware: nil option")
		}
		o(&c)
	}
	if err := validName(c.name); err != nil {
		return nil, err
	}
	if c.cost <= 0 {
		return nil, fmt.Errorf("ratekeeper: middleware: cost must be > 0, got %d", c.cost)
	}
	probe := store.Request{Key: "probe", Limits: c.limits, Cost: c.cost}
	if err := probe.Validate(); err != nil {
		return nil, fmt.Errorf("ratekeeper: middleware: policy %q: %w", c.name, err)
	}
	if c.failure != FailOpen && c.failure != FailClosed {
		return nil, fmt.Errorf("ratekeeper: middleware: unknown failure mode %d", int(c.failure))
	}
	if c.timeout <= 0 {
		return nil, fmt.Errorf("ratekeeper: middleware: timeout must be > 0, got %s", c.timeout)
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
	if c.logger == nil {
		c.logger = slog.Default()
	}
	fields, err := c.headers.Compile(c.name, c.limits)
	if err != nil {
		return nil, fmt.Errorf("ratekeeper: middleware: policy %q: %w", c.name, err)
	}
	nameJSON := strconv.AppendQuote(nil, c.name) // names are plain ASCII, so Go quoting is JSON quoting
	l := &Limiter{
		store:     s,
		key:       key,
		fallback:  c.fallbackKey,
		limits:    append([]store.Limit(nil), c.limits...),
		cost:      c.cost,
		name:      c.name,
		nameJSON:  nameJSON,
		failure:   c.failure,
		timeout:   c.timeout,
		headers:   fields,
		logger:    c.logger,
		now:       c.now,
		denied:    c.denied,
		observer:  c.observer,
		breaker:   breaker{threshold: int32(c.breakerThreshold), cooldown: c.breakerCooldown},
		storeName: storeName(s),
	}
	return l, nil
}

func validName(n string) error {
	if n == "" || len(n) > 64 {
		return fmt.Errorf("ratekeeper: middleware: name must be 1 to 64 characters, got %q", n)
	}
	for i := 0; i < len(n); i++ {
		b := n[i]
		if !('a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '_' || b == '-' || b == '.') {
			return fmt.Errorf("ratekeeper: middleware: name %q: only [A-Za-z0-9_.-] allowed", n)
		}
	}
	return nil
}

// Name returns the policy name.
func (l *Limiter) Name() string { return l.name }

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

func (l *Limiter) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	key, err := l.identity(r)
	if err != nil {
		l.observe(Event{Policy: l.name, Outcome: OutcomeRejected, Err: err})
		if errors.Is(err, keyfunc.ErrNoIdentity) {
			writeJSON(w, http.StatusUnauthorized, bodyUnauthorized)
		} else {
			writeJSON(w, http.StatusBadRequest, bodyBadRequest)
		}
		return
	}
	req := store.Request{Key: key, Limits: l.limits, Cost: l.cost}

	now := l.now()
	if !l.breaker.allow(now) {
		l.fail(w, r, next, Event{Policy: l.name, Err: errBreakerOpen, Skipped: true})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), l.timeout)
	start := time.Now()
	d, err := l.store.Take(ctx, req)
	latency := time.Since(start)
	cancel()
	if err != nil {
		if r.Context().Err() != nil {
			// The client went away; that says nothing about the store.
			l.breaker.release()
			l.observe(Event{Policy: l.name, Outcome: OutcomeCanceled, Err: err, Latency: latency})
			return
		}
		l.breaker.failure(l.now())
		l.fail(w, r, next, Event{Policy: l.name, Err: err, Latency: latency})
		return
	}
	l.breaker.success()

	l.headers.Write(w.Header(), d, now)
	if d.Allowed {
		l.observe(Event{Policy: l.name, Outcome: OutcomeAllowed, Decision: d, Latency: latency})
		next.ServeHTTP(w, r)
		return
	}
	l.observe(Event{Policy: l.name, Outcome: OutcomeLimited, Decision: d, Latency: latency})
	if l.denied != nil {
		l.denied(w, r, d)
		return
	}
	l.writeLimited(w, d, now)
}

// identity runs the key function, then the fallback on ErrNoIdentity, and
// namespaces the result with the policy name. Policy names cannot contain
// ':', so the composition is injective.
func (l *Limiter) identity(r *http.Request) (string, error) {
	k, err := l.key(r)
	if err != nil && l.fallback != nil && errors.Is(err, keyfunc.ErrNoIdentity) {
		k, err = l.fallback(r)
	}
	if err != nil {
		return "", err
	}
	if k == "" {
		return "", errEmptyKey
	}
	return l.name + ":" + k, nil
}

var (
	errEmptyKey    = errors.New("ratekeeper: key function returned an empty key")
	errBreakerOpen = errors.New("ratekeeper: store skipped: circuit breaker open")
)

// fail applies the failure mode.
func (l *Limiter) fail(w http.ResponseWriter, r *http.Request, next http.Handler, e Event) {
	l.warn(e.Err)
	if l.failure == FailClosed {
		e.Outcome = OutcomeFailedClosed
		l.observe(e)
		w.Header()[headers.RetryAfter] = []string{strconv.FormatInt(headers.RetryAfterSeconds(l.breaker.cooldown), 10)}
		writeJSON(w, http.StatusServiceUnavailable, bodyUnavailable)
		return
	}
	e.Outcome = OutcomeFailedOpen
	l.observe(e)
	next.ServeHTTP(w, r)
}

// warn logs a store failure at most once per second; the error text goes to
// the log only, never to the client.
func (l *Limiter) warn(err error) {
	now := time.Now().UnixNano()
	last := l.lastWarn.Load()
	if now-last < int64(time.Second) || !l.lastWarn.CompareAndSwap(last, now) {
		return
	}
	l.logger.Warn("ratekeeper: store failure",
		slog.String("policy", l.name),
		slog.String("failure_mode", l.failure.String()),
		slog.String("kind", string(store.KindOf(err))),
		slog.String("error", err.Error()))
}

func (l *Limiter) observe(e Event) {
	if l.observer != nil {
		e.Store = l.storeName
		e.StoreDown = l.breaker.open(l.now())
		l.observer.Observe(e)
	}
}

// storeName returns the backend name used in metrics labels.
func storeName(s store.Store) string {
	if n, ok := s.(Named); ok {
		return n.Name()
	}
	return fmt.Sprintf("%T", s)
}

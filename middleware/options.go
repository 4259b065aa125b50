package middleware

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/store"
)

// FailureMode says what a [Limiter] does when its store fails or exceeds
// the decision budget.
type FailureMode int

const (
	// FailOpen lets the request through without rate-limit headers, logs a
	// rate-limited warning and counts it. The default: an outage of the
	// limiter's store does not become an outage of the service.
	FailOpen FailureMode = iota
	// FailClosed answers 503 Service Unavailable with a JSON body and
	// Retry-After, and does not call the wrapped handler.
	FailClosed
)

// String returns "fail_open" or "fail_closed".
func (m FailureMode) String() string {
	switch m {
	case FailOpen:
		return "fail_open"
	case FailClosed:
		return "fail_closed"
	}
	return fmt.Sprintf("FailureMode(%d)", int(m))
}

// BodyFormat chooses the body of refusals.
type BodyFormat int

const (
	// BodyJSON is the default application/json body (see [Limiter]).
	BodyJSON BodyFormat = iota
	// BodyProblem is an RFC 9457 application/problem+json body with the
	// quota-exceeded problem type of draft-ietf-httpapi-ratelimit-headers
	// and its violated-policies member.
	BodyProblem
)

// Defaults used when the corresponding option is not given.
const (
	// DefaultName is the policy name of a limiter built without [WithName].
	DefaultName = "default"
	// DefaultTimeout is the decision budget: the longest a request waits for
	// the store before the failure mode applies.
	DefaultTimeout = 50 * time.Millisecond
	// DefaultBreakerThreshold is how many consecutive store failures open
	// the circuit breaker.
	DefaultBreakerThreshold = 5
	// DefaultBreakerCooldown is how long an open breaker skips the store
	// before letting one probe request through.
	DefaultBreakerCooldown = time.Second
)

// Option configures a [Limiter]. Options are applied in order by [New] or
// [NewTiered], which validate the result.
type Option func(*config)

type config struct {
	name             string
	cost             int64
	costFunc         func(*http.Request) (int64, error)
	limitsFunc       func(*http.Request) ([]store.Limit, error)
	dedup            func(*http.Request) string
	countDenied      bool
	dryRun           bool
	failure          FailureMode
	timeout          time.Duration
	breakerThreshold int
	breakerCooldown  time.Duration
	headers          headers.Writer
	body             BodyFormat
	fallbackKey      keyfunc.KeyFunc
	logger           *slog.Logger
	now              func() time.Time
	denied           DeniedHandler
	observer         Observer
	exempt           []func(*http.Request) bool
	extraLimits      []store.Limit
	local            store.Store
	err              error
}

// DeniedHandler writes the response for a request the limiter refused.
// The rate-limit headers are already set on w when it is called. It must
// write a status (usually 429).
type DeniedHandler func(w http.ResponseWriter, r *http.Request, d store.Decision)

// WithName names the policy (default [DefaultName]). The name appears in
// the 429 body, in metrics and logs, and namespaces the storage key, so two
// limiters with different names never share counters. Names are 1 to 64
// characters from [A-Za-z0-9_.-].
func WithName(name string) Option { return func(c *config) { c.name = name } }

// WithLimits adds limits to the one given to [New]. A request must pass all
// of them and is recorded in all or none (for example 10 per minute and 100
// per hour). All limits use the same algorithm. Not valid with [NewTiered],
// whose tiers carry their own limits.
func WithLimits(limits ...store.Limit) Option {
	return func(c *config) { c.extraLimits = append(c.extraLimits, limits...) }
}

// WithLimitsFunc chooses the limits per request (for example from the
// caller's plan, read from configuration that changes without a deploy),
// overriding the configured ones, those of every tier included (with
// [NewTiered], give each tier its own Limiter if their plans differ). Limit
// names it returns become the "scope" label of blocks: keep them to a fixed
// set. The function must be fast and safe for
// concurrent use; an error or invalid limits answer 500 and are logged
// (throttled). The header fields are compiled per request on this path.
func WithLimitsFunc(f func(*http.Request) ([]store.Limit, error)) Option {
	return func(c *config) { c.limitsFunc = f }
}

// WithCost sets how many units each request takes (default 1). A cost above
// any limit's capacity is a configuration error reported by [New]. See
// also [Limiter.WithCost] for routes that share a quota at other costs.
// [WithCostFunc], when set, takes precedence.
func WithCost(n int64) Option { return func(c *config) { c.cost = n } }

// WithCostFunc computes the cost per request (a bulk call costs its item
// count). A cost below 1 or an error answers 500 and is logged: a free pass
// is never silent. A cost above a limit's capacity answers 429 with error
// "cost_exceeds_limit" and no Retry-After, since waiting cannot help.
func WithCostFunc(f func(*http.Request) (int64, error)) Option {
	return func(c *config) { c.costFunc = f }
}

// WithDedup sets a function returning a de-duplication id for the request
// (an idempotency key, a form fingerprint), or "" for none. A request whose
// id was admitted for the same key within the longest period is admitted
// again without being counted.
func WithDedup(f func(*http.Request) string) Option { return func(c *config) { c.dedup = f } }

// WithCountDenied records refused attempts too, so that a client hammering
// a login route stays over its threshold. Window algorithms only.
func WithCountDenied() Option { return func(c *config) { c.countDenied = true } }

// WithDryRun runs the policy in shadow mode: it decides, records, sets the
// headers and reports [OutcomeDryRun] for requests it would refuse, but
// always calls the wrapped handler.
func WithDryRun() Option { return func(c *config) { c.dryRun = true } }

// WithFailureMode chooses [FailOpen] (default) or [FailClosed].
func WithFailureMode(m FailureMode) Option { return func(c *config) { c.failure = m } }

// WithTimeout sets the decision budget (default [DefaultTimeout]): the
// store call is cancelled when it runs longer, and the failure mode
// applies. The request's own deadline, when earlier, wins.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithBreaker configures the circuit breaker that keeps a dead store from
// costing every request a full timeout: after threshold consecutive
// failures the limiter stops calling the store for cooldown, applying the
// failure mode at once, then lets one probe request through; a successful
// probe closes the breaker. threshold 0 disables the breaker. Defaults:
// [DefaultBreakerThreshold], [DefaultBreakerCooldown].
func WithBreaker(threshold int, cooldown time.Duration) Option {
	return func(c *config) { c.breakerThreshold, c.breakerCooldown = threshold, cooldown }
}

// WithHeaders sets how rate-limit headers are written (default: the
// X-RateLimit-* set with epoch resets; see [headers.Writer] for the IETF
// fields, delta resets, and no headers at all).
func WithHeaders(w headers.Writer) Option { return func(c *config) { c.headers = w } }

// WithBody chooses the refusal body format (default [BodyJSON]).
func WithBody(f BodyFormat) Option { return func(c *config) { c.body = f } }

// WithFallbackKey sets the key function used when the primary key function
// reports [keyfunc.ErrNoIdentity] (for example: key by verified JWT
// subject, fall back to the client IP for anonymous callers). Without it
// such requests get 401 with a JSON body. Not valid with [NewTiered].
func WithFallbackKey(k keyfunc.KeyFunc) Option { return func(c *config) { c.fallbackKey = k } }

// WithLogger sets the structured logger (default: slog.Default()). Store
// failures are logged at warn level at most once per second per limiter;
// each decision is logged at debug level with a hashed key. Keys, tokens
// and error details never reach the client.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithClock sets the clock used for reset headers and the breaker (default
// time.Now). Tests use it; the store keeps its own clock.
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// WithDeniedHandler replaces the default 429 response.
func WithDeniedHandler(h DeniedHandler) Option { return func(c *config) { c.denied = h } }

// WithObserver registers an observer told about every decision, for
// metrics. It must be safe for concurrent use and fast.
func WithObserver(o Observer) Option { return func(c *config) { c.observer = o } }

// WithLocalFallback decides with s, typically a [memstore.Store] private
// to this process, whenever the main store fails or the breaker skips it:
// each instance then enforces the limits on its own traffic instead of
// failing open or closed. The failure mode applies only if s fails too.
// Requests decided this way are reported with [Event.Fallback].
//
// [memstore.Store]: https://pkg.go.dev/github.com/ratekeeper/ratekeeper/store/memstore#Store
func WithLocalFallback(s store.Store) Option { return func(c *config) { c.local = s } }

// WithExempt exempts requests for which f returns true: they reach the
// wrapped handler without a decision and without rate-limit headers.
func WithExempt(f func(*http.Request) bool) Option {
	return func(c *config) { c.exempt = append(c.exempt, f) }
}

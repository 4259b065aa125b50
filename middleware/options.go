package middleware

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/store"
)

// FailureMode says what a [Limiter] does when its store fails (an error,
// or no answer within the store's own time budget, such as the Redis
// store's Options.Timeout).
type FailureMode int

const (
	// FailOpen lets the request through without rate-limit headers, logs a
	// throttled warning and reports it. The default: an outage of the
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

// Defaults of the options.
const (
	defaultName             = "default"
	defaultBreakerThreshold = 5
	defaultBreakerCooldown  = time.Second
)

// Option configures a [Limiter]. Options are applied in order by [New] or
// [NewTiered], which validate the result.
type Option func(*config)

type config struct {
	name             string
	named            bool // WithName was given
	limitsFunc       func(*http.Request, string) ([]store.Limit, error)
	dedup            func(*http.Request) string
	dedupReplays     int
	dedupWindow      time.Duration
	countDenied      bool
	dryRun           bool
	problem          bool
	failure          FailureMode
	breakerThreshold int
	breakerCooldown  time.Duration
	headers          headers.Options
	logger           *slog.Logger
	logSecret        []byte
	now              func() time.Time
	denied           func(http.ResponseWriter, *http.Request, Decision)
	observer         func(Event)
	refused          func(ctx context.Context, d Decision, identity string)
	exempt           []func(*http.Request) bool
	extraLimits      []store.Limit
	local            store.Store
	store            store.Store // LimitByIP's store (WithStore)
	overrides        bool
}

// WithName names the policy (default "default"). The name appears in the
// 429 body, in metrics and logs, and namespaces the storage key, so two
// limiters with different names never share counters. Names are 1 to 64
// characters from [A-Za-z0-9_.-].
//
// Limiters given the same name on one store share one quota: that is how
// replicas, or two routes that should count together, share a limit on
// purpose. Without a name they would share it by accident, so [New] and
// [NewTiered] refuse a limiter without a name on a store (or fallback
// store) that another live limiter without a name already uses: name
// every limiter but one. A limiter no longer referenced anywhere does not
// count. [Limiter.WithCost] variants are not new limiters: they share
// their limiter's quota by design.
func WithName(name string) Option {
	return func(c *config) { c.name, c.named = name, true }
}

// WithLimits adds limits to the one given to [New]. A request must pass all
// of them and is recorded in all or none (for example 10 per minute and 100
// per hour). All limits use the same algorithm. Not valid with [NewTiered],
// whose tiers carry their own limits.
func WithLimits(limits ...store.Limit) Option {
	return func(c *config) { c.extraLimits = append(c.extraLimits, limits...) }
}

// WithLimitsFunc chooses the limits per request and tier (for example from
// the caller's plan, read from configuration that changes without a
// deploy). f is called for requests of tiers that have limits, with the
// tier's name ("" for a limiter built with [New]); a nil or empty result
// keeps the tier's configured limits. How a change of limits applies to a
// client's existing state is defined by the store package: a raised limit
// applies at once, a cut one counts what was already used.
//
// Each distinct result is validated and compiled once and reused (the
// limiter keeps up to 64 distinct results per tier; beyond that, results
// are compiled per request). Limit names become the "scope" label of
// block metrics: keep them to a fixed set. f must be fast and safe for
// concurrent use; an error or invalid limits answer 500 and are logged
// (throttled).
func WithLimitsFunc(f func(r *http.Request, tier string) ([]store.Limit, error)) Option {
	return func(c *config) { c.limitsFunc = f }
}

// WithDedup sets a function returning a de-duplication id for the request
// (an idempotency key, a form fingerprint), or "" for none. A request whose
// id was admitted and counted for the same identity is admitted again
// without being counted, at most 3 times and within a minute of that
// admission (the period when shorter; see [WithDedupBound]); later repeats
// are counted like any request. Ids are kept per identity, so one client's
// id never replays another's. Security: the id is chosen by the client, so
// a client can run the handler at most 1 + 3 times per counted request
// within the bound, never more; key the limiter by an identity the client
// cannot choose.
func WithDedup(f func(*http.Request) string) Option { return func(c *config) { c.dedup = f } }

// WithDedupBound sets how many times an id of [WithDedup] may be replayed
// (default 3) and for how long after its admission (default a minute; at
// most the longest period of the request's limits). Zero keeps a default;
// negative values make [New] fail.
func WithDedupBound(replays int, window time.Duration) Option {
	return func(c *config) { c.dedupReplays, c.dedupWindow = replays, window }
}

// WithCountDenied records refused attempts too, so that a client hammering
// a login route stays over its threshold. Window algorithms only.
func WithCountDenied() Option { return func(c *config) { c.countDenied = true } }

// WithOverrides applies per-client overrides ([store.Override]) set in
// the store for this policy's clients, with [Limiter.SetOverride], the
// admin API or the command-line tool: a raised or cut limit, an exempt
// client admitted without counting (no rate-limit headers), a suspended
// client answered 403 until the override ends. The store reads the
// override in the same atomic step as the decision, so a policy with
// overrides runs the full decision script on Redis (one more key read,
// about as costly as a block); policies without them never read it. The
// store must implement [store.OverrideStore] (both stores of this module do);
// [New] returns an error otherwise. [Decision] reports the override that
// applied in its Override field. Overrides live in the store: while it
// fails, a local fallback store ([WithLocalFallback]) decides without
// them, under the configured limits (a suspended client is then limited
// like any other).
func WithOverrides() Option { return func(c *config) { c.overrides = true } }

// WithDryRun runs the policy in shadow mode: it decides, records, sets the
// headers (never Retry-After) and reports [OutcomeDryRun] for requests it
// would refuse, but always calls the wrapped handler.
func WithDryRun() Option { return func(c *config) { c.dryRun = true } }

// WithFailureMode chooses [FailOpen] (default) or [FailClosed].
func WithFailureMode(m FailureMode) Option { return func(c *config) { c.failure = m } }

// WithBreaker configures the circuit breaker that keeps a dead store from
// costing every request a full store timeout: after threshold consecutive
// failures the limiter stops calling the store for cooldown, applying the
// failure mode at once, then lets one probe request through; a successful
// probe closes the breaker. Opening and closing are logged at info level.
// With a store that tells which node serves a request (the Redis store on
// a Cluster client, through its NodeFor method) there is one breaker per
// node, at most 64, so one failing master applies the failure mode only to
// its own keys.
// threshold 0 disables the breaker. Defaults: 5 failures, 1 second.
// Failures that belong to one key do not count: a bounded store refusing
// a new key (kind "capacity") and a script error about the key's own
// data (one whose chain holds an error with a KeyScoped method returning
// true, as the Redis store reports WRONGTYPE); the failure mode still
// applies to that request. A store that repaired a key's state reports
// [store.Decision.Repaired], which the limiter logs at warn level (at
// most once per second) and shows observers.
func WithBreaker(threshold int, cooldown time.Duration) Option {
	return func(c *config) { c.breakerThreshold, c.breakerCooldown = threshold, cooldown }
}

// WithHeaders chooses the rate-limit headers (default: the X-RateLimit-*
// set with epoch resets, and Retry-After on refusals; see
// [headers.Options]).
func WithHeaders(o headers.Options) Option { return func(c *config) { c.headers = o } }

// WithProblemDetails answers refusals with an RFC 9457
// application/problem+json document (the quota-exceeded problem type of
// draft-ietf-httpapi-ratelimit-headers and its violated-policies member)
// instead of the default application/json body. The members of the default
// body are carried over.
func WithProblemDetails() Option { return func(c *config) { c.problem = true } }

// WithLogger sets the structured logger (default: slog.Default()). Lines
// are logged with the request's context. Store failures are logged at warn
// level at most once per second per limiter; the breaker opening and
// closing and the start of a block at info level; each decision at debug
// level with the method, the route pattern and a hash of the identity.
// Identities, tokens and error details never reach the client.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithLogSecret keys the hash of identities in logs with secret
// (HMAC-SHA256), so that replicas sharing the secret log the same hash for
// the same client and one client can be followed across instances. Without
// it each process uses a random secret: hashes correlate lines within one
// process only. Either way the hash cannot be reversed by hashing every
// IPv4 address. Keep the secret as private as the logs are not.
func WithLogSecret(secret []byte) Option {
	return func(c *config) { c.logSecret = append([]byte(nil), secret...) }
}

// WithDeniedHandler replaces the default 429 response. The rate-limit
// headers, Retry-After included, are already set on w when h is called; h
// must write a status (usually 429).
func WithDeniedHandler(h func(w http.ResponseWriter, r *http.Request, d Decision)) Option {
	return func(c *config) { c.denied = h }
}

// WithObserver registers a function told about every request the limiter
// handles, for metrics (see the metrics package's Collector.Observe). It
// must be safe for concurrent use and fast; it is not called for
// [Limiter.Peek].
func WithObserver(observe func(Event)) Option { return func(c *config) { c.observer = observe } }

// WithRefusalHook calls hook for every request the limiter refuses
// (limited or blocked, and refusals dry-run lets through) with the
// request's context, the decision and the identity as the key function or
// classifier returned it, for example to feed an admin summary of the
// most limited clients (package middleware/admin's Top). Unlike
// [WithObserver], which metrics use, the hook sees identities: keep what
// it stores bounded and private. It runs on the request's goroutine, so it
// must be fast and safe for concurrent use.
func WithRefusalHook(hook func(ctx context.Context, d Decision, identity string)) Option {
	return func(c *config) { c.refused = hook }
}

// WithStore makes [LimitByIP] count on s, a Redis store for example, so
// that every replica shares the limit, instead of on a memory store of its
// own. [New] and [NewTiered] take their store as their first argument and
// refuse this option.
func WithStore(s store.Store) Option { return func(c *config) { c.store = s } }

// WithLocalFallback decides with s, typically a memory store private to
// this process, whenever the main store fails or the breaker skips it:
// each instance then enforces the limits on its own traffic instead of
// failing open or closed. The failure mode applies only if s fails too.
// Requests decided this way are reported with [Event].Fallback.
func WithLocalFallback(s store.Store) Option { return func(c *config) { c.local = s } }

// WithExempt exempts requests for which f returns true: they reach the
// wrapped handler without a decision and without rate-limit headers. See
// [ExemptPaths] and [ExemptCIDRs]; for a method, such as CORS preflights:
//
//	middleware.WithExempt(func(r *http.Request) bool { return r.Method == http.MethodOptions })
func WithExempt(f func(*http.Request) bool) Option {
	return func(c *config) { c.exempt = append(c.exempt, f) }
}

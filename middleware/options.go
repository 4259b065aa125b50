package middleware

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/store"
)

// Options configures a [Limiter]: the decision fields of
// [limiter.Options], whose documentation states each in full, and the
// fields that concern HTTP. The zero value of every field is its default;
// [New], [NewTiered] and [LimitByIP] validate the whole and name the field
// in their errors.
type Options struct {
	// Name names the policy (default "default"); see
	// [limiter.Options].Name. New and NewTiered refuse a second limiter
	// without a name on a store another limiter without a name uses, so
	// that two policies never end up on one quota by accident. The name
	// appears in the 429 body.
	Name string
	// Limits adds limits to the one given to [New] or [LimitByIP]: a
	// request must pass all of them and is recorded in all or none. Not
	// valid with [NewTiered], whose tiers carry their own limits.
	Limits []store.Limit
	// LimitsFunc chooses the limits per request and tier (tier is "" for a
	// limiter built with New); see [limiter.Options].LimitsFunc. An error
	// or invalid limits answer 500 and are logged (throttled).
	LimitsFunc func(r *http.Request, tier string) ([]store.Limit, error)
	// CountDenied records refused attempts too; see
	// [limiter.Options].CountDenied.
	CountDenied bool
	// Overrides applies per-client overrides set in the store; see
	// [limiter.Options].Overrides. An exempt client is admitted without
	// rate-limit headers; a suspended one is answered 403 until the
	// override ends.
	Overrides bool
	// DryRun runs the policy in shadow mode: it decides, records, sets the
	// headers (never Retry-After) and reports [limiter.OutcomeDryRun] for
	// requests it would refuse, but always calls the wrapped handler.
	DryRun bool
	// MaxWait, when > 0, delays a request that would be refused but whose
	// turn comes within MaxWait, instead of answering 429: its place is
	// reserved at once, the handler runs when its turn comes, with headers
	// that describe the limits as they then stand. A client that goes
	// away while waiting gives its place back and the handler never runs.
	// Zero refuses at once. Needs GCRA or token-bucket limits and a store
	// that implements [store.Waiter] (both stores of this module do); not
	// with Overrides (see [limiter.Options].MaxWait). Each waiting request
	// holds its goroutine and connection: keep MaxWait short.
	MaxWait time.Duration
	// FailureMode chooses [limiter.FailOpen] (the default: the request is
	// served without rate-limit headers) or [limiter.FailClosed] (503 with
	// a JSON body and Retry-After).
	FailureMode limiter.FailureMode
	// Fallback decides with this store, typically a memory store private
	// to the process, whenever the main store fails; see
	// [limiter.Options].Fallback.
	Fallback store.Store
	// BreakerThreshold (default 5; negative disables the breaker) and
	// BreakerCooldown (default 1 second) configure the circuit breaker;
	// see [limiter.Options].BreakerThreshold.
	BreakerThreshold int
	BreakerCooldown  time.Duration
	// Dedup returns a de-duplication id for the request (an idempotency
	// key, a form fingerprint), or "" for none. A request whose id was
	// admitted for the same identity is a replay, within DedupReplays and
	// DedupWindow (see [limiter.Options].DedupReplays): its decision says
	// Duplicate, and it is counted like any request, so replays never
	// take a client past its limit, whatever ids it sends. Key the limiter
	// by an identity the client cannot choose (the id is the client's).
	// A limiter with Dedup cannot be stacked.
	Dedup func(*http.Request) string
	// DedupReplays (default 3) and DedupWindow (default a minute) bound
	// which repeats of an id are replays.
	DedupReplays int
	DedupWindow  time.Duration
	// DecisionInContext attaches each request's decision to the request
	// that [Limiter.Handler] passes on, for [DecisionFrom]. It costs a
	// copy of the request (http.Request.WithContext) and a larger
	// allocation per request, which is why it is off by default. A
	// limiter attaches its decision without it when it needs it itself:
	// with tiers or LimitsFunc (for [Limiter.Allow] from the handler, which
	// takes the request's tier and limits), and when its quota is shared
	// by [Limiter.WithCost] variants or its Handler wraps more than one
	// handler (so that a request that passes the quota twice is charged
	// once); [NewStack] always does. With it, each request's cost is a
	// reservation that the handler may settle with [Limiter.ReportCost];
	// under window-algorithm limits the store then reports when it took
	// the units, which on Redis runs the full decision script instead of
	// the lean one.
	DecisionInContext bool
	// Headers chooses the rate-limit headers (default: the X-RateLimit-*
	// set with epoch resets, and Retry-After on refusals; see
	// [headers.Options]).
	Headers headers.Options
	// ProblemDetails answers refusals with an RFC 9457
	// application/problem+json document (the quota-exceeded problem type
	// of draft-ietf-httpapi-ratelimit-headers and its violated-policies
	// member) instead of the default application/json body. The members of
	// the default body are carried over.
	ProblemDetails bool
	// DeniedHandler, when set, replaces the default 429 response. The
	// rate-limit headers, Retry-After included, are already set on w when
	// it is called; it must write a status (usually 429).
	DeniedHandler func(w http.ResponseWriter, r *http.Request, d limiter.Decision)
	// Exempt lists exemptions: requests for which one returns true reach
	// the wrapped handler without a decision and without rate-limit
	// headers. See [ExemptPaths] and [ExemptCIDRs]; for a method, such as
	// CORS preflights:
	//
	//	func(r *http.Request) bool { return r.Method == http.MethodOptions }
	Exempt []func(*http.Request) bool
	// Logger is the structured logger (default slog.Default()); see
	// [limiter.Options].Logger. Lines about a request also carry its
	// method and route pattern.
	Logger *slog.Logger
	// LogSecret keys the hash of identities in logs; see
	// [limiter.Options].LogSecret.
	LogSecret []byte
	// Observer is told about every request the limiter handles, with the
	// request's context, for metrics and traces (see the metrics package's
	// Collector.Observe); it is not called for [Limiter.Peek].
	Observer func(context.Context, limiter.Event)
	// RefusalHook is called for every request the limiter refuses; see
	// [limiter.Options].RefusalHook.
	RefusalHook func(ctx context.Context, d limiter.Decision, identity string)
	// InFlight caps the requests of one identity that run at once (the
	// identity of the key function: a client, or a route with package
	// keyfunc's route pattern); see [limiter.InFlight]. A slot is taken
	// before the rate limits are decided and given back when the wrapped
	// handler returns, panics included. With a cap, the limit given to
	// [New] may be the zero store.Limit: the limiter then limits
	// concurrency alone, sets no rate-limit headers and attaches no
	// decision. A refusal is answered with InFlightStatus, Retry-After (an
	// estimate: see [limiter.Limiter.Acquire]) and a JSON body whose error
	// is "too_many_in_flight"; no X-RateLimit-* field, which would describe
	// a rate limit; DeniedHandler, when set, answers it instead (its
	// decision's Outcome is [limiter.OutcomeInFlight]).
	InFlight limiter.InFlight
	// InFlightStatus is the status of an in-flight refusal: 429 (the
	// default) or 503.
	InFlightStatus int
	// Store is the store [LimitByIP] counts on (a Redis store, to share
	// one limit across replicas) instead of a memory store of its own. New
	// and NewTiered take their store as their first argument and refuse
	// this field.
	Store store.Store
	// Clock tells the time for reset headers and the breaker (default
	// time.Now); the store keeps its own clock.
	Clock func() time.Time
}

// core returns the decision options of o for the given limits or tiers,
// logging through logger.
func (o *Options) core(limits []store.Limit, tiers []limiter.Tier, logger *slog.Logger) limiter.Options {
	c := limiter.Options{
		Name:             o.Name,
		Limits:           limits,
		Tiers:            tiers,
		CountDenied:      o.CountDenied,
		Overrides:        o.Overrides,
		DryRun:           o.DryRun,
		MaxWait:          o.MaxWait,
		FailureMode:      o.FailureMode,
		Fallback:         o.Fallback,
		BreakerThreshold: o.BreakerThreshold,
		BreakerCooldown:  o.BreakerCooldown,
		DedupReplays:     o.DedupReplays,
		DedupWindow:      o.DedupWindow,
		Headers:          o.Headers,
		Logger:           logger,
		LogSecret:        o.LogSecret,
		Observer:         o.Observer,
		RefusalHook:      o.RefusalHook,
		InFlight:         o.InFlight,
		Clock:            o.Clock,
	}
	if f := o.LimitsFunc; f != nil {
		c.LimitsFunc = func(ctx context.Context, tier string) ([]store.Limit, error) {
			r := requestFrom(ctx)
			if r == nil {
				return nil, nil // not an HTTP request: the tier's limits
			}
			return f(r, tier)
		}
	}
	return c
}

package limiter

import (
	"fmt"
	"time"
)

// Outcome is what the limiter made of one request.
type Outcome string

// Outcomes reported in an [Event].
const (
	// OutcomeAllowed: the store admitted the request.
	OutcomeAllowed Outcome = "allowed"
	// OutcomeLimited: the store refused the request, or its cost exceeds a
	// limit's capacity (then the decision's Capacity is 0); HTTP answers
	// 429.
	OutcomeLimited Outcome = "limited"
	// OutcomeFailedOpen: the store failed and the request went through.
	OutcomeFailedOpen Outcome = "failed_open"
	// OutcomeFailedClosed: the store failed and the request is refused
	// (HTTP answers 503).
	OutcomeFailedClosed Outcome = "failed_closed"
	// OutcomeRejected: no identity could be derived (HTTP answers 400 or
	// 401), or a configuration mistake was found at request time (500).
	OutcomeRejected Outcome = "rejected"
	// OutcomeCanceled: the client went away while the store was deciding.
	OutcomeCanceled Outcome = "canceled"
	// OutcomeBlocked: refused because the key is blocked (abuse limit).
	OutcomeBlocked Outcome = "blocked"
	// OutcomeExempt: an exemption matched ([Request].Exempt) or the client
	// has an exempting override; nothing was counted.
	OutcomeExempt Outcome = "exempt"
	// OutcomeDryRun: the store refused the request but the policy runs in
	// dry-run mode, so it went through.
	OutcomeDryRun Outcome = "dry_run"
	// OutcomeUnlimited: the request's tier is unlimited (trusted).
	OutcomeUnlimited Outcome = "unlimited"
	// OutcomeSuspended: the request's tier is suspended, or the client has
	// a suspending override (HTTP answers 403).
	OutcomeSuspended Outcome = "suspended"
	// OutcomeInFlight: the identity already runs as many requests as its
	// in-flight cap allows ([Options].InFlight, [Limiter.Acquire]); HTTP
	// answers 429, or 503 when configured.
	OutcomeInFlight Outcome = "in_flight"
)

// Event describes what the limiter did with one request, for an observer
// ([Options].Observer). It never carries the identity.
type Event struct {
	// Decision is the limiter's decision, Outcome included; its store part
	// is zero when the store gave none (an exemption, a failure). Policy
	// is always set.
	Decision
	// Latency is how long the store call took; zero when it was skipped.
	Latency time.Duration
	// Err is the store or identity error, if any. With Fallback it is the
	// main store's failure.
	Err error
	// Skipped reports that the circuit breaker was open and the store was
	// not called.
	Skipped bool
	// StoreDown reports whether, after this request, a circuit breaker of
	// the limiter considers the store (or, on Redis Cluster, one of its
	// masters) unavailable.
	StoreDown bool
	// Fallback reports that the main store failed and the decision came
	// from the fallback store ([Options].Fallback).
	Fallback bool
	// Store names the backend: the store's Name method ("redis",
	// "memory"), or its Go type.
	Store string
}

// FailureMode says what a [Limiter] decides when its store fails (an
// error, or no answer within the store's own time budget, such as the
// Redis store's Options.Timeout) and no fallback store decides.
type FailureMode int

const (
	// FailOpen admits the request ([OutcomeFailedOpen]), logs a throttled
	// warning and reports it. The default: an outage of the limiter's
	// store does not become an outage of the service. The HTTP middleware
	// serves the request without rate-limit headers.
	FailOpen FailureMode = iota
	// FailClosed refuses the request ([OutcomeFailedClosed]) with the
	// breaker's cooldown as its RetryAfter. The HTTP middleware answers
	// 503 Service Unavailable with a JSON body and Retry-After.
	FailClosed
)

// name returns "fail_open" or "fail_closed".
func (m FailureMode) name() string {
	switch m {
	case FailOpen:
		return "fail_open"
	case FailClosed:
		return "fail_closed"
	}
	return fmt.Sprintf("FailureMode(%d)", int(m))
}

package middleware

import "time"

// Outcome is what the limiter did with one request.
type Outcome string

// Outcomes reported in an [Event].
const (
	// OutcomeAllowed: the store admitted the request.
	OutcomeAllowed Outcome = "allowed"
	// OutcomeLimited: the store refused the request (or its cost exceeds a
	// limit's capacity); it got 429.
	OutcomeLimited Outcome = "limited"
	// OutcomeFailedOpen: the store failed and the request went through.
	OutcomeFailedOpen Outcome = "failed_open"
	// OutcomeFailedClosed: the store failed and the request got 503.
	OutcomeFailedClosed Outcome = "failed_closed"
	// OutcomeRejected: no identity could be derived (400 or 401), or a
	// configuration mistake was found at request time (500).
	OutcomeRejected Outcome = "rejected"
	// OutcomeCanceled: the client went away while the store was deciding.
	OutcomeCanceled Outcome = "canceled"
	// OutcomeBlocked: refused because the key is blocked (abuse limit).
	OutcomeBlocked Outcome = "blocked"
	// OutcomeExempt: an exemption matched; no decision was taken.
	OutcomeExempt Outcome = "exempt"
	// OutcomeDryRun: the store refused the request but the policy runs in
	// dry-run mode, so it went through.
	OutcomeDryRun Outcome = "dry_run"
	// OutcomeUnlimited: the request's tier is unlimited (trusted).
	OutcomeUnlimited Outcome = "unlimited"
	// OutcomeSuspended: the request's tier is suspended; it got 403.
	OutcomeSuspended Outcome = "suspended"
)

// Event describes what the limiter did with one request, for an observer
// ([WithObserver]). It never carries the identity.
type Event struct {
	// Decision is the limiter's decision; its store part is zero when the
	// store gave none (an exemption, a failure). Policy is always set.
	Decision
	// Outcome is what happened to the request.
	Outcome Outcome
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
	// from the local fallback store ([WithLocalFallback]).
	Fallback bool
	// Store names the backend: the store's Name method ("redis",
	// "memory"), or its Go type.
	Store string
}

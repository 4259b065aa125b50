package middleware

import (
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// Outcome is what the limiter did with one request.
type Outcome string

// Outcomes reported to an [Observer].
const (
	// OutcomeAllowed: the store admitted the request.
	OutcomeAllowed Outcome = "allowed"
	// OutcomeLimited: the store refused the request; it got 429.
	OutcomeLimited Outcome = "limited"
	// OutcomeFailedOpen: the store failed and the request went through.
	OutcomeFailedOpen Outcome = "failed_open"
	// OutcomeFailedClosed: the store failed and the request got 503.
	OutcomeFailedClosed Outcome = "failed_closed"
	// OutcomeRejected: no key could be derived; the request got 400 or 401.
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

// Event describes one decision. It never carries the key.
type Event struct {
	// Policy is the limiter's name.
	Policy string
	// Outcome is what happened to the request.
	Outcome Outcome
	// Decision is the store's answer when there was one.
	Decision store.Decision
	// Latency is how long the store call took; zero when it was skipped.
	Latency time.Duration
	// Err is the store or key error, if any.
	Err error
	// Skipped reports that the circuit breaker was open and the store was
	// not called.
	Skipped bool
	// Store names the backend ("redis", "memory", or the Go type of a
	// store that does not implement [Named]).
	Store string
	// StoreDown reports whether, after this request, the circuit breaker
	// considers the store unavailable.
	StoreDown bool
	// Fallback reports that the main store failed and the decision came
	// from the local fallback store ([WithLocalFallback]).
	Fallback bool

	key string // for the debug log only (hashed there); never exported
}

// Named is implemented by stores that report a short backend name for
// metrics labels.
type Named interface {
	Name() string
}

// Observer is told about every decision a [Limiter] makes. Implementations
// must be safe for concurrent use and must not block.
type Observer interface {
	Observe(e Event)
}

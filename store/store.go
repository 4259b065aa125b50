package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Algorithm selects how a [Limit] counts requests. The zero value is [GCRA].
type Algorithm int

const (
	// GCRA is the generic cell rate algorithm: a smooth limit of Rate per
	// Period with a burst tolerance of Burst requests. It is the token
	// bucket seen from the other side, and the two share one
	// implementation (see "Semantics" in the package doc). The default.
	GCRA Algorithm = iota
	// TokenBucket holds up to Burst tokens that refill continuously at Rate
	// per Period; a request takes Cost tokens. Tokens are fractional.
	TokenBucket
	// SlidingWindowLog records every admitted unit with its timestamp and
	// admits a request when the units inside the last Period plus its cost
	// do not exceed Rate. Exact; memory grows with Rate.
	SlidingWindowLog
	// SlidingWindowCounter keeps one counter per aligned window and weights
	// the previous window by the part of it still inside the sliding Period.
	// Approximate (never admits more than Rate within one aligned window),
	// O(1) memory.
	SlidingWindowCounter
	// FixedWindow counts units in windows of Period aligned to the store's
	// clock (multiples of Period since the Unix epoch).
	FixedWindow
)

var algorithmNames = [...]string{
	GCRA:                 "gcra",
	TokenBucket:          "token_bucket",
	SlidingWindowLog:     "sliding_window_log",
	SlidingWindowCounter: "sliding_window_counter",
	FixedWindow:          "fixed_window",
}

// Algorithms lists the algorithms, in declaration order. (Load shedding
// above a soft limit, whose refusals are random, is not an algorithm but
// a layer over a counting limit: package store/suppressed.)
var Algorithms = []Algorithm{GCRA, TokenBucket, SlidingWindowLog, SlidingWindowCounter, FixedWindow}

// String returns the algorithm's snake_case name, e.g. "token_bucket".
func (a Algorithm) String() string {
	if a.valid() {
		return algorithmNames[a]
	}
	return "algorithm(" + strconv.Itoa(int(a)) + ")"
}

// window reports whether a counts units in windows (the log and counter
// algorithms), as opposed to GCRA and the token bucket.
func (a Algorithm) window() bool {
	return a == SlidingWindowLog || a == SlidingWindowCounter || a == FixedWindow
}

// valid reports whether a is one of the declared algorithms.
func (a Algorithm) valid() bool { return a >= GCRA && a <= FixedWindow }

// ParseAlgorithm returns the algorithm named by s (the [Algorithm.String]
// form). It returns an error wrapping [ErrInvalidLimit] for unknown names.
func ParseAlgorithm(s string) (Algorithm, error) {
	for i, n := range algorithmNames {
		if n == s {
			return Algorithm(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown algorithm %q", ErrInvalidLimit, s)
}

// Limit is one rate: Rate units per Period, counted with Algorithm.
//
// The zero value is not a valid limit: Rate and Period must be positive.
// Period must be a whole number of milliseconds (the Redis store keeps TTLs
// in milliseconds) and at least one millisecond.
type Limit struct {
	// Name identifies the limit inside a request: it is reported in
	// [Decision.LimitID] and used in storage keys. Empty means a name derived
	// from the algorithm and period ("gcra/1m0s"). Names must be unique
	// within one [Request] and may not contain control characters.
	Name string
	// Algorithm chooses the counting method. Zero is [GCRA]. All limits of
	// one request must use the same algorithm.
	Algorithm Algorithm
	// Rate is the number of units admitted per Period. Required, > 0.
	Rate int64
	// Period is the window (or, for GCRA and TokenBucket, the time in which
	// Rate units are replenished). Required, >= 1ms, whole milliseconds.
	Period time.Duration
	// Burst is the capacity of GCRA and TokenBucket: how many units may be
	// taken at once from a fresh key. Zero means Rate. Ignored (must be 0 or
	// equal to Rate) by the window algorithms, whose capacity is Rate.
	Burst int64
	// Block, when > 0, turns a refusal by this limit into a block of the
	// request's key for Block: while the block lasts every request for the
	// key is refused with RetryAfter equal to the block's remaining time,
	// even after the counting window has emptied. Whole milliseconds.
	Block time.Duration
	// BlockMax, when > Block, escalates repeat offences: the n-th block of
	// a key lasts min(Block·2^(n-1), BlockMax). Offences are forgotten
	// BlockMax after the last block ends. Zero disables escalation.
	BlockMax time.Duration
	// Calendar, when set, makes a [FixedWindow] limit count in calendar
	// windows of Location instead of windows of Period (which must then
	// be 0): "day" (from midnight to midnight), "week" (from Monday
	// midnight) or "month" (from midnight on the 1st), each ending at the
	// real boundary across daylight saving changes and months of any
	// length (package store, "Calendar quotas").
	Calendar string
	// Location is the time zone of a Calendar limit's windows. Nil means
	// UTC. Only with Calendar.
	Location *time.Location
}

// PerSecond returns a GCRA limit of n per second with burst n.
func PerSecond(n int64) Limit { return Limit{Rate: n, Period: time.Second} }

// PerMinute returns a GCRA limit of n per minute with burst n.
func PerMinute(n int64) Limit { return Limit{Rate: n, Period: time.Minute} }

// PerHour returns a GCRA limit of n per hour with burst n.
func PerHour(n int64) Limit { return Limit{Rate: n, Period: time.Hour} }

// Capacity returns the largest cost one request may have under l: Burst for
// GCRA and TokenBucket (Rate when Burst is zero), Rate otherwise (the
// other algorithms take no Burst but Rate's own value).
//
// A limit trips on the unit that would exceed its capacity (count + cost >
// capacity refuses). A seed-style "refuse when the count reaches N" (>=)
// limit is the same as a limit with Rate N-1.
func (l Limit) Capacity() int64 {
	if l.Burst > 0 {
		return l.Burst
	}
	return l.Rate
}

// Window returns the time a full l takes to empty when nothing more is
// recorded, at most: Burst·Period/Rate for GCRA and TokenBucket (rounded
// up to the microsecond), Period for SlidingWindowLog and FixedWindow,
// and 2·Period for SlidingWindowCounter (its estimate still weighs the
// previous window). It follows that a client that records at most
// [Limit.Capacity] units in any interval of length Window (half-open, or
// any longer interval) is never refused by l: the IETF RateLimit-Policy
// field advertises that quota (package headers).
func (l Limit) Window() time.Duration {
	switch l.Algorithm {
	case SlidingWindowLog, FixedWindow:
		return l.Period
	case SlidingWindowCounter:
		return 2 * l.Period
	}
	if l.Rate <= 0 {
		return 0
	}
	// Capacity·Period/Rate in µs, rounded up; exact in a float64 within
	// the bounds Validate sets.
	us := math.Ceil(float64(l.Capacity()) * float64(l.Period/time.Microsecond) / float64(l.Rate))
	return time.Duration(us) * time.Microsecond
}

// ID returns the limit's identity within a request: Name when set, else
// "<algorithm>/<period>", or "<algorithm>/<calendar>" for a Calendar limit.
func (l Limit) ID() string {
	if l.Name != "" {
		return l.Name
	}
	if l.Calendar != "" {
		return l.Algorithm.String() + "/" + l.Calendar
	}
	return l.Algorithm.String() + "/" + l.Period.String()
}

// maxRate bounds Rate and Burst so that every quantity the algorithms
// compute stays exact in a float64 (Lua numbers) and an int64.
const maxRate = 1 << 30

// maxPeriod bounds Period: one year is longer than any useful window and
// keeps microsecond arithmetic far from float64's 2^53.
const maxPeriod = 366 * 24 * time.Hour

// maxDrain bounds the time a full GCRA or token bucket takes to drain
// (Burst·Period/Rate), so that every duration a store reports fits a
// time.Duration and stays exact in a float64 of microseconds.
const maxDrain = 100 * maxPeriod

// Validate reports whether l is usable. Errors wrap [ErrInvalidLimit] and
// name the offending field.
func (l Limit) Validate() error {
	if l.Calendar != "" || l.Location != nil {
		span, err := l.validateCalendar()
		if err != nil {
			return err
		}
		l.Period = span // this copy only: the checks below then hold
	}
	switch {
	case !l.Algorithm.valid():
		return fmt.Errorf("%w: Algorithm: unknown value %d", ErrInvalidLimit, int(l.Algorithm))
	case l.Rate <= 0:
		return fmt.Errorf("%w: Rate must be > 0, got %d", ErrInvalidLimit, l.Rate)
	case l.Rate > maxRate:
		return fmt.Errorf("%w: Rate must be <= %d, got %d", ErrInvalidLimit, maxRate, l.Rate)
	case l.Period < time.Millisecond:
		return fmt.Errorf("%w: Period must be >= 1ms, got %s", ErrInvalidLimit, l.Period)
	case l.Period > maxPeriod:
		return fmt.Errorf("%w: Period must be <= %s, got %s", ErrInvalidLimit, maxPeriod, l.Period)
	case l.Period%time.Millisecond != 0:
		return fmt.Errorf("%w: Period must be whole milliseconds, got %s", ErrInvalidLimit, l.Period)
	case l.Burst < 0:
		return fmt.Errorf("%w: Burst must be >= 0, got %d", ErrInvalidLimit, l.Burst)
	case l.Burst > maxRate:
		return fmt.Errorf("%w: Burst must be <= %d, got %d", ErrInvalidLimit, maxRate, l.Burst)
	case l.Burst != 0 && l.Burst != l.Rate && l.Algorithm != GCRA && l.Algorithm != TokenBucket:
		return fmt.Errorf("%w: Burst is not supported by %s (capacity is Rate)", ErrInvalidLimit, l.Algorithm)
	case l.Block < 0 || l.Block%time.Millisecond != 0:
		return fmt.Errorf("%w: Block must be >= 0 and whole milliseconds, got %s", ErrInvalidLimit, l.Block)
	case l.Block > maxPeriod:
		return fmt.Errorf("%w: Block must be <= %s, got %s", ErrInvalidLimit, maxPeriod, l.Block)
	case l.BlockMax != 0 && (l.Block == 0 || l.BlockMax < l.Block || l.BlockMax > maxPeriod || l.BlockMax%time.Millisecond != 0):
		return fmt.Errorf("%w: BlockMax must be 0 or whole milliseconds between Block and %s, got %s", ErrInvalidLimit, maxPeriod, l.BlockMax)
	}
	// Without a Burst above Rate a bucket drains within one Period.
	if l.Burst > l.Rate {
		if drain := float64(l.Burst) * float64(l.Period) / float64(l.Rate); drain > float64(maxDrain) {
			return fmt.Errorf("%w: Burst·Period/Rate (the time a full bucket takes to drain) must be <= %s, got %.0fh", ErrInvalidLimit, maxDrain, drain/float64(time.Hour))
		}
	}
	for _, r := range l.Name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: Name %q contains a control character", ErrInvalidLimit, l.Name)
		}
	}
	return nil
}

// Request asks a [Store] for a decision about one key.
type Request struct {
	// Key identifies the client (IP, subject, route, ...). Required,
	// non-empty. Any bytes are allowed: stores encode keys injectively.
	Key string
	// Limits are checked all-or-nothing: a request is admitted only if every
	// limit admits it, and then it is recorded in every limit; a request
	// that fails any limit is recorded in none. Required, at least one, all
	// with the same Algorithm and distinct IDs.
	Limits []Limit
	// Cost is how many units the request takes. Zero means 1. Negative
	// costs are invalid, and a cost above any limit's [Limit.Capacity] (or
	// above 2³⁰) is rejected with [ErrCostExceedsCapacity] (it could never
	// be admitted). For a request with Overrides, Validate leaves the
	// capacity check to the store, which makes it once it has read the
	// key's override: against the scaled limits under a scale, not at all
	// for an exempt or suspended client (a Store that implements
	// [OverrideStore] must do the same).
	Cost int64
	// CountDenied records refused requests too (refused by a limit or by an
	// active block), as login brute-force protection wants: every attempt
	// counts. Only for window algorithms.
	CountDenied bool
	// DedupID, when set, de-duplicates: if a request with the same DedupID
	// was admitted and recorded for this Key within the id's window, this
	// one is admitted again without being recorded ([Decision.Duplicate]),
	// at most DedupReplays times; beyond that, or once the window has
	// passed, it is decided and recorded like any request. Any bytes; long
	// ids are hashed. Security: an id chosen by the client lets it run the
	// handler up to 1 + DedupReplays times per recorded unit of its window,
	// never more (package store, "Blocks, counted refusals and
	// de-duplication").
	DedupID string
	// DedupReplays is how many times an admitted DedupID may be replayed
	// as a duplicate. Zero means 3; negative or above 2³¹−1 is invalid.
	DedupReplays int
	// DedupWindow is how long an admitted DedupID is replayed, counted
	// from its admission, in whole microseconds (rounded down). Zero means
	// a minute; a window longer than the longest period of the limits is
	// cut to that period; negative is invalid.
	DedupWindow time.Duration
	// ApplyOverride applies the key's [Override], if it has one, in the same
	// atomic step: a scale changes the limits' rate and capacity, exempt
	// admits without counting, suspend refuses without counting. False
	// means the override is not read at all (no cost). An override takes
	// precedence over the key's block.
	ApplyOverride bool
	// Partial takes up to Cost units instead of all or none: the request
	// is admitted with as many units as every limit admits now, reported
	// in [Decision.Granted], and refused only when not even one unit fits
	// (its RetryAfter is then the time until one does). Cost may exceed
	// the limits' capacity. Not with CountDenied, DedupID, ApplyOverride,
	// a Calendar limit, the suppressed strategy or in a stack (package
	// store, "Partial grants").
	Partial bool
	// MaxWait, when > 0, admits later instead of refusing: a request that
	// every limit would admit within MaxWait (rounded down to the
	// microsecond) is admitted now with its units reserved at the time it
	// may proceed, which [Decision.Delay] reports; later requests queue
	// behind it, and [Waiter.CancelWait] gives its place back. A request
	// that would wait longer is refused as without MaxWait. GCRA and
	// TokenBucket only; not with Partial, DedupID or ApplyOverride, nor in
	// a stack (package store, "Waiting instead of refusing").
	MaxWait time.Duration
	// Reserve marks a Take whose Cost is an estimate that
	// [Refunder.Settle] will settle once the actual cost is known: an
	// admitted take then reports when it was recorded
	// ([Decision.Taken]), which a window algorithm's settlement needs to
	// find the window it was taken in. GCRA and token-bucket
	// reservations settle without it. Not with Partial, Calendar limits,
	// the suppressed strategy or in a stack. On the Redis store a
	// reservation runs the full decision script (package lua,
	// "Reservations").
	Reserve bool
}

// cost returns the effective cost (zero means one).
func (r Request) cost() int64 {
	if r.Cost == 0 {
		return 1
	}
	return r.Cost
}

// Validate checks the request as every store does before touching state.
// Errors wrap [ErrInvalidRequest], [ErrInvalidLimit] or
// [ErrCostExceedsCapacity].
func (r Request) Validate() error {
	if r.Key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidRequest)
	}
	if len(r.Limits) == 0 {
		return fmt.Errorf("%w: no limits", ErrInvalidRequest)
	}
	if len(r.Limits) > MaxLimits {
		return fmt.Errorf("%w: %d limits, at most %d", ErrInvalidRequest, len(r.Limits), MaxLimits)
	}
	if r.Cost < 0 {
		return fmt.Errorf("%w: negative cost %d", ErrInvalidRequest, r.Cost)
	}
	if r.Cost > maxRate {
		// No limit, scaled or not, holds more.
		return fmt.Errorf("%w: cost %d, at most %d", ErrCostExceedsCapacity, r.Cost, maxRate)
	}
	if r.DedupReplays < 0 || int64(r.DedupReplays) > math.MaxInt32 {
		return fmt.Errorf("%w: DedupReplays %d, want 0 to 2³¹−1", ErrInvalidRequest, r.DedupReplays)
	}
	if r.DedupWindow < 0 {
		return fmt.Errorf("%w: negative DedupWindow %s", ErrInvalidRequest, r.DedupWindow)
	}
	if err := r.validatePartial(); err != nil {
		return err
	}
	if err := r.validateWait(); err != nil {
		return err
	}
	if err := r.calendarRequest(); err != nil {
		return err
	}
	if err := r.validateReserve(); err != nil {
		return err
	}
	c := r.cost()
	alg := r.Limits[0].Algorithm
	if r.CountDenied && !alg.window() {
		return fmt.Errorf("%w: CountDenied needs a window algorithm, not %s", ErrInvalidRequest, alg)
	}
	for i, l := range r.Limits {
		if err := l.Validate(); err != nil {
			return fmt.Errorf("limit %d: %w", i, err)
		}
		if l.Algorithm != alg {
			return fmt.Errorf("%w: limit %d uses %s, limit 0 uses %s; one request uses one algorithm", ErrInvalidRequest, i, l.Algorithm, alg)
		}
		for j := 0; j < i; j++ {
			if r.Limits[j].ID() == l.ID() {
				return fmt.Errorf("%w: limits %d and %d share the id %q", ErrInvalidRequest, j, i, l.ID())
			}
		}
		if c > l.Capacity() && !r.ApplyOverride && !r.Partial {
			return costError(c, l)
		}
	}
	return nil
}

// MaxLimits is the most limits one request may carry.
const MaxLimits = 8

// Decision is a store's answer. Being over the limit is a Decision with
// Allowed false, never an error.
type Decision struct {
	// Allowed reports whether the request was admitted (and, for Take,
	// recorded in every limit).
	Allowed bool
	// Capacity is the capacity of the deciding limit ([Limit.Capacity]): the
	// value X-RateLimit-Limit sends.
	Capacity int64
	// Remaining is how many units the deciding limit would still admit right
	// now, after this request when it was admitted. Never negative.
	Remaining int64
	// ResetAfter is the time until the deciding limit is back to full
	// capacity if no further requests arrive. Zero when it already is.
	ResetAfter time.Duration
	// NextAfter is the time until the deciding limit next makes quota
	// available if no further requests arrive: until it admits
	// Remaining+1 units (package store, "Next quota"). Zero when the limit
	// is full, for which no more quota will come. For a blocked key it
	// is RetryAfter: nothing is made available before the block ends.
	NextAfter time.Duration
	// RetryAfter is, for a denied request, the time after which the same
	// request (same cost) would be admitted if nothing else is recorded
	// meanwhile. Zero when Allowed.
	RetryAfter time.Duration
	// LimitID is the ID ([Limit.ID]) of the deciding limit: for a denied
	// request the denying limit with the longest RetryAfter; for an admitted
	// one the limit with the fewest units remaining (ties: the earliest).
	LimitID string
	// Index is the position of the deciding limit in [Request.Limits], or
	// -1 when a block was started by a limit that is not in this request.
	Index int
	// Blocked reports a refusal because the key is blocked (see
	// [Limit.Block]); LimitID then names the limit that tripped the block and
	// RetryAfter is the block's remaining time.
	Blocked bool
	// BlockStarted reports that this request started the block. Exactly one
	// request per block reports it, however many race.
	BlockStarted bool
	// Duplicate reports an admission as a repeat of [Request.DedupID],
	// which was not recorded again.
	Duplicate bool
	// Cached reports a refusal answered from the store's local memory of
	// an earlier refusal, without asking the backend (see the Redis
	// store's deny cache).
	Cached bool
	// Repaired reports that the store found state it could not read for
	// this key (of the wrong type or malformed) and replaced it; the
	// decision is as for a fresh key. The memory store never sets it.
	Repaired bool
	// Override is the kind of the key's override that decided the request
	// ([Request.ApplyOverride]); OverrideNone when none applied. Under
	// [OverrideScale], Capacity and Remaining are the scaled limit's; under
	// [OverrideExempt] the request is admitted with the deciding limit's
	// full capacity remaining; under [OverrideSuspend] it is refused with
	// RetryAfter the override's remaining time.
	Override OverrideKind
	// Suppression is, for a store of package store/suppressed, the
	// suppression factor the request met: the probability in [0, 1] that
	// a request between the soft and the hard limit is refused. 0 below
	// the soft limit, 1 at or over the hard limit; with several limits,
	// the largest. Always 0 for other stores.
	Suppression float64
	// Suppressed reports a refusal that was a random draw against the
	// suppression factor (the request was between the soft and the hard
	// limit of every limit that refused it), as opposed to a refusal by
	// a hard limit. Only stores of package store/suppressed set it.
	Suppressed bool
	// PerLimit holds each limit's state, in request order, when the request
	// has more than one limit; nil for single-limit requests.
	PerLimit []LimitState
	// Granted is, for a [Request.Partial] request, the units taken (or,
	// for Peek, that a Take would take now): 1 to Cost when Allowed, 0
	// when refused. Zero for other requests.
	Granted int64
	// Delay is, for an admission of a [Request.MaxWait] request, how long
	// the caller must wait before it proceeds: 0 when it may proceed at
	// once. Remaining, ResetAfter and PerLimit then describe the limits
	// as they will stand when it proceeds, after its units (ResetAfter
	// counted from then).
	Delay time.Duration
	// Reservation is, for a Take admitted with a Delay, the store's
	// opaque record of the place it reserved, which [Waiter.CancelWait]
	// reads to give the place back; "" otherwise. Only meaningful to the
	// store that issued it.
	Reservation string
	// Taken is, for an admitted Take of a [Request.Reserve] request, when
	// it was recorded, on the store's clock (the Redis server's TIME), to
	// the microsecond: pass the decision to [Refunder.Settle]. The zero
	// time for other decisions.
	Taken time.Time
}

// LimitState is one limit's part of a [Decision].
type LimitState struct {
	// Remaining is how many units the limit would still admit.
	Remaining int64
	// ResetAfter is the time until the limit is back to full capacity.
	ResetAfter time.Duration
	// NextAfter is the time until the limit admits Remaining+1 units;
	// zero when it is full (see [Decision.NextAfter]).
	NextAfter time.Duration
}

// Store keeps rate-limit state. Implementations are safe for concurrent use
// and make each Take atomic: concurrent Takes for one key behave as if run
// one after another.
type Store interface {
	// Take checks req against every limit and records it in all of them if,
	// and only if, all admit it. It returns an error only when the request
	// is invalid (see [Request.Validate]) or the backend fails; a backend
	// failure never records the request twice.
	Take(ctx context.Context, req Request) (Decision, error)
	// Peek returns the decision Take would return now, writing nothing.
	Peek(ctx context.Context, req Request) (Decision, error)
	// Reset forgets all state of req.Key under req.Limits (and the key's
	// block, strikes and remembered de-duplication ids). Cost is ignored.
	// It returns an error wrapping [ErrNotFound] when nothing was stored,
	// so that a reset aimed at the wrong identity does not pass silently.
	Reset(ctx context.Context, req Request) error
}

var (
	// ErrInvalidRequest reports a malformed [Request] (empty key, no
	// limits, negative cost, mixed algorithms).
	ErrInvalidRequest = errors.New("ratekeeper: invalid request")
	// ErrInvalidLimit reports a malformed [Limit].
	ErrInvalidLimit = errors.New("ratekeeper: invalid limit")
	// ErrCostExceedsCapacity reports a request whose cost is larger than a
	// limit's capacity: it could never be admitted, so no retry time exists.
	ErrCostExceedsCapacity = errors.New("ratekeeper: cost exceeds limit capacity")
	// ErrStoreUnavailable wraps backend failures (connection, timeout,
	// script errors) so callers can tell them from invalid requests.
	ErrStoreUnavailable = errors.New("ratekeeper: store unavailable")
	// ErrNotFound is returned by Reset when the store held no state for
	// the request's key and limits.
	ErrNotFound = errors.New("ratekeeper: no state stored for this key")
	// ErrTooManyKeys is returned by bounded stores when the key cap is
	// reached and no expired state can be dropped.
	ErrTooManyKeys = errors.New("ratekeeper: too many keys")
)

// BackendError is the error stores return when the backend fails. It
// matches [ErrStoreUnavailable] with errors.Is and unwraps to the cause.
type BackendError struct {
	// Op is the store operation: "take", "peek" or "reset".
	Op string
	// Kind classifies the failure for metrics and logs (see [KindOf]):
	// "timeout" (the call exceeded its deadline), "connection" (the
	// backend could not be reached or the connection broke), "script"
	// (the backend answered with an error or a reply that could not be
	// decoded), "capacity" (a bounded store refused a new key), "busy"
	// (the backend was running another script and refused the call),
	// "clusterdown" (a Redis Cluster node refused the call while the
	// cluster does not serve every slot), "oom" (the backend refused a
	// write at its memory limit), "readonly" (a replica, or a master
	// being failed over, refused a write) or "other".
	Kind string
	// Err is the underlying error.
	Err error
}

// Error implements error.
func (e *BackendError) Error() string {
	return "ratekeeper: store unavailable: " + e.Op + ": " + e.Kind + ": " + e.Err.Error()
}

// Unwrap returns [ErrStoreUnavailable] and the cause, so errors.Is matches
// either.
func (e *BackendError) Unwrap() []error { return []error{ErrStoreUnavailable, e.Err} }

// KindOf returns the Kind of a [BackendError] in err's chain, or "other"
// when there is none. A context deadline counts as "timeout".
func KindOf(err error) string {
	var be *BackendError
	if errors.As(err, &be) {
		return be.Kind
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	return "other"
}

// costError is the error of a request whose cost c exceeds l's capacity.
func costError(c int64, l Limit) error {
	return fmt.Errorf("%w: cost %d, limit %q holds %d", ErrCostExceedsCapacity, c, l.ID(), l.Capacity())
}

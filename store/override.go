package store

import (
	"fmt"
	"strconv"
	"time"
)

// OverrideKind says what an [Override] does to one client's requests. The
// zero value, OverrideNone, is no override.
type OverrideKind uint8

const (
	// OverrideNone: the request was decided under its own limits.
	OverrideNone OverrideKind = iota
	// OverrideScale multiplies the rate and capacity of every limit by
	// [Override.Scale]: above 1 it raises the client's limits, below 1 it
	// cuts them. Counters are kept: units already used count against the
	// scaled limits, and those used under the override count against the
	// limits once it ends, with two bounds: a GCRA or token bucket state
	// written under a raised limit expires when its units would have
	// drained at the raised rate, and a sliding window log that counts
	// refusals (Request.CountDenied) keeps the newest units the scaled
	// rate needs (its rate plus the cost), so attempts beyond those, made
	// under a cut, are forgotten.
	OverrideScale
	// OverrideExempt admits every request of the client without counting
	// it.
	OverrideExempt
	// OverrideSuspend refuses every request of the client, without counting
	// it, until the override expires; the middleware answers 403.
	OverrideSuspend
)

var overrideNames = [...]string{
	OverrideNone:    "none",
	OverrideScale:   "scale",
	OverrideExempt:  "exempt",
	OverrideSuspend: "suspend",
}

// String returns the kind's name: "none", "scale", "exempt" or "suspend".
func (k OverrideKind) String() string {
	if int(k) < len(overrideNames) {
		return overrideNames[k]
	}
	return "override(" + strconv.Itoa(int(k)) + ")"
}

// ParseOverrideKind returns the kind named by s ([OverrideKind.String]'s
// form; "none" is not accepted). Errors wrap [ErrInvalidRequest].
func ParseOverrideKind(s string) (OverrideKind, error) {
	for k := OverrideScale; int(k) < len(overrideNames); k++ {
		if overrideNames[k] == s {
			return k, nil
		}
	}
	return OverrideNone, fmt.Errorf("%w: unknown override kind %q (want scale, exempt or suspend)", ErrInvalidRequest, s)
}

// Override changes the limits of one client (one [Request.Key]) for a
// while. A store keeps it beside the client's state (the Redis store under
// the same hash tag, read by the same atomic script) and applies it to
// requests that ask for it ([Request.ApplyOverride]); requests that do not ask
// never read it and pay nothing for it.
type Override struct {
	// Kind is what the override does. Required.
	Kind OverrideKind
	// Scale is the factor of an [OverrideScale] override, within
	// [2⁻²⁰, 2²⁰]: each limit's rate and capacity x become
	// floor(x·Scale), never more than the largest valid rate (2³⁰) and
	// never less than 1 nor than min(cost, x), so that a cut never makes
	// a cost the configured limit holds impossible. Zero for other kinds.
	Scale float64
	// TTL is how long the override lasts. Required when setting one: > 0,
	// whole milliseconds, at most 366 days. A store reports the time left.
	TTL time.Duration
}

// Bounds of [Override.Scale]: 2⁻²⁰ and 2²⁰.
const (
	minOverrideScale = 1.0 / (1 << 20)
	maxOverrideScale = 1 << 20
)

// Validate reports whether o can be stored. Errors wrap
// [ErrInvalidRequest] and name the field.
func (o Override) Validate() error {
	switch o.Kind {
	case OverrideScale:
		if !(o.Scale >= minOverrideScale && o.Scale <= maxOverrideScale) {
			return fmt.Errorf("%w: override Scale must be between 2⁻²⁰ and 2²⁰, got %v", ErrInvalidRequest, o.Scale)
		}
	case OverrideExempt, OverrideSuspend:
		if o.Scale != 0 {
			return fmt.Errorf("%w: override Scale is only for kind scale, got %v for %s", ErrInvalidRequest, o.Scale, o.Kind)
		}
	default:
		return fmt.Errorf("%w: override Kind must be scale, exempt or suspend, got %s", ErrInvalidRequest, o.Kind)
	}
	if o.TTL < time.Millisecond || o.TTL > maxPeriod || o.TTL%time.Millisecond != 0 {
		return fmt.Errorf("%w: override TTL must be whole milliseconds between 1ms and %s, got %s", ErrInvalidRequest, maxPeriod, o.TTL)
	}
	return nil
}

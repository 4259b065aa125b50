package grpclimit

// This file is the one place that calls the decision core
// (limiter.Limiter.Decide); the rest of the package works on a verdict.

import (
	"context"
	"errors"
	"time"

	"github.com/ratekeeper/ratekeeper/middleware/limiter"
)

// verdictKind is what the interceptor does with a call.
type verdictKind int

const (
	// proceed: the call goes on (admitted, admitted by dry run, exempt,
	// unlimited, or the store failed and the limiter fails open).
	proceed verdictKind = iota
	// refuse: the call is over its limit (or blocked): ResourceExhausted.
	refuse
	// suspend: the client is suspended (a suspended tier or override):
	// PermissionDenied.
	suspend
	// unavailable: the store failed and the limiter fails closed.
	unavailable
)

// verdict is a decision as the interceptors use it.
type verdict struct {
	kind verdictKind
	// limit is the capacity of the deciding limit; 0 when no limit
	// describes the call (no limit applied, or the store failed).
	limit     int64
	remaining int64
	// reset is the time until the deciding limit is full again, or, for a
	// refusal, until the call may be retried.
	reset time.Duration
	// retry is, for a refusal, the wait before the same call would be
	// admitted (0 when no wait can admit it: its cost exceeds a limit's
	// capacity); for unavailable, the breaker's cooldown, 0 when unknown.
	retry time.Duration
}

// errInternal marks a decision that failed for a reason other than the
// store (an unknown tier, invalid limits from a limits function).
var errInternal = errors.New("ratekeeper: grpc: the limiter could not decide")

// acquire takes a slot of lim's in-flight cap (limiter.Options.InFlight)
// for req, before the call runs: release gives it back once the call is
// done. rated is false when the call needs no rate decision after it: the
// limiter has a cap and no rate limits, and the slot's decision was the
// call's. A verdict that is not proceed ends the call (release is then a
// no-op). Without a cap it takes nothing and the call goes on to decide.
func acquire(ctx context.Context, lim *limiter.Limiter, req limiter.Request) (release func(), v verdict, rated bool, err error) {
	release, d, err := lim.Acquire(ctx, req)
	if err != nil && ctx.Err() != nil {
		return release, verdict{}, false, ctx.Err()
	}
	switch d.Outcome {
	case limiter.OutcomeInFlight:
		// No limit describes the wait: RetryInfo alone carries it.
		return release, verdict{kind: refuse, retry: max(d.RetryAfter, time.Second)}, false, nil
	case limiter.OutcomeFailedClosed:
		return release, verdict{kind: unavailable, retry: d.RetryAfter}, false, nil
	case limiter.OutcomeAllowed:
		// A cap alone: the slot's admission was reported as the call's.
		return release, verdict{}, false, nil
	case limiter.OutcomeCanceled:
		if ctx.Err() != nil {
			return release, verdict{}, false, ctx.Err()
		}
		return release, verdict{}, false, context.Canceled
	case limiter.OutcomeRejected:
		return release, verdict{}, false, errInternal
	case limiter.OutcomeFailedOpen:
		// The store failed and the limiter fails open: the call goes on
		// without a slot, to its rate decision (which fails open too).
		return release, verdict{}, true, nil
	}
	if err != nil {
		return release, verdict{}, false, errInternal
	}
	return release, verdict{}, true, nil
}

// decide asks lim for req. Its error is the context's when the caller went
// away or ran out of time, or wraps errInternal; a store failure is a
// verdict of the limiter's failure mode.
func decide(ctx context.Context, lim *limiter.Limiter, req limiter.Request) (verdict, error) {
	d, err := lim.Decide(ctx, req)
	if err != nil && ctx.Err() != nil {
		return verdict{}, ctx.Err()
	}
	switch d.Outcome {
	case limiter.OutcomeAllowed, limiter.OutcomeDryRun:
		// A dry-run refusal goes on with the state of the limit, whose
		// reset is, as for a refusal, the wait before a retry (as the
		// HTTP middleware's headers say).
		reset := d.ResetAfter
		if !d.Allowed {
			reset = d.RetryAfter
		}
		return verdict{limit: d.Capacity, remaining: d.Remaining, reset: reset}, nil
	case limiter.OutcomeLimited, limiter.OutcomeBlocked:
		// A cost above a limit's capacity is refused with that capacity
		// and no RetryAfter: no wait can admit it.
		return verdict{kind: refuse, limit: d.Capacity, remaining: d.Remaining, reset: d.RetryAfter, retry: d.RetryAfter}, nil
	case limiter.OutcomeSuspended:
		return verdict{kind: suspend}, nil
	case limiter.OutcomeFailedClosed:
		return verdict{kind: unavailable, retry: d.RetryAfter}, nil
	case limiter.OutcomeExempt, limiter.OutcomeUnlimited, limiter.OutcomeFailedOpen:
		// No limit describes the call: no metadata.
		return verdict{}, nil
	case limiter.OutcomeCanceled:
		if ctx.Err() != nil {
			return verdict{}, ctx.Err()
		}
		return verdict{}, context.Canceled
	}
	// OutcomeRejected (an unknown tier, invalid limits), or an error
	// without an outcome (a negative cost): a mistake of configuration.
	return verdict{}, errInternal
}

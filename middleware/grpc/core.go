package grpclimit

// This file is the one place that calls the decision core
// (middleware.Limiter); the rest of the package works on a verdict.

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
)

// verdictKind is what the interceptor does with a call.
type verdictKind int

const (
	// proceed: the call goes on (admitted, admitted by dry run, no limit
	// applied, or the store failed and the limiter fails open).
	proceed verdictKind = iota
	// refuse: the call is over its limit (or blocked): ResourceExhausted.
	refuse
	// suspend: the client is suspended by an override: PermissionDenied.
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
	// admitted; 0 when no wait can admit it (its cost exceeds a limit's
	// capacity).
	retry time.Duration
}

// core decides for an identity: the decision core behind the
// interceptors.
type core struct {
	lim *middleware.Limiter
}

// errInternal marks a decision that failed for a reason other than the
// store (a misconfigured limiter).
var errInternal = errors.New("ratekeeper: grpc: the limiter could not decide")

// decide charges identity the limiter's cost (n 0) or n units. Its error is the context's when the
// caller went away or ran out of time, or wraps errInternal; a store
// failure is a verdict of the limiter's failure mode. r is the call as
// the HTTP/2 request it travels in.
func (c core) decide(ctx context.Context, r *http.Request, identity string, n int64) (verdict, error) {
	var (
		d   middleware.Decision
		err error
	)
	if n == 0 {
		d, err = c.lim.Allow(ctx, identity)
	} else {
		d, err = c.lim.AllowN(ctx, identity, n)
	}
	switch {
	case err == nil:
	case errors.Is(err, store.ErrCostExceedsCapacity):
		return verdict{kind: refuse, limit: d.Capacity}, nil
	case ctx.Err() != nil:
		return verdict{}, ctx.Err()
	case errors.Is(err, store.ErrStoreUnavailable):
		if c.lim.FailureMode() == middleware.FailClosed {
			return verdict{kind: unavailable}, nil
		}
		return verdict{kind: proceed}, nil
	default:
		return verdict{}, errInternal
	}
	v := verdict{limit: d.Capacity, remaining: d.Remaining, reset: d.ResetAfter}
	if d.Override == store.OverrideExempt {
		v.limit = 0 // an exempt client has no limit to describe
	}
	if d.Allowed {
		return v, nil
	}
	v.reset = d.RetryAfter
	// Enforce knows the limiter's dry-run mode and suspensions: it lets a
	// refusal of a dry-run limiter through and answers a suspension with
	// 403. What it writes is thrown away.
	w := &statusWriter{h: make(http.Header)}
	switch {
	case c.lim.Enforce(w, r, d):
		v.kind = proceed
	case w.code == http.StatusForbidden:
		v = verdict{kind: suspend}
	default:
		v.kind, v.retry = refuse, d.RetryAfter
	}
	return v, nil
}

// statusWriter records the status of a response and discards the rest.
type statusWriter struct {
	h    http.Header
	code int
}

func (w *statusWriter) Header() http.Header         { return w.h }
func (w *statusWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *statusWriter) WriteHeader(code int)        { w.code = code }

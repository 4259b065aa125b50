package middleware

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"

	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/store"
)

// ReportCost tells l the actual cost of the request ctx belongs to, once
// the handler knows it (the tokens a completion used, the rows an export
// read): the request was admitted at l's estimated cost (1, or n for a
// limiter made with [Limiter.WithCost]), and when the handler returns the
// difference is charged or given back in one step. The settlement also
// runs when the handler panics and when the client went away, within the
// store's own time budget; its failure is logged, never answered. The
// last report counts; without one the estimate stands. Every algorithm
// settles; what an overrun and a give-back mean for each is in package
// store ("Costs settled after the response").
// ReportCost finds the request's decision in ctx, so l (and, for headers
// that describe both budgets, an enclosing limiter of another quota) must
// be built with [Options].DecisionInContext, which also makes each
// request's cost a reservation. It returns an error when l's Handler did
// not admit the request ctx belongs to, or left no decision in it (a
// request of a stack, which decides all or nothing, is not settled), when
// a window-algorithm decision was not taken as a reservation (a limiter
// that attaches its decision for tiers or a limits function, without
// DecisionInContext), or when n is negative.
func (l *Limiter) ReportCost(ctx context.Context, n int64) error {
	if n < 0 {
		return fmt.Errorf("ratekeeper: middleware: ReportCost: n must be >= 0, got %d", n)
	}
	for s := stateFrom(ctx); s != nil; s = s.prev {
		if s.lim == l.Limiter && s.dec.Outcome == limiter.OutcomeAllowed {
			if s.actual == -2 {
				break // admitted by a Stack
			}
			if !settles(&s.dec) {
				return fmt.Errorf("ratekeeper: middleware: ReportCost: policy %q: a %s decision settles only as a reservation (Options.DecisionInContext)", l.h.name, s.dec.Limits[0].Algorithm)
			}
			s.actual = n
			return nil
		}
	}
	return fmt.Errorf("ratekeeper: middleware: ReportCost: policy %q did not admit this request or left no decision in its context (Options.DecisionInContext)", l.h.name)
}

// settles reports whether d can be settled: GCRA and token-bucket
// decisions always, window-algorithm ones when they were reservations.
func settles(d *limiter.Decision) bool {
	if len(d.Limits) == 0 {
		return true
	}
	alg := d.Limits[0].Algorithm
	return alg == store.GCRA || alg == store.TokenBucket || !d.Taken.IsZero()
}

// serveSettling passes an admitted request on and settles the cost its
// handler reported, after the handler returns or panics.
func (l *Limiter) serveSettling(w http.ResponseWriter, st *reqState, next http.Handler) {
	st.actual = -1
	defer l.settleReported(st)
	next.ServeHTTP(w, &st.req)
}

// settleReported settles st's decision at the cost its handler reported,
// if it reported one.
func (l *Limiter) settleReported(st *reqState) {
	if st.actual < 0 {
		st.actual = -2
		return
	}
	if err := l.Settle(st, &st.dec, st.actual); err != nil {
		l.h.logger.LogAttrs(st, slog.LevelWarn, "ratekeeper: cost not settled",
			slog.String("policy", st.dec.Policy), slog.Int64("reserved", st.dec.Cost), slog.Int64("actual", st.actual), slog.Any("error", err))
	}
	st.actual = -2
}

// writeNestedHeaders writes the headers of st's decision for a request an
// enclosing limiter of another policy admitted first (a request budget
// around a token budget): the X-RateLimit-* fields describe the inner
// policy, and the IETF RateLimit and RateLimit-Policy lists hold the items
// of both, the enclosing policy's first.
func writeNestedHeaders(h http.Header, st *reqState) {
	policy, state := h["Ratelimit-Policy"], h["Ratelimit"]
	writeHeaders(h, &st.dec, &st.hb, false)
	if len(policy) > 0 && len(h["Ratelimit-Policy"]) > 0 && &policy[0] != &h["Ratelimit-Policy"][0] {
		h["Ratelimit-Policy"] = append(slices.Clip(policy), h["Ratelimit-Policy"]...)
	}
	if len(state) > 0 && len(h["Ratelimit"]) > 0 && &state[0] != &h["Ratelimit"][0] {
		h["Ratelimit"] = append(slices.Clip(state), h["Ratelimit"]...)
	}
}

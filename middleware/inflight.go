package middleware

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
)

// inFlightStatus returns the status of o's in-flight refusals: 0 without
// a cap.
func inFlightStatus(o *Options) (int, error) {
	switch {
	case o.InFlightStatus != 0 && o.InFlightStatus != http.StatusTooManyRequests && o.InFlightStatus != http.StatusServiceUnavailable:
		return 0, fmt.Errorf("ratekeeper: middleware: Options.InFlightStatus must be 429 or 503, got %d", o.InFlightStatus)
	case o.InFlight.Max == 0 && o.InFlight.Lease == 0:
		if o.InFlightStatus != 0 {
			return 0, fmt.Errorf("ratekeeper: middleware: Options.InFlightStatus is set but Options.InFlight.Max is not")
		}
		return 0, nil
	case o.InFlightStatus == 0:
		return http.StatusTooManyRequests, nil
	}
	return o.InFlightStatus, nil
}

// serveInFlight takes a slot of the in-flight cap for r's identity, runs
// the rest of the request (its rate limits, then next) while it holds it,
// and gives it back when that returns or panics.
func (l *Limiter) serveInFlight(w http.ResponseWriter, r *http.Request, next http.Handler) {
	tier, id, err := l.h.classify(r)
	if err == nil && id == "" {
		err = errEmptyKey
	}
	if err != nil {
		l.rejectIdentity(r.Context(), w, err)
		return
	}
	release, d, _ := l.Acquire(r.Context(), limiter.Request{Tier: tier, Identity: id})
	defer release()
	switch d.Outcome {
	case limiter.OutcomeInFlight:
		headers.WriteRetryAfter(w.Header(), d.RetryAfter)
		if l.h.denied != nil {
			l.h.denied(w, r, d)
			return
		}
		writeJSON(w, l.h.inFlight, l.h.contentType(), l.h.inFlightBody(&d))
		return
	case limiter.OutcomeFailedClosed:
		headers.WriteRetryAfter(w.Header(), d.RetryAfter)
		writeJSON(w, http.StatusServiceUnavailable, contentTypeJSON, bodyUnavailable)
		return
	case limiter.OutcomeRejected:
		writeJSON(w, http.StatusInternalServerError, contentTypeJSON, bodyInternal)
		return
	case limiter.OutcomeCanceled:
		return // the client went away: nobody reads an answer
	}
	if l.h.rateless {
		next.ServeHTTP(w, r)
		return
	}
	l.serveRate(w, r, next)
}

// inFlightBody renders an in-flight refusal, e.g.
//
//	{"error":"too_many_in_flight","message":"Too many requests in progress. Try again in 2 seconds.",
//	 "retry_after":2,"in_flight_limit":10,"policy":"api"}
//
// retry_after is the estimate Retry-After carries (see
// limiter.Limiter.Acquire). With Options.ProblemDetails the same members
// are carried in an RFC 9457 problem document of type about:blank.
func (h *policy) inFlightBody(d *limiter.Decision) []byte {
	secs := headers.RetryAfterSeconds(d.RetryAfter)
	b := make([]byte, 0, 256)
	if h.problem {
		b = append(b, `{"type":"about:blank","title":"Too many requests in progress","status":`...)
		b = strconv.AppendInt(b, int64(h.inFlight), 10)
		b = append(b, `,"error":"too_many_in_flight","detail":"`...)
	} else {
		b = append(b, `{"error":"too_many_in_flight","message":"`...)
	}
	b = append(b, "Too many requests in progress. Try again in "...)
	b = appendDuration(b, secs)
	b = append(b, `.","retry_after":`...)
	b = strconv.AppendInt(b, secs, 10)
	b = append(b, `,"in_flight_limit":`...)
	b = strconv.AppendInt(b, d.Capacity, 10)
	b = append(b, `,"policy":`...)
	b = strconv.AppendQuote(b, d.Policy)
	return append(b, "}\n"...)
}

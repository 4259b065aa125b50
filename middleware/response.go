package middleware

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/store"
)

const (
	contentTypeJSON    = "application/json"
	contentTypeProblem = "application/problem+json"
	// ProblemTypeQuotaExceeded is the problem type of
	// draft-ietf-httpapi-ratelimit-headers used by [BodyProblem].
	ProblemTypeQuotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"
)

var (
	hdrContentType = http.CanonicalHeaderKey("Content-Type")
	hdrNoSniff     = http.CanonicalHeaderKey("X-Content-Type-Options")
	hdrCacheCtl    = http.CanonicalHeaderKey("Cache-Control")

	bodyUnauthorized = []byte(`{"error":"unauthorized","message":"A valid credential is required."}` + "\n")
	bodyBadRequest   = []byte(`{"error":"bad_request","message":"The request's client identity could not be determined."}` + "\n")
	bodyUnavailable  = []byte(`{"error":"rate_limiter_unavailable","message":"The service is temporarily unavailable. Try again shortly."}` + "\n")
	bodySuspended    = []byte(`{"error":"suspended","message":"This client is suspended."}` + "\n")
	bodyInternal     = []byte(`{"error":"internal_error","message":"The request could not be processed."}` + "\n")
)

func writeJSON(w http.ResponseWriter, status int, contentType string, body []byte) {
	h := w.Header()
	h[hdrContentType] = []string{contentType}
	h[hdrNoSniff] = []string{"nosniff"}
	h[hdrCacheCtl] = []string{"no-store"}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeLimited writes the default refusal: 429 with a JSON body whose
// message states the real wait, e.g.
//
//	{"error":"rate_limit_exceeded","message":"Too many requests. Try again in 17 seconds.",
//	 "retry_after":17,"limit":100,"remaining":0,"reset":1767225600,"policy":"api"}
//
// reset is the epoch second at which the request may be retried, the same
// instant Retry-After names. A blocked key gets error "blocked", the
// message "Too many attempts. Try again in N seconds." and a "scope" member
// naming the limit that tripped. With [BodyProblem] the same members are
// carried in an RFC 9457 problem document.
func (l *Limiter) writeLimited(w http.ResponseWriter, t *tierState, f *headers.Fields, d store.Decision, now time.Time) {
	writeJSON(w, http.StatusTooManyRequests, l.contentType(), l.limitedBody(t, f, d, now))
}

func (l *Limiter) contentType() string {
	if l.body == BodyProblem {
		return contentTypeProblem
	}
	return contentTypeJSON
}

// appendJSONString appends s as a JSON string (encoding/json's escaping,
// invalid UTF-8 replaced), for the rare values that are not known to be
// plain ASCII.
func appendJSONString(b []byte, s string) []byte {
	q, err := json.Marshal(s)
	if err != nil {
		return append(b, `""`...)
	}
	return append(b, q...)
}

func (l *Limiter) limitedBody(t *tierState, f *headers.Fields, d store.Decision, now time.Time) []byte {
	secs := headers.RetryAfterSeconds(d.RetryAfter)
	reset := now.Add(d.RetryAfter)
	resetEpoch := reset.Unix()
	if reset.Nanosecond() != 0 {
		resetEpoch++
	}
	b := make([]byte, 0, 320)
	code, msg := "rate_limit_exceeded", "Too many requests. Try again in "
	if d.Blocked {
		code, msg = "blocked", "Too many attempts. Try again in "
	}
	if l.body == BodyProblem {
		b = append(b, `{"type":"`+ProblemTypeQuotaExceeded+`","title":"Request cannot be satisfied as assigned quota has been exceeded","status":429,"detail":"`...)
	} else {
		b = append(b, `{"error":"`...)
		b = append(b, code...)
		b = append(b, `","message":"`...)
	}
	b = append(b, msg...)
	b = appendDuration(b, secs)
	b = append(b, `.","retry_after":`...)
	b = strconv.AppendInt(b, secs, 10)
	b = append(b, `,"limit":`...)
	b = strconv.AppendInt(b, d.Limit, 10)
	b = append(b, `,"remaining":`...)
	b = strconv.AppendInt(b, max(d.Remaining, 0), 10)
	b = append(b, `,"reset":`...)
	b = strconv.AppendInt(b, resetEpoch, 10)
	b = append(b, `,"policy":`...)
	b = append(b, t.nameJSON...)
	if d.Blocked {
		b = append(b, `,"scope":`...)
		b = appendJSONString(b, d.LimitID)
	}
	if l.body == BodyProblem {
		// violated-policies names the RateLimit-Policy item that refused.
		item := f.ItemName(d.Index)
		if item == "" {
			item = t.policy
		}
		b = append(b, `,"error":"`...)
		b = append(b, code...)
		b = append(b, `","violated-policies":[`...)
		b = appendJSONString(b, item)
		b = append(b, ']')
	}
	b = append(b, "}\n"...)
	return b
}

// appendDuration renders whole seconds as "1 second" or "N seconds": the
// exact count, so the message states the real wait.
func appendDuration(b []byte, secs int64) []byte {
	b = strconv.AppendInt(b, secs, 10)
	if secs == 1 {
		return append(b, " second"...)
	}
	return append(b, " seconds"...)
}

// writeCostExceeded answers a request whose cost can never fit: 429 without
// Retry-After, since waiting cannot help.
func (l *Limiter) writeCostExceeded(w http.ResponseWriter, req store.Request, t *tierState) {
	writeJSON(w, http.StatusTooManyRequests, l.contentType(), costBody(req, t.policy, l.body == BodyProblem))
}

// costBody renders the cost-exceeded body, as a problem document when
// problem is set.
func costBody(req store.Request, policy string, problem bool) []byte {
	capacity := req.Limits[0].Capacity()
	for _, l := range req.Limits[1:] {
		capacity = min(capacity, l.Capacity())
	}
	b := make([]byte, 0, 256)
	if problem {
		b = append(b, `{"type":"`+ProblemTypeQuotaExceeded+`","title":"Request cannot be satisfied as assigned quota has been exceeded","status":429,"error":"cost_exceeds_limit","detail":"This request costs `...)
	} else {
		b = append(b, `{"error":"cost_exceeds_limit","message":"This request costs `...)
	}
	b = strconv.AppendInt(b, req.EffectiveCost(), 10)
	b = append(b, ` units; the limit allows at most `...)
	b = strconv.AppendInt(b, capacity, 10)
	b = append(b, ` per request.","cost":`...)
	b = strconv.AppendInt(b, req.EffectiveCost(), 10)
	b = append(b, `,"limit":`...)
	b = strconv.AppendInt(b, capacity, 10)
	b = append(b, `,"policy":`...)
	b = strconv.AppendQuote(b, policy)
	b = append(b, "}\n"...)
	return b
}

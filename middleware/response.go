package middleware

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
)

const (
	contentTypeJSON    = "application/json"
	contentTypeProblem = "application/problem+json"
	// problemTypeQuotaExceeded is the problem type of
	// draft-ietf-httpapi-ratelimit-headers used by Options.ProblemDetails.
	problemTypeQuotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	problemTitle             = "Request cannot be satisfied as assigned quota has been exceeded"
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

// The values of the fields every JSON answer carries, shared by all
// responses: a header map's values are read, never written in place.
var (
	valJSON    = []string{contentTypeJSON}
	valProblem = []string{contentTypeProblem}
	valNoSniff = []string{"nosniff"}
	valNoStore = []string{"no-store"}
)

func writeJSON(w http.ResponseWriter, status int, contentType string, body []byte) {
	h := w.Header()
	switch contentType {
	case contentTypeJSON:
		h[hdrContentType] = valJSON
	case contentTypeProblem:
		h[hdrContentType] = valProblem
	default:
		h[hdrContentType] = []string{contentType}
	}
	h[hdrNoSniff] = valNoSniff
	h[hdrCacheCtl] = valNoStore
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func (h *policy) contentType() string {
	if h.problem {
		return contentTypeProblem
	}
	return contentTypeJSON
}

// bodies holds the refusal bodies last rendered: a ResponseWriter does
// not keep what it is given to write, so a body serves again once
// written, rendered anew only when its inputs changed.
var bodies = sync.Pool{New: func() any { return &refusalBody{body: make([]byte, 0, 512)} }}

// writeLimited answers the refusal of d with the default body.
func (h *policy) writeLimited(w http.ResponseWriter, d *limiter.Decision) {
	rb := bodies.Get().(*refusalBody)
	h.writeLimitedFrom(w, d, rb)
	bodies.Put(rb)
}

// refusalBody is a rendered default refusal body and what it was rendered
// from (see limitedBody): a client over its limit is refused again and
// again with the same body within a second, which is then written as it
// is.
type refusalBody struct {
	of   refusalOf
	body []byte
}

// refusalOf is every input of limitedBody.
type refusalOf struct {
	h                                *policy
	secs, capacity, remaining, reset int64
	blocked                          bool
	policy, limitID                  string
	fields                           *headers.Policy
	index                            int
}

// writeLimitedFrom answers the refusal of d with the default body, as
// writeLimited does, rendered into rb's memory unless rb holds it already.
func (h *policy) writeLimitedFrom(w http.ResponseWriter, d *limiter.Decision, rb *refusalBody) {
	of := refusalOf{
		h: h, secs: headers.RetryAfterSeconds(d.RetryAfter), capacity: d.Capacity,
		remaining: max(d.Remaining, 0), reset: epochSeconds(d.Reset), blocked: d.Blocked,
		policy: d.Policy, limitID: d.LimitID, fields: d.Headers, index: d.Index,
	}
	if of != rb.of {
		rb.body = h.limitedBody(rb.body[:0], d)
		rb.of = of
	}
	writeJSON(w, http.StatusTooManyRequests, h.contentType(), rb.body)
	if cap(rb.body) > 4096 {
		*rb = refusalBody{} // the pool keeps no large body
	}
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

// appendPlainJSONString appends s as a JSON string, as appendJSONString
// does, without its cost for the common case of a string that needs no
// escaping, such as a policy name ([A-Za-z0-9_.-], "/" before a tier).
func appendPlainJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			return appendJSONString(b, s)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// limitedBody renders the default refusal, e.g.
//
//	{"error":"rate_limit_exceeded","message":"Too many requests. Try again in 17 seconds.",
//	 "retry_after":17,"limit":100,"remaining":0,"reset":1767225600,"policy":"api"}
//
// reset is the epoch second at which the request may be retried, the same
// instant Retry-After names. A blocked key gets error "blocked", the
// message "Too many attempts. Try again in N seconds." and a "scope" member
// naming the limit that tripped. With Options.ProblemDetails the same members
// are carried in an RFC 9457 problem document.
func (h *policy) limitedBody(b []byte, d *limiter.Decision) []byte {
	secs := headers.RetryAfterSeconds(d.RetryAfter)
	code, msg := "rate_limit_exceeded", "Too many requests. Try again in "
	if d.Blocked {
		code, msg = "blocked", "Too many attempts. Try again in "
	}
	if h.problem {
		b = append(b, `{"type":"`+problemTypeQuotaExceeded+`","title":"`+problemTitle+`","status":429,"detail":"`...)
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
	b = strconv.AppendInt(b, d.Capacity, 10)
	b = append(b, `,"remaining":`...)
	b = strconv.AppendInt(b, max(d.Remaining, 0), 10)
	b = append(b, `,"reset":`...)
	b = strconv.AppendInt(b, epochSeconds(d.Reset), 10)
	b = append(b, `,"policy":`...)
	b = appendPlainJSONString(b, d.Policy)
	if d.Blocked {
		b = append(b, `,"scope":`...)
		b = appendJSONString(b, d.LimitID)
	}
	if h.problem {
		// violated-policies names the RateLimit-Policy item that refused.
		var item string
		if d.Headers != nil {
			item = d.Headers.Item(d.Index)
		}
		if item == "" {
			item = d.Policy
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

// costBody renders the body for a request whose cost no limit can hold.
func costBody(cost, capacity int64, policy string, problem bool) []byte {
	b := make([]byte, 0, 256)
	if problem {
		b = append(b, `{"type":"`+problemTypeQuotaExceeded+`","title":"`+problemTitle+`","status":429,"error":"cost_exceeds_limit","detail":"This request costs `...)
	} else {
		b = append(b, `{"error":"cost_exceeds_limit","message":"This request costs `...)
	}
	b = strconv.AppendInt(b, cost, 10)
	b = append(b, ` units; the limit allows at most `...)
	b = strconv.AppendInt(b, capacity, 10)
	b = append(b, ` per request.","cost":`...)
	b = strconv.AppendInt(b, cost, 10)
	b = append(b, `,"limit":`...)
	b = strconv.AppendInt(b, capacity, 10)
	b = append(b, `,"policy":`...)
	b = strconv.AppendQuote(b, policy)
	b = append(b, "}\n"...)
	return b
}

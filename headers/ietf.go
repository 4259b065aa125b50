package headers

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// IETF header names (draft-ietf-httpapi-ratelimit-headers-10), in Go's
// canonical form.
const (
	// RateLimit carries the current state: one item per limit with r and t.
	RateLimit = "Ratelimit"
	// RateLimitPolicy carries the quota policies: one item per limit with q
	// and w.
	RateLimitPolicy = "Ratelimit-Policy"
)

// Fields is a [Writer] compiled for one policy: the RateLimit-Policy value
// and the item names are computed once, at construction. Build it with
// [Writer.Compile]; it is immutable and safe for concurrent use.
type Fields struct {
	w           Writer
	names       []string // quoted sf-string item names, one per limit
	plain       []string // the same names unquoted
	policyValue string   // the whole RateLimit-Policy value
	policyHdr   []string
}

// Compile prepares w for a policy named policy with the given limits (in
// request order). Each limit becomes one item of the IETF fields, named
// after the policy when there is one limit, else after the limit's Name, or
// "<policy>-<index>" when the limit has none. Names must be printable
// ASCII; Compile returns an error otherwise.
func (w Writer) Compile(policy string, limits []store.Limit) (*Fields, error) {
	if len(limits) == 0 {
		return nil, fmt.Errorf("ratekeeper: headers: policy %q has no limits", policy)
	}
	f := &Fields{w: w, names: make([]string, len(limits)), plain: make([]string, len(limits))}
	var pv strings.Builder
	for i, l := range limits {
		name := policy
		if len(limits) > 1 {
			name = l.Name
			if name == "" {
				name = policy + "-" + strconv.Itoa(i)
			}
		}
		q, err := quoteSFString(name)
		if err != nil {
			return nil, err
		}
		f.names[i] = q
		f.plain[i] = name
		if i > 0 {
			pv.WriteString(", ")
		}
		pv.WriteString(q)
		pv.WriteString(";q=")
		pv.WriteString(strconv.FormatInt(l.Capacity(), 10))
		pv.WriteString(";w=")
		pv.WriteString(strconv.FormatInt(max(ceilSeconds(l.Period), 1), 10))
	}
	f.policyValue = pv.String()
	f.policyHdr = []string{f.policyValue}
	return f, nil
}

// ItemName returns the name of the i-th limit's item in the IETF fields
// (unquoted), or "" when i is out of range.
func (f *Fields) ItemName(i int) string {
	if i < 0 || i >= len(f.plain) {
		return ""
	}
	return f.plain[i]
}

// PolicyValue returns the RateLimit-Policy field value, e.g.
// `"api";q=100;w=60`.
func (f *Fields) PolicyValue() string { return f.policyValue }

// Write sets the headers the Writer was configured for: the X-RateLimit-*
// set unless [Writer.NoLegacy], the IETF RateLimit and RateLimit-Policy
// fields when [Writer.IETF], and Retry-After on refusals; nothing at all
// when [Writer.Omit].
func (f *Fields) Write(h http.Header, d store.Decision, now time.Time) {
	if f.w.Omit {
		return
	}
	if !f.w.NoLegacy {
		f.w.Write(h, d, now)
	} else if !d.Allowed {
		h[RetryAfter] = []string{strconv.FormatInt(RetryAfterSeconds(d.RetryAfter), 10)}
	}
	if !f.w.IETF {
		return
	}
	h[RateLimitPolicy] = f.policyHdr
	h[RateLimit] = []string{f.rateLimitValue(d)}
}

// rateLimitValue renders one item per limit: r is the remaining quota and
// t the seconds until it is back to full; for the deciding limit of a
// refusal t is the wait before a retry, equal to Retry-After.
func (f *Fields) rateLimitValue(d store.Decision) string {
	b := make([]byte, 0, 48*len(f.names))
	for i, name := range f.names {
		rem, reset := d.Remaining, d.ResetAfter
		if d.PerLimit != nil && i < len(d.PerLimit) {
			rem, reset = d.PerLimit[i].Remaining, d.PerLimit[i].ResetAfter
		} else if len(f.names) > 1 && i != d.Index {
			continue // no per-limit state: report the deciding limit only
		}
		if !d.Allowed && (i == d.Index || d.Blocked) {
			reset = d.RetryAfter
			if d.Blocked {
				rem = 0
			}
		}
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		b = append(b, name...)
		b = append(b, ";r="...)
		b = strconv.AppendInt(b, max(rem, 0), 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, ceilSeconds(reset), 10)
	}
	return string(b)
}

// quoteSFString renders s as an RFC 9651 sf-string.
func quoteSFString(s string) (string, error) {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e {
			return "", fmt.Errorf("ratekeeper: headers: name %q is not printable ASCII", s)
		}
		if c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String(), nil
}

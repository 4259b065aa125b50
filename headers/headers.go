package headers

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ratekeeper/ratekeeper/store"
)

// Options chooses the rate-limit header fields written on every response
// of a limited route (see the package documentation for each field's
// meaning). The zero value writes the X-RateLimit-* set with epoch-second
// resets, and Retry-After on refusals. Options is a plain value: the
// middleware copies it at construction.
type Options struct {
	// ResetDelta writes X-RateLimit-Reset as seconds from now instead of
	// Unix epoch seconds.
	ResetDelta bool
	// Omit suppresses every rate-limit header except Retry-After, which a
	// refusal (429) always carries: useful on login routes, where the
	// remaining count helps attackers pace themselves, while a locked-out
	// user still learns when to come back.
	Omit bool
	// IETF adds the RateLimit-Policy and RateLimit fields of
	// draft-ietf-httpapi-ratelimit-headers-10, one item per limit.
	IETF bool
	// NoLegacy drops the X-RateLimit-Limit, -Remaining and -Reset fields;
	// use it with IETF to send the standard fields only. Retry-After is
	// still sent on refusals.
	NoLegacy bool
	// Bucket adds X-RateLimit-Bucket, the limiter's name, and, for a
	// limiter with tiers, X-RateLimit-Tier, the request's tier.
	Bucket bool
	// Suppression adds X-RateLimit-Suppression, the suppression factor
	// the request met: set it for a limiter on a store of package
	// store/suppressed.
	Suppression bool
}

// Canonical names of the fields (see the package documentation for their
// meaning).
const (
	fieldLimit       = "X-Ratelimit-Limit"
	fieldRemaining   = "X-Ratelimit-Remaining"
	fieldReset       = "X-Ratelimit-Reset"
	fieldRetryAfter  = "Retry-After"
	fieldBucket      = "X-Ratelimit-Bucket"
	fieldTier        = "X-Ratelimit-Tier"
	fieldRateLimit   = "Ratelimit"
	fieldPolicy      = "Ratelimit-Policy"
	fieldSuppression = "X-Ratelimit-Suppression"
)

// Policy is the header values of one policy that depend only on its
// options, names and limits, formatted once by [NewPolicy] so that
// writing a response's fields formats only the numbers of its decision.
// A Policy is immutable and safe for concurrent use.
type Policy struct {
	opts       Options
	capacities []int64    // the capacity of each limit
	limitVals  [][]string // X-RateLimit-Limit value of each limit
	items      []string   // IETF item name of each limit
	quoted     []string   // the same as RFC 9651 sf-strings; nil without IETF
	policyVal  []string   // RateLimit-Policy value; nil without IETF
	windows    []int64    // the w of each limit's RateLimit-Policy item; nil without IETF
	bucketVal  []string   // X-RateLimit-Bucket value
	tierVal    []string   // X-RateLimit-Tier value; nil without a tier
	// resets keeps recent X-RateLimit-Reset values (see resetValue).
	resets [resetSlots]atomic.Pointer[resetVal]
	// near holds, for each limit, the shared X-RateLimit-Remaining values
	// near its capacity (see nearNums), made on first use; nil for a
	// limit whose every remaining count has a small value, or past
	// maxNearCapacities.
	near []func() []string
}

var errUnprintable = errors.New("ratekeeper: headers: IETF item names must be printable ASCII")

// NewPolicy formats the header values of the policy named bucket (the
// limiter's name) with the given tier ("" for none) and limits. The policy
// label is bucket, or bucket "/" tier; an IETF item is named after it when
// there is one limit, else after the limit's Name, or "<policy>-<index>"
// when it has none. NewPolicy returns an error when o.IETF is set and an
// item name is not printable ASCII. It does not validate the limits: the
// store does.
func NewPolicy(o Options, bucket, tier string, limits []store.Limit) (*Policy, error) {
	policy := bucket
	if tier != "" {
		policy += "/" + tier
	}
	p := &Policy{
		opts:       o,
		capacities: make([]int64, len(limits)),
		limitVals:  make([][]string, len(limits)),
		near:       make([]func() []string, len(limits)),
		items:      make([]string, len(limits)),
		bucketVal:  []string{bucket},
	}
	if tier != "" {
		p.tierVal = []string{tier}
	}
	var pv strings.Builder
	for i, l := range limits {
		p.capacities[i] = l.Capacity()
		p.limitVals[i] = []string{strconv.FormatInt(l.Capacity(), 10)}
		p.near[i] = nears.of(l.Capacity())
		p.items[i] = policy
		if len(limits) > 1 {
			p.items[i] = l.Name
			if l.Name == "" {
				p.items[i] = policy + "-" + strconv.Itoa(i)
			}
		}
		if !o.IETF {
			continue
		}
		q, err := quoteSFString(p.items[i])
		if err != nil {
			return nil, err
		}
		p.quoted = append(p.quoted, q)
		if i > 0 {
			pv.WriteString(", ")
		}
		p.windows = append(p.windows, policyWindow(l))
		pv.WriteString(q + ";q=" + strconv.FormatInt(l.Capacity(), 10) + ";w=" + strconv.FormatInt(p.windows[i], 10))
	}
	if o.IETF {
		p.policyVal = []string{pv.String()}
	}
	return p, nil
}

// policyWindow returns the w of l's RateLimit-Policy item: the whole
// seconds, at least one, in which a full l surely empties
// ([store.Limit.Window]), so that a client sending at most l's capacity in
// any window of w seconds is never refused by l.
func policyWindow(l store.Limit) int64 {
	return max(ceilSeconds(l.Window()), 1)
}

// Item returns the IETF item name of limit i of the policy (the name
// RateLimit-Policy gives it, with or without IETF), or "" when there is
// no such limit.
func (p *Policy) Item(i int) string {
	if p == nil || i < 0 || i >= len(p.items) {
		return ""
	}
	return p.items[i]
}

// Buffer holds the values of the fields a caller writes. Numbers are
// formatted into it and the header map refers to them there, so that
// writing the fields of a response allocates nothing when the Buffer lives
// in memory the caller allocates anyway (a request's state). A Buffer never
// writes again where it wrote: the values it hands out never change. So
// one Buffer may serve one response after another (never two at once),
// as the middleware's pooled request states do; once its own room is
// used, it carves values from chunks it allocates, many values each. The
// zero value is ready to use; a nil *Buffer gives each value that is not
// shared (see [Policy.Write]) memory of its own.
type Buffer struct {
	vals [3]string
	nv   int
	buf  [48]byte
	nb   int
	more *chunk // where values go once vals or buf is used up
}

// chunk is room for the values of many responses, in one allocation.
type chunk struct {
	vals [16]string
	nv   int
	buf  [256]byte
	nb   int
}

// num returns a one-element header value holding v in decimal: a shared
// one for small numbers, else one held in b.
func (b *Buffer) num(v int64) []string {
	if v >= 0 && v < smallNums {
		return small()[v : v+1 : v+1]
	}
	var digits [20]byte
	return b.value(strconv.AppendInt(digits[:0], v, 10))
}

// own is the memory of one value outside a Buffer: the value and its
// bytes in one allocation.
type own struct {
	v [1]string
	b [24]byte
}

// value returns a one-element header value holding a copy of p, kept in b
// (or a chunk of b's) when it fits.
func (b *Buffer) value(p []byte) []string {
	switch {
	case len(p) == 0:
		return []string{""}
	case b == nil:
		if len(p) > len(own{}.b) {
			return []string{string(p)}
		}
		o := new(own)
		n := copy(o.b[:], p)
		o.v[0] = unsafe.String(&o.b[0], n)
		return o.v[:]
	case b.nv < len(b.vals) && len(b.buf)-b.nb >= len(p):
		return carve(b.vals[:], &b.nv, b.buf[:], &b.nb, p)
	case len(p) > len(chunk{}.buf):
		return []string{string(p)}
	}
	c := b.more
	if c == nil || c.nv == len(c.vals) || len(c.buf)-c.nb < len(p) {
		c = new(chunk)
		b.more = c
	}
	return carve(c.vals[:], &c.nv, c.buf[:], &c.nb, p)
}

// carve copies p into buf after its first *nb bytes and returns a
// one-element value over it, held in vals after its first *nv; the caller
// has checked that both have room.
func carve(vals []string, nv *int, buf []byte, nb *int, p []byte) []string {
	n := copy(buf[*nb:], p)
	// The bytes are never written there again: what a string needs.
	vals[*nv] = unsafe.String(&buf[*nb], n)
	*nb += n
	*nv++
	return vals[*nv-1 : *nv : *nv]
}

// smallNums is how many numbers (0 to smallNums-1) have one-element
// values shared by every response: the remaining counts of most limits
// and most Retry-After waits.
const smallNums = 4096

// small returns the shared values of the numbers below smallNums, made on
// first use.
var small = sync.OnceValue(func() []string {
	return numbers(smallNums, func(i int) int64 { return int64(i) })
})

// nearNums is how many remaining counts just below a limit's capacity, the
// capacity included, have values shared by every response: those of the
// clients that have used less than nearNums units of a limit too large for
// the small values, most clients of a large quota. They take 10-18 KB per
// capacity (more for more digits), made on the first response that needs
// one, and the limits of every policy with that capacity share them.
const nearNums = 512

// maxNearCapacities bounds the capacities that have shared values near
// them, so that a limits function that makes ever new capacities keeps
// at most a few megabytes: past it, a new capacity's counts are
// formatted per response.
const maxNearCapacities = 128

// nearValues keeps the shared values near each capacity (see nearNums).
type nearValues struct {
	max   int32
	n     atomic.Int32
	byCap sync.Map // int64 capacity -> func() []string
}

// nears is the shared values near the capacities of every policy.
var nears = nearValues{max: maxNearCapacities}

// of returns the function that makes, on first use, the shared values of
// the remaining counts c, c-1, ... of a limit of capacity c (value j is
// that of c-j), nearNums of them or down to smallNums; nil when c is
// below smallNums, every count then having a small value, or when v
// already keeps its most capacities.
func (v *nearValues) of(c int64) func() []string {
	n := min(nearNums, c-smallNums+1)
	if n <= 0 {
		return nil
	}
	if f, ok := v.byCap.Load(c); ok {
		return f.(func() []string)
	}
	if v.n.Load() >= v.max {
		return nil
	}
	f, loaded := v.byCap.LoadOrStore(c, sync.OnceValue(func() []string {
		return numbers(int(n), func(j int) int64 { return c - int64(j) })
	}))
	if !loaded {
		v.n.Add(1)
	}
	return f.(func() []string)
}

// numbers returns n one-element values, value i holding at(i) in decimal,
// over one string of all their digits.
func numbers(n int, at func(int) int64) []string {
	var digits []byte
	ends := make([]int, n)
	for i := range n {
		digits = strconv.AppendInt(digits, at(i), 10)
		ends[i] = len(digits)
	}
	all := string(digits)
	vals := make([]string, n)
	start := 0
	for i, end := range ends {
		vals[i] = all[start:end]
		start = end
	}
	return vals
}

// resetSlots is how many X-RateLimit-Reset values (Unix seconds) a
// Policy keeps formatted: the seconds a busy policy names within a few
// seconds of each other, one slot per second modulo resetSlots.
const resetSlots = 8

// resetVal is a formatted X-RateLimit-Reset value and the second it
// names, in one allocation.
type resetVal struct {
	sec int64
	own
}

// resetValue returns the value naming Unix second sec: the policy's
// shared one when it holds it, else a new one, which becomes the shared
// one of its slot (a value formatted once is then read by every response
// that names the same second: with many clients at once, most of them).
func (p *Policy) resetValue(sec int64) []string {
	slot := &p.resets[uint64(sec)%resetSlots]
	cur := slot.Load()
	if cur != nil && cur.sec == sec {
		return cur.v[:]
	}
	v := &resetVal{sec: sec}
	digits := strconv.AppendInt(v.b[:0], sec, 10)
	v.v[0] = unsafe.String(&v.b[0], len(digits))
	slot.Store(v)
	return v.v[:]
}

// Write sets the fields the policy's options choose for d on h (an
// http.Header, or any map keyed by canonical field names), with values
// held in b. reset is the instant X-RateLimit-Reset names: when the
// deciding limit is full again, or for a refusal when the request may be
// retried. retry adds Retry-After, which every refusal carries whatever
// the options say. A nil Policy (no limit applied) writes Retry-After
// alone, when retry is set.
func (p *Policy) Write(h map[string][]string, d *store.Decision, reset time.Time, b *Buffer, retry bool) {
	if retry {
		h[fieldRetryAfter] = b.num(RetryAfterSeconds(d.RetryAfter))
	}
	if p == nil || p.opts.Omit {
		return
	}
	if !p.opts.NoLegacy {
		p.writeLegacy(h, d, reset, b)
	}
	if p.opts.IETF {
		var stack [192]byte
		if i := d.Index; i >= 0 && i < len(p.capacities) && p.capacities[i] != d.Capacity {
			// The decision's capacity is not its limit's (a scale
			// override): the deciding limit's item with that capacity,
			// alone, since the others' are not known here.
			h[fieldPolicy] = b.value(fmt.Appendf(stack[:0], "%s;q=%d;w=%d", p.quoted[i], d.Capacity, p.windows[i]))
		} else {
			h[fieldPolicy] = p.policyVal
		}
		h[fieldRateLimit] = b.value(p.appendRateLimit(stack[:0], d, retry))
	}
	if p.opts.Suppression {
		var digits [24]byte
		h[fieldSuppression] = b.value(strconv.AppendFloat(digits[:0], d.Suppression, 'f', -1, 64))
	}
	if p.opts.Bucket {
		h[fieldBucket] = p.bucketVal
		if p.tierVal != nil {
			h[fieldTier] = p.tierVal
		}
	}
}

// writeLegacy sets X-RateLimit-Limit, -Remaining and -Reset.
func (p *Policy) writeLegacy(h map[string][]string, d *store.Decision, reset time.Time, b *Buffer) {
	rem := max(d.Remaining, 0)
	if i := d.Index; i >= 0 && i < len(p.limitVals) && p.capacities[i] == d.Capacity {
		h[fieldLimit] = p.limitVals[i]
		h[fieldRemaining] = p.remainingValue(i, rem, b)
	} else {
		h[fieldLimit] = b.num(d.Capacity)
		h[fieldRemaining] = b.num(rem)
	}
	if p.opts.ResetDelta {
		wait := d.ResetAfter
		if !d.Allowed {
			wait = d.RetryAfter
		}
		h[fieldReset] = b.num(ceilSeconds(wait))
	} else {
		h[fieldReset] = p.resetValue(ceilSeconds(time.Duration(reset.UnixNano())))
	}
}

// remainingValue returns the X-RateLimit-Remaining value of rem units
// remaining of limit i, whose capacity the decision has: a shared small
// or near-capacity one when there is one, else one held in b.
func (p *Policy) remainingValue(i int, rem int64, b *Buffer) []string {
	if j := p.capacities[i] - rem; rem >= smallNums && j >= 0 && j < nearNums && p.near[i] != nil {
		return p.near[i]()[j : j+1 : j+1]
	}
	return b.num(rem)
}

// appendRateLimit appends the RateLimit field to b: one item per limit, r
// the units remaining and t the seconds, rounded up, until the limit next
// makes quota available ([store.Decision.NextAfter]); a full limit, which
// has no more quota to come, goes without t. Every limit of a blocked key
// reports r=0 and, as t, the wait before a retry. With Retry-After (retry),
// an item whose t would name a later moment than Retry-After goes without
// t (see the package documentation).
func (p *Policy) appendRateLimit(b []byte, d *store.Decision, retry bool) []byte {
	for i, name := range p.quoted {
		rem, next := d.Remaining, d.NextAfter
		if i == d.Index {
			// The deciding limit: the decision's own values (a refusal's
			// NextAfter is at most its RetryAfter).
		} else if d.PerLimit != nil && i < len(d.PerLimit) {
			rem, next = d.PerLimit[i].Remaining, d.PerLimit[i].NextAfter
		} else if len(p.quoted) > 1 {
			continue // no per-limit state: report the deciding limit only
		}
		if d.Blocked {
			rem, next = 0, d.RetryAfter
		}
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		b = append(b, name...)
		b = append(b, ";r="...)
		b = strconv.AppendInt(b, max(rem, 0), 10)
		if t := ceilSeconds(next); next > 0 && (!retry || t <= RetryAfterSeconds(d.RetryAfter)) {
			b = append(b, ";t="...)
			b = strconv.AppendInt(b, t, 10)
		}
	}
	return b
}

// WriteRetryAfter sets Retry-After on h to wait in whole seconds (see
// [RetryAfterSeconds]), for answers that carry no decision, such as a
// 503 while the store is unavailable.
func WriteRetryAfter(h map[string][]string, wait time.Duration) {
	h[fieldRetryAfter] = []string{strconv.FormatInt(RetryAfterSeconds(wait), 10)}
}

// RetryAfterSeconds converts a wait to the whole seconds sent in
// Retry-After: rounded up, and at least 1 so that clients never retry in
// a tight loop.
func RetryAfterSeconds(wait time.Duration) int64 {
	return max(ceilSeconds(wait), 1)
}

// ceilSeconds rounds d up to whole seconds; negative durations give 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// quoteSFString renders s as an RFC 9651 sf-string.
func quoteSFString(s string) (string, error) {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e {
			return "", fmt.Errorf("%w: %q", errUnprintable, s)
		}
		if c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String(), nil
}

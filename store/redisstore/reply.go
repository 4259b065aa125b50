package redisstore

import (
	"errors"
	"fmt"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// replyHead is the number of integers a full script reply starts with; two
// per limit, the block scope and the applied override follow (see package
// lua).
const replyHead = 10

// maxReplyMicros bounds the durations a script may report: 2^53µs (285
// years), beyond which a float64 is no longer exact. Valid limits stay far
// below it (package store bounds a bucket's drain time to 100 periods of
// 366 days); anything larger means a script or server that does not follow
// the contract.
const maxReplyMicros = int64(1) << 53

// errBadReply reports a script reply that breaks the contract.
var errBadReply = errors.New("redisstore: unexpected script reply")

// reply is a decoded script reply.
type reply struct {
	allowed      bool
	index        int // -1 when blocked
	blocked      bool
	blockStarted bool
	duplicate    bool
	repaired     bool
	override     store.OverrideKind
	// The limits as the script applied them: scaled under an override.
	limits [store.MaxLimits]store.Limit
	// Per limit, in request order: remaining units and reset after (µs).
	remaining [store.MaxLimits]int64
	resetUS   [store.MaxLimits]int64
	// Of the deciding limit, or the block's remaining time.
	retryUS int64
	// The block's scope when blocked.
	scope string
	// Suppressed strategy only: the largest factor met (ppm) and whether
	// the refusal was by the draw.
	suppression int64
	suppressed  bool
}

// decodeReply checks and decodes a script reply for a request with the
// given (validated) limits and cost. It never panics: any surprise is an
// error wrapping errBadReply.
func decodeReply(v any, limits []store.Limit, cost int64) (reply, error) {
	n := len(limits)
	arr, ok := v.([]any)
	if !ok {
		return reply{}, fmt.Errorf("%w: got %T, want an array", errBadReply, v)
	}
	// The suppressed strategy's script adds two integers after the
	// override: the factor met, in parts per million, and the
	// drawn-refusal flag (not when an exempt or suspend override answered
	// before the strategy ran; checked below).
	var tail []any
	if limits[0].Algorithm == store.Suppressed && len(arr) == replyHead+2*n+4 {
		arr, tail = arr[:len(arr)-2], arr[len(arr)-2:]
	}
	if len(arr) != replyHead+2*n+2 {
		return reply{}, fmt.Errorf("%w: got %d elements, want %d", errBadReply, len(arr), replyHead+2*n+2)
	}
	ov, ok := arr[len(arr)-1].(string)
	if !ok {
		return reply{}, fmt.Errorf("%w: override is %T, want a string", errBadReply, arr[len(arr)-1])
	}
	arr = arr[:len(arr)-1]
	var x [replyHead + 2*store.MaxLimits]int64
	for i, e := range arr[:len(arr)-1] {
		iv, ok := e.(int64)
		if !ok {
			return reply{}, fmt.Errorf("%w: element %d is %T, want an integer", errBadReply, i, e)
		}
		x[i] = iv
	}
	scope, ok := arr[len(arr)-1].(string)
	if !ok {
		return reply{}, fmt.Errorf("%w: scope is %T, want a string", errBadReply, arr[len(arr)-1])
	}
	for i, name := range [...]string{0: "allowed", 5: "blocked", 6: "block started", 7: "duplicate", 8: "repaired"} {
		if name != "" && x[i] != 0 && x[i] != 1 {
			return reply{}, fmt.Errorf("%w: %s flag %d", errBadReply, name, x[i])
		}
	}
	r := reply{
		allowed: x[0] == 1, index: int(x[1]), retryUS: x[4],
		blocked: x[5] == 1, blockStarted: x[6] == 1, duplicate: x[7] == 1, repaired: x[8] == 1, scope: scope,
		override: store.OverrideKind(x[9]),
	}
	copy(r.limits[:], limits)
	if x[9] != 0 {
		o, err := contract.DecodeOverride(ov)
		if err != nil || int64(o.Kind) != x[9] {
			return reply{}, fmt.Errorf("%w: override %d applied as %q", errBadReply, x[9], ov)
		}
		if o.Kind == store.OverrideScale {
			for i, l := range limits {
				r.limits[i] = contract.ScaleLimit(l, o.Scale, cost)
			}
		}
	} else if ov != "" {
		return reply{}, fmt.Errorf("%w: override %q without its code", errBadReply, ov)
	}
	switch {
	case (r.override == store.OverrideExempt && !r.allowed) || (r.override == store.OverrideSuspend && (r.allowed || x[4] == 0)):
		return reply{}, fmt.Errorf("%w: %s override answered allowed %d, retry after %dµs", errBadReply, r.override, x[0], x[4])
	case (r.override == store.OverrideExempt || r.override == store.OverrideSuspend) && (r.blocked || r.duplicate):
		return reply{}, fmt.Errorf("%w: %s override answered as blocked or duplicate", errBadReply, r.override)
	case x[4] < 0 || x[4] > maxReplyMicros || (r.allowed && x[4] != 0):
		return reply{}, fmt.Errorf("%w: retry after %dµs", errBadReply, x[4])
	case r.blockStarted && !r.blocked:
		return reply{}, fmt.Errorf("%w: block started without blocking", errBadReply)
	case r.duplicate && !r.allowed:
		return reply{}, fmt.Errorf("%w: refused duplicate", errBadReply)
	case r.blocked && (r.allowed || r.index != -1 || x[2] != 0 || x[3] != x[4] || x[4] == 0 || scope == ""):
		return reply{}, fmt.Errorf("%w: blocked reply: allowed %d, index %d, remaining %d, reset after %dµs, retry after %dµs, scope %q",
			errBadReply, x[0], x[1], x[2], x[3], x[4], scope)
	case !r.blocked && (x[1] < 0 || x[1] >= int64(n)):
		return reply{}, fmt.Errorf("%w: limit index %d of %d", errBadReply, x[1], n)
	case !r.blocked && scope != "":
		return reply{}, fmt.Errorf("%w: scope %q without a block", errBadReply, scope)
	}
	for i, l := range r.limits[:n] {
		rem, reset := x[replyHead+2*i], x[replyHead+2*i+1]
		if rem < 0 || rem > l.Capacity() {
			return reply{}, fmt.Errorf("%w: limit %d: remaining %d of %d", errBadReply, i, rem, l.Capacity())
		}
		if reset < 0 || reset > maxReplyMicros {
			return reply{}, fmt.Errorf("%w: limit %d: reset after %dµs", errBadReply, i, reset)
		}
		r.remaining[i], r.resetUS[i] = rem, reset
	}
	if !r.blocked && (x[2] != r.remaining[r.index] || x[3] != r.resetUS[r.index]) {
		return reply{}, fmt.Errorf("%w: deciding limit %d reported as %d/%dµs and %d/%dµs",
			errBadReply, r.index, x[2], x[3], r.remaining[r.index], r.resetUS[r.index])
	}
	if limits[0].Algorithm == store.Suppressed && tail == nil && r.override != store.OverrideExempt && r.override != store.OverrideSuspend {
		return reply{}, fmt.Errorf("%w: suppressed reply without its factor", errBadReply)
	}
	if tail != nil {
		f, ok1 := tail[0].(int64)
		drawn, ok2 := tail[1].(int64)
		switch {
		case !ok1 || !ok2:
			return reply{}, fmt.Errorf("%w: suppression is %T and %T, want integers", errBadReply, tail[0], tail[1])
		case f < 0 || f > ppm:
			return reply{}, fmt.Errorf("%w: suppression factor %d ppm", errBadReply, f)
		case drawn != 0 && drawn != 1 || drawn == 1 && r.allowed:
			return reply{}, fmt.Errorf("%w: suppressed flag %d (allowed %v)", errBadReply, drawn, r.allowed)
		}
		r.suppression, r.suppressed = f, drawn == 1
	}
	return r, nil
}

// ppm is the scale of a suppression factor in a script reply.
const ppm = 1_000_000

// decision turns a decoded reply into the Decision for limits. PerLimit is
// set only for requests with more than one limit. A blocked decision names
// the block's scope as Policy; Index and Limit are those of the limit with
// that ID in limits, or -1 and the first limit's capacity when the block
// was started by a limit this request does not carry.
func (r *reply) decision(limits []store.Limit) store.Decision {
	limits = r.limits[:len(limits)]
	var d store.Decision
	if r.blocked {
		d = store.Decision{
			Limit:        limits[0].Capacity(),
			ResetAfter:   micros(r.retryUS),
			RetryAfter:   micros(r.retryUS),
			LimitID:      r.scope,
			Index:        -1,
			Blocked:      true,
			BlockStarted: r.blockStarted,
		}
		for i, l := range limits {
			if l.ID() == r.scope {
				d.Index, d.Limit = i, l.Capacity()
				break
			}
		}
	} else {
		l := limits[r.index]
		d = store.Decision{
			Allowed:    r.allowed,
			Limit:      l.Capacity(),
			Remaining:  r.remaining[r.index],
			ResetAfter: micros(r.resetUS[r.index]),
			RetryAfter: micros(r.retryUS),
			LimitID:    l.ID(),
			Index:      r.index,
			Duplicate:  r.duplicate,
		}
	}
	d.Repaired = r.repaired
	d.Override = r.override
	d.Suppression = float64(r.suppression) / ppm
	d.Suppressed = r.suppressed
	if len(limits) > 1 {
		d.PerLimit = make([]store.LimitState, len(limits))
		for i := range limits {
			d.PerLimit[i] = store.LimitState{Remaining: r.remaining[i], ResetAfter: micros(r.resetUS[i])}
		}
	}
	return d
}

// decodeLean checks and decodes the reply of a lean script, {allowed,
// remaining, reset after µs, retry after µs} and, from the built-in
// scripts, a fifth integer, repaired (0 or 1), into the decision for the
// limit li. User scripts' replies reach it cut to their first four
// elements. It never panics.
func decodeLean(v any, li *limitInfo) (store.Decision, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 4 && len(arr) != 5 {
		return store.Decision{}, fmt.Errorf("%w: got %T %v, want 4 or 5 integers", errBadReply, v, v)
	}
	return decodeLeanInts(arr, li.limit, li.id)
}

// decodeLeanInts decodes a lean reply's integers, arr (4 or 5 elements),
// for a limit of capacity limit and ID id.
func decodeLeanInts(arr []any, limit int64, id string) (store.Decision, error) {
	var x [5]int64
	for i, e := range arr {
		iv, ok := e.(int64)
		if !ok {
			return store.Decision{}, fmt.Errorf("%w: element %d is %T, want an integer", errBadReply, i, e)
		}
		x[i] = iv
	}
	switch {
	case x[0] != 0 && x[0] != 1:
		return store.Decision{}, fmt.Errorf("%w: allowed flag %d", errBadReply, x[0])
	case x[1] < 0 || x[1] > limit:
		return store.Decision{}, fmt.Errorf("%w: remaining %d of %d", errBadReply, x[1], limit)
	case x[2] < 0 || x[2] > maxReplyMicros:
		return store.Decision{}, fmt.Errorf("%w: reset after %dµs", errBadReply, x[2])
	case x[3] < 0 || x[3] > maxReplyMicros || (x[0] == 1) != (x[3] == 0):
		return store.Decision{}, fmt.Errorf("%w: retry after %dµs (allowed %d)", errBadReply, x[3], x[0])
	case x[4] != 0 && x[4] != 1:
		return store.Decision{}, fmt.Errorf("%w: repaired flag %d", errBadReply, x[4])
	}
	return store.Decision{
		Allowed:    x[0] == 1,
		Limit:      limit,
		Remaining:  x[1],
		ResetAfter: micros(x[2]),
		RetryAfter: micros(x[3]),
		LimitID:    id,
		Repaired:   x[4] == 1,
	}, nil
}

// decodeLeanOverride decodes the reply of the lean script with overrides
// (lua.SourceWithOverrides) for a request with limit l and cost: the lean
// reply's five integers, then the applied override's code and value, as
// in the full reply. Under a scale override the decision describes the
// scaled limit. It never panics.
func decodeLeanOverride(v any, l store.Limit, cost int64, li *limitInfo) (store.Decision, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 7 {
		return store.Decision{}, fmt.Errorf("%w: got %T %v, want 5 integers, the override's code and value", errBadReply, v, v)
	}
	kind, ok1 := arr[5].(int64)
	ov, ok2 := arr[6].(string)
	if !ok1 || !ok2 {
		return store.Decision{}, fmt.Errorf("%w: override is %T and %T, want an integer and a string", errBadReply, arr[5], arr[6])
	}
	limit := li.limit
	switch {
	case kind == 0:
		if ov != "" {
			return store.Decision{}, fmt.Errorf("%w: override %q without its code", errBadReply, ov)
		}
	case kind >= int64(store.OverrideScale) && kind <= int64(store.OverrideSuspend):
		o, err := contract.DecodeOverride(ov)
		if err != nil || int64(o.Kind) != kind {
			return store.Decision{}, fmt.Errorf("%w: override %d applied as %q", errBadReply, kind, ov)
		}
		if o.Kind == store.OverrideScale {
			limit = contract.ScaleLimit(l, o.Scale, cost).Capacity()
		}
	default:
		return store.Decision{}, fmt.Errorf("%w: override code %d", errBadReply, kind)
	}
	d, err := decodeLeanInts(arr[:5], limit, li.id)
	if err != nil {
		return store.Decision{}, err
	}
	d.Override = store.OverrideKind(kind)
	switch {
	case d.Override == store.OverrideExempt && !d.Allowed, d.Override == store.OverrideSuspend && d.Allowed:
		return store.Decision{}, fmt.Errorf("%w: %s override answered allowed %v", errBadReply, d.Override, d.Allowed)
	}
	return d, nil
}

// micros converts a microsecond count to a Duration.
func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

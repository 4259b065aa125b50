package redisstore

import (
	"errors"
	"fmt"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// replyHead is the number of integers a script reply starts with; two per
// limit follow (see package lua).
const replyHead = 6

// maxReplyMicros bounds the durations a script may report: twice the
// longest period, which the window counter's reset can reach. Anything
// larger means a script or server that does not follow the contract.
const maxReplyMicros = int64(2 * 366 * 24 * time.Hour / time.Microsecond)

// errBadReply reports a script reply that breaks the contract.
var errBadReply = errors.New("redisstore: unexpected script reply")

// reply is a decoded script reply.
type reply struct {
	allowed  bool
	index    int
	replayed bool
	// Per limit, in request order: remaining units and reset after (µs).
	remaining [store.MaxLimits]int64
	resetUS   [store.MaxLimits]int64
	// Of the deciding limit.
	retryUS int64
}

// decodeReply checks and decodes a script reply for a request with the
// given (validated) limits. It never panics: any surprise is an error
// wrapping errBadReply.
func decodeReply(v any, limits []store.Limit) (reply, error) {
	n := len(limits)
	arr, ok := v.([]any)
	if !ok {
		return reply{}, fmt.Errorf("%w: got %T, want an array", errBadReply, v)
	}
	if len(arr) != replyHead+2*n {
		return reply{}, fmt.Errorf("%w: got %d elements, want %d", errBadReply, len(arr), replyHead+2*n)
	}
	var x [replyHead + 2*store.MaxLimits]int64
	for i, e := range arr {
		iv, ok := e.(int64)
		if !ok {
			return reply{}, fmt.Errorf("%w: element %d is %T, want an integer", errBadReply, i, e)
		}
		x[i] = iv
	}
	switch {
	case x[0] != 0 && x[0] != 1:
		return reply{}, fmt.Errorf("%w: allowed flag %d", errBadReply, x[0])
	case x[1] < 0 || x[1] >= int64(n):
		return reply{}, fmt.Errorf("%w: limit index %d of %d", errBadReply, x[1], n)
	case x[4] < 0 || x[4] > maxReplyMicros || (x[0] == 1 && x[4] != 0):
		return reply{}, fmt.Errorf("%w: retry after %dµs", errBadReply, x[4])
	case x[5] != 0 && x[5] != 1:
		return reply{}, fmt.Errorf("%w: replayed flag %d", errBadReply, x[5])
	}
	r := reply{allowed: x[0] == 1, index: int(x[1]), retryUS: x[4], replayed: x[5] == 1}
	for i, l := range limits {
		rem, reset := x[replyHead+2*i], x[replyHead+2*i+1]
		if rem < 0 || rem > l.Capacity() {
			return reply{}, fmt.Errorf("%w: limit %d: remaining %d of %d", errBadReply, i, rem, l.Capacity())
		}
		if reset < 0 || reset > maxReplyMicros {
			return reply{}, fmt.Errorf("%w: limit %d: reset after %dµs", errBadReply, i, reset)
		}
		r.remaining[i], r.resetUS[i] = rem, reset
	}
	if x[2] != r.remaining[r.index] || x[3] != r.resetUS[r.index] {
		return reply{}, fmt.Errorf("%w: deciding limit %d reported as %d/%dµs and %d/%dµs",
			errBadReply, r.index, x[2], x[3], r.remaining[r.index], r.resetUS[r.index])
	}
	return r, nil
}

// decision turns a decoded reply into the Decision for limits. PerLimit is
// set only for requests with more than one limit.
func (r *reply) decision(limits []store.Limit) store.Decision {
	l := limits[r.index]
	d := store.Decision{
		Allowed:    r.allowed,
		Limit:      l.Capacity(),
		Remaining:  r.remaining[r.index],
		ResetAfter: micros(r.resetUS[r.index]),
		RetryAfter: micros(r.retryUS),
		Policy:     l.ID(),
		Index:      r.index,
	}
	if len(limits) > 1 {
		d.PerLimit = make([]store.LimitState, len(limits))
		for i := range limits {
			d.PerLimit[i] = store.LimitState{Remaining: r.remaining[i], ResetAfter: micros(r.resetUS[i])}
		}
	}
	return d
}

// micros converts a microsecond count to a Duration.
func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

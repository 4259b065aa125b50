package redisstore

import (
	"errors"
	"fmt"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// replyLen is the number of integers a script returns (see package lua).
const replyLen = 6

// maxReplyMicros bounds the durations a script may report: twice the
// longest period, which the window counter's reset can reach. Anything
// larger means a script or server that does not follow the contract.
const maxReplyMicros = int64(2 * 366 * 24 * time.Hour / time.Microsecond)

// reply is a decoded script reply.
type reply struct {
	allowed   bool
	index     int
	remaining int64
	resetUS   int64
	retryUS   int64
	replayed  bool
}

// errBadReply reports a script reply that breaks the contract.
var errBadReply = errors.New("redisstore: unexpected script reply")

// decodeReply checks and decodes a script reply for a request with the
// given limits. It never panics: any surprise is an error wrapping
// errBadReply.
func decodeReply(v any, limits []store.Limit) (reply, error) {
	n := len(limits)
	arr, ok := v.([]any)
	if !ok {
		return reply{}, fmt.Errorf("%w: got %T, want an array", errBadReply, v)
	}
	if len(arr) != replyLen {
		return reply{}, fmt.Errorf("%w: got %d elements, want %d", errBadReply, len(arr), replyLen)
	}
	var x [replyLen]int64
	for i, e := range arr {
		iv, ok := e.(int64)
		if !ok {
			return reply{}, fmt.Errorf("%w: element %d is %T, want an integer", errBadReply, i, e)
		}
		x[i] = iv
	}
	r := reply{
		allowed:   x[0] == 1,
		index:     int(x[1]),
		remaining: x[2],
		resetUS:   x[3],
		retryUS:   x[4],
		replayed:  x[5] == 1,
	}
	switch {
	case x[0] != 0 && x[0] != 1:
		return reply{}, fmt.Errorf("%w: allowed flag %d", errBadReply, x[0])
	case x[1] < 0 || x[1] >= int64(n):
		return reply{}, fmt.Errorf("%w: limit index %d of %d", errBadReply, x[1], n)
	case x[2] < 0 || x[2] > limits[x[1]].Capacity():
		return reply{}, fmt.Errorf("%w: remaining %d of %d", errBadReply, x[2], limits[x[1]].Capacity())
	case x[3] < 0 || x[3] > maxReplyMicros:
		return reply{}, fmt.Errorf("%w: reset after %dµs", errBadReply, x[3])
	case x[4] < 0 || x[4] > maxReplyMicros || (r.allowed && x[4] != 0):
		return reply{}, fmt.Errorf("%w: retry after %dµs", errBadReply, x[4])
	case x[5] != 0 && x[5] != 1:
		return reply{}, fmt.Errorf("%w: replayed flag %d", errBadReply, x[5])
	}
	return r, nil
}

// decision turns a decoded reply into the Decision for limits.
func (r reply) decision(limits []store.Limit) store.Decision {
	l := limits[r.index]
	return store.Decision{
		Allowed:    r.allowed,
		Limit:      l.Capacity(),
		Remaining:  r.remaining,
		ResetAfter: time.Duration(r.resetUS) * time.Microsecond,
		RetryAfter: time.Duration(r.retryUS) * time.Microsecond,
		Policy:     l.ID(),
		Index:      r.index,
	}
}

package redisstore

import (
	"fmt"

	"github.com/ratekeeper/ratekeeper/store"
)

// decodePartial checks and decodes the reply of a partial-grant script
// (package lua, "Partial grants") for req, which wanted cost units: a
// full reply for the grant's cost, then the grant, 1 to cost when the
// request was admitted and 0 when it was refused. It never panics.
func decodePartial(v any, req *store.Request, cost int64) (store.Decision, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 {
		return store.Decision{}, fmt.Errorf("%w: got %T %v, want a full reply and the grant", errBadReply, v, v)
	}
	var granted int64
	if err := readInts(arr[len(arr)-1:], &granted); err != nil {
		return store.Decision{}, fmt.Errorf("grant: %w", err)
	}
	r, err := decodeReply(arr[:len(arr)-1], req.Limits, max(granted, 1))
	if err != nil {
		return store.Decision{}, err
	}
	if r.allowed && (granted < 1 || granted > cost) || !r.allowed && granted != 0 {
		return store.Decision{}, fmt.Errorf("%w: granted %d of %d (allowed %v)", errBadReply, granted, cost, r.allowed)
	}
	d := r.decision(req.Limits)
	d.Granted = granted
	return d, nil
}

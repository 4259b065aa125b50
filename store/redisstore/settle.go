package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

var _ store.Refunder = (*redisStore)(nil)

// Settle implements [store.Refunder]: it runs the refund script in mode
// "settle" (GCRA and the token bucket) or "settle_window" (the window
// algorithms, with taken's time) on req's state keys (package lua,
// "Stacked decisions"), once: like every script call it is never re-sent,
// so a call whose reply is lost fails and may or may not have applied. A
// settlement of the reserved cost itself sends nothing.
func (s *redisStore) Settle(ctx context.Context, req store.Request, taken store.Decision, actual int64) error {
	delta, at, err := contract.SettleDelta(&req, &taken, actual)
	if err != nil || delta == 0 {
		return err
	}
	if err := ctx.Err(); err != nil {
		return backendError("settle", err)
	}
	base := keyBase(s.prefix, encodeKey(req.Key))
	var stateKeys [store.MaxLimits]string
	keys := appendStateKeys(stateKeys[:0], base, req.Limits)
	args := make([]any, 0, 3+len(keys)+6+2*len(req.Limits))
	args = append(args, "evalsha", s.scripts.refund.sha, len(keys))
	for _, k := range keys {
		args = append(args, k)
	}
	if alg := req.Limits[0].Algorithm; alg == store.GCRA || alg == store.TokenBucket {
		args = append(args, "settle", delta, len(req.Limits))
	} else {
		args = append(args, "settle_window", int(alg), delta, at, s.nonce(), len(req.Limits))
	}
	for _, l := range req.Limits {
		li := s.limits.get(l)
		args = append(args, li.rate, li.period)
	}
	v, err := s.do(ctx, "settle", &command{key: keys[0], sc: &s.scripts.refund, args: args})
	if err != nil {
		return err
	}
	if n, ok := v.(int64); !ok || n != 1 {
		return backendError("settle", fmt.Errorf("%w: settle answered %v, want 1", errBadReply, v))
	}
	return nil
}

// decodeReservation checks and decodes the reply of a reservation script
// (package lua, "Reservations") for req of cost: a full reply, then the
// time of the decision (µs), which an admission that recorded the
// request reports as Decision.Taken. It never panics.
func decodeReservation(v any, req *store.Request, cost int64) (store.Decision, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 {
		return store.Decision{}, fmt.Errorf("%w: got %T %v, want a full reply and the time", errBadReply, v, v)
	}
	var at int64
	if err := readInts(arr[len(arr)-1:], &at); err != nil || at <= 0 {
		return store.Decision{}, fmt.Errorf("%w: reservation time %v", errBadReply, arr[len(arr)-1])
	}
	r, err := decodeReply(arr[:len(arr)-1], req.Limits, cost)
	if err != nil {
		return store.Decision{}, err
	}
	d := r.decision(req.Limits)
	if d.Allowed && !d.Duplicate {
		d.Taken = time.UnixMicro(at)
	}
	return d, nil
}

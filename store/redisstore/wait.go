package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

var _ store.Waiter = (*redisStore)(nil)

// decodeWait checks and decodes the reply of a waiting script (package
// lua, "Waiting") for req: a full reply, then the delay in µs and the
// reservation (per limit the state before and after, "" unless a take
// was admitted with a delay). It never panics.
func decodeWait(v any, req *store.Request, cost int64) (store.Decision, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) < 2 {
		return store.Decision{}, fmt.Errorf("%w: got %T %v, want a full reply, the delay and the reservation", errBadReply, v, v)
	}
	var delay int64
	if err := readInts(arr[len(arr)-2:len(arr)-1], &delay); err != nil {
		return store.Decision{}, fmt.Errorf("delay: %w", err)
	}
	res, ok := arr[len(arr)-1].(string)
	if !ok {
		return store.Decision{}, fmt.Errorf("%w: reservation is %T, want a string", errBadReply, arr[len(arr)-1])
	}
	r, err := decodeReply(arr[:len(arr)-2], req.Limits, cost)
	if err != nil {
		return store.Decision{}, err
	}
	if delay < 0 || delay > req.MaxWait.Microseconds() || delay > 0 && !r.allowed ||
		res != "" && (delay == 0 || len(res) != 2*contract.StateSize*len(req.Limits)) {
		return store.Decision{}, fmt.Errorf("%w: delay %dµs, reservation of %d bytes (allowed %v)", errBadReply, delay, len(res), r.allowed)
	}
	d := r.decision(req.Limits)
	d.Delay = time.Duration(delay) * time.Microsecond
	d.Reservation = res
	return d, nil
}

// CancelWait implements [store.Waiter]: it runs the waiting script in
// mode "cancel" (package lua, "Waiting") on req's state keys, once: like
// every script call it is never re-sent, so a call whose reply is lost
// fails and may or may not have applied.
func (s *redisStore) CancelWait(ctx context.Context, req store.Request, d store.Decision) error {
	if err := contract.CheckReservation(&req, &d); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return backendError("cancel", err)
	}
	sc := &s.scripts.byAlgorithm[req.Limits[0].Algorithm][waiting]
	base := keyBase(s.prefix, encodeKey(req.Key))
	var stateKeys [store.MaxLimits]string
	keys := appendStateKeys(stateKeys[:0], base, req.Limits)
	args := make([]any, 0, 3+len(keys)+3+2*len(req.Limits))
	args = append(args, "evalsha", sc.sha, len(keys))
	for _, k := range keys {
		args = append(args, k)
	}
	args = append(args, "cancel", d.Reservation, len(req.Limits))
	for _, l := range req.Limits {
		li := s.limits.get(l)
		args = append(args, li.rate, li.period)
	}
	v, err := s.do(ctx, "cancel", &command{key: keys[0], sc: sc, args: args})
	if err != nil {
		return err
	}
	if n, ok := v.(int64); !ok || n < 0 || n > int64(len(req.Limits)) {
		return backendError("cancel", fmt.Errorf("%w: cancel answered %v, want 0 to %d", errBadReply, v, len(req.Limits)))
	}
	return nil
}

package redisstore

import (
	"context"
	"fmt"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

var _ store.Refunder = (*redisStore)(nil)

// Settle implements [store.Refunder]: it runs the refund script in mode
// "settle" (package lua, "Stacked decisions") on req's state keys, once:
// like every script call it is never re-sent, so a call whose reply is
// lost fails and may or may not have applied. A settlement of the
// reserved cost itself sends nothing.
func (s *redisStore) Settle(ctx context.Context, req store.Request, actual int64) error {
	delta, err := contract.SettleDelta(&req, actual)
	if err != nil || delta == 0 {
		return err
	}
	if err := ctx.Err(); err != nil {
		return backendError("settle", err)
	}
	base := keyBase(s.prefix, encodeKey(req.Key))
	var stateKeys [store.MaxLimits]string
	keys := appendStateKeys(stateKeys[:0], base, req.Limits)
	args := make([]any, 0, 3+len(keys)+3+2*len(req.Limits))
	args = append(args, "evalsha", s.scripts.refund.sha, len(keys))
	for _, k := range keys {
		args = append(args, k)
	}
	args = append(args, "settle", delta, len(req.Limits))
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

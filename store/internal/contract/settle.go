package contract

import (
	"fmt"

	"github.com/ratekeeper/ratekeeper/store"
)

// maxSettle is the largest actual cost a settlement takes: the largest
// cost a request may have.
const maxSettle = 1 << 30

// SettleDelta validates a settlement of req, whose Take answered taken, at
// the actual cost (see [store.Refunder]) and returns the units it charges
// (actual less the cost req reserved, negative to give back) and, for a
// window algorithm, the time of the take in microseconds of the store's
// clock. Errors wrap [store.ErrInvalidRequest] or the error of
// [store.Request.Validate].
func SettleDelta(req *store.Request, taken *store.Decision, actual int64) (delta, at int64, err error) {
	r := *req
	r.Reserve = false // a settlement reserves nothing
	if err := r.Validate(); err != nil {
		return 0, 0, err
	}
	alg := req.Limits[0].Algorithm
	window := alg != store.GCRA && alg != store.TokenBucket
	switch {
	case req.ApplyOverride:
		return 0, 0, fmt.Errorf("%w: Settle does not apply overrides (ApplyOverride set)", store.ErrInvalidRequest)
	case req.Partial:
		return 0, 0, fmt.Errorf("%w: Settle does not settle partial grants (Partial set)", store.ErrInvalidRequest)
	case actual < 0 || actual > maxSettle:
		return 0, 0, fmt.Errorf("%w: actual cost %d, want 0 to %d", store.ErrInvalidRequest, actual, int64(maxSettle))
	case !taken.Allowed || taken.Duplicate:
		return 0, 0, fmt.Errorf("%w: Settle of a decision that recorded nothing (not admitted, or a duplicate)", store.ErrInvalidRequest)
	case window && taken.Taken.IsZero():
		return 0, 0, fmt.Errorf("%w: Settle of %s needs the decision of a Reserve take (Decision.Taken is zero)", store.ErrInvalidRequest, alg)
	}
	if window {
		at = taken.Taken.UnixMicro()
	}
	return actual - Cost(req), at, nil
}

package contract

import (
	"fmt"

	"github.com/ratekeeper/ratekeeper/store"
)

// maxSettle is the largest actual cost a settlement takes: the largest
// cost a request may have.
const maxSettle = 1 << 30

// SettleDelta validates a settlement of req at the actual cost (see
// [store.Refunder]) and returns the units it charges: actual less the
// cost req reserved, negative to give back. Errors wrap
// [store.ErrInvalidRequest] or the error of [store.Request.Validate].
func SettleDelta(req *store.Request, actual int64) (int64, error) {
	if err := req.Validate(); err != nil {
		return 0, err
	}
	switch alg := req.Limits[0].Algorithm; {
	case alg != store.GCRA && alg != store.TokenBucket:
		return 0, fmt.Errorf("%w: Settle needs %s or %s, not %s", store.ErrInvalidRequest, store.GCRA, store.TokenBucket, alg)
	case req.ApplyOverride:
		return 0, fmt.Errorf("%w: Settle does not apply overrides (ApplyOverride set)", store.ErrInvalidRequest)
	case req.Partial:
		return 0, fmt.Errorf("%w: Settle does not settle partial grants (Partial set)", store.ErrInvalidRequest)
	case actual < 0 || actual > maxSettle:
		return 0, fmt.Errorf("%w: actual cost %d, want 0 to %d", store.ErrInvalidRequest, actual, int64(maxSettle))
	}
	return actual - Cost(req), nil
}

package contract

import (
	"fmt"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// Defaults of the de-duplication bound ([store.Request.DedupReplays],
// [store.Request.DedupWindow]).
const (
	defaultDedupReplays = 3
	defaultDedupWindow  = time.Minute
)

// Plain reports a request with one limit and none of the features that
// need a key's shared state: no block, no counted refusals, no
// de-duplication id, no partial grant, no wait, no calendar window, no reservation (ApplyOverride aside, which each store weighs on its
// own). It is the one test of a plain request: the Redis store's lean
// scripts and deny cache, and the hybrid store's local decisions, follow
// it.
func Plain(req *store.Request) bool {
	return len(req.Limits) == 1 && req.Limits[0].Block == 0 && !req.CountDenied && req.DedupID == "" && !req.Partial && req.MaxWait == 0 && !req.Reserve &&
		req.Limits[0].Calendar == "" && req.Limits[0].Location == nil
}

// Cost returns the cost req takes: req.Cost, or 1 when it is zero.
func Cost(req *store.Request) int64 {
	if req.Cost == 0 {
		return 1
	}
	return req.Cost
}

// DedupBound returns the bound of req's DedupID as the stores apply it:
// the replays allowed and the window in microseconds (the defaults for
// zero fields, the window cut to the longest period of req's limits).
// Call it on a validated request.
func DedupBound(req *store.Request) (replays, windowUS int64) {
	replays = int64(req.DedupReplays)
	if replays == 0 {
		replays = defaultDedupReplays
	}
	w := req.DedupWindow
	if w == 0 {
		w = defaultDedupWindow
	}
	longest := time.Duration(0)
	for _, l := range req.Limits {
		longest = max(longest, Span(l))
	}
	w = min(w, longest)
	return replays, w.Microseconds()
}

// CheckCost returns an error wrapping [store.ErrCostExceedsCapacity] when
// cost exceeds the capacity of one of limits: what [store.Request.Validate]
// checks, and what a store checks for a request with Overrides once it
// knows the limits the key's override leaves.
func CheckCost(cost int64, limits []store.Limit) error {
	for _, l := range limits {
		if cost > l.Capacity() {
			return fmt.Errorf("%w: cost %d, limit %q holds %d", store.ErrCostExceedsCapacity, cost, l.ID(), l.Capacity())
		}
	}
	return nil
}

// Package clientstate reads what a store holds for a client as it is, for
// the operators' views of a client (the admin API and the CLI).
//
// A store's Peek answers "what would Take say now", so an admitted peek
// describes the limits after one hypothetical unit: a client with nothing
// used shows one unit less than it has and a reset one emission interval
// (or a whole window) in the future. [Read] undoes that.
package clientstate

import (
	"context"
	"errors"

	"github.com/ratekeeper/ratekeeper/store"
)

// Read returns the decision of a peek at req (cost 1) with Remaining,
// ResetAfter and NextAfter describing the deciding limit as it is, without
// the peek's unit: nothing used is the full capacity and a ResetAfter and
// NextAfter of zero. A
// refused peek (a block, a suspension, a full limit) and an exempt client
// already describe the state as it is and are returned unchanged. PerLimit
// is dropped from an admitted peek: it describes every limit after the
// hypothetical unit. Read writes nothing; it makes a second peek when the
// deciding limit holds something, and returns the store's errors.
func Read(ctx context.Context, st store.Store, req store.Request) (store.Decision, error) {
	req.Cost, req.DedupID, req.CountDenied = 1, "", false
	d, err := st.Peek(ctx, req)
	if err != nil || !d.Allowed || d.Override == store.OverrideExempt {
		return d, err
	}
	d.PerLimit = nil
	d.Remaining++
	if d.Remaining >= d.Capacity {
		d.Remaining, d.ResetAfter, d.NextAfter = d.Capacity, 0, 0
		return d, nil
	}
	// The deciding limit holds something: a peek at its whole capacity is
	// refused, and a refusal describes the limits without the request.
	probe := req
	probe.Cost = d.Capacity
	multi := len(req.Limits) > 1
	if multi && req.Limits[0].Algorithm != store.SlidingWindowLog && d.Index >= 0 {
		// Each limit's state is its own (package store, "Changing a
		// limit"): the deciding limit alone, however large its capacity.
		probe.Limits, multi = req.Limits[d.Index:d.Index+1], false
	} else if multi {
		// One log holds the set's units: every limit must hold the cost.
		for _, l := range req.Limits {
			probe.Cost = min(probe.Cost, l.Capacity())
		}
	}
	p, err := st.Peek(ctx, probe)
	switch {
	case errors.Is(err, store.ErrCostExceedsCapacity):
		return d, nil // a scaled-down override: the estimate stands
	case err != nil:
		return d, err
	case p.Allowed:
		return d, nil // another limit of a log decides; the estimate stands
	case multi && d.Index < len(p.PerLimit):
		d.ResetAfter, d.NextAfter = p.PerLimit[d.Index].ResetAfter, p.PerLimit[d.Index].NextAfter
	default:
		d.ResetAfter, d.NextAfter = p.ResetAfter, p.NextAfter
	}
	return d, nil
}

package contract

import (
	"fmt"

	"github.com/ratekeeper/ratekeeper/store"
)

// ValidateStack checks a stack as every [store.MultiStore] does before
// touching state, by the rules [store.MultiStore] states: 1 to
// [store.MaxParts] parts, each valid, without a DedupID, without
// Overrides, without Partial, MaxWait, Reserve or Calendar limits, and with
// distinct keys. Errors wrap [store.ErrInvalidRequest] or the error of the invalid
// part.
func ValidateStack(reqs []store.Request) error {
	if len(reqs) == 0 || len(reqs) > store.MaxParts {
		return fmt.Errorf("%w: %d parts, want 1 to %d", store.ErrInvalidRequest, len(reqs), store.MaxParts)
	}
	for i, r := range reqs {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("part %d: %w", i, err)
		}
		if r.DedupID != "" {
			return fmt.Errorf("%w: part %d: a stacked decision does not de-duplicate (DedupID set)", store.ErrInvalidRequest, i)
		}
		if r.ApplyOverride {
			return fmt.Errorf("%w: part %d: a stacked decision does not apply overrides (Overrides set)", store.ErrInvalidRequest, i)
		}
		for _, l := range r.Limits {
			if l.Calendar != "" {
				return fmt.Errorf("%w: part %d: a stacked decision does not take Calendar limits", store.ErrInvalidRequest, i)
			}
		}
		if r.Partial {
			return fmt.Errorf("%w: part %d: a stacked decision takes all or nothing (Partial set)", store.ErrInvalidRequest, i)
		}
		if r.MaxWait > 0 {
			return fmt.Errorf("%w: part %d: a stacked decision does not wait (MaxWait set)", store.ErrInvalidRequest, i)
		}
		if r.Reserve {
			return fmt.Errorf("%w: part %d: a stacked decision is not settled (Reserve set)", store.ErrInvalidRequest, i)
		}
		for j := 0; j < i; j++ {
			if reqs[j].Key == r.Key {
				return fmt.Errorf("%w: parts %d and %d share the key %q", store.ErrInvalidRequest, j, i, r.Key)
			}
		}
	}
	return nil
}

// MostRestrictive returns the index of the part that decides a stack of
// part decisions, as [store.MultiDecision] defines it: when every part
// admits, the one with the fewest units remaining; otherwise the refusing
// part with the longest RetryAfter. Ties go to the earliest part. It
// returns -1 for an empty slice.
func MostRestrictive(parts []store.Decision) int {
	all := true
	for i := range parts {
		all = all && parts[i].Allowed
	}
	d := -1
	for i := range parts {
		p := &parts[i]
		switch {
		case all:
			if d < 0 || p.Remaining < parts[d].Remaining {
				d = i
			}
		case !p.Allowed:
			if d < 0 || p.RetryAfter > parts[d].RetryAfter {
				d = i
			}
		}
	}
	return d
}

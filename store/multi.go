package store

import (
	"fmt"
)

// MaxParts is the most requests one stacked decision ([MultiStore]) may
// carry.
const MaxParts = 8

// MultiDecision is the answer to a stacked decision ([MultiStore]).
type MultiDecision struct {
	// Decision describes the most restrictive part, the one Part names:
	// for an admission the part with the fewest units remaining (in
	// absolute units, as between the limits of one request; ties: the
	// earliest part), for a refusal the refusing part with the longest
	// RetryAfter (ties: the earliest). Allowed is true only when every
	// part admitted the request.
	Decision
	// Part is the index in the stack of the part Decision describes.
	Part int
	// Parts holds each part's decision, in stack order. A part that
	// admits the request while another refuses it reports Allowed true
	// (it alone would admit) and its limits as they stand, without the
	// request, which was recorded in none.
	Parts []Decision
	// Refunded is how many parts recorded the request in an earlier step
	// and were given their units back because a later step refused it.
	// Only the Redis store on a Redis Cluster takes several steps.
	Refunded int
	// Unrefunded is how many parts that recorded the request could not be
	// refunded because the backend failed: their units stay charged until
	// they expire. Zero unless the backend failed during the refund.
	Unrefunded int
}

// ValidateMulti checks a stack as every [MultiStore] does before touching
// state: 1 to [MaxParts] parts, each valid ([Request.Validate]), without a
// DedupID (a stack has no single identity to de-duplicate for), without
// Overrides and without the [Suppressed] strategy (neither is decided in a
// stack), and with
// distinct keys (parts of one key would count against each other before
// either is recorded; give one request all the limits of a key instead).
// Errors wrap [ErrInvalidRequest] or the error of the invalid part.
func ValidateMulti(reqs []Request) error {
	if len(reqs) == 0 || len(reqs) > MaxParts {
		return fmt.Errorf("%w: %d parts, want 1 to %d", ErrInvalidRequest, len(reqs), MaxParts)
	}
	for i, r := range reqs {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("part %d: %w", i, err)
		}
		if r.DedupID != "" {
			return fmt.Errorf("%w: part %d: a stacked decision does not de-duplicate (DedupID set)", ErrInvalidRequest, i)
		}
		if r.Limits[0].Algorithm == Suppressed {
			return fmt.Errorf("%w: part %d: a stacked decision does not take the suppressed strategy", ErrInvalidRequest, i)
		}
		if r.Overrides {
			return fmt.Errorf("%w: part %d: a stacked decision does not apply overrides (Overrides set)", ErrInvalidRequest, i)
		}
		for j := 0; j < i; j++ {
			if reqs[j].Key == r.Key {
				return fmt.Errorf("%w: parts %d and %d share the key %q", ErrInvalidRequest, j, i, r.Key)
			}
		}
	}
	return nil
}

// MostRestrictive returns the index of the part that decides a stack of
// part decisions, as [MultiDecision] defines it: when every part admits,
// the one with the fewest units remaining; otherwise the refusing part
// with the longest RetryAfter. Ties go to the earliest part. It returns
// -1 for an empty slice.
func MostRestrictive(parts []Decision) int {
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

package store

import "fmt"

// validateWait refuses a [Request.MaxWait] that is negative, holds more
// than 2³⁰ units of a limit, or comes with what a reservation does not
// support: an algorithm that counts in windows (a unit recorded for a
// later time would count in the wrong window), a partial grant, a
// de-duplication id (a replay would skip the wait) or an override.
func (r Request) validateWait() error {
	switch {
	case r.MaxWait < 0:
		return fmt.Errorf("%w: MaxWait must be >= 0, got %s", ErrInvalidRequest, r.MaxWait)
	case r.MaxWait == 0:
		return nil
	case r.Partial:
		return fmt.Errorf("%w: MaxWait and Partial cannot be combined", ErrInvalidRequest)
	case r.DedupID != "":
		return fmt.Errorf("%w: MaxWait and DedupID cannot be combined", ErrInvalidRequest)
	case r.ApplyOverride:
		return fmt.Errorf("%w: MaxWait and ApplyOverride cannot be combined", ErrInvalidRequest)
	}
	for i, l := range r.Limits {
		if l.Algorithm.window() {
			return fmt.Errorf("%w: limit %d: MaxWait needs %s or %s, not %s", ErrInvalidRequest, i, GCRA, TokenBucket, l.Algorithm)
		}
		if l.Period > 0 && float64(r.MaxWait)*float64(l.Rate)/float64(l.Period) > maxRate {
			return fmt.Errorf("%w: limit %d: MaxWait·Rate/Period (the units a wait may hold) must be <= %d, got MaxWait %s", ErrInvalidRequest, i, maxRate, r.MaxWait)
		}
	}
	return nil
}

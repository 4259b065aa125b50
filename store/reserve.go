package store

import "fmt"

// validateReserve refuses the combinations a [Request.Reserve] request
// does not support: a partial grant (the units reserved are not known
// before the take), calendar limits (settled windows are aligned ones).
// The suppressed strategy and stacks refuse it where they are decided.
func (r Request) validateReserve() error {
	if !r.Reserve {
		return nil
	}
	if r.Partial {
		return fmt.Errorf("%w: Reserve and Partial cannot be combined", ErrInvalidRequest)
	}
	for i, l := range r.Limits {
		if l.Calendar != "" {
			return fmt.Errorf("%w: limit %d: Reserve is not supported with a Calendar limit", ErrInvalidRequest, i)
		}
	}
	return nil
}

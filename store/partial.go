package store

import "fmt"

// validatePartial refuses the combinations a [Request.Partial] request
// does not support: counted refusals and de-duplication ids (a grant is
// not a repeatable unit) and overrides (an override changes the limits
// the grant is measured against).
func (r Request) validatePartial() error {
	if !r.Partial {
		return nil
	}
	switch {
	case r.CountDenied:
		return fmt.Errorf("%w: Partial and CountDenied cannot be combined", ErrInvalidRequest)
	case r.DedupID != "":
		return fmt.Errorf("%w: Partial and DedupID cannot be combined", ErrInvalidRequest)
	case r.ApplyOverride:
		return fmt.Errorf("%w: Partial and ApplyOverride cannot be combined", ErrInvalidRequest)
	}
	return nil
}

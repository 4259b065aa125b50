package limiter

import (
	"context"
	"errors"
	"fmt"

	"github.com/ratekeeper/ratekeeper/store"
)

// partialRequest refuses the combinations a partial grant does not take,
// naming the field.
func (l *Limiter) partialRequest(req *Request) error {
	switch {
	case req.Charged > 0:
		return errors.New("ratekeeper: limiter: Request.Partial cannot be combined with Charged")
	case req.DedupID != "":
		return errors.New("ratekeeper: limiter: Request.Partial cannot be combined with a DedupID")
	case l.countDenied:
		return fmt.Errorf("ratekeeper: limiter %q: Request.Partial cannot be combined with Options.CountDenied", l.name)
	case l.overrides:
		return fmt.Errorf("ratekeeper: limiter %q: Request.Partial cannot be combined with Options.Overrides", l.name)
	}
	return nil
}

// Settle charges or gives back the difference between the units d took
// and actual, the request's real cost known once it was served, in one
// step on the store that took them (package store, "Costs settled after
// the response"), once per decision. Of a request an enclosing decision
// already charged part of (Request.Charged), that part stands and only
// the units d took are settled. A decision that took nothing (a refusal,
// a peek, an exempt or unlimited request) settles nothing. Settle runs
// with ctx's values but not its cancellation, so a client that went away
// does not cancel it; the store's own time budget bounds it. Limits of
// the window algorithms settle only a decision of a [Request] with
// Reserve, which tells the store to report when it took the units. It
// returns an error wrapping [store.ErrInvalidRequest] for a negative
// actual cost or a window decision taken without Reserve, and
// errors.ErrUnsupported for a store that cannot settle.
func (l *Limiter) Settle(ctx context.Context, d *Decision, actual int64) error {
	if actual < 0 {
		return fmt.Errorf("%w: actual cost must be >= 0, got %d", store.ErrInvalidRequest, actual)
	}
	if d.key == "" || d.Limits == nil {
		return nil
	}
	s := l.store
	if d.local {
		s = l.local
	}
	r, ok := s.(store.Refunder)
	if !ok {
		return fmt.Errorf("ratekeeper: limiter %q: store %T cannot settle costs: %w", l.name, s, errors.ErrUnsupported)
	}
	if d.Granted == 0 {
		// Of the whole cost, an enclosing decision of this quota took
		// the part d did not (Request.Charged): that part stands.
		actual = max(actual-(d.Cost-d.reserved), 0)
	}
	req := store.Request{Key: d.key, Limits: d.Limits, Cost: d.reserved}
	if err := r.Settle(context.WithoutCancel(ctx), req, d.Decision, actual); err != nil {
		return err
	}
	d.key = "" // settled once
	return nil
}

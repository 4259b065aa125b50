package limiter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// validateWait checks Options.MaxWait: at least 0, and when set, limits
// that can wait (GCRA or the token bucket), stores that can give a place
// back, and no overrides, naming the field.
func (o *Options) validateWait(s store.Store) error {
	switch {
	case o.MaxWait < 0:
		return fmt.Errorf("ratekeeper: limiter: Options.MaxWait must be >= 0, got %s", o.MaxWait)
	case o.MaxWait == 0:
		return nil
	case o.Overrides:
		return errors.New("ratekeeper: limiter: Options.MaxWait cannot be combined with Options.Overrides")
	}
	for _, st := range []store.Store{s, o.Fallback} {
		if _, ok := st.(store.Waiter); st != nil && !ok {
			return fmt.Errorf("ratekeeper: limiter: Options.MaxWait needs stores that can wait (store.Waiter); %T cannot", st)
		}
	}
	check := func(field string, limits []store.Limit) error {
		for i, l := range limits {
			if l.Algorithm != store.GCRA && l.Algorithm != store.TokenBucket {
				return fmt.Errorf("ratekeeper: limiter: Options.MaxWait needs %s or %s limits; %s[%d] is %s", store.GCRA, store.TokenBucket, field, i, l.Algorithm)
			}
		}
		return nil
	}
	if err := check("Options.Limits", o.Limits); err != nil {
		return err
	}
	for i, t := range o.Tiers {
		if err := check(fmt.Sprintf("Options.Tiers[%d].Limits", i), t.Limits); err != nil {
			return err
		}
	}
	return nil
}

// Wait is [Limiter.Decide] for a caller that would rather wait for its
// turn than be refused: a request that Options.MaxWait lets wait has its
// place reserved at once, in the same atomic step as the decision, and
// Wait returns when its turn comes, with the Decision as it then stands
// (its Delay is how long it waited; Remaining and ResetAfter describe the
// limits from then on). A request that would wait longer than MaxWait is
// refused at once, as by Decide. A client throttling its own outgoing
// calls waits on each call this way.
//
// When ctx ends first (or its deadline falls before the request's turn),
// Wait gives the place back (see [store.Waiter]; a place with later
// waiters behind it stays taken, so that their turns stay exact) and
// returns a Decision with [OutcomeCanceled] and ctx's error. The observer
// saw the admission when it was decided (with its Delay). A dry run, a
// peek, a partial grant or a request with a DedupID does not wait; with
// MaxWait 0 Wait is Decide.
func (l *Limiter) Wait(ctx context.Context, req Request) (d Decision, err error) {
	// Small enough to inline: the decision is built in the caller's
	// variable, not copied out of Wait's.
	err = l.waitTo(ctx, &req, &d)
	return d, err
}

// waitTo is Wait writing its decision to d, which is zero on entry.
func (l *Limiter) waitTo(ctx context.Context, req *Request, d *Decision) error {
	req.wait = l.maxWait > 0 && !l.dryRun && !req.Peek && !req.Partial && req.DedupID == ""
	err := l.decideTo(ctx, req, d)
	if err != nil || !d.Allowed || d.Delay <= 0 {
		return err
	}
	t := time.NewTimer(d.Delay)
	defer t.Stop()
	done := ctx.Done()
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d.Delay {
		closed := make(chan struct{})
		close(closed)
		done = closed // its turn comes too late: give the place back now
	}
	select {
	case <-t.C:
	case <-done:
		l.giveBack(ctx, d)
		d.Allowed, d.Outcome = false, OutcomeCanceled
		err := ctx.Err()
		if err == nil {
			err = context.DeadlineExceeded
		}
		return fmt.Errorf("ratekeeper: limiter %q: gave up waiting %s for a turn: %w", l.name, d.Delay, err)
	}
	d.ResetAfter = max(d.ResetAfter-d.Delay, 0)
	if d.PerLimit != nil {
		per := make([]store.LimitState, len(d.PerLimit))
		for i, p := range d.PerLimit {
			per[i] = store.LimitState{Remaining: p.Remaining, ResetAfter: max(p.ResetAfter-d.Delay, 0)}
		}
		d.PerLimit = per
	}
	return nil
}

// giveBack gives back the place d reserved, on the store that reserved
// it, without ctx's cancellation (the store's own budget bounds it). A
// failure is logged: the place then stays taken until its units drain.
func (l *Limiter) giveBack(ctx context.Context, d *Decision) {
	if d.key == "" {
		return
	}
	s := l.store
	if d.local {
		s = l.local
	}
	w, ok := s.(store.Waiter)
	if !ok {
		return // New checked the stores: not reached
	}
	req := store.Request{Key: d.key, Limits: d.Limits, Cost: d.reserved, MaxWait: l.maxWait}
	if err := w.CancelWait(context.WithoutCancel(ctx), req, d.Decision); err != nil {
		l.logger.LogAttrs(ctx, slog.LevelWarn, "ratekeeper: a place reserved for a waiting request could not be given back",
			slog.String("policy", d.Policy), slog.String("error", err.Error()))
	}
	d.key = "" // nothing left to settle
}

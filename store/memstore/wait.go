package memstore

import (
	"context"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

var _ store.Waiter = (*memStore)(nil)

// wait turns the refusal of a [store.Request.MaxWait] request by its
// limits into an admission at the time at which every limit admits it,
// when that is within MaxWait (package store, "Waiting instead of
// refusing"): each limit is evaluated as at that time, and its next state
// moved back to now on the same line (the units then, plus what drains
// until then), so that a take counts the request from now on. It returns
// the delay in µs (0 when nothing changed) and the reservation: each
// limit's state before and after.
func (o *op) wait(out []outcome) (delay int64, res []byte) {
	if o.v.allowed || o.v.blocked {
		return 0, nil
	}
	for i := range out {
		if !out[i].allowed {
			delay = max(delay, out[i].retry)
		}
	}
	if delay > o.req.MaxWait.Microseconds() {
		return 0, nil
	}
	var later [store.MaxLimits]outcome
	res = make([]byte, 0, 2*contract.StateSize*len(out))
	for i := range out {
		l := &o.req.Limits[i]
		var c *counts
		if st := o.liveState(o.ids[i]); st != nil {
			c = &st.counts
			res = contract.AppendState(res, float64(c.ts), c.used)
		} else {
			res = contract.AppendState(res, 0, 0)
		}
		w := &later[i]
		bucket(l, c, o.now+delay, o.cost, w)
		if !w.allowed {
			return 0, nil // cannot happen: delay is every limit's retry or later
		}
		r, p := float64(l.Rate), float64(l.Period.Microseconds())
		used := w.next.used + float64(delay)*r/p
		w.reset1 = ceilUS(used * p / r)
		w.next = counts{ts: o.now, used: used}
		w.next.exp = o.now + drained(&w.next, o.now, r, p)
		res = contract.AppendState(res, float64(w.next.ts), w.next.used)
	}
	copy(out, later[:len(out)])
	o.v.allowed = true
	return delay, res
}

// drained returns the first microsecond after from at which the units of
// st have drained to 0 (as a take's expiry: state dropped earlier would
// decide differently from the state itself).
func drained(st *counts, from int64, r, p float64) int64 {
	return earliest(ceilUS(usedAt(st, from, r, p)*p/r), func(d int64) bool {
		return usedAt(st, from+d, r, p) <= 0
	})
}

// CancelWait implements [store.Waiter]: under the key's lock, each limit
// whose state is still the one the reservation wrote is put back as it
// stood before it.
func (s *memStore) CancelWait(_ context.Context, req store.Request, d store.Decision) error {
	if err := contract.CheckReservation(&req, &d); err != nil {
		return err
	}
	var o op
	o.s, o.req = s, req
	s.limitIDs(req.Limits, &o.ids)
	now := s.now()
	o.sh, o.h = s.locate(req.Key)
	o.sh.lock()
	defer o.sh.mu.Unlock()
	o.now = o.sh.clock(now)
	o.rec = o.sh.index.get(req.Key, o.h)
	if o.rec == nil {
		return nil // expired or reset since: nothing left to give back
	}
	for i, l := range req.Limits {
		j := o.rec.find(l.Algorithm, o.ids[i])
		if j < 0 {
			continue
		}
		st := &o.rec.states[j]
		ts, used := contract.State(d.Reservation, 2*i+1)
		if st.exp <= o.now || float64(st.ts) != ts || st.used != used {
			continue // written since: the units stay
		}
		ts, used = contract.State(d.Reservation, 2*i)
		prev := counts{ts: int64(ts), used: used}
		r, p := float64(l.Rate), float64(l.Period.Microseconds())
		if u := usedAt(&prev, o.now, r, p); u <= 0 {
			st.counts = counts{} // expired: as fresh
			continue
		}
		prev.exp = o.now + drained(&prev, o.now, r, p)
		st.counts = prev
		o.sh.expiresAt(prev.exp)
	}
	o.finish()
	return nil
}

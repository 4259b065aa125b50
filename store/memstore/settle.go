package memstore

import (
	"context"
	"slices"
	"strings"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

var _ store.Refunder = (*memStore)(nil)

// Settle implements [store.Refunder]: under the key's lock it applies
// actual − req.Cost to each limit, as package store specifies ("Costs
// settled after the response"): GCRA and the token bucket drain to now
// first, the window algorithms give back to the window taken.Taken names
// and charge the current one. A charge to a key with no state creates it;
// when the store holds MaxKeys and no room can be made, nothing is charged
// and Settle returns a *[store.BackendError] with Kind "capacity". It
// never blocks on I/O, so ctx is not consulted.
func (s *memStore) Settle(_ context.Context, req store.Request, taken store.Decision, actual int64) error {
	delta, at, err := contract.SettleDelta(&req, &taken, actual)
	if err != nil || delta == 0 {
		return err
	}
	var o op
	o.s, o.req = s, req
	s.limitIDs(req.Limits, &o.ids)
	if o.isLog() {
		o.logID[0] = s.logID(req.Limits)
	}
	now := s.now()
	o.sh, o.h = s.locate(req.Key)
	o.sh.lock()
	defer o.sh.mu.Unlock()
	o.now = o.sh.clock(now)
	o.rec = o.sh.index.get(req.Key, o.h)
	if o.rec == nil {
		// A record made here keeps the key: a copy, in case the key is
		// in memory a request lent (see Take).
		o.req.Key = strings.Clone(req.Key)
	}
	if o.rec != nil {
		if o.rec.ks != nil && o.rec.ks.exp > o.now {
			o.ks = o.rec.ks
		}
		o.renew() // expired states of the request now read as none
	}
	if delta > 0 && !o.room(o.missing()) {
		o.finish()
		return &store.BackendError{Op: "settle", Kind: "capacity", Err: store.ErrTooManyKeys}
	}
	switch req.Limits[0].Algorithm {
	case store.SlidingWindowLog:
		o.settleLog(delta, at)
	case store.FixedWindow, store.SlidingWindowCounter:
		o.settleWindows(delta, at)
	default:
		o.settleBuckets(delta)
	}
	o.finish()
	return nil
}

// found returns the request's state of ID id, nil when it has none and
// delta gives back (nothing to give back to), created when it charges.
func (o *op) found(id string, delta int64) *limitState {
	if o.rec != nil {
		if j := o.rec.find(o.req.Limits[0].Algorithm, id); j >= 0 {
			return &o.rec.states[j]
		}
	}
	if delta <= 0 {
		return nil
	}
	return o.state(id)
}

// settleBuckets applies delta to each GCRA or token-bucket limit, drained
// to now first.
func (o *op) settleBuckets(delta int64) {
	df := float64(delta)
	for i, l := range o.req.Limits {
		st := o.found(o.ids[i], delta)
		if st == nil {
			continue
		}
		r, p := float64(l.Rate), float64(l.Period.Microseconds())
		u := usedAt(&st.counts, o.now, r, p) + df
		if u <= 0 {
			st.counts = counts{} // expired: as fresh
			continue
		}
		next := counts{ts: o.now, used: u}
		// As a take's: the first microsecond at which the units have
		// drained to 0.
		next.exp = o.now + earliest(ceilUS(u*p/r), func(d int64) bool {
			return usedAt(&next, o.now+d, r, p) <= 0
		})
		st.counts = next
		o.sh.expiresAt(next.exp)
	}
}

// settleWindows applies delta to each fixed-window or sliding-window-
// counter limit: a give-back to the count of the window that holds at
// while the state still counts it (as cur, or as prev for the counter),
// never below 0; a charge to the current window, past the capacity if
// need be.
func (o *op) settleWindows(delta, at int64) {
	for i := range o.req.Limits {
		l := &o.req.Limits[i]
		st := o.found(o.ids[i], delta)
		if st == nil {
			continue
		}
		p := l.Period.Microseconds()
		if delta < 0 {
			switch ws := windowStart(at, p); {
			case st.ts == ws:
				st.cur = max(st.cur+delta, 0)
			case l.Algorithm == store.SlidingWindowCounter && st.ts == ws+p:
				st.prev = max(st.prev+delta, 0)
			}
			continue
		}
		var next outcome
		if l.Algorithm == store.FixedWindow {
			fixedWindow(l, &st.counts, o.now, delta, &next)
		} else {
			slidingCounter(l, &st.counts, o.now, delta, &next)
		}
		st.counts = next.next
		o.sh.expiresAt(st.exp)
	}
}

// settleLog applies delta to the request's sliding window log: a
// give-back removes up to −delta entries recorded at at, a charge records
// delta entries at now, at most the largest capacity of the limits (more
// would change no decision: the log is full for a period either way).
func (o *op) settleLog(delta, at int64) {
	st := o.found(o.logID[0], delta)
	if st == nil || (delta < 0 && st.log == nil) {
		return
	}
	longest := longestPeriod(o.req.Limits)
	if delta < 0 {
		st.log.remove(at, -delta)
		if st.log.total() == st.log.base {
			st.log.clear()
			st.counts = counts{} // empty: as fresh
			return
		}
	} else {
		var most int64
		for _, l := range o.req.Limits {
			most = max(most, l.Capacity())
		}
		if st.log == nil {
			st.log = &runLog{}
		}
		st.log.prune(o.now - longest)
		st.log.add(o.now, min(delta, most))
	}
	st.exp = st.log.newest() + longest
	o.sh.expiresAt(st.exp)
}

// remove drops up to k entries recorded at t.
func (l *runLog) remove(t, k int64) {
	i, before := l.after(t - 1)
	r := l.live()
	if i == len(r) || r[i].ts != t {
		return
	}
	n := r[i].cum - before
	k = min(k, n)
	for j := i; j < len(r); j++ {
		r[j].cum -= k
	}
	if k == n {
		l.runs = slices.Delete(l.runs, l.head+i, l.head+i+1)
	}
}

// Refunds implements [store.Refunder]: 0, as the memory store decides
// every stack in one step and never refunds one.
func (s *memStore) Refunds() uint64 { return 0 }

// Unrefunded implements [store.Refunder]: 0, as for Refunds.
func (s *memStore) Unrefunded() uint64 { return 0 }

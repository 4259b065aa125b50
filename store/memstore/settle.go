package memstore

import (
	"context"
	"strings"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

var _ store.Refunder = (*memStore)(nil)

// Settle implements [store.Refunder]: under the key's lock it drains each
// limit's units to now and adds actual − req.Cost, as package store
// specifies ("Costs settled after the response"). A charge to a key with
// no state creates it; when the store holds MaxKeys and no room can be
// made, nothing is charged and Settle returns a *[store.BackendError]
// with Kind "capacity". It never blocks on I/O, so ctx is not
// consulted.
func (s *memStore) Settle(_ context.Context, req store.Request, actual int64) error {
	delta, err := contract.SettleDelta(&req, actual)
	if err != nil || delta == 0 {
		return err
	}
	var o op
	o.s, o.req = s, req
	s.limitIDs(req.Limits, &o.ids)
	now := s.now()
	o.sh = s.shardFor(req.Key)
	o.sh.mu.Lock()
	defer o.sh.mu.Unlock()
	o.now = o.sh.clock(now)
	o.rec = o.sh.index[req.Key]
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
	df := float64(delta)
	for i, l := range req.Limits {
		var st *limitState
		if o.rec != nil {
			if j := o.rec.find(l.Algorithm, o.ids[i]); j >= 0 {
				st = &o.rec.states[j]
			}
		}
		r, p := float64(l.Rate), float64(l.Period.Microseconds())
		var u float64
		if st != nil {
			u = usedAt(&st.counts, o.now, r, p)
		} else if delta <= 0 {
			continue
		}
		if st == nil {
			st = o.state(o.ids[i])
		}
		u += df
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
	o.finish()
	return nil
}

// Refunds implements [store.Refunder]: 0, as the memory store decides
// every stack in one step and never refunds one.
func (s *memStore) Refunds() uint64 { return 0 }

// Unrefunded implements [store.Refunder]: 0, as for Refunds.
func (s *memStore) Unrefunded() uint64 { return 0 }

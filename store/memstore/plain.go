package memstore

import (
	"context"
	"math"
	"strings"
	"sync/atomic"

	"github.com/ratekeeper/ratekeeper/internal/keybuf"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// The plain path: a Take of one limit of any algorithm but the
// suppressed strategy, with none of the features that need the key's
// shared state (contract.Plain) and no override, is by far the most
// common request. It is decided here without the general machinery of
// decide.go, to the same result: the limit's validation and ID are looked
// up rather than recomputed, and when the key's record holds the limit's
// state and nothing else that a write would have to drop, the state is
// updated in place. Anything else (a new key or state, an expired state of
// another limit, an expired key state) continues on the general path
// under the same lock and with the same clock reading.

// plan is what a validated limit needs on every request: its ID and its
// capacity.
type plan struct {
	limit    [1]store.Limit // validated
	id       string
	capacity int64
}

// planCache holds the plans of the limits seen, like idCache: a few slots,
// read without locking. A limit that finds no slot takes the general path.
type planCache struct {
	slots [128]atomic.Pointer[plan]
}

// planProbe is how many consecutive slots a plan may occupy.
const planProbe = 4

func planHash(l *store.Limit) uint64 {
	h := uint64(l.Rate)*0x9e3779b97f4a7c15 ^ uint64(l.Period) ^ uint64(l.Algorithm)<<59
	return h * 0xbf58476d1ce4e5b9 >> 57 // 7 bits: 128 slots
}

// get returns the plan of a limit equal to *l, or nil.
func (c *planCache) get(l *store.Limit) *plan {
	h := planHash(l)
	for i := uint64(0); i < planProbe; i++ {
		p := c.slots[(h+i)%uint64(len(c.slots))].Load()
		if p == nil {
			return nil
		}
		if sameLimit(&p.limit[0], l) {
			return p
		}
	}
	return nil
}

// sameLimit reports a == b, field by field: cheaper than the generated
// comparison.
func sameLimit(a, b *store.Limit) bool {
	return a.Rate == b.Rate && a.Period == b.Period && a.Algorithm == b.Algorithm &&
		a.Burst == b.Burst && a.Block == b.Block && a.BlockMax == b.BlockMax &&
		len(a.Name) == len(b.Name) && (len(a.Name) == 0 || a.Name == b.Name)
}

// free reports whether one of the slots of a plan of l is free.
func (c *planCache) free(l *store.Limit) bool {
	h := planHash(l)
	for i := uint64(0); i < planProbe; i++ {
		if c.slots[(h+i)%uint64(len(c.slots))].Load() == nil {
			return true
		}
	}
	return false
}

// add stores p when one of its slots is free.
func (c *planCache) add(p *plan) {
	h := planHash(&p.limit[0])
	for i := uint64(0); i < planProbe; i++ {
		if c.slots[(h+i)%uint64(len(c.slots))].CompareAndSwap(nil, p) {
			return
		}
	}
}

// plainAlgorithm reports an algorithm the plain path decides.
func plainAlgorithm(a store.Algorithm) bool {
	return a == store.GCRA || a == store.TokenBucket || a == store.FixedWindow ||
		a == store.SlidingWindowCounter || a == store.SlidingWindowLog
}

// planFor returns the plan of req's one limit when req is a plain,
// valid request: one for which req.Validate returns nil. It returns nil
// for every other request, valid or not, which the general path decides.
func (s *memStore) planFor(req *store.Request) *plan {
	if !contract.Plain(req) || req.ApplyOverride || !plainAlgorithm(req.Limits[0].Algorithm) {
		return nil
	}
	l := &req.Limits[0]
	p := s.plans.get(l)
	if p == nil {
		// A limit with no room left in the cache takes the general path
		// on every request, as it would without the cache.
		if !s.plans.free(l) || req.Validate() != nil {
			return nil
		}
		p = &plan{limit: [1]store.Limit{*l}, capacity: l.Capacity()}
		var ids [store.MaxLimits]string
		s.limitIDs(req.Limits, &ids)
		p.id = ids[0]
		s.plans.add(p)
		return p
	}
	// The checks of Request.Validate beyond the limit's own, which p
	// stands for; the capacity is at most 2^30, the cost's bound.
	if req.Key == "" || req.Cost < 0 || contract.Cost(req) > p.capacity ||
		req.DedupReplays < 0 || int64(req.DedupReplays) > math.MaxInt32 || req.DedupWindow < 0 {
		return nil
	}
	return p
}

// takePlain is Take for a request that planFor gave p. It writes the
// decision to d, which must be zero. ctx may lend the key's memory,
// which a new record must not keep.
func (s *memStore) takePlain(ctx context.Context, req *store.Request, p *plan, d *store.Decision) error {
	cost := contract.Cost(req)
	now := s.nowFor(ctx)
	sh, h := s.locate(req.Key)
	sh.spinLock()
	now = sh.clock(now)
	recent := sh.recent
	r := sh.lookup(req.Key, h)
	st := r.plainState(p, now)
	if st == nil {
		sh.settleHot()
		return s.takeGeneral(ctx, req, p, sh, h, now, d)
	}
	var out [1]outcome
	l := &p.limit[0]
	if r == sh.hot {
		// The counts are the shard's (see hold); the record's are stale.
		if l.Algorithm == store.FixedWindow {
			sh.takeHotWindow(l, now, cost, &out[0])
		} else {
			c := &counts{exp: sh.hotExp, ts: sh.hotTS, used: math.Float64frombits(sh.hotN)}
			if c.exp <= now {
				c = nil // decides like none, and is written afresh
			}
			bucketOf(l, c, now, cost, &out[0], false)
			if n := &out[0].next; out[0].allowed {
				sh.hotExp, sh.hotTS, sh.hotN = n.exp, n.ts, math.Float64bits(n.used)
				sh.expiresAt(n.exp)
			}
		}
		sh.touch(r, now)
		sh.mu.Unlock()
		s.plainDecision(p, &out[0], d)
		return nil
	}
	// An expired state decides like none and is written afresh in place.
	c, lg := &st.counts, st.log
	if st.exp <= now {
		*c, c, lg = counts{}, nil, nil
		if st.log != nil {
			st.log.clear()
		}
	}
	switch l.Algorithm {
	case store.FixedWindow:
		fixedWindow(l, c, now, cost, &out[0])
	case store.SlidingWindowCounter:
		slidingCounter(l, c, now, cost, &out[0])
	case store.SlidingWindowLog:
		sh.plainLog(st, lg, l, now, cost, &out[0])
	default:
		bucketOf(l, c, now, cost, &out[0], false) // rem0, reset0: refusals only
	}
	if n := &out[0].next; out[0].allowed && l.Algorithm != store.SlidingWindowLog {
		if n.cur == st.cur && n.prev == st.prev && n.sup == st.sup {
			// The buckets' {exp, ts, used}, alone: a store to the
			// others, although unchanged, would dirty another cache
			// line of the record (see record).
			st.exp, st.ts, st.used = n.exp, n.ts, n.used
		} else {
			st.counts = *n
		}
		sh.expiresAt(st.exp)
	}
	if r == recent && len(r.states) == 1 && r.ks == nil && hotAlgorithm(l.Algorithm) {
		// A key taken twice in a row in its shard: its counts move to
		// the shard's line (see hold).
		sh.hold(r, st)
	}
	sh.touch(r, now)
	sh.mu.Unlock()
	s.plainDecision(p, &out[0], d)
	return nil
}

// takeHotWindow decides a plain Take of the hot record's fixed window l
// on the shard's counts, setting o (zero), and stores them when it admits.
func (sh *shard) takeHotWindow(l *store.Limit, now, cost int64, o *outcome) {
	c := &counts{exp: sh.hotExp, ts: sh.hotTS, cur: int64(sh.hotN)}
	if c.exp <= now {
		c = nil // decides like none, and is written afresh
	}
	fixedWindow(l, c, now, cost, o)
	if n := &o.next; o.allowed {
		sh.hotExp, sh.hotTS, sh.hotN = n.exp, n.ts, uint64(n.cur)
		sh.expiresAt(n.exp)
	}
}

// plainDecision writes to d the decision of a plain request of plan p
// whose limit's outcome is o: op.decision for one limit that met no
// block and no de-duplication id.
func (*memStore) plainDecision(p *plan, o *outcome, d *store.Decision) {
	d.Capacity, d.LimitID = p.capacity, p.id
	if o.allowed {
		d.Allowed = true
		d.Remaining, d.ResetAfter = o.rem1, micros(o.reset1)
	} else {
		d.Remaining, d.ResetAfter, d.RetryAfter = o.rem0, micros(o.reset0), micros(o.retry)
	}
	d.NextAfter = micros(o.nextAfter(&p.limit[0], d.Allowed))
	if !d.Allowed {
		d.NextAfter = min(d.NextAfter, d.RetryAfter) // as op.decision
	}
}

// plainLog is evaluateLog and, when admitted, op.record for a log of one
// limit l, which prunes at the window's start that evaluateLog looks up:
// it sets o (zero) to l's outcome against lg (st's log, or nil when st
// holds none or an expired one) and records an admitted request in st.
func (sh *shard) plainLog(st *limitState, lg *runLog, l *store.Limit, now, cost int64, o *outcome) {
	period := l.Period.Microseconds()
	var idx int
	var before int64
	if lg != nil {
		idx, before = lg.after(now - period)
	}
	if logOutcome(l, lg, logCut{idx, before}, now, cost, o); !o.allowed {
		return
	}
	if st.log == nil {
		st.log = &runLog{}
	}
	if lg != nil {
		st.log.pruneAt(idx, before)
	} else {
		st.log.prune(now - period)
	}
	st.log.add(now, cost)
	st.exp = st.log.newest() + period
	sh.expiresAt(st.exp)
}

// plainState returns r's state for p, live or not, when the general path
// would write it in place and change nothing else in r: r (nil: none)
// holds it, and r's other states and its key state (if any) are live at
// now. Otherwise it returns nil.
func (r *record) plainState(p *plan, now int64) *limitState {
	if r == nil || (r.ks != nil && r.ks.exp <= now) {
		return nil
	}
	if len(r.states) == 1 { // the common case, without the loop
		if st := &r.states[0]; st.alg == p.limit[0].Algorithm && st.id == p.id {
			return st
		}
		return nil
	}
	var found *limitState
	for i := range r.states {
		st := &r.states[i]
		if st.alg == p.limit[0].Algorithm && st.id == p.id {
			found = st
		} else if st.exp <= now {
			return nil
		}
	}
	return found
}

// takeGeneral decides a plain request on the general path, sh (where
// the key's hash h leads) being locked at now, and writes the decision to
// d; it unlocks sh. A key in memory ctx lends is copied first, since the
// record it may create keeps it.
func (s *memStore) takeGeneral(ctx context.Context, req *store.Request, p *plan, sh *shard, h uint64, now int64, d *store.Decision) error {
	o := op{s: s, sh: sh, h: h, req: *req, cost: contract.Cost(req), now: now}
	if keybuf.Holds(ctx, o.req.Key) {
		o.req.Key = strings.Clone(o.req.Key)
	}
	o.ids[0], o.logID[0] = p.id, p.id // a log of one limit has its ID
	var one [1]outcome
	out := one[:]
	o.evaluate(out)
	err := o.write(out)
	sh.mu.Unlock()
	if err != nil {
		return err
	}
	*d = o.decision(out)
	return nil
}

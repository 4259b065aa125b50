package memstore

import (
	"math"
	"runtime"
	"sync/atomic"
	"time"
)

// budget counts the states of every shard against MaxKeys. It is the one
// place where shards meet, and it changes only when states are created or
// dropped, never when a Take updates a state in place.
type budget struct {
	_    [64]byte // keep the counter off the lines every request reads
	used atomic.Int64
	max  int64
	_    [64]byte
}

// take reserves n states, reporting whether they fit under the cap.
func (b *budget) take(n int) bool {
	for {
		u := b.used.Load()
		if u+int64(n) > b.max {
			return false
		}
		if b.used.CompareAndSwap(u, u+int64(n)) {
			return true
		}
	}
}

// give returns n states to the budget.
func (b *budget) give(n int) {
	if n != 0 {
		b.used.Add(-int64(n))
	}
}

// evictWait bounds how long a store making room keeps looking when every
// shard it could evict from is busy, yielding the processor between
// looks. A shard is held only for bounded work, so a look fails only
// while each shard holding records is held at that very moment (its
// holder's thread may have been descheduled), or while the states a full
// store counts are reserved by writes not yet done.
const evictWait = 5 * time.Millisecond

// makeRoom reserves need states for a write in shard sh, which the caller
// holds locked, at now. When the store is full it first drops states that
// carry no information (expired: they decide exactly like no state), in
// any shard, then evicts the least recently taken keys, across shards,
// never keep (the record the write is for). It reports false, having
// evicted nothing, when need cannot fit even in an otherwise empty store.
//
// States dropped or evicted to make room are handed to the write rather
// than returned to the budget, so that a concurrent write elsewhere
// cannot take them first.
func (s *memStore) makeRoom(sh *shard, now int64, need int, keep *record) bool {
	if s.budget.take(need) {
		return true
	}
	kept := 0
	if keep != nil {
		kept = keep.size()
	}
	if int64(kept+need) > s.budget.max {
		return false
	}
	got := s.dropExpired(sh, now, keep, need)
	for got < need {
		if s.budget.take(need - got) {
			got = need
			break
		}
		n, ok := s.evictOne(sh, now, keep)
		if !ok {
			break
		}
		got += n
	}
	if got < need {
		s.budget.give(got)
		return false
	}
	s.budget.give(got - need)
	return true
}

// dropExpired sweeps the shards that may hold expired state (their
// published minExp has passed), sh first, until need states are freed,
// and returns how many it freed. Other shards are swept only when
// tryLock has their lock; a busy one is skipped.
func (s *memStore) dropExpired(sh *shard, now int64, keep *record, need int) int {
	got := 0
	if sh.minExp <= now {
		got += sh.sweep(now, keep)
	}
	for i := range s.shards {
		if got >= need {
			break
		}
		o := &s.shards[i]
		if o == sh || o.pubMinExp.Load() > now || !o.tryLock() {
			continue
		}
		got += o.sweep(now, nil)
		o.mu.Unlock()
	}
	return got
}

// evictOne evicts the least recently taken record of the store other than
// keep (by touched time: to within recencyUS, see touch) and returns how
// many states that freed. The candidates are the tails of the shards'
// lists. Other shards are locked with tryLock, which never waits for
// long, so two decisions making room in each other's shards cannot deadlock.
// When the shard holding the oldest is busy, sh's own oldest record
// goes instead, or, when sh holds none, the oldest of any other shard that
// can be locked, so that the store stays close to least-recently-used
// order without waiting. When every candidate is busy it looks again, for
// up to evictWait. It reports false when nothing can be evicted.
func (s *memStore) evictOne(sh *shard, now int64, keep *record) (int, bool) {
	var started time.Time
	for {
		own := sh.oldest(keep)
		var victim *shard
		best := int64(math.MaxInt64)
		if own != nil {
			victim, best = sh, own.touched
		}
		for i := range s.shards {
			o := &s.shards[i]
			if o == sh {
				continue
			}
			if t := o.pubOldest.Load(); t < best {
				victim, best = o, t
			}
		}
		if victim == sh {
			return s.evict(sh, own, now), true
		}
		if victim != nil {
			if n, ok := s.evictFrom(victim, now); ok {
				return n, true
			}
		}
		if own != nil {
			return s.evict(sh, own, now), true
		}
		for i := range s.shards {
			o := &s.shards[i]
			if o == sh || o == victim || o.pubOldest.Load() == math.MaxInt64 {
				continue
			}
			if n, ok := s.evictFrom(o, now); ok {
				return n, true
			}
		}
		// Nothing could be evicted now: every shard holding records is
		// busy, or the states counted are reserved by writes under way.
		if started.IsZero() {
			started = time.Now()
		} else if time.Since(started) > s.evictWait {
			return 0, false
		}
		runtime.Gosched()
	}
}

// evictFrom evicts the least recently taken record of shard o, while
// another shard is held, reporting false when o is busy or holds no record.
func (s *memStore) evictFrom(o *shard, now int64) (int, bool) {
	if !o.tryLock() {
		return 0, false
	}
	n := 0
	r := o.oldest(nil)
	if r != nil {
		n = s.evict(o, r, now)
	}
	o.mu.Unlock()
	return n, r != nil
}

// evict removes record r from shard o, both locked, and returns how many
// states it held. A record with anything live counts as one eviction.
func (s *memStore) evict(o *shard, r *record, now int64) int {
	if r.live(now) {
		s.evictions.Add(1)
	}
	n := r.size()
	o.size -= n
	o.remove(r)
	return n
}

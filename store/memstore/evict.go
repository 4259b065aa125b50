package memstore

import (
	"math"
	"runtime"
	"sync/atomic"
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

// evictRounds bounds how often a store making room retries when the shard
// it would evict from is busy.
const evictRounds = 64

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
// and returns how many it freed. Other shards are swept only when their
// lock can be had without risking a deadlock; a busy one is skipped.
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
		if o == sh || o.pubMinExp.Load() > now || !s.lockOther(sh, o) {
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
// lists; when the shard holding the oldest is busy, sh's own oldest record
// goes instead, so that the store stays close to least-recently-used order
// without waiting. It reports false when nothing can be evicted.
func (s *memStore) evictOne(sh *shard, now int64, keep *record) (int, bool) {
	for round := 0; round < evictRounds; round++ {
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
		switch {
		case victim == nil:
			return 0, false
		case victim == sh:
			return s.evict(sh, own, now), true
		case s.lockOther(sh, victim):
			r := victim.oldest(nil)
			n := 0
			if r != nil {
				n = s.evict(victim, r, now)
			}
			victim.mu.Unlock()
			if r != nil {
				return n, true
			}
		case own != nil:
			return s.evict(sh, own, now), true
		default:
			runtime.Gosched()
		}
	}
	return 0, false
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

// lockOther locks shard o while sh is held. Locks are taken in shard
// order, so it blocks only for a shard after sh and otherwise tries once:
// two stores making room in each other's shards cannot deadlock.
func (s *memStore) lockOther(sh, o *shard) bool {
	if o.pos > sh.pos {
		o.mu.Lock()
		return true
	}
	return o.mu.TryLock()
}

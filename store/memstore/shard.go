package memstore

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/ratekeeper/ratekeeper/store"
)

// counts is the part of a limit's state that its algorithm computes (see
// algorithms.go): for GCRA and the token bucket the units used at ts; for
// the window algorithms the start of the current window (ts) and the
// counts of that window (cur) and, for the sliding counter and the
// suppressed strategy, of the one before it (prev). exp is when the state starts to decide exactly like
// no state at all: it is dropped at and after exp.
type counts struct {
	exp  int64 // µs
	ts   int64 // µs
	used float64
	cur  int64
	prev int64
	sup  *suppression // the suppressed strategy's own part; nil for others
}

// suppression is what a suppressed limit keeps beyond the sliding window
// counter's {ts, cur, prev}: the offered units (admitted or not) of the
// windows cur and prev count, and the cached suppression factor in parts
// per million with the time it was computed (µs). It lives behind a
// pointer so that the other algorithms' states do not carry it.
type suppression struct {
	ocur, oprev int64
	fppm, fts   int64
}

// limitState is the state of one limit of a request key, or of one
// sliding window log.
//
// It is found by its algorithm and ID, the pair the Redis store names its
// keys with: the limit's ID, or for a sliding window log of several
// limits their sorted IDs each preceded by a NUL (see logID), which no
// limit ID contains.
//
// The counts come first: with record's layout they share a cache line with
// the record's touched time, the two fields a Take writes.
type limitState struct {
	counts
	alg store.Algorithm
	id  string
	log *runLog // sliding window log only
}

// record holds everything stored for one request key: the states of its
// limits and its block, strikes and remembered de-duplication ids. A
// record exists while it holds at least one state.
//
// The fields a Take of a GCRA or token bucket limit writes (touched, and
// the first state's exp, ts and used) are bytes 32 to 63, one 32-byte
// block of the record: records are allocated 32-byte aligned, so when
// callers on two cores take the same key those writes move one cache line
// between them, and the fields a Take only reads stay shared (takePlain
// writes only those three counts when the others do not change). The
// order before them keeps a record's other fields where a Take of a key
// not in the cache finds them in as few lines as before.
type record struct {
	key        string
	prev, next *record // the shard's list, most recently taken first
	touched    int64   // µs: when a Take last moved the key to the list's front (see touch)
	inline     [1]limitState
	ks         *keyState // nil when the key has no block, strikes or ids
	states     []limitState
	hash       uint64 // keyHash of key, the shard's index's
}

// size returns the number of states r holds, counted as for MaxKeys: one
// per limit state, one for the key state and one per remembered id.
func (r *record) size() int {
	n := len(r.states)
	if r.ks != nil {
		n += 1 + len(r.ks.ids)
	}
	return n
}

// find returns the index of the state of alg and id in r.states, or -1.
func (r *record) find(alg store.Algorithm, id string) int {
	for i := range r.states {
		if st := &r.states[i]; st.alg == alg && st.id == id {
			return i
		}
	}
	return -1
}

// live reports whether r holds anything that matters at now.
func (r *record) live(now int64) bool {
	for i := range r.states {
		if r.states[i].exp > now {
			return true
		}
	}
	return r.ks != nil && r.ks.exp > now
}

// removeState deletes r.states[i]; the order of the others changes.
func (r *record) removeState(i int) {
	last := len(r.states) - 1
	r.states[i] = r.states[last]
	r.states[last] = limitState{} // release its strings and log
	r.states = r.states[:last]
}

// dropExpired removes the states of r that have expired at now (and the
// expired ids of a live key state when pruneIDs is set) and returns how
// many states it removed.
func (r *record) dropExpired(now int64, pruneIDs bool) int {
	n := 0
	for i := 0; i < len(r.states); {
		if r.states[i].exp <= now {
			r.removeState(i)
			n++
			continue
		}
		i++
	}
	switch {
	case r.ks == nil:
	case r.ks.exp <= now:
		n += 1 + len(r.ks.ids)
		r.ks = nil
	case pruneIDs && len(r.ks.ids) > 0:
		n += r.ks.pruneIDs(now)
	}
	return n
}

// minExp returns the earliest expiry among r's states and remembered ids.
func (r *record) minExp() int64 {
	m := int64(math.MaxInt64)
	for i := range r.states {
		m = min(m, r.states[i].exp)
	}
	if r.ks != nil {
		m = min(m, r.ks.exp, r.ks.firstIDExp())
	}
	return m
}

// shard is one lock's share of the store: the records of the keys that
// hash to it, in an index (see keyIndex) and in a list ordered by their
// last Take.
//
// The fields every Take writes (the lock, the latest time, the recent
// record when it changes, and a hot key's counts) fill the first cache
// line, the lock's, and nothing else written per Take shares it.
type shard struct {
	mu   sync.Mutex
	last int64 // latest time seen, µs: time never runs backwards in a shard
	// recent is the record lookup found last (nil: none), and recentHash
	// its key's hash: a key taken again and again, by many callers at
	// once, is found without an index lookup under the lock.
	recent     *record
	recentHash uint64
	// hot is a record whose one state's counts live here while its own
	// are stale (nil: none; see hold): exp and ts in hotExp and hotTS, and
	// in hotN a fixed window's cur, or the bits of a bucket's used.
	hot    *record
	hotExp int64
	hotTS  int64
	hotN   uint64

	index keyIndex // first on the next line, which a lookup reads

	// The LRU tail's touched time, published for other shards making room,
	// which read it without the lock.
	pubOldest    atomic.Int64
	publishedOld int64

	lru   record // sentinel: lru.next is the most recently taken record
	size  int    // states held, counted as for MaxKeys
	spare *record
	pos   int       // index in the store's shards
	ov    overrides // per-client overrides, by request key

	// minExp is a lower bound of every expiry in the shard; a full sweep
	// makes it exact. It is published, as the tail's touched time is.
	minExp    int64
	pubMinExp atomic.Int64
	_         [96]byte
}

func (sh *shard) init(pos int) {
	sh.pos = pos
	sh.lru.next, sh.lru.prev = &sh.lru, &sh.lru
	sh.last = math.MinInt64
	sh.minExp = math.MaxInt64
	sh.pubMinExp.Store(math.MaxInt64)
	sh.publishedOld = math.MaxInt64
	sh.pubOldest.Store(math.MaxInt64)
}

// lockSpins is how many times spinLock tries the shard's mutex again
// before it waits in Lock.
const lockSpins = 64

// spinLock locks sh.mu. A shard is held for tens of nanoseconds, less
// than one round of the spinning sync.Mutex does before it looks again
// (30 PAUSE instructions): a caller that finds the lock held tries it
// again in a tight loop first, and falls back to Lock, which may park it,
// only when that fails. TryLock fails while the mutex is starving, so the
// goroutines queued then keep their turn.
//
// Only the plain path, which knows the hot record (see hold), locks this
// way; every other holder of a shard locks with lock or tryLock.
func (sh *shard) spinLock() {
	for range lockSpins {
		if sh.mu.TryLock() {
			return
		}
	}
	sh.mu.Lock()
}

// lock locks sh.mu as spinLock does and writes the hot record's counts
// back (see hold), so that the holder finds every record as it is.
func (sh *shard) lock() {
	sh.spinLock()
	sh.settleHot()
}

// tryLock locks sh.mu unless it stays held for lockSpins tries, and then
// writes the hot record's counts back, as lock does. A decision holding
// one shard locks another only this way (see evictOne), so it never waits
// on a shard whose holder waits on it.
func (sh *shard) tryLock() bool {
	for range lockSpins {
		if sh.mu.TryLock() {
			sh.settleHot()
			return true
		}
	}
	return false
}

// hold makes r, whose only state st is a bucket's (GCRA or the token
// bucket) or a fixed window's (see hotAlgorithm) and whose key has no key
// state, the shard's hot record: its counts are kept on the shard's first
// cache line from now on, where every Take of the key already writes the
// lock, instead of in the record.
//
// A key taken by callers on several cores then moves one cache line
// between them per Take instead of two, and the lock is held for no miss
// on the record's line: on two cores, one key's Takes from 64 callers ran
// 1.4 to 1.7 times as fast. The record's own lines are only read while it
// is hot, so they stay in every core's cache.
//
// The plain path alone reads and writes the hot counts, with the shard
// locked by spinLock; lock and tryLock write them back to the record
// first (settleHot), so the rest of the store never sees a hot record.
// A plain Take that does not find its state in place (plainState) writes
// them back too before the general path runs. The plain path calls hold
// only for a record that is not hot, so another hot record's counts are
// written back first.
func (sh *shard) hold(r *record, st *limitState) {
	sh.settleHot()
	sh.hot = r
	sh.keepHot(st.alg, &st.counts)
}

// keepHot stores the counts c of a hot record's state of algorithm alg in
// the shard's hot fields.
func (sh *shard) keepHot(alg store.Algorithm, c *counts) {
	sh.hotExp, sh.hotTS = c.exp, c.ts
	if alg == store.FixedWindow {
		sh.hotN = uint64(c.cur)
	} else {
		sh.hotN = math.Float64bits(c.used)
	}
}

// hotCounts returns the hot record's counts, its state being of
// algorithm alg.
func (sh *shard) hotCounts(alg store.Algorithm) counts {
	c := counts{exp: sh.hotExp, ts: sh.hotTS}
	if alg == store.FixedWindow {
		c.cur = int64(sh.hotN)
	} else {
		c.used = math.Float64frombits(sh.hotN)
	}
	return c
}

// hotAlgorithm reports an algorithm whose state a hot record may hold:
// one whose counts are exp, ts and one more (a bucket's used, a fixed
// window's cur), which fit on the shard's first line.
func hotAlgorithm(a store.Algorithm) bool {
	return a == store.GCRA || a == store.TokenBucket || a == store.FixedWindow
}

// settleHot writes the hot record's counts back to its state, if there
// is a hot record, and leaves none.
func (sh *shard) settleHot() {
	if r := sh.hot; r != nil {
		st := &r.states[0]
		c := sh.hotCounts(st.alg)
		st.exp, st.ts, st.used, st.cur = c.exp, c.ts, c.used, c.cur
		sh.hot = nil
	}
}

// clock returns now, or the latest time the shard has seen when the clock
// stepped back, and remembers it.
func (sh *shard) clock(now int64) int64 {
	if now < sh.last {
		return sh.last
	}
	sh.last = now
	return now
}

// expiresAt notes that a state or id of the shard expires at exp.
func (sh *shard) expiresAt(exp int64) {
	if exp < sh.minExp {
		sh.minExp = exp
		sh.pubMinExp.Store(exp)
	}
}

// lookup returns the record of key, whose hash is h (see keyHash), or nil
// when the shard holds none. The hash is compared first so that another
// key's lookup does not read the recent record's key, a cache line of
// its own.
func (sh *shard) lookup(key string, h uint64) *record {
	if r := sh.recent; r != nil && sh.recentHash == h && r.key == key {
		return r
	}
	r := sh.index.get(key, h)
	if r != nil {
		sh.recent, sh.recentHash = r, h
	}
	return r
}

// newRecord returns an empty record for key, linked first in the list and
// indexed. The caller adds its states.
func (sh *shard) newRecord(key string, h uint64, now int64) *record {
	r := sh.spare
	if r != nil {
		sh.spare = nil
	} else {
		r = &record{}
	}
	r.key, r.hash = key, h
	r.states = r.inline[:0]
	sh.index.put(r)
	r.touched = now
	sh.pushFront(r)
	return r
}

// remove unindexes and unlinks r, which the caller has emptied or whose
// states it accounts for, and keeps its memory for the next new record.
func (sh *shard) remove(r *record) {
	sh.index.del(r)
	if sh.recent == r {
		sh.recent = nil
	}
	if sh.hot == r { // never, as the lock settled it; kept safe all the same
		sh.hot = nil
	}
	sh.unlink(r)
	sh.publishOldest()
	*r = record{}
	sh.spare = r
}

// recencyUS is how precisely the list orders records by their last Take,
// in µs: a Take of a record placed less than recencyUS ago leaves it
// where it is. Moving a record writes its neighbours and the shard's head,
// lines that callers on other cores then fetch back (over 10,000 keys at
// 64 and 256 callers on two cores, the middleware on the memory store ran
// 20-50% faster without those moves); a key taken again within 100 ms
// keeps its place instead, and eviction order is exact to within 100 ms.
const recencyUS = 100_000

// touch moves r to the front of the list, with now as its touched time: a
// Take reached it at now. It leaves r where it is when it was placed less
// than recencyUS before now: the key's last Take is then still within
// recencyUS of its touched time, so records evicted by their touched
// times go least recently taken first, to within recencyUS.
func (sh *shard) touch(r *record, now int64) {
	if now-r.touched < recencyUS {
		return
	}
	r.touched = now
	if sh.lru.next == r {
		if sh.lru.prev == r { // the only record: it is also the tail
			sh.publishOldest()
		}
		return
	}
	// unlink and pushFront, written out: r was linked and not first, so
	// the list does not become empty or start with a new tail.
	tail := sh.lru.prev == r
	r.prev.next, r.next.prev = r.next, r.prev
	r.prev, r.next = &sh.lru, sh.lru.next
	r.next.prev = r
	sh.lru.next = r
	if tail {
		sh.publishOldest()
	}
}

func (sh *shard) pushFront(r *record) {
	r.prev, r.next = &sh.lru, sh.lru.next
	r.next.prev = r
	sh.lru.next = r
	if r.next == &sh.lru {
		sh.publishOldest()
	}
}

func (sh *shard) unlink(r *record) {
	r.prev.next, r.next.prev = r.next, r.prev
	r.prev, r.next = nil, nil
}

// publishOldest publishes the touched time of the list's tail
// (math.MaxInt64 for an empty shard) when it changed.
func (sh *shard) publishOldest() {
	t := int64(math.MaxInt64)
	if tail := sh.lru.prev; tail != &sh.lru {
		t = tail.touched
	}
	if t != sh.publishedOld {
		sh.publishedOld = t
		sh.pubOldest.Store(t)
	}
}

// oldest returns the least recently taken record other than keep, or nil.
func (sh *shard) oldest(keep *record) *record {
	r := sh.lru.prev
	if r == keep {
		r = r.prev
	}
	if r == &sh.lru {
		return nil
	}
	return r
}

// sweep drops every expired state and id of the shard, except keep's, and
// returns how many it dropped; it leaves minExp exact and returns the
// index's memory after a large shrink.
func (sh *shard) sweep(now int64, keep *record) int {
	freed := 0
	m := int64(math.MaxInt64)
	for r := sh.lru.next; r != &sh.lru; {
		next := r.next
		if r != keep {
			freed += r.dropExpired(now, true)
			if r.size() == 0 {
				sh.remove(r)
				r = next
				continue
			}
		}
		m = min(m, r.minExp())
		r = next
	}
	sh.size -= freed
	sh.minExp = m
	sh.pubMinExp.Store(m)
	sh.index.shrink()
	return freed
}

// sweepSome drops the expired states of up to n records, from where the
// last sample of the index stopped, and returns how many it dropped. keep
// is left alone.
func (sh *shard) sweepSome(now int64, n int, keep *record) int {
	freed := 0
	sh.index.sample(n, func(r *record) bool {
		if r == keep {
			return false
		}
		f := r.dropExpired(now, false)
		freed += f
		if f > 0 && r.size() == 0 {
			sh.remove(r)
			return true
		}
		return false
	})
	sh.size -= freed
	return freed
}

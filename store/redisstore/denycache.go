package redisstore

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// denyShards is the number of independently locked parts of the deny cache.
const denyShards = 64

// denyCheckInterval is how long a cached refusal answers before Redis is
// asked again: a Reset made through another process reaches this one
// within it, and a key that keeps being refused costs at most one round
// trip per interval.
const denyCheckInterval = 250 * time.Millisecond

// denyCache remembers refusals until their retry time. A refusal records
// nothing in Redis, and only time frees capacity, so a request of the
// same key, limit and cost is refused until then whatever other requests
// do (see Take for what it cannot see). It answers only what Redis
// would answer, with waits never longer than Redis answered and never
// ending before Redis admits (see lookup): a request of another cost has
// another wait, so it asks Redis; and a refusal of a cost above 1 is not
// kept at all unless a block decided it, since the units remaining may
// grow while the wait runs (a cost of 1 is refused only while none
// remains, and a block reports none).
type denyCache struct {
	base   time.Time // monotonic origin of the cached times
	seed   maphash.Seed
	perCap int // entries per shard
	hits   atomic.Uint64
	// latest is the latest end (until) of any refusal stored, in
	// nanoseconds since base: once the clock passes it every entry has
	// expired, and lookup misses without the shard's lock (a workload
	// without refusals, or after they ended).
	latest atomic.Int64
	shards [denyShards]denyShard
}

type denyShard struct {
	mu sync.Mutex
	m  map[string]denyEntry
	_  [40]byte // keep shards' locks on separate cache lines
}

// denyEntry is one remembered refusal. Times are nanoseconds since the
// cache's base.
type denyEntry struct {
	li        *limitInfo // the limit refused; a changed limit never matches
	cost      int64      // the refused cost: only that cost matches
	since     int64      // when the refused call was sent
	until     int64      // answered from the cache until then
	answered  int64      // when the refusal came back: its waits count from then
	retryAt   int64      // answered + RetryAfter
	resetAt   int64      // answered + ResetAfter
	remaining int64
	limitID   string
	index     int
	blocked   bool
}

func newDenyCache(size int) *denyCache {
	c := &denyCache{base: time.Now(), seed: maphash.MakeSeed(), perCap: max(1, size/denyShards)}
	for i := range c.shards {
		c.shards[i].m = make(map[string]denyEntry)
	}
	return c
}

func (c *denyCache) shard(key string) *denyShard {
	return &c.shards[maphash.String(c.seed, key)%denyShards]
}

// lookup returns the cached refusal of key under li for a request of cost
// made at now, if one applies. Its waits count down from when the refusal
// came back, never from an earlier time: the script read its clock
// somewhere between the call's sending and its answer, so waits counted
// from the sending would end before the server's (by the time the call
// queued and travelled), and a client that waited them would be refused
// again. A refusal answered after now (by a call sent while this caller
// was between reading the clock and looking) is read as of its answer, so
// that its waits never exceed what Redis answered.
func (c *denyCache) lookup(key string, li *limitInfo, cost int64, now time.Time) (store.Decision, bool) {
	t := int64(now.Sub(c.base))
	if t >= c.latest.Load() {
		// A refusal stored meanwhile is missed as if this lookup had
		// come first.
		return store.Decision{}, false
	}
	sh := c.shard(key)
	sh.mu.Lock()
	e, ok := sh.m[key]
	if ok && t >= e.until {
		delete(sh.m, key)
		ok = false
	}
	sh.mu.Unlock()
	if !ok || e.li != li || cost != e.cost || t >= e.since+int64(denyCheckInterval) {
		return store.Decision{}, false
	}
	t = max(t, e.answered)
	c.hits.Add(1)
	d := store.Decision{
		Capacity:   li.limit,
		Remaining:  e.remaining,
		RetryAfter: ceilMicros(e.retryAt - t),
		LimitID:    e.limitID,
		Index:      e.index,
		Blocked:    e.blocked,
		Cached:     true,
	}
	if e.resetAt > t {
		d.ResetAfter = ceilMicros(e.resetAt - t)
	}
	if d.ResetAfter < d.RetryAfter && e.blocked {
		d.ResetAfter = d.RetryAfter
	}
	// A cached refusal is of a block, or of a cost of 1 with nothing
	// remaining: the next unit comes when the retry is admitted.
	d.NextAfter = d.RetryAfter
	return d, true
}

// store remembers refusal d of key under li for a request of cost sent at
// start and answered at end. The script read its clock between the two,
// so the refusal lasts at least until start + RetryAfter, and the cache
// answers until then (it never refuses what Redis would admit); the waits
// it reports end at end + RetryAfter, when a client of the answer can
// count on being admitted.
func (c *denyCache) store(key string, li *limitInfo, cost int64, start, end time.Time, d store.Decision) {
	if d.Allowed || d.RetryAfter <= 0 || cost > 1 && !d.Blocked {
		return
	}
	t := int64(start.Sub(c.base))
	a := max(t, int64(end.Sub(c.base)))
	e := denyEntry{
		li:        li,
		cost:      cost,
		since:     t,
		until:     t + int64(d.RetryAfter),
		answered:  a,
		retryAt:   a + int64(d.RetryAfter),
		resetAt:   a + int64(d.ResetAfter),
		remaining: d.Remaining,
		limitID:   d.LimitID,
		index:     d.Index,
		blocked:   d.Blocked,
	}
	sh := c.shard(key)
	sh.mu.Lock()
	if old, ok := sh.m[key]; ok && old.li == li && old.until > e.until && old.cost == e.cost {
		sh.mu.Unlock()
		return // the entry already refuses longer
	}
	if _, ok := sh.m[key]; !ok && len(sh.m) >= c.perCap {
		c.evict(sh, t)
	}
	sh.m[key] = e
	for {
		l := c.latest.Load()
		if e.until <= l || c.latest.CompareAndSwap(l, e.until) {
			break
		}
	}
	sh.mu.Unlock()
}

// evict makes room in a full shard: it looks at up to 16 entries (Go's
// map order is random) and drops the expired ones among them, or else the
// one that expires first.
func (c *denyCache) evict(sh *denyShard, t int64) {
	victim, soonest, seen, dropped := "", int64(0), 0, false
	for k, e := range sh.m {
		if t >= e.until {
			delete(sh.m, k)
			dropped = true
		} else if victim == "" || e.until < soonest {
			victim, soonest = k, e.until
		}
		if seen++; seen == 16 {
			break
		}
	}
	if !dropped && victim != "" {
		delete(sh.m, victim)
	}
}

// forget drops the cached refusal of key.
func (c *denyCache) forget(key string) {
	sh := c.shard(key)
	sh.mu.Lock()
	delete(sh.m, key)
	sh.mu.Unlock()
}

// ceilMicros returns ns rounded up to whole microseconds, at least 1µs.
func ceilMicros(ns int64) time.Duration {
	us := (ns + 999) / 1000
	if us < 1 {
		us = 1
	}
	return time.Duration(us) * time.Microsecond
}

// refusalQuery is a call's question to the deny cache, the one way the
// store consults it: is a refusal cached for the call's state key and
// limit that covers its cost? Only calls of plain requests without an
// override ask (see command); the zero value, for every other
// call, finds nothing and remembers nothing.
type refusalQuery struct {
	cache *denyCache // nil: the call is not answered from the cache
	key   string
	li    *limitInfo
	cost  int64
}

// cached returns the cached refusal that answers the call at now, if any.
func (q *refusalQuery) cached(now time.Time) (store.Decision, bool) {
	if q.cache == nil {
		return store.Decision{}, false
	}
	return q.cache.lookup(q.key, q.li, q.cost, now)
}

// remember caches d, the call's decision from Redis, when it refuses; the
// call was sent at start and its answer has just come back.
func (q *refusalQuery) remember(start time.Time, d store.Decision) {
	if q.cache != nil && !d.Allowed {
		q.cache.store(q.key, q.li, q.cost, start, time.Now(), d)
	}
}

package memstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// Defaults applied by [New] to zero fields of [Options].
const (
	// DefaultMaxKeys is the default cap on stored states.
	DefaultMaxKeys = 1_000_000
	// DefaultShards is the default number of shards.
	DefaultShards = 64
)

// Options configures a [Store]. The zero value selects every default; [New]
// never modifies the caller's value.
type Options struct {
	// Clock returns the current time. Nil means time.Now. The store measures
	// elapsed time with [time.Time.Sub] from the first reading, so a clock
	// with a monotonic reading (time.Now has one) keeps limits correct when
	// the system clock is stepped. Clock must be safe for concurrent use.
	Clock func() time.Time
	// MaxKeys caps the number of stored states: one per key and limit, and
	// one per key and limit set for [store.SlidingWindowLog]. It bounds
	// memory against floods of distinct keys. Zero means [DefaultMaxKeys];
	// negative is an error. See [Store.Take] for what happens at the cap.
	MaxKeys int
	// Shards is the number of independently locked maps the states are
	// spread over (by a seeded hash of the key). Zero means
	// [DefaultShards]; negative is an error. It is lowered to MaxKeys when
	// larger.
	Shards int
}

// Store is an in-memory [store.Store]. Create it with [New]; the zero value
// is not usable.
//
// A Store is safe for concurrent use. State is spread over shards, each
// with its own mutex that is held only for the in-memory update of one
// request; there is no process-wide lock and no background goroutine, so a
// Store needs no Close and is reclaimed by the garbage collector like any
// value.
//
// State never outlives its use: every state carries the expiry the Redis
// store would give its keys, expired state is dropped when it is next
// touched, each insertion of a new state examines a few others and drops
// the expired ones, and a shard at its cap sweeps itself before refusing a
// new state.
type Store struct {
	clock   func() time.Time
	start   time.Time // first clock reading
	startUS int64     // start in µs since the Unix epoch, truncated
	startNS int64     // start's nanoseconds below the microsecond
	seed    maphash.Seed
	shards  []shard

	ids    cache[idKey]  // derived IDs of unnamed limits
	logIDs cache[string] // state IDs of single-limit sliding window logs
}

// cache is a small copy-on-write map for strings derived from limit
// configuration: reads take no lock and do not allocate.
type cache[K comparable] struct {
	mu sync.Mutex // serialises writers
	m  atomic.Pointer[map[K]string]
}

// maxCached bounds each cache; limits come from configuration, so a
// handful of distinct entries is normal, and beyond the bound values are
// computed on every call.
const maxCached = 256

// get returns the value for k, computing and caching it when absent.
func (c *cache[K]) get(k K, compute func() string) string {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	v := compute()
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	size := 0
	if old != nil {
		size = len(*old)
	}
	if size >= maxCached {
		return v
	}
	m := make(map[K]string, size+1)
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[k] = v
	c.m.Store(&m)
	return v
}

// idKey identifies an unnamed limit's derived ID.
type idKey struct {
	alg    store.Algorithm
	period time.Duration
}

// stateKey identifies one stored state: the request key and the limit ID
// (or, for the sliding window log, the limit set, prefixed with a NUL that
// no limit ID contains).
type stateKey struct {
	key string
	id  string
}

// entry is one stored state. Which fields are used depends on the
// algorithm (see the state types in algorithms.go).
type entry struct {
	exp    int64   // µs; the state is gone at and after exp
	ts     int64   // bucket: time of the last update
	tokens float64 // bucket: tokens left at ts
	ws     int64   // windows: start of the window cur counts
	cur    int64   // windows: units in window ws
	prev   int64   // sliding counter: units in window ws-P
	log    *runLog // sliding log
}

type shard struct {
	mu     sync.Mutex
	m      map[stateKey]entry
	limit  int   // most entries this shard may hold
	peak   int   // largest len(m) since the map was last rebuilt
	last   int64 // latest time seen, µs: time never runs backwards in a shard
	minExp int64 // lower bound of the expiry of every entry in m
	_      [64]byte
}

// New returns a Store configured by opts. It returns an error when MaxKeys
// or Shards is negative.
func New(opts Options) (*Store, error) {
	if opts.MaxKeys < 0 {
		return nil, fmt.Errorf("memstore: MaxKeys must be >= 0, got %d", opts.MaxKeys)
	}
	if opts.Shards < 0 {
		return nil, fmt.Errorf("memstore: Shards must be >= 0, got %d", opts.Shards)
	}
	clock := opts.Clock
	if clock == nil {
		clock = time.Now
	}
	maxKeys := opts.MaxKeys
	if maxKeys == 0 {
		maxKeys = DefaultMaxKeys
	}
	n := opts.Shards
	if n == 0 {
		n = DefaultShards
	}
	if n > maxKeys {
		n = maxKeys
	}
	start := clock()
	s := &Store{
		clock:   clock,
		start:   start,
		startUS: start.UnixMicro(),
		startNS: int64(start.Nanosecond() % 1000),
		seed:    maphash.MakeSeed(),
		shards:  make([]shard, n),
	}
	base, extra := maxKeys/n, maxKeys%n
	for i := range s.shards {
		sh := &s.shards[i]
		sh.m = make(map[stateKey]entry)
		sh.limit = base
		if i < extra {
			sh.limit++
		}
		sh.last = math.MinInt64
		sh.minExp = math.MaxInt64
	}
	return s, nil
}

// now returns the store's clock in µs since the Unix epoch.
func (s *Store) now() int64 {
	d := int64(s.clock().Sub(s.start)) + s.startNS
	us := d / 1000
	if d < 0 && d%1000 != 0 {
		us-- // floor, like UnixMicro
	}
	return s.startUS + us
}

func (s *Store) shardFor(key string) *shard {
	if len(s.shards) == 1 {
		return &s.shards[0]
	}
	return &s.shards[maphash.String(s.seed, key)%uint64(len(s.shards))]
}

// limitID returns l.ID() without allocating for limits seen before.
func (s *Store) limitID(l store.Limit) string {
	if l.Name != "" {
		return l.Name
	}
	return s.ids.get(idKey{l.Algorithm, l.Period}, l.ID)
}

// logID returns the state ID of a sliding window log: the IDs of the
// request's limits, sorted, each preceded by a NUL. Limit IDs contain no
// control characters, so the encoding is injective and cannot collide
// with a limit ID.
func (s *Store) logID(ids []string) string {
	if len(ids) == 1 {
		return s.logIDs.get(ids[0], func() string { return "\x00" + ids[0] })
	}
	var sorted [store.MaxLimits]string
	n := copy(sorted[:], ids)
	slices.Sort(sorted[:n])
	var b strings.Builder
	for _, id := range sorted[:n] {
		b.WriteByte(0)
		b.WriteString(id)
	}
	return b.String()
}

// Take implements [store.Store]: it checks req against every limit and
// records it in all of them only if all admit it.
//
// It returns an error wrapping [store.ErrInvalidRequest],
// [store.ErrInvalidLimit] or [store.ErrCostExceedsCapacity] for an invalid
// request. When an admitted request needs a new state, the key's shard is
// at its share of MaxKeys and sweeping it frees nothing, Take records
// nothing and returns a *[store.BackendError] with Kind
// [store.KindCapacity] wrapping [store.ErrTooManyKeys] (so it also matches
// [store.ErrStoreUnavailable]): the caller applies its failure mode. Keys
// whose states exist keep working at the cap, and denied requests never
// need a new state.
//
// The memory store never blocks, so ctx is not consulted.
func (s *Store) Take(_ context.Context, req store.Request) (store.Decision, error) {
	return s.decide(req, true)
}

// Peek implements [store.Store]: it returns the decision Take would return
// now and changes no state (it does not even drop expired state). Errors
// are those of Take for invalid requests; Peek never fails otherwise.
func (s *Store) Peek(_ context.Context, req store.Request) (store.Decision, error) {
	return s.decide(req, false)
}

// Reset implements [store.Store]: it forgets req.Key's state under
// req.Limits (for [store.SlidingWindowLog], the log of exactly that limit
// set). State of the key under other limits is kept. req.Cost is ignored;
// other fields are validated as for Take.
func (s *Store) Reset(_ context.Context, req store.Request) error {
	req.Cost = 0
	if err := req.Validate(); err != nil {
		return err
	}
	var ids [store.MaxLimits]string
	for i, l := range req.Limits {
		ids[i] = s.limitID(l)
	}
	sh := s.shardFor(req.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if req.Limits[0].Algorithm == store.SlidingWindowLog {
		delete(sh.m, stateKey{req.Key, s.logID(ids[:len(req.Limits)])})
		return nil
	}
	for _, id := range ids[:len(req.Limits)] {
		delete(sh.m, stateKey{req.Key, id})
	}
	return nil
}

// Len returns the number of states currently stored, expired ones not yet
// dropped included. It locks each shard in turn, so it is meant for tests
// and occasional monitoring, not the request path.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// outcome is one limit's verdict: whether it admits the request, its
// remaining units and time to reset (µs) without the request (rem0,
// reset0) and, when it admits it, after it (rem1, reset1), and when it
// refuses it, the wait until it would admit it (retry, µs).
type outcome struct {
	allowed      bool
	rem0, reset0 int64
	rem1, reset1 int64
	retry        int64
}

func (s *Store) decide(req store.Request, take bool) (store.Decision, error) {
	if err := req.Validate(); err != nil {
		return store.Decision{}, err
	}
	var ids [store.MaxLimits]string
	for i, l := range req.Limits {
		ids[i] = s.limitID(l)
	}
	n := len(req.Limits)
	now := s.now()
	sh := s.shardFor(req.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if now < sh.last {
		now = sh.last
	}
	sh.last = now
	var out [store.MaxLimits]outcome
	var err error
	if req.Limits[0].Algorithm == store.SlidingWindowLog {
		err = s.decideLog(sh, req, ids[:n], out[:n], now, take)
	} else {
		err = s.decidePerLimit(sh, req, ids[:n], out[:n], now, take)
	}
	if err != nil {
		return store.Decision{}, err
	}
	return pick(req, ids[:n], out[:n]), nil
}

func (s *Store) decidePerLimit(sh *shard, req store.Request, ids []string, out []outcome, now int64, take bool) error {
	var next [store.MaxLimits]entry
	var present [store.MaxLimits]bool // in the map, expired or not
	allowed := true
	c := req.EffectiveCost()
	for i, l := range req.Limits {
		e, ok := sh.m[stateKey{req.Key, ids[i]}]
		present[i] = ok
		live := ok && e.exp > now
		out[i], next[i] = evaluate(l, e, live, now, c)
		allowed = allowed && out[i].allowed
	}
	if !take {
		return nil
	}
	if !allowed {
		for i := range req.Limits {
			if k := (stateKey{req.Key, ids[i]}); present[i] && sh.m[k].exp <= now {
				delete(sh.m, k)
			}
		}
		return nil
	}
	missing := 0
	for i := range req.Limits {
		if !present[i] {
			missing++
		}
	}
	if missing > 0 && !sh.room(now, missing) {
		// The sweep may have dropped expired entries of this request,
		// which only makes room; count again.
		missing = 0
		for i := range req.Limits {
			if _, ok := sh.m[stateKey{req.Key, ids[i]}]; !ok {
				missing++
			}
		}
		if len(sh.m)+missing > sh.limit {
			return &store.BackendError{Op: "take", Kind: store.KindCapacity, Err: store.ErrTooManyKeys}
		}
	}
	for i := range req.Limits {
		sh.put(stateKey{req.Key, ids[i]}, next[i])
	}
	if missing > 0 {
		sh.sweepSome(now, sweepBatch)
	}
	return nil
}

func (s *Store) decideLog(sh *shard, req store.Request, ids []string, out []outcome, now int64, take bool) error {
	k := stateKey{req.Key, s.logID(ids)}
	e, present := sh.m[k]
	var lg *runLog
	if present && e.exp > now {
		lg = e.log
	}
	c := req.EffectiveCost()
	allowed := evaluateLog(req.Limits, lg, now, c, out)
	if !take {
		return nil
	}
	if !allowed {
		if present && e.exp <= now {
			delete(sh.m, k)
		}
		return nil
	}
	if !present && !sh.room(now, 1) {
		return &store.BackendError{Op: "take", Kind: store.KindCapacity, Err: store.ErrTooManyKeys}
	}
	var longest int64
	for _, l := range req.Limits {
		longest = max(longest, l.Period.Microseconds())
	}
	switch {
	case lg != nil:
	case present && e.log != nil: // expired: reuse its memory
		lg = e.log
		lg.clear()
	default:
		lg = &runLog{}
	}
	lg.prune(now - longest)
	lg.add(now, c)
	sh.put(k, entry{exp: lg.newest() + longest, log: lg})
	if !present {
		sh.sweepSome(now, sweepBatch)
	}
	return nil
}

// pick builds the decision from every limit's outcome: for a denied request
// the denying limit with the longest retry time, for an admitted one the
// limit with the fewest units remaining; ties go to the earliest limit.
// Remaining and ResetAfter describe the limits after the request when it
// is admitted and without it when it is denied.
func pick(req store.Request, ids []string, out []outcome) store.Decision {
	allowed := true
	for _, o := range out {
		allowed = allowed && o.allowed
	}
	rem := func(o outcome) (int64, int64) {
		if allowed {
			return o.rem1, o.reset1
		}
		return o.rem0, o.reset0
	}
	d := -1
	for i, o := range out {
		switch {
		case allowed:
			if r, _ := rem(o); d < 0 || r < out[d].rem1 {
				d = i
			}
		case !o.allowed:
			if d < 0 || o.retry > out[d].retry {
				d = i
			}
		}
	}
	remaining, reset := rem(out[d])
	dec := store.Decision{
		Allowed:    allowed,
		Limit:      req.Limits[d].Capacity(),
		Remaining:  remaining,
		ResetAfter: micros(reset),
		Policy:     ids[d],
		Index:      d,
	}
	if !allowed {
		dec.RetryAfter = micros(out[d].retry)
	}
	if len(out) > 1 {
		dec.PerLimit = make([]store.LimitState, len(out))
		for i, o := range out {
			r, t := rem(o)
			dec.PerLimit[i] = store.LimitState{Remaining: r, ResetAfter: micros(t)}
		}
	}
	return dec
}

// micros converts microseconds to a Duration, saturating: a bucket with a
// large burst and a slow rate can take longer than a Duration holds to
// refill.
func micros(us int64) time.Duration {
	if us > math.MaxInt64/int64(time.Microsecond) {
		return math.MaxInt64
	}
	return time.Duration(us) * time.Microsecond
}

// sweepBatch is how many entries an insertion examines for expiry.
const sweepBatch = 4

// put stores e under k and keeps the shard's bookkeeping.
func (sh *shard) put(k stateKey, e entry) {
	sh.m[k] = e
	if e.exp < sh.minExp {
		sh.minExp = e.exp
	}
	if len(sh.m) > sh.peak {
		sh.peak = len(sh.m)
	}
}

// sweepSome drops expired entries among up to n entries of the map, which
// Go iterates from a random position.
func (sh *shard) sweepSome(now int64, n int) {
	for k, e := range sh.m {
		if e.exp <= now {
			delete(sh.m, k)
		}
		if n--; n == 0 {
			return
		}
	}
}

// room reports whether need more entries fit in the shard, sweeping every
// expired entry first when some may exist. A full sweep recomputes minExp,
// so it runs again only once something has certainly expired or an entry
// whose expiry was the minimum has been rewritten.
func (sh *shard) room(now int64, need int) bool {
	if len(sh.m)+need <= sh.limit {
		return true
	}
	if now < sh.minExp {
		return false
	}
	minExp := int64(math.MaxInt64)
	for k, e := range sh.m {
		if e.exp <= now {
			delete(sh.m, k)
			continue
		}
		minExp = min(minExp, e.exp)
	}
	sh.minExp = minExp
	if sh.peak > 1024 && len(sh.m) < sh.peak/4 {
		// Go maps do not shrink: rebuild to return the memory.
		m := make(map[stateKey]entry, len(sh.m))
		for k, e := range sh.m {
			m[k] = e
		}
		sh.m = m
		sh.peak = len(m)
	}
	return len(sh.m)+need <= sh.limit
}

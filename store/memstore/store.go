package memstore

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ratekeeper/ratekeeper/internal/keybuf"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// Defaults applied by [New] to zero fields of [Options].
const (
	defaultMaxKeys = 1_000_000
	defaultShards  = 64
)

// Options configures the store [New] returns. The zero value selects every default; [New]
// never modifies the caller's value.
type Options struct {
	// Clock returns the current time. Nil means time.Now. The store measures
	// elapsed time with [time.Time.Sub] from the first reading, so a clock
	// with a monotonic reading (time.Now has one) keeps limits correct when
	// the system clock is stepped. Clock must be safe for concurrent use.
	Clock func() time.Time
	// MaxKeys caps the number of stored states, across all shards: one per
	// key and limit (for [store.SlidingWindowLog], per key and limit set),
	// one per key that has a block, a strike count or remembered
	// de-duplication ids, and one per remembered id. It bounds memory
	// against floods of distinct keys and ids. Zero means 1,000,000;
	// negative is an error. A full store makes room by
	// evicting (see Take).
	MaxKeys int
	// Shards is the number of independently locked maps the states are
	// spread over (by a seeded hash of the key). Zero means 64;
	// negative is an error. It is lowered to MaxKeys when
	// larger. Shards do not divide MaxKeys: any shard may hold any share.
	Shards int
	// Rand returns the uniform random value in [0, 1) that a request of
	// the suppressed strategy (package store/suppressed) is drawn against (one per request,
	// Take or Peek). Nil means math/rand/v2's Float64. Tests inject a
	// fixed sequence. A value outside [0, 1) is clamped into it (NaN
	// counts as 0). It must be safe for concurrent use.
	Rand func() float64
}

// memStore is the in-memory [store.Store] that [New] returns; the zero
// value is not usable.
//
// A memStore is safe for concurrent use. State is spread over shards, each
// with its own mutex that is held only for the in-memory update of one
// request; there is no process-wide lock and no background goroutine, so a
// memStore needs no Close and is reclaimed by the garbage collector like any
// value.
//
// State never outlives its use: every state carries the expiry the Redis
// store would give its keys and reads as absent once expired. Writes drop
// state expired for more than a second a few records at a time (a key
// back sooner renews its record in place), a full store drops every
// expired state at once, and then evicts the least recently used keys
// (see Take).
type memStore struct {
	clock   func() time.Time // nil: time.Now, read as time.Since(start)
	rand    func() float64   // never nil
	start   time.Time        // first clock reading
	startUS int64            // start in µs since the Unix epoch, truncated
	startNS int64            // start's nanoseconds below the microsecond
	seed    uint64           // of the key hash that picks a shard
	shards  []shard
	ids     idCache
	plans   planCache
	slots   slotTable // in-flight caps (slots.go)

	budget    budget
	evictions atomic.Uint64
	evictWait time.Duration // see evictWait; tests change it
	overrides atomic.Int64  // live overrides, expired ones not yet dropped included
}

// New returns an in-memory [store.Store] configured by opts. It returns an
// error when MaxKeys or Shards is negative. Besides [store.Store] the value
// implements [store.MultiStore], [store.OverrideStore], [store.BlockLister],
// [store.EvictionCounter], [store.Refunder] and [store.SlotStore]; reach
// them by type assertion.
func New(opts Options) (store.Store, error) {
	s, err := newMem(opts)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// newMem is [New] with the concrete type.
func newMem(opts Options) (*memStore, error) {
	if opts.MaxKeys < 0 {
		return nil, fmt.Errorf("memstore: MaxKeys must be >= 0, got %d", opts.MaxKeys)
	}
	if opts.Shards < 0 {
		return nil, fmt.Errorf("memstore: Shards must be >= 0, got %d", opts.Shards)
	}
	start := time.Now()
	if opts.Clock != nil {
		start = opts.Clock()
	}
	maxKeys := opts.MaxKeys
	if maxKeys == 0 {
		maxKeys = defaultMaxKeys
	}
	n := opts.Shards
	if n == 0 {
		n = defaultShards
	}
	n = min(n, maxKeys)
	s := &memStore{
		clock:   opts.Clock,
		start:   start,
		startUS: start.UnixMicro(),
		startNS: int64(start.Nanosecond() % 1000),
		seed:    rand.Uint64(),
		shards:  make([]shard, n),
		rand:    opts.Rand,
	}
	if s.rand == nil {
		s.rand = rand.Float64
	}
	s.budget.max = int64(maxKeys)
	s.evictWait = evictWait
	for i := range s.shards {
		s.shards[i].init(i)
	}
	return s, nil
}

// nowFor is now for a request with context ctx: the instant its decision
// was stamped with (see package internal/keybuf), which the caller read
// from the same monotonic clock as time.Since, when the store has no
// Options.Clock; else a reading of its own.
func (s *memStore) nowFor(ctx context.Context) int64 {
	if s.clock == nil {
		if elapsed, ok := keybuf.Since(ctx, s.start); ok {
			return s.since(elapsed)
		}
	}
	return s.now()
}

// now returns the store's clock in µs since the Unix epoch: the first
// reading plus the time elapsed since, which time.Since reads from the
// monotonic clock alone, at half the cost of time.Now.
func (s *memStore) now() int64 {
	var elapsed time.Duration
	if s.clock == nil {
		elapsed = time.Since(s.start)
	} else {
		elapsed = s.clock().Sub(s.start)
	}
	return s.since(elapsed)
}

// since returns the store's clock elapsed after its first reading, in µs
// since the Unix epoch.
func (s *memStore) since(elapsed time.Duration) int64 {
	d := int64(elapsed) + s.startNS
	us := d / 1000
	if d < 0 && d%1000 != 0 {
		us-- // floor, like UnixMicro
	}
	return s.startUS + us
}

// draw returns the store's random value, clamped into [0, 1).
func (s *memStore) draw() float64 {
	return clampUnit(s.rand())
}

// clampUnit returns u within [0, 1): below 0 and NaN give 0, 1 and above
// the largest float64 below 1.
func clampUnit(u float64) float64 {
	switch {
	case !(u >= 0):
		return 0
	case u >= 1:
		return math.Nextafter(1, 0)
	}
	return u
}

func (s *memStore) shardFor(key string) *shard {
	sh, _ := s.locate(key)
	return sh
}

// locate returns the shard of key and the key's hash, with which the
// shard's lookup finds its record.
func (s *memStore) locate(key string) (*shard, uint64) {
	h := keyHash(s.seed, key)
	hi, _ := bits.Mul64(h, uint64(len(s.shards)))
	return &s.shards[hi], h
}

// keyHash returns a hash of key seeded by seed, which spreads keys evenly
// over shards and tells a shard's recent key from others (a collision
// costs an index lookup, see shard.lookup) and finds its slot in the
// shard's index by its low bits: it reads the key eight bytes at
// a time and folds each word into the state by a 128-bit multiplication,
// at a third of the cost of hash/maphash for the short keys of rate
// limiting.
func keyHash(seed uint64, key string) uint64 {
	const m1, m2 = 0xa0761d6478bd642f, 0xe7037ed1a0b428db
	n := len(key)
	h := seed ^ uint64(n)*m1
	if n < 8 {
		var w uint64
		for i := 0; i < n; i++ {
			w |= uint64(key[i]) << (8 * i)
		}
		return fold(fold(h^w, m2), m1)
	}
	for i := 0; i < n-8; i += 8 {
		h = fold(h^le64(key[i:]), m2)
	}
	// The last eight bytes, overlapping the word before when n is not a
	// multiple of 8.
	return fold(fold(h^le64(key[n-8:]), m2), m1)
}

// le64 reads the first eight bytes of s as a little-endian word.
func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// fold mixes x by m: the two halves of their 128-bit product, xored.
func fold(x, m uint64) uint64 {
	hi, lo := bits.Mul64(x, m)
	return hi ^ lo
}

// Take implements [store.Store]: in one step under the key's lock it
// applies the key's block, answers a remembered [store.Request.DedupID],
// checks req against every limit, records it in all of them only if all
// admit it (or, with [store.Request.CountDenied], even when refused) and
// starts a block when a refusing limit has one, as package store
// specifies.
//
// It returns an error wrapping [store.ErrInvalidRequest],
// [store.ErrInvalidLimit] or [store.ErrCostExceedsCapacity] for an invalid
// request.
//
// When a write needs new states and the store holds MaxKeys, Take makes
// room: it drops expired states (which decide exactly like no state)
// first, then evicts the least recently taken keys (to within 100 ms, see
// the package documentation), each with all its states, block and
// remembered ids; [memStore.Evictions] counts them. An
// evicted key starts afresh, as if it had expired. Only when the request
// cannot fit even in an otherwise empty store (MaxKeys is smaller than
// its states, plus what its key already holds), or in the rare case that
// every shard it could evict from stays busy for 5ms, does an admission record
// nothing and return a *[store.BackendError] with Kind
// "capacity" wrapping [store.ErrTooManyKeys] (so it also
// matches [store.ErrStoreUnavailable]): the caller applies its failure
// mode. A refusal is never turned into an error: a counted refusal or a
// new block that cannot fit is not written, and the refusal is returned.
//
// Take never blocks on I/O, so ctx is not consulted.
func (s *memStore) Take(ctx context.Context, req store.Request) (d store.Decision, err error) {
	// A key in memory the request lends (see CopiesLentKeys) is copied
	// before a new record keeps it: on the plain path only when the key
	// is new, on the general path at once.
	if p := s.planFor(&req); p != nil {
		// The decision is written in place: it is large to copy.
		err = s.takePlain(ctx, &req, p, &d)
		return
	}
	if keybuf.Holds(ctx, req.Key) {
		req.Key = strings.Clone(req.Key)
	}
	return s.decide(req, true)
}

// Peek implements [store.Store]: it returns the decision Take would return
// now and changes no state (it does not even drop expired state, nor
// count as a use of the key for eviction). It reports an existing block
// or a remembered de-duplication id; where Take would start a block, Peek
// reports the limits' refusal without Blocked, since no block exists yet.
// Errors are those of Take for invalid requests; Peek never fails
// otherwise.
func (s *memStore) Peek(_ context.Context, req store.Request) (store.Decision, error) {
	return s.decide(req, false)
}

// Reset implements [store.Store]: it forgets req.Key's state under
// req.Limits (for [store.SlidingWindowLog], the log of exactly that limit
// set) and the key's block, strike count and remembered de-duplication
// ids, which all limits of the key share. State of the key under other
// limits is kept. It returns [store.ErrNotFound] when none of that state
// was live (expired state counts as none). req.Cost is ignored; other
// fields are validated as for Take.
func (s *memStore) Reset(_ context.Context, req store.Request) error {
	req.Cost = 0
	if err := req.Validate(); err != nil {
		return err
	}
	return s.reset(req)
}

// Suppress implements contract.Suppressor: req, checked by package
// store/suppressed, is decided like any other request.
func (s *memStore) Suppress(_ context.Context, req store.Request, mode contract.Mode) (store.Decision, error) {
	switch mode {
	case contract.Take:
		return s.run(req, true)
	case contract.Peek:
		return s.run(req, false)
	}
	return store.Decision{}, s.reset(req)
}

// reset is Reset on a request already checked.
func (s *memStore) reset(req store.Request) error {
	var ids [store.MaxLimits]string
	s.limitIDs(req.Limits, &ids)
	alg := req.Limits[0].Algorithm
	n := len(req.Limits)
	if alg == store.SlidingWindowLog {
		ids[0], n = s.logID(req.Limits), 1
	}
	sh, h := s.locate(req.Key)
	sh.lock()
	defer sh.mu.Unlock()
	now := sh.clock(s.now())
	r := sh.index.get(req.Key, h)
	if r == nil {
		return store.ErrNotFound
	}
	found := r.ks != nil && r.ks.exp > now
	freed := 0
	if r.ks != nil {
		freed += 1 + len(r.ks.ids)
		r.ks = nil
	}
	for _, id := range ids[:n] {
		if i := r.find(alg, id); i >= 0 {
			found = found || r.states[i].exp > now
			r.removeState(i)
			freed++
		}
	}
	sh.size -= freed
	if r.size() == 0 {
		sh.remove(r)
	}
	s.budget.give(freed)
	if !found {
		return store.ErrNotFound
	}
	return nil
}

// Len returns the number of states currently stored, counted as for
// [Options.MaxKeys], expired ones not yet dropped included. It reads one
// counter and does not lock.
func (s *memStore) Len() int { return int(s.budget.used.Load()) }

// Evictions returns how many keys the store has evicted to make room
// since it was created: keys whose state still mattered when it was
// dropped because the store held MaxKeys states. Expired state dropped to
// make room is not counted. A steadily growing count means MaxKeys is too
// small for the number of active clients: each eviction forgets what a
// client had used.
//
// It implements [store.EvictionCounter], through which metrics
// collectors find it. It is safe for concurrent use.
func (s *memStore) Evictions() uint64 { return s.evictions.Load() }

// CopiesLentKeys implements keybuf.Copier: a key in memory the request's
// context lent is copied before a record keeps it (see Take).
func (*memStore) CopiesLentKeys(*keybuf.Buffer) {}

// Name returns "memory", the backend name used in metrics labels.
func (s *memStore) Name() string { return "memory" }

// limitIDs writes the ID of each limit to ids, without allocating for
// limits seen before.
func (s *memStore) limitIDs(limits []store.Limit, ids *[store.MaxLimits]string) {
	for i, l := range limits {
		if l.Name != "" || l.Calendar != "" {
			ids[i] = l.ID()
		} else {
			ids[i] = s.ids.get(l.Algorithm, l.Period)
		}
	}
}

// logID returns the state ID of a sliding window log of limits: the ID of
// its one limit, or the IDs of its limits, sorted, each preceded by a NUL.
// Limit IDs contain no control characters, so the encoding is injective
// and a log of several limits never shares an ID with a limit.
func (s *memStore) logID(limits []store.Limit) string {
	var ids [store.MaxLimits]string
	s.limitIDs(limits, &ids)
	if len(limits) == 1 {
		return ids[0]
	}
	sorted := ids[:len(limits)]
	slices.Sort(sorted)
	var b strings.Builder
	for _, id := range sorted {
		b.WriteByte(0)
		b.WriteString(id)
	}
	return b.String()
}

// idCache holds the derived IDs of unnamed limits ("gcra/1m0s"), which
// would otherwise be built on every call: a few slots, found by a hash of
// the algorithm and period, read without locking. Limits come from
// configuration, so a handful of entries is the norm; an ID that finds no
// slot is built again, which costs an allocation and nothing else.
type idCache struct {
	slots [64]atomic.Pointer[derivedID]
}

type derivedID struct {
	alg    store.Algorithm
	period time.Duration
	id     string
}

// idProbe is how many consecutive slots an ID may occupy.
const idProbe = 4

func (c *idCache) get(alg store.Algorithm, period time.Duration) string {
	h := ((uint64(period)<<3 | uint64(alg)) * 0x9e3779b97f4a7c15) >> 58
	for i := uint64(0); i < idProbe; i++ {
		d := c.slots[(h+i)%uint64(len(c.slots))].Load()
		if d == nil {
			break
		}
		if d.alg == alg && d.period == period {
			return d.id
		}
	}
	d := &derivedID{alg, period, store.Limit{Algorithm: alg, Period: period}.ID()}
	for i := uint64(0); i < idProbe; i++ {
		if c.slots[(h+i)%uint64(len(c.slots))].CompareAndSwap(nil, d) {
			break
		}
	}
	return d.id
}

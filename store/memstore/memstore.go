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
	// MaxKeys caps the number of stored states: one per key and limit (for
	// [store.SlidingWindowLog], per key and limit set), one per key that
	// has a block, a strike count or remembered de-duplication ids, and one
	// per remembered id. It bounds memory against floods of distinct keys
	// and ids. Zero means [DefaultMaxKeys]; negative is an error. See
	// [Store.Take] for what happens at the cap.
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
// no limit ID contains; or keyStateID for the key's block, strikes and
// de-duplication ids).
type stateKey struct {
	key string
	id  string
}

// entry is one stored state. Which fields are used depends on the
// algorithm (see the state types in algorithms.go).
type entry struct {
	exp    int64     // µs; the state is gone at and after exp
	ts     int64     // bucket: time of the last update
	tokens float64   // bucket: tokens left at ts
	ws     int64     // windows: start of the window cur counts
	cur    int64     // windows: units in window ws
	prev   int64     // sliding counter: units in window ws-P
	log    *runLog   // sliding log
	ks     *keyState // the key's block, strikes and de-duplication ids
}

type shard struct {
	mu     sync.Mutex
	m      map[stateKey]entry
	ids    int   // de-duplication ids held by the key states in m
	kss    int   // entries of m that hold a key state
	limit  int   // most states (entries and ids) this shard may hold
	peak   int   // largest len(m) since the map was last rebuilt
	last   int64 // latest time seen, µs: time never runs backwards in a shard
	minExp int64 // lower bound of the expiry of every entry and id in m
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

// Take implements [store.Store]: in one step under the key's lock it
// applies the key's block, answers a remembered [store.Request.DedupID],
// checks req against every limit, records it in all of them only if all
// admit it (or, with [store.Request.CountDenied], even when refused) and
// starts a block when a refusing limit has one, as package store
// specifies.
//
// It returns an error wrapping [store.ErrInvalidRequest],
// [store.ErrInvalidLimit] or [store.ErrCostExceedsCapacity] for an invalid
// request. When an admitted request needs new states (a limit's, the
// key's, a remembered id), the key's shard is at its share of MaxKeys and
// sweeping it frees nothing, Take records nothing and returns a
// *[store.BackendError] with Kind [store.KindCapacity] wrapping
// [store.ErrTooManyKeys] (so it also matches [store.ErrStoreUnavailable]):
// the caller applies its failure mode. A refusal is never turned into an
// error: when the writes of a refused request (a counted refusal, a new
// block) need new states that do not fit, they are skipped whole and the
// request is refused without them, which fails closed. Keys whose states
// exist keep working at the cap.
//
// The memory store never waits, so ctx is not consulted.
func (s *Store) Take(_ context.Context, req store.Request) (store.Decision, error) {
	return s.decide(req, true)
}

// Peek implements [store.Store]: it returns the decision Take would return
// now and changes no state (it does not even drop expired state). It
// reports an existing block or a remembered de-duplication id; where Take
// would start a block, Peek reports the limits' refusal without Blocked,
// since no block exists yet. Errors are those of Take for invalid
// requests; Peek never fails otherwise.
func (s *Store) Peek(_ context.Context, req store.Request) (store.Decision, error) {
	return s.decide(req, false)
}

// Reset implements [store.Store]: it forgets req.Key's state under
// req.Limits (for [store.SlidingWindowLog], the log of exactly that limit
// set) and the key's block, strike count and remembered de-duplication
// ids, which all limits of the key share. State of the key under other
// limits is kept. req.Cost is ignored; other fields are validated as for
// Take.
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
	sh.remove(stateKey{req.Key, keyStateID})
	if req.Limits[0].Algorithm == store.SlidingWindowLog {
		sh.remove(stateKey{req.Key, s.logID(ids[:len(req.Limits)])})
		return nil
	}
	for _, id := range ids[:len(req.Limits)] {
		sh.remove(stateKey{req.Key, id})
	}
	return nil
}

// Len returns the number of states currently stored, expired ones not yet
// dropped included, counted as for [Options.MaxKeys]. It locks each shard
// in turn, so it is meant for tests and occasional monitoring, not the
// request path.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.size()
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

// op is one decision in progress, under its shard's lock.
type op struct {
	sh   *shard
	req  store.Request
	n    int                     // limits
	ids  [store.MaxLimits]string // limit IDs, in request order
	now  int64
	cost int64

	// Limit states: one per limit, or keys[0] for the sliding window log.
	log     bool
	nkeys   int
	keys    [store.MaxLimits]stateKey
	exp     [store.MaxLimits]int64 // expiry of the stored state, when present
	present [store.MaxLimits]bool
	next    [store.MaxLimits]entry // per-limit state with the request recorded
	lg      *runLog                // the live log, or nil
	stale   *runLog                // an expired log whose memory may be reused
	out     [store.MaxLimits]outcome
	allowed bool // every limit admits the request

	// The key's block, strikes and de-duplication ids.
	kk      stateKey
	ks      *keyState // live, or nil
	kfound  entry
	kstored bool // kk is in the map, live or expired
	dedup   dedupKey
	created bool // the op stored an entry that was not in the map
}

// verdict is what the key's block and de-duplication state make of a
// request.
type verdict struct {
	blocked, started, duplicate bool
}

func (s *Store) decide(req store.Request, take bool) (store.Decision, error) {
	if err := req.Validate(); err != nil {
		return store.Decision{}, err
	}
	o := op{req: req, n: len(req.Limits), cost: req.EffectiveCost()}
	for i, l := range req.Limits {
		o.ids[i] = s.limitID(l)
	}
	now := s.now()
	sh := s.shardFor(req.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if now < sh.last {
		now = sh.last
	}
	sh.last = now
	o.sh, o.now = sh, now
	s.load(&o)
	var v verdict
	v.blocked = o.ks.blocked(now)
	if !v.blocked && req.DedupID != "" {
		o.dedup = dedupKeyOf(req.DedupID)
		v.duplicate = o.ks.remembers(o.dedup, now)
	}
	if take {
		if err := o.write(&v); err != nil {
			return store.Decision{}, err
		}
	}
	return o.decision(v), nil
}

// load reads the request's states and evaluates every limit.
func (s *Store) load(o *op) {
	sh, req, now := o.sh, o.req, o.now
	o.kk = stateKey{req.Key, keyStateID}
	if sh.kss > 0 {
		o.kfound, o.kstored = sh.m[o.kk]
		if o.kstored && o.kfound.exp > now {
			o.ks = o.kfound.ks
		}
	}
	if req.Limits[0].Algorithm == store.SlidingWindowLog {
		o.log, o.nkeys = true, 1
		o.keys[0] = stateKey{req.Key, s.logID(o.ids[:o.n])}
		e, ok := sh.m[o.keys[0]]
		o.exp[0], o.present[0] = e.exp, ok
		if ok && e.exp > now {
			o.lg = e.log
		} else if ok {
			o.stale = e.log
		}
		o.allowed = evaluateLog(req.Limits, o.lg, now, o.cost, o.out[:o.n])
		return
	}
	o.nkeys = len(req.Limits)
	o.allowed = true
	for i, l := range req.Limits {
		k := stateKey{req.Key, o.ids[i]}
		e, ok := sh.m[k]
		o.keys[i], o.exp[i], o.present[i] = k, e.exp, ok
		o.out[i], o.next[i] = evaluate(l, e, ok && e.exp > now, now, o.cost)
		o.allowed = o.allowed && o.out[i].allowed
	}
}

// write applies a Take: it records the request, remembers its
// de-duplication id or starts a block, as v and the limits' verdict say,
// and updates v.
func (o *op) write(v *verdict) error {
	o.dropExpired()
	req := o.req
	switch {
	case v.blocked:
		// Only a counted refusal writes; skipped when it does not fit.
		if req.CountDenied && o.fits(o.missing()) {
			o.record()
		}
	case v.duplicate:
	case o.allowed:
		need := o.missing()
		if req.DedupID != "" {
			if o.ks == nil {
				need++
			} else if _, ok := o.ks.ids[o.dedup]; ok {
				// Expired (a live one makes a duplicate): forget it, so
				// that remembering it again counts it once.
				delete(o.ks.ids, o.dedup)
				o.sh.ids--
			}
			need++
		}
		if !o.fits(need) {
			return &store.BackendError{Op: "take", Kind: store.KindCapacity, Err: store.ErrTooManyKeys}
		}
		o.record()
		if req.DedupID != "" {
			o.remember()
		}
	default:
		strikes := o.ks.strikeCount(o.now)
		best, ms := blockFor(req.Limits, o.out[:o.n], strikes)
		need := 0
		if req.CountDenied {
			need += o.missing()
		}
		if best >= 0 && o.ks == nil {
			need++
		}
		if !o.fits(need) {
			break
		}
		if req.CountDenied {
			o.record()
		}
		if best >= 0 {
			o.startBlock(best, ms, strikes)
			v.blocked, v.started = true, true
		}
	}
	if o.created {
		o.sh.sweepSome(o.now, sweepBatch)
	}
	return nil
}

// dropExpired removes the request's expired states from the map, so that
// every state of the request left in it is live: a sweep cannot remove
// one, and the count of states a write creates is exact.
func (o *op) dropExpired() {
	for i := 0; i < o.nkeys; i++ {
		if o.present[i] && o.exp[i] <= o.now {
			delete(o.sh.m, o.keys[i]) // limit state: no key state to count
			o.present[i] = false
		}
	}
	if o.kstored && o.ks == nil {
		o.sh.drop(o.kk, o.kfound)
		o.kstored = false
	}
}

// missing returns how many limit states recording the request creates.
func (o *op) missing() int {
	n := 0
	for i := 0; i < o.nkeys; i++ {
		if !o.present[i] {
			n++
		}
	}
	return n
}

// fits reports whether need new states fit in the shard.
func (o *op) fits(need int) bool {
	return need == 0 || o.sh.room(o.now, need)
}

// record adds the request to every limit: an admitted request, or a
// refused one whose attempt counts.
func (o *op) record() {
	if !o.log {
		for i := 0; i < o.nkeys; i++ {
			o.sh.put(o.keys[i], o.next[i])
			o.created = o.created || !o.present[i]
		}
		return
	}
	var most int64
	for _, l := range o.req.Limits {
		most = max(most, l.Rate)
	}
	longest := longestPeriod(o.req.Limits)
	lg := o.lg
	switch {
	case lg != nil:
	case o.stale != nil: // expired: reuse its memory
		lg = o.stale
		lg.clear()
	default:
		lg = &runLog{}
	}
	lg.prune(o.now - longest)
	lg.add(o.now, o.cost)
	if o.req.CountDenied {
		// Counted refusals can outgrow every window's capacity. A
		// decision never looks past the (capacity − cost + 1)-th newest
		// entry, so keeping the newest (largest rate + cost) changes none.
		lg.trim(most + o.cost)
	}
	o.sh.put(o.keys[0], entry{exp: lg.newest() + longest, log: lg})
	o.created = o.created || !o.present[0]
}

// keyState returns the key's state, creating it when the key has none.
func (o *op) keyState() *keyState {
	if o.ks == nil {
		o.ks = &keyState{}
		o.sh.kss++
		o.created = true
	}
	return o.ks
}

// storeKeyState writes the key's state back with its new expiry.
func (o *op) storeKeyState() {
	o.sh.put(o.kk, entry{exp: o.ks.expiry(), ks: o.ks})
	o.kstored = true
}

// remember stores the admitted request's de-duplication id for the
// longest period of its limits. The caller has removed any earlier entry
// of the id. Expired ids are pruned once the key holds twice as many as
// at the last pruning (plus 16): amortized O(1) per id.
func (o *op) remember() {
	ks := o.keyState()
	if ks.ids == nil {
		ks.ids = make(map[dedupKey]int64)
	}
	exp := o.now + longestPeriod(o.req.Limits)
	ks.ids[cloneID(o.dedup)] = exp
	o.sh.ids++
	ks.idsEnd = max(ks.idsEnd, exp)
	o.sh.minExp = min(o.sh.minExp, exp)
	if len(ks.ids) > 2*ks.idsLive+16 {
		ks.pruneIDs(o.sh, o.now)
	}
	o.storeKeyState()
}

// startBlock blocks the key for ms milliseconds on behalf of limit best
// and, when that limit escalates, counts the strike. strikes is the
// key's strike count before this block.
func (o *op) startBlock(best int, ms, strikes int64) {
	ks := o.keyState()
	l := o.req.Limits[best]
	nowMS := floorMS(o.now)
	ks.blockEnd = nowMS + ms
	ks.scope = o.ids[best]
	if l.BlockMax > l.Block {
		ks.strikes = strikes + 1
		ks.strikesEnd = nowMS + ms + l.BlockMax.Milliseconds()
	}
	o.storeKeyState()
}

// decision builds the answer. A blocked request reports the block: its
// remaining time in whole milliseconds as RetryAfter and ResetAfter, the
// limit that started it as Policy (Index -1 when that limit is not in the
// request). Otherwise the deciding limit is, for a refused request, the
// refusing limit with the longest retry time, for an admitted one (a
// duplicate included) the limit with the fewest units remaining; ties go
// to the earliest limit. Remaining, ResetAfter and PerLimit describe the
// limits after the request when it was admitted and recorded, and without
// it otherwise.
func (o *op) decision(v verdict) store.Decision {
	n := o.n
	out := o.out[:n]
	allowed := !v.blocked && (v.duplicate || o.allowed)
	after := allowed && !v.duplicate
	var dec store.Decision
	if v.blocked {
		left := micros((o.ks.blockEnd - floorMS(o.now)) * 1000)
		dec = store.Decision{
			Limit:        o.req.Limits[0].Capacity(),
			ResetAfter:   left,
			RetryAfter:   left,
			LimitID:      o.ks.scope,
			Index:        -1,
			Blocked:      true,
			BlockStarted: v.started,
		}
		for i, id := range o.ids[:n] {
			if id == o.ks.scope {
				dec.Limit, dec.Index = o.req.Limits[i].Capacity(), i
				break
			}
		}
	} else {
		d := -1
		for i := range out {
			switch {
			case allowed:
				if d < 0 || remaining(out[i], after) < remaining(out[d], after) {
					d = i
				}
			case !out[i].allowed:
				if d < 0 || out[i].retry > out[d].retry {
					d = i
				}
			}
		}
		dec = store.Decision{
			Allowed:    allowed,
			Limit:      o.req.Limits[d].Capacity(),
			Remaining:  remaining(out[d], after),
			ResetAfter: micros(resetAfter(out[d], after)),
			LimitID:    o.ids[d],
			Index:      d,
			Duplicate:  v.duplicate,
		}
		if !allowed {
			dec.RetryAfter = micros(out[d].retry)
		}
	}
	if n > 1 {
		dec.PerLimit = make([]store.LimitState, n)
		for i, oc := range out {
			dec.PerLimit[i] = store.LimitState{Remaining: remaining(oc, after), ResetAfter: micros(resetAfter(oc, after))}
		}
	}
	return dec
}

// remaining returns a limit's units left after the request (after) or
// without it.
func remaining(o outcome, after bool) int64 {
	if after {
		return o.rem1
	}
	return o.rem0
}

// resetAfter returns a limit's time to full capacity in µs, after the
// request (after) or without it.
func resetAfter(o outcome, after bool) int64 {
	if after {
		return o.reset1
	}
	return o.reset0
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

// size returns the number of states the shard holds: its entries and the
// de-duplication ids of its key states.
func (sh *shard) size() int { return len(sh.m) + sh.ids }

// put stores e under k and keeps the shard's bookkeeping. A key state
// entry must be counted in kss by its creator.
func (sh *shard) put(k stateKey, e entry) {
	sh.m[k] = e
	if e.exp < sh.minExp {
		sh.minExp = e.exp
	}
	if len(sh.m) > sh.peak {
		sh.peak = len(sh.m)
	}
}

// drop deletes the entry e stored under k and keeps the shard's counts.
func (sh *shard) drop(k stateKey, e entry) {
	delete(sh.m, k)
	if e.ks != nil {
		sh.kss--
		sh.ids -= len(e.ks.ids)
	}
}

// remove deletes the entry under k, if any.
func (sh *shard) remove(k stateKey) {
	if e, ok := sh.m[k]; ok {
		sh.drop(k, e)
	}
}

// sweepSome drops expired entries among up to n entries of the map, which
// Go iterates from a random position.
func (sh *shard) sweepSome(now int64, n int) {
	for k, e := range sh.m {
		if e.exp <= now {
			sh.drop(k, e)
		}
		if n--; n == 0 {
			return
		}
	}
}

// room reports whether need more states fit in the shard, sweeping every
// expired entry and de-duplication id first when some may exist. A full
// sweep recomputes minExp, so it runs again only once something has
// certainly expired or an entry whose expiry was the minimum has been
// rewritten.
func (sh *shard) room(now int64, need int) bool {
	if sh.size()+need <= sh.limit {
		return true
	}
	if now < sh.minExp {
		return false
	}
	minExp := int64(math.MaxInt64)
	for k, e := range sh.m {
		if e.exp <= now {
			sh.drop(k, e)
			continue
		}
		minExp = min(minExp, e.exp)
		if e.ks != nil && len(e.ks.ids) > 0 {
			minExp = min(minExp, e.ks.pruneIDs(sh, now))
		}
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
	return sh.size()+need <= sh.limit
}

// Name returns "memory", the backend name used in metrics labels.
func (s *Store) Name() string { return "memory" }

// Local reports true: the store answers from process memory, never blocks
// and ignores contexts, so callers need not bound its calls with a
// deadline (see [store.Local]).
func (s *Store) Local() bool { return true }

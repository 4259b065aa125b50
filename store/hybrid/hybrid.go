package hybrid

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// Defaults applied by New to zero fields of Options.
const (
	defaultSyncInterval = 10 * time.Millisecond
	defaultTimeout      = time.Second
	defaultCloseTimeout = 5 * time.Second
)

// maxProbeInterval caps the time between probes of a backend marked down.
const maxProbeInterval = time.Second

// shardCount is the number of independently locked maps keys are spread over.
const shardCount = 64

// maxCommitters bounds the background calls in flight at once.
const maxCommitters = 32

// Options configures a Store. The zero value selects every default; New
// never modifies the caller's value.
type Options struct {
	// SyncInterval is how often the syncer commits each key's pending units
	// and renews its lease. It sets the overshoot bound (see the package
	// documentation): shorter is more precise and costs more backend calls.
	// Zero means 10ms; it must otherwise be at least one millisecond.
	SyncInterval time.Duration
	// Timeout bounds each background call to the backend (commits and
	// probes). Calls made for a request use the request's context. Zero
	// means one second; negative is an error.
	Timeout time.Duration
	// CloseTimeout bounds the final commit made by [Store.Close]. Zero means
	// five seconds; negative is an error.
	CloseTimeout time.Duration
	// IdleTimeout is how long a key may go without requests before its
	// local state, when nothing is pending, is forgotten. Zero means the
	// larger of one second and 100 sync intervals; negative is an error.
	IdleTimeout time.Duration
	// Clock returns the current time, for the deny cache and idle keys. Nil
	// means time.Now. It must be safe for concurrent use; the store measures
	// time with [time.Time.Sub] from its first reading.
	Clock func() time.Time
}

// Stats counts what the store did since New. Every field only grows.
type Stats struct {
	// Refreshes counts synchronous backend calls made for requests whose
	// key had no lease left (including each key's first request).
	Refreshes uint64
	// Commits counts background commit calls that succeeded.
	Commits uint64
	// CommittedUnits counts the units those commits recorded.
	CommittedUnits uint64
	// Failures counts backend calls (requests, commits and probes) that
	// failed.
	Failures uint64
	// Unconfirmed counts units in failed calls whose outcome is unknown.
	// They count as applied and are never re-sent: the backend undercounts
	// by at most this many.
	Unconfirmed uint64
	// Overadmitted counts units admitted locally that the backend refused
	// when they were committed: the overshoot actually incurred. They are
	// committed later, as capacity frees.
	Overadmitted uint64
}

// Store is a [store.Store] that decides lean requests from local leases and
// commits them to a backend in the background (see the package
// documentation). Create it with [New] and stop it with Close. Besides
// Store, the value [New] returns implements [store.BlockLister],
// [store.EvictionCounter], [store.EvictionPolicyReporter],
// [store.Refunder] and [store.SlotStore] with the backend's (see
// "Capabilities" in the package documentation); reach them by type
// assertion.
//
// A Store is safe for concurrent use. No lock is held across a backend
// call: each key has its own mutex, held for the in-memory update only.
type Store interface {
	store.Store
	// Close stops the syncer, commits every key's pending units within
	// [Options.CloseTimeout], and returns once every goroutine the store
	// started has ended. It returns an error when units could not be
	// committed; later calls return the same result.
	Close() error
	// Stats returns the store's counters, without locking.
	Stats() Stats
}

// hybridStore is the [Store] that [New] returns; the zero value is not
// usable.
type hybridStore struct {
	backend      store.Store
	interval     time.Duration
	timeout      time.Duration
	closeTimeout time.Duration
	idle         time.Duration
	clock        func() time.Time
	base         time.Time
	seed         maphash.Seed
	shards       [shardCount]shard

	ctx      context.Context // cancelled by Close, after the final commit
	cancel   context.CancelFunc
	stop     chan struct{}
	done     chan struct{} // closed when the syncer has returned
	closed   atomic.Bool
	closeErr error
	closing  sync.Once

	// down is set while the backend is considered unavailable; probeAt
	// (store clock, ns) is when it may next be tried, backoff the wait
	// after that, lastKind the kind of the failure.
	downMu   sync.Mutex
	down     atomic.Bool
	probeAt  atomic.Int64
	backoff  time.Duration
	lastKind string

	refreshes, commits, committed, failures, unconfirmed, overadmitted atomic.Uint64
}

type shard struct {
	mu sync.RWMutex
	m  map[string][]*entry
}

// New returns a Store deciding lean requests locally on behalf of backend,
// and starts its syncer. It returns an error when backend is nil or an
// option is out of range.
func New(backend store.Store, opts Options) (Store, error) {
	if backend == nil {
		return nil, errors.New("hybrid: nil backend")
	}
	interval := opts.SyncInterval
	switch {
	case interval == 0:
		interval = defaultSyncInterval
	case interval < time.Millisecond:
		return nil, fmt.Errorf("hybrid: SyncInterval %s is below 1ms", interval)
	}
	timeout, err := orDefault("Timeout", opts.Timeout, defaultTimeout)
	if err != nil {
		return nil, err
	}
	closeTimeout, err := orDefault("CloseTimeout", opts.CloseTimeout, defaultCloseTimeout)
	if err != nil {
		return nil, err
	}
	idle, err := orDefault("IdleTimeout", opts.IdleTimeout, max(time.Second, 100*interval))
	if err != nil {
		return nil, err
	}
	clock := opts.Clock
	if clock == nil {
		clock = time.Now
	}
	s := &hybridStore{
		backend:      backend,
		interval:     interval,
		timeout:      timeout,
		closeTimeout: closeTimeout,
		idle:         idle,
		clock:        clock,
		base:         clock(),
		seed:         maphash.MakeSeed(),
		stop:         make(chan struct{}),
		done:         make(chan struct{}),
		backoff:      interval,
	}
	for i := range s.shards {
		s.shards[i].m = make(map[string][]*entry)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	go s.syncLoop()
	return s, nil
}

func orDefault(name string, v, def time.Duration) (time.Duration, error) {
	switch {
	case v == 0:
		return def, nil
	case v < 0:
		return 0, fmt.Errorf("hybrid: negative %s %s", name, v)
	}
	return v, nil
}

// Stats returns the store's counters. It is safe for concurrent use and
// does not lock.
func (s *hybridStore) Stats() Stats {
	return Stats{
		Refreshes:      s.refreshes.Load(),
		Commits:        s.commits.Load(),
		CommittedUnits: s.committed.Load(),
		Failures:       s.failures.Load(),
		Unconfirmed:    s.unconfirmed.Load(),
		Overadmitted:   s.overadmitted.Load(),
	}
}

// Name returns "hybrid", the backend name used in metrics labels.
func (s *hybridStore) Name() string { return "hybrid" }

// now returns the store clock in nanoseconds since New.
func (s *hybridStore) now() int64 { return int64(s.clock().Sub(s.base)) }

// lean reports whether req may be decided locally.
func lean(req *store.Request) bool {
	return contract.Plain(req) && !req.ApplyOverride && req.Cost >= 0
}

// Take implements [store.Store]. A lean request (see the package
// documentation) is admitted from its key's lease without I/O when the lease
// covers its cost, refused from memory while a refusal of its cost
// is cached, and otherwise decided by one backend Take that also commits the
// key's pending units and renews the lease. Other requests, and every
// request after Close, are passed to the backend unchanged.
//
// Errors are the backend's: invalid requests, and backend failures for a
// key whose known remaining is spent while the backend fails (see "Outages"
// in the package documentation).
func (s *hybridStore) Take(ctx context.Context, req store.Request) (store.Decision, error) {
	if !lean(&req) || s.closed.Load() {
		return s.backend.Take(ctx, req)
	}
	lim := &req.Limits[0]
	cost := contract.Cost(&req)
	if e := s.lookup(req.Key, lim); e != nil {
		now := s.now()
		e.mu.Lock()
		if !e.dead && !s.closed.Load() {
			if d, ok := e.local(now, cost, true); ok {
				e.mu.Unlock()
				return d, nil
			}
		}
		e.mu.Unlock()
	}
	return s.refresh(ctx, req, cost)
}

// Peek implements [store.Store]. For a lean request whose key has a lease
// covering its cost, or a cached refusal, it answers from memory; otherwise
// it asks the backend and subtracts the key's pending units from the
// Remaining it reports. It writes nothing.
func (s *hybridStore) Peek(ctx context.Context, req store.Request) (store.Decision, error) {
	if !lean(&req) || s.closed.Load() {
		return s.backend.Peek(ctx, req)
	}
	lim := &req.Limits[0]
	cost := contract.Cost(&req)
	e := s.lookup(req.Key, lim)
	if e == nil {
		return s.backend.Peek(ctx, req)
	}
	now := s.now()
	e.mu.Lock()
	d, ok := e.local(now, cost, false)
	unknown := e.pending + e.debt + e.inflight
	e.mu.Unlock()
	if ok {
		return d, nil
	}
	d, err := s.backend.Peek(ctx, req)
	if err == nil {
		d.Remaining = max(0, d.Remaining-unknown)
	}
	return d, err
}

// Reset implements [store.Store]: it forgets the local state of req.Key
// under req.Limits (pending units included) and resets the backend. It
// returns the backend's [store.ErrNotFound] only when no local state
// existed either.
func (s *hybridStore) Reset(ctx context.Context, req store.Request) error {
	local := s.forget(req.Key, req.Limits)
	err := s.backend.Reset(ctx, req)
	if local && errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// Close stops the syncer, commits every key's pending units (waiting for
// commits in flight) within [Options.CloseTimeout], and returns once every
// goroutine the store started has ended. It returns an error when units
// could not be committed. Later calls return the same result. Requests
// made after Close go straight to the backend; pending units of requests
// decided while Close runs may be left uncommitted.
func (s *hybridStore) Close() error {
	s.closing.Do(func() {
		s.closed.Store(true)
		close(s.stop)
		ctx, cancel := context.WithTimeout(context.Background(), s.closeTimeout)
		defer cancel()
		select {
		case <-s.done:
		case <-ctx.Done():
			s.cancel() // abort the syncer's calls in flight
			<-s.done
		}
		s.closeErr = s.flush(ctx)
		s.cancel()
	})
	return s.closeErr
}

// lookup returns the local state of key under lim, or nil.
func (s *hybridStore) lookup(key string, lim *store.Limit) *entry {
	sh := &s.shards[maphash.String(s.seed, key)%shardCount]
	sh.mu.RLock()
	for _, e := range sh.m[key] {
		if e.lim == *lim {
			sh.mu.RUnlock()
			return e
		}
	}
	sh.mu.RUnlock()
	return nil
}

// obtain returns the local state of key under lim, creating it.
func (s *hybridStore) obtain(key string, lim *store.Limit) *entry {
	if e := s.lookup(key, lim); e != nil {
		return e
	}
	sh := &s.shards[maphash.String(s.seed, key)%shardCount]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, e := range sh.m[key] {
		if e.lim == *lim {
			return e
		}
	}
	e := newEntry(key, *lim, s.interval, s.now())
	sh.m[key] = append(sh.m[key], e)
	return e
}

// forget drops the local states of key under limits (matched by ID) and
// reports whether any held information.
func (s *hybridStore) forget(key string, limits []store.Limit) bool {
	sh := &s.shards[maphash.String(s.seed, key)%shardCount]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	found := false
	kept := sh.m[key][:0]
	for _, e := range sh.m[key] {
		drop := false
		for i := range limits {
			if limits[i].ID() == e.id {
				drop = true
				break
			}
		}
		if !drop {
			kept = append(kept, e)
			continue
		}
		e.mu.Lock()
		e.dead = true
		if e.pending > 0 || e.debt > 0 || e.known {
			found = true
		}
		e.pending, e.debt, e.lease, e.remaining = 0, 0, 0, 0
		e.mu.Unlock()
	}
	if len(kept) == 0 {
		delete(sh.m, key)
	} else {
		sh.m[key] = kept
	}
	return found
}

// refresh decides req with the backend for a key whose lease does not
// cover cost, committing its pending units in the same call.
func (s *hybridStore) refresh(ctx context.Context, req store.Request, cost int64) (store.Decision, error) {
	lim := &req.Limits[0]
	if err := req.Validate(); err != nil {
		return store.Decision{}, err
	}
	e := s.obtain(req.Key, lim)
	for {
		now := s.now()
		e.mu.Lock()
		if e.dead {
			e.mu.Unlock()
			e = s.obtain(req.Key, lim)
			continue
		}
		if s.closed.Load() {
			e.mu.Unlock()
			return s.backend.Take(ctx, req)
		}
		if d, ok := e.local(now, cost, true); ok {
			e.mu.Unlock()
			return d, nil
		}
		if e.syncing {
			wait := e.wait
			e.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return store.Decision{}, &store.BackendError{Op: "take", Kind: store.KindOf(ctx.Err()), Err: ctx.Err()}
			}
		}
		if s.isDown(now) {
			d, err := e.degrade(now, cost, 0, s.downError("take"))
			e.mu.Unlock()
			return d, err
		}
		send, owed := e.begin()
		e.mu.Unlock()

		s.refreshes.Add(1)
		x := s.exchange(ctx, req.Key, lim, send, cost)
		x.cost = cost
		if x.err != nil {
			s.failed(ctx, x.err, now)
		} else {
			s.recover()
		}
		done := s.now()
		e.mu.Lock()
		d, err := e.finish(s, now, done, owed, &x)
		e.mu.Unlock()
		return d, err
	}
}

// exchange is the outcome of backend calls for one key.
type exchange struct {
	d        store.Decision // the request's decision (or the last commit's)
	decided  bool           // d decides the request
	left     int64          // units of the commit not applied (refused or not sent)
	unknown  int64          // units whose outcome is unknown (counted as applied)
	costSent bool           // the request's cost was part of the failed call
	answered bool           // at least one backend call succeeded
	cost     int64          // the request's cost (0: a commit)
	err      error
}

// exchange commits send pending units and decides a request of cost (cost
// 0: commit only), in one backend Take when they fit in the capacity.
func (s *hybridStore) exchange(ctx context.Context, key string, lim *store.Limit, send, cost int64) exchange {
	capacity := lim.Capacity()
	if cost > 0 && send+cost <= capacity {
		d, err := s.take(ctx, key, lim, send+cost)
		if err != nil {
			if notSent(err) {
				return exchange{left: send, err: err}
			}
			return exchange{unknown: send + cost, costSent: true, err: err}
		}
		if d.Allowed || send == 0 {
			return exchange{d: d, decided: true, answered: true}
		}
		// Refused: the request's RetryAfter holds once the pending units
		// are committed, which is done next.
		x := s.commit(ctx, key, lim, send)
		d.Remaining = max(0, d.Remaining-(send-x.left-x.unknown))
		x.d, x.decided, x.answered = d, true, true
		return x
	}
	x := s.commit(ctx, key, lim, send)
	if x.err != nil || cost == 0 {
		return x
	}
	d, err := s.take(ctx, key, lim, cost)
	if err != nil {
		x.err = err
		if !notSent(err) {
			x.unknown += cost
			x.costSent = true
		}
		return x
	}
	x.d, x.decided, x.answered = d, true, true
	return x
}

// commit records units in the backend, in Takes of at most the capacity;
// a refused Take is retried with what the backend reports as remaining,
// and what does not fit is returned as left.
func (s *hybridStore) commit(ctx context.Context, key string, lim *store.Limit, units int64) exchange {
	var x exchange
	next := min(units, lim.Capacity())
	for refusals := 0; units > 0 && refusals < 3; {
		d, err := s.take(ctx, key, lim, next)
		if err != nil {
			x.err = err
			if notSent(err) {
				x.left = units
			} else {
				x.unknown, x.left = next, units-next
			}
			return x
		}
		x.d, x.answered = d, true
		if d.Allowed {
			s.committed.Add(uint64(next))
			units -= next
			next = min(units, lim.Capacity())
			continue
		}
		refusals++
		if d.Remaining <= 0 {
			break
		}
		next = min(d.Remaining, units)
	}
	x.left = units
	return x
}

// take sends one backend Take of cost units for key under lim.
func (s *hybridStore) take(ctx context.Context, key string, lim *store.Limit, cost int64) (store.Decision, error) {
	return s.backend.Take(ctx, store.Request{Key: key, Limits: []store.Limit{*lim}, Cost: cost})
}

// notSent reports whether err proves that the call never reached the
// backend: only a refused connection does.
func notSent(err error) bool {
	return errors.Is(err, errConnRefused)
}

// isDown reports whether the backend is marked down and may not be probed
// yet; when the probe time has come, the caller's call is the probe.
func (s *hybridStore) isDown(now int64) bool {
	if !s.down.Load() {
		return false
	}
	at := s.probeAt.Load()
	if now < at {
		return true
	}
	// One caller wins the probe; the others keep treating it as down.
	return !s.probeAt.CompareAndSwap(at, now+int64(s.interval))
}

// fail counts a failed backend call and marks the backend down.
func (s *hybridStore) fail(err error, now int64) {
	s.failures.Add(1)
	s.downMu.Lock()
	defer s.downMu.Unlock()
	s.lastKind = store.KindOf(err)
	if s.down.Load() {
		s.backoff = min(2*s.backoff, maxProbeInterval)
	} else {
		s.backoff = s.interval
	}
	s.probeAt.Store(now + int64(s.backoff))
	s.down.Store(true)
}

// failed counts a failed backend call and, unless it failed because ctx
// ended (a caller gone or out of time says nothing about the backend),
// marks the backend down.
func (s *hybridStore) failed(ctx context.Context, err error, now int64) {
	if ctx.Err() != nil {
		s.failures.Add(1)
		return
	}
	s.fail(err, now)
}

// recover marks the backend up after a successful call.
func (s *hybridStore) recover() {
	if s.down.Load() {
		s.downMu.Lock()
		s.down.Store(false)
		s.backoff = s.interval
		s.downMu.Unlock()
	}
}

// errBackendDown is the cause of errors returned without a backend call
// while the backend is marked down.
var errBackendDown = errors.New("hybrid: backend marked down after a failure")

func (s *hybridStore) downError(op string) error {
	s.downMu.Lock()
	kind := s.lastKind
	s.downMu.Unlock()
	return &store.BackendError{Op: op, Kind: kind, Err: errBackendDown}
}

package limiter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// InFlight configures an in-flight cap ([Options].InFlight): at most Max
// requests of one identity (in its tier) run at once, across every
// limiter of the policy's name on the store. Key the limiter by route
// (package keyfunc's route pattern) for a per-route cap.
//
// A request takes a slot with [Limiter.Acquire] before it runs and gives
// it back with the release function Acquire returns. Each slot is leased
// in the store ([store.SlotStore]): while a request runs, the limiter
// renews the leases of all the slots it holds in one batch every third of
// Lease (one goroutine per limiter, running only while it holds slots),
// so a slot whose holder died (a crashed instance) comes back by itself
// at most Lease after its last renewal, and a live request keeps its slot
// however long it runs, as long as its renewals reach the store: while
// the store fails they are logged (throttled), and a slot whose lease
// ran out meanwhile is not taken back, so the cap may admit more than
// Max until those requests end.
type InFlight struct {
	// Max is the most requests of one identity that hold a slot at once:
	// 1 to store.MaxSlots; 0 (the default) means no cap.
	Max int64
	// Lease is how long a slot counts without renewal: 1 second to 24
	// hours, default 30 seconds. A shorter lease frees a dead holder's
	// slots sooner and costs more renewals.
	Lease time.Duration
}

// Defaults and bounds of InFlight.
const (
	defaultLease = 30 * time.Second
	minLease     = time.Second
	maxLease     = 24 * time.Hour
	// minInFlightRetry is the least Retry-After of an in-flight refusal.
	minInFlightRetry = time.Second
)

// validate checks c, on store s; field names the option.
func (c *InFlight) validate(field string, s store.Store) error {
	switch {
	case c.Max == 0 && c.Lease == 0:
		return nil
	case c.Max < 1 || c.Max > store.MaxSlots:
		return fmt.Errorf("ratekeeper: limiter: %s.Max must be 1 to %d, got %d", field, int64(store.MaxSlots), c.Max)
	case c.Lease != 0 && (c.Lease < minLease || c.Lease > maxLease):
		return fmt.Errorf("ratekeeper: limiter: %s.Lease must be %s to %s, got %s", field, minLease, maxLease, c.Lease)
	}
	if _, ok := s.(store.SlotStore); !ok {
		return fmt.Errorf("ratekeeper: limiter: %s needs a store that keeps in-flight caps (store.SlotStore); %T does not", field, s)
	}
	return nil
}

// slots is the in-flight cap of a limiter, nil without one.
type slots struct {
	max      int64
	lease    time.Duration
	rateless bool   // the limiter has no rate limits, only the cap
	idBase   string // random per limiter: holder ids are idBase + sequence
	seq      atomic.Uint64
	avgHold  atomic.Int64 // moving average of the hold times, ns

	mu      sync.Mutex
	held    map[uint64]holding
	renewer bool // a renewal goroutine runs
}

// holding is one slot held, with the store that keeps it.
type holding struct {
	slot store.Slot
	ss   store.SlotStore
}

// newSlots returns the cap c configures, nil for none.
func newSlots(c InFlight, rateless bool) *slots {
	if c.Max == 0 {
		return nil
	}
	if c.Lease == 0 {
		c.Lease = defaultLease
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &slots{max: c.Max, lease: c.Lease, rateless: rateless, idBase: hex.EncodeToString(b[:]) + ":", held: map[uint64]holding{}}
}

func noRelease() {}

// Acquire takes a slot of the in-flight cap ([Options].InFlight) of
// req.Identity in req.Tier, before the request runs, and returns the
// function that gives it back, which the caller must call once the
// request is done (deferred, so that a panic releases it too; further
// calls do nothing). The release runs under ctx's values without its
// cancellation, within the store's own time budget, so a client that
// went away still gives its slot back; a release the store fails to
// apply is logged and the slot comes back when its lease ends.
//
// The Decision admits (Allowed) when a slot was taken, or when no slot is
// needed: a limiter without a cap (no Outcome), an exempt request, an
// unlimited or suspended tier (whose Decide answers). Otherwise its
// Outcome is [OutcomeInFlight] (refused: Capacity is the cap, Remaining
// 0 and RetryAfter an estimate of when a slot frees: the average time
// the limiter's slots were held lately, at least a second and at most the
// lease, since nobody knows when a request ends), or, in dry-run mode,
// [OutcomeDryRun] (admitted without a slot). A store failure is handled
// as [Limiter.Decide] handles it: through the breaker, the fallback store
// (when it keeps caps), then the failure mode, which admits without a slot
// or refuses ([OutcomeFailedClosed]). Refusals and failures are reported
// to the observer and the refusal hook; an admission is reported by the
// Decide that follows it, or here for a limiter without rate limits. An
// empty identity or IdentityErr returns an error and reports nothing
// (Decide reports the rejection).
func (l *Limiter) Acquire(ctx context.Context, req Request) (release func(), d Decision, err error) {
	d = Decision{Decision: store.Decision{Allowed: true}, Policy: l.name, Tier: req.Tier}
	switch {
	case req.Exempt:
		return noRelease, d, nil
	case req.IdentityErr != nil:
		return noRelease, Decision{Policy: l.name, Tier: req.Tier}, req.IdentityErr
	case req.Identity == "":
		return noRelease, Decision{Policy: l.name, Tier: req.Tier}, errEmptyKey
	case l.slots == nil:
		return noRelease, d, nil
	}
	t, err := l.tier(req.Tier)
	if err != nil {
		d.Allowed = false
		d, err = l.fail(ctx, &req, d, err, storeCall{})
		return noRelease, d, err
	}
	d.Policy = t.policy
	if t.unlimited && !l.slots.rateless || t.suspended {
		return noRelease, d, nil
	}
	sc := l.slots
	slot := store.Slot{Key: StoreKey(l.name, t.name, req.Identity), ID: sc.idBase + strconv.FormatUint(sc.seq.Add(1), 36)}
	now := l.now()
	ok, held, ss, call, err := l.acquireSlot(ctx, slot, now)
	if err != nil {
		d.Allowed = false
		d, err = l.fail(ctx, &req, d, err, call)
		return noRelease, d, err
	}
	d.Capacity, d.Remaining = sc.max, max(sc.max-held, 0)
	if !ok {
		d.Allowed = false
		d.Outcome = OutcomeInFlight
		if l.dryRun {
			d.Outcome = OutcomeDryRun
		}
		d.RetryAfter = sc.retryAfter()
		d.Reset = now.Add(d.RetryAfter)
		l.reportSlot(ctx, &req, &d, call)
		return noRelease, d, nil
	}
	if sc.rateless {
		d.Outcome = OutcomeAllowed
		l.reportSlot(ctx, &req, &d, call)
	}
	return l.holdSlot(ctx, slot, ss), d, nil
}

// reportSlot reports an Acquire's decision, with a warning when the
// fallback store took it.
func (l *Limiter) reportSlot(ctx context.Context, req *Request, d *Decision, call storeCall) {
	if call.fallback {
		l.warn(ctx, d.Policy, call.cause)
	}
	if l.watching(ctx) {
		l.report(ctx, &Event{Decision: *d, Latency: call.latency, Fallback: call.fallback, Err: call.cause, Skipped: call.skipped}, req.Identity)
	}
}

// acquireSlot takes slot through the breaker, then in the fallback store
// when the main store failed and the fallback keeps caps. It returns the
// store that answered.
func (l *Limiter) acquireSlot(ctx context.Context, slot store.Slot, now time.Time) (bool, int64, store.SlotStore, storeCall, error) {
	sc := l.slots
	var c storeCall
	main := l.store.(store.SlotStore)                    // checked by New
	node := l.nodeFor(ctx, store.Request{Key: slot.Key}) // a cap's slots share its key's hash tag
	b := l.breaker.of(node)
	allowed, probe := b.allow(now)
	var (
		ok   bool
		held int64
		err  error
	)
	if !allowed {
		c.skipped = true
		err = &storeFailure{err: errBreakerOpen, skipped: true}
	} else {
		start := time.Now()
		ok, held, err = main.Acquire(ctx, slot, sc.max, sc.lease)
		c.latency = time.Since(start)
		if errors.Is(err, errors.ErrUnsupported) {
			// A decorator whose backend keeps no caps (a hybrid store's):
			// a configuration mistake, not a failing store.
			err = releasing(b, probe, fmt.Errorf("%w: in-flight cap: %w", errMisconfigured, err))
		} else {
			err = l.settle(ctx, b, probe, node, err)
		}
	}
	if err == nil {
		return ok, held, main, c, nil
	}
	local, isSlots := l.local.(store.SlotStore)
	if !isSlots || !isStoreFailure(err) {
		return false, 0, nil, c, err
	}
	ok, held, lerr := local.Acquire(ctx, slot, sc.max, sc.lease)
	if lerr != nil {
		return false, 0, nil, c, err
	}
	c.fallback, c.cause = true, err
	return ok, held, local, c, nil
}

// holdSlot registers slot, held in ss, for renewal and returns its
// release.
func (l *Limiter) holdSlot(ctx context.Context, slot store.Slot, ss store.SlotStore) func() {
	sc := l.slots
	n := sc.seq.Add(1)
	sc.mu.Lock()
	sc.held[n] = holding{slot: slot, ss: ss}
	if !sc.renewer {
		sc.renewer = true
		go l.renewSlots()
	}
	sc.mu.Unlock()
	start := time.Now()
	var done atomic.Bool
	return func() {
		if done.Swap(true) {
			return
		}
		sc.mu.Lock()
		delete(sc.held, n)
		sc.mu.Unlock()
		sc.observeHold(time.Since(start))
		rctx := context.WithoutCancel(ctx)
		if err := ss.Release(rctx, slot); err != nil {
			l.warn(rctx, l.name, fmt.Errorf("in-flight slot not released (it frees when its lease ends): %w", err))
		}
	}
}

// renewSlots renews the leases of every slot the limiter holds, in one
// batch per store every third of the lease, until it holds none.
func (l *Limiter) renewSlots() {
	sc := l.slots
	tick := time.NewTicker(sc.lease / 3)
	defer tick.Stop()
	for range tick.C {
		batches := map[store.SlotStore][]store.Slot{}
		sc.mu.Lock()
		if len(sc.held) == 0 {
			sc.renewer = false
			sc.mu.Unlock()
			return
		}
		for _, h := range sc.held {
			batches[h.ss] = append(batches[h.ss], h.slot)
		}
		sc.mu.Unlock()
		for ss, batch := range batches {
			ctx, cancel := context.WithTimeout(context.Background(), sc.lease/3)
			if _, err := ss.Renew(ctx, batch, sc.lease); err != nil {
				l.warn(ctx, l.name, fmt.Errorf("in-flight leases not renewed: %w", err))
			}
			cancel()
		}
	}
}

// observeHold folds one hold time into the moving average (weight 1/8).
func (sc *slots) observeHold(d time.Duration) {
	for {
		old := sc.avgHold.Load()
		next := int64(d)
		if old != 0 {
			next = old + (int64(d)-old)/8
		}
		if sc.avgHold.CompareAndSwap(old, next) {
			return
		}
	}
}

// retryAfter is the Retry-After of a refusal: the average hold time, at
// least a second, at most the lease.
func (sc *slots) retryAfter() time.Duration {
	return min(max(time.Duration(sc.avgHold.Load()), minInFlightRetry), sc.lease)
}

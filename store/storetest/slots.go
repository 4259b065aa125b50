package storetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// slotStore returns the store as a [store.SlotStore], or skips.
func (e *env) slotStore() store.SlotStore {
	e.Helper()
	ss, ok := e.h.Store.(store.SlotStore)
	if !ok {
		e.Skip("in-flight caps: needs a store that implements store.SlotStore")
	}
	return ss
}

// acquire acquires s and fails on an error or an unexpected answer.
func (e *env) acquire(what string, s store.Slot, max int64, lease time.Duration, want bool, wantHeld int64) {
	e.Helper()
	got, held, err := e.slotStore().Acquire(e.ctx, s, max, lease)
	if err != nil {
		e.Fatalf("%s: Acquire(%q, %q, %d, %s): got error %v, want nil", what, s.Key, s.ID, max, lease, err)
	}
	if got != want || held != wantHeld {
		e.Errorf("%s: Acquire(%q, %q, %d): got acquired %t with %d held, want %t with %d", what, s.Key, s.ID, max, got, held, want, wantHeld)
	}
}

// release releases s and fails on an error.
func (e *env) release(s store.Slot) {
	e.Helper()
	if err := e.slotStore().Release(e.ctx, s); err != nil {
		e.Fatalf("Release(%q, %q): got error %v, want nil", s.Key, s.ID, err)
	}
}

// renew renews slots and checks how many were.
func (e *env) renew(what string, slots []store.Slot, lease time.Duration, want int) {
	e.Helper()
	n, err := e.slotStore().Renew(e.ctx, slots, lease)
	if err != nil {
		e.Fatalf("%s: Renew: got error %v, want nil", what, err)
	}
	if n != want {
		e.Errorf("%s: Renew: got %d renewed, want %d", what, n, want)
	}
}

// slotLease is the lease of the slot subtests: long on an exact clock,
// short on real time, which sleeps through it, yet long enough that a
// stalled machine seldom outlasts the margins the subtests leave (a
// quarter of it in testSlotsRenew).
func (e *env) slotLease() time.Duration { return pick(e, time.Minute, 900*time.Millisecond) }

// testSlotsCap: of a cap of 3, three holders get a slot (held 1, 2, 3), a
// fourth is refused with 3 held, a holder acquiring again keeps its slot
// with a fresh lease, and another key is not affected.
func testSlotsCap(e *env) {
	e.slotStore()
	k, lease := e.key(), e.slotLease()
	for i := int64(1); i <= 3; i++ {
		e.acquire(fmt.Sprintf("holder %d", i), store.Slot{Key: k, ID: fmt.Sprint("h", i)}, 3, lease, true, i)
	}
	e.acquire("fourth holder", store.Slot{Key: k, ID: "h4"}, 3, lease, false, 3)
	e.acquire("holder 2 again", store.Slot{Key: k, ID: "h2"}, 3, lease, true, 3)
	e.acquire("a cut cap", store.Slot{Key: k, ID: "h5"}, 2, lease, false, 3)
	e.acquire("another key", store.Slot{Key: e.key(), ID: "h4"}, 1, lease, true, 1)
}

// testSlotsConcurrent: 40 holders acquiring a cap of 7 at once get
// exactly 7 slots; once those are released, 7 others do.
func testSlotsConcurrent(e *env) {
	ss := e.slotStore()
	k, lease := e.key(), e.slotLease()
	var (
		wg   sync.WaitGroup
		won  atomic.Int64
		mu   sync.Mutex
		held []store.Slot
	)
	round := func(tag string) {
		won.Store(0)
		for i := range 40 {
			wg.Go(func() {
				s := store.Slot{Key: k, ID: fmt.Sprintf("%s%d", tag, i)}
				ok, _, err := ss.Acquire(e.ctx, s, 7, lease)
				if err != nil {
					e.Errorf("Acquire: got error %v, want nil", err)
					return
				}
				if ok {
					won.Add(1)
					mu.Lock()
					held = append(held, s)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if got := won.Load(); got != 7 {
			e.Errorf("round %s: got %d slots taken, want 7", tag, got)
		}
	}
	round("a")
	for _, s := range held {
		e.release(s)
	}
	held = nil
	round("b")
}

// testSlotsRelease: a released slot is free for another holder at once;
// releasing it again, or a slot never held, does nothing; releasing the
// last slot leaves no key behind (with KeyTTLs).
func testSlotsRelease(e *env) {
	e.slotStore()
	k, lease := e.key(), e.slotLease()
	a, b, c := store.Slot{Key: k, ID: "a"}, store.Slot{Key: k, ID: "b"}, store.Slot{Key: k, ID: "c"}
	e.acquire("a", a, 2, lease, true, 1)
	e.acquire("b", b, 2, lease, true, 2)
	e.acquire("c while full", c, 2, lease, false, 2)
	e.release(a)
	e.acquire("c after a released", c, 2, lease, true, 2)
	e.release(a)
	e.release(store.Slot{Key: k, ID: "never"})
	e.acquire("a while full again", a, 2, lease, false, 2)
	e.release(b)
	e.release(c)
	e.acquire("a after all released", a, 1, lease, true, 1)
	e.release(a)
	if e.h.KeyTTLs != nil {
		if keys := e.keys(); len(keys) != 0 {
			e.Errorf("every slot released: got keys %v, want none", keys)
		}
	}
}

// testSlotsLease: a slot whose holder never releases it (a crashed
// instance) comes back when its lease ends, and not before: with an exact
// clock it is still held a microsecond before, and free at the end.
func testSlotsLease(e *env) {
	e.slotStore()
	k, lease := e.key(), e.slotLease()
	dead, live := store.Slot{Key: k, ID: "dead"}, store.Slot{Key: k, ID: "live"}
	e.acquire("dead holder", dead, 1, lease, true, 1)
	if e.h.Exact {
		e.advance(lease - time.Microsecond)
		e.acquire("a microsecond before the lease ends", live, 1, lease, false, 1)
		e.advance(time.Microsecond)
	} else {
		e.acquire("during the lease", live, 1, lease, false, 1)
		e.past(lease)
	}
	e.acquire("after the lease", live, 1, lease, true, 1)
	e.renew("the dead holder's ended lease", []store.Slot{dead}, lease, 0)
	e.acquire("the dead holder, after renewing nothing", dead, 1, lease, false, 1)
}

// testSlotsRenew: a holder that renews keeps its slot past its first
// lease; Renew counts what it renewed and skips slots not held.
func testSlotsRenew(e *env) {
	e.slotStore()
	k, lease := e.key(), e.slotLease()
	a, b := store.Slot{Key: k, ID: "a"}, store.Slot{Key: k, ID: "b"}
	other := store.Slot{Key: e.key(), ID: "a"}
	e.acquire("a", a, 1, lease, true, 1)
	e.acquire("a on another key", other, 1, lease, true, 1)
	e.advance(lease / 2)
	e.renew("half way", []store.Slot{a, other, b}, lease, 2)
	e.advance(lease * 3 / 4) // past the first lease, within the renewed one
	e.acquire("b after a renewed", b, 1, lease, false, 1)
	e.past(lease / 4)
	e.acquire("b once the renewed lease ended", b, 1, lease, true, 1)
}

// testSlotsInvalid: bad arguments are errors wrapping
// store.ErrInvalidRequest, and take nothing.
func testSlotsInvalid(e *env) {
	ss := e.slotStore()
	k := e.key()
	ok := store.Slot{Key: k, ID: "x"}
	cases := []struct {
		name  string
		slot  store.Slot
		max   int64
		lease time.Duration
	}{
		{"empty key", store.Slot{ID: "x"}, 1, time.Second},
		{"empty id", store.Slot{Key: k}, 1, time.Second},
		{"max 0", ok, 0, time.Second},
		{"negative max", ok, -1, time.Second},
		{"max above MaxSlots", ok, store.MaxSlots + 1, time.Second},
		{"lease 0", ok, 1, 0},
		{"negative lease", ok, 1, -time.Second},
		{"lease below 1ms", ok, 1, time.Microsecond},
		{"lease above 24h", ok, 1, 25 * time.Hour},
	}
	for _, c := range cases {
		if _, _, err := ss.Acquire(e.ctx, c.slot, c.max, c.lease); !errors.Is(err, store.ErrInvalidRequest) {
			e.Errorf("Acquire with %s: got error %v, want one wrapping ErrInvalidRequest", c.name, err)
		}
	}
	if err := ss.Release(e.ctx, store.Slot{Key: k}); !errors.Is(err, store.ErrInvalidRequest) {
		e.Errorf("Release with an empty id: got error %v, want one wrapping ErrInvalidRequest", err)
	}
	for _, c := range []struct {
		name  string
		slots []store.Slot
		lease time.Duration
	}{{"empty key", []store.Slot{ok, {ID: "x"}}, time.Second}, {"lease 0", []store.Slot{ok}, 0}, {"lease above 24h", []store.Slot{ok}, 25 * time.Hour}} {
		if _, err := ss.Renew(e.ctx, c.slots, c.lease); !errors.Is(err, store.ErrInvalidRequest) {
			e.Errorf("Renew with %s: got error %v, want one wrapping ErrInvalidRequest", c.name, err)
		}
	}
	e.acquire("after the invalid calls", store.Slot{Key: k, ID: "y"}, 1, time.Second, true, 1)
}

// testSlotsTTL: the slot set of a key lives no longer than its longest
// lease (needs KeyTTLs and real TTLs).
func testSlotsTTL(e *env) {
	e.slotStore()
	e.needKeyTTLs()
	if e.h.Exact {
		e.Skip("key TTLs: checked on real time, where keys keep the TTLs the store gives them")
	}
	k := e.key()
	e.acquire("short", store.Slot{Key: k, ID: "s"}, 2, 200*time.Millisecond, true, 1)
	e.acquire("long", store.Slot{Key: k, ID: "l"}, 2, 400*time.Millisecond, true, 2)
	keys := e.keys()
	if len(keys) != 1 {
		e.Fatalf("two slots of one key: got keys %v, want one", keys)
	}
	for name, ttl := range keys {
		if ttl <= 300*time.Millisecond || ttl > 400*time.Millisecond+ttlSlack {
			e.Errorf("key %s: got TTL %s, want the longest lease, 400ms", name, ttl)
		}
	}
}

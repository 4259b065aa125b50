package storetest

import (
	"sync"
	"time"
)

// defaultStart is where a zero FakeClock starts: a realistic epoch, so that
// stores compute with today's magnitudes (float64 microseconds have a
// resolution of 0.25µs there), and not aligned to any window.
var defaultStart = time.Date(2025, time.March, 14, 15, 9, 26, 535897000, time.UTC)

// FakeClock is a manually advanced clock for stores that accept an
// injected clock. Its zero value reads 2025-03-14T15:09:26.535897Z. It is
// safe for concurrent use.
type FakeClock struct {
	mu  sync.Mutex
	now time.Time
	set bool
}

// NewFakeClock returns a FakeClock reading start (the zero time selects
// the zero value's start).
func NewFakeClock(start time.Time) *FakeClock {
	c := &FakeClock{}
	if !start.IsZero() {
		c.now, c.set = start, true
	}
	return c
}

// Now returns the clock's current time. The result carries no monotonic
// reading, so differences between readings are exactly the advances made.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.set {
		c.now, c.set = defaultStart, true
	}
	return c.now
}

// Advance moves the clock forward by d. A negative d moves it back, which
// tests of clock steps may want.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.set {
		c.now, c.set = defaultStart, true
	}
	c.now = c.now.Add(d)
}

// FakeRand is a source of the random values a store draws for
// [store.Suppressed] requests, chosen by the test: give its Float64 method
// as the store's Rand option. Its zero value returns 0.5. It is safe for
// concurrent use.
type FakeRand struct {
	mu   sync.Mutex
	next func() float64
	u    float64
	set  bool
}

// Float64 returns the next value: the one given to Set, or the next of the
// function given to SetFunc.
func (r *FakeRand) Float64() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.next != nil:
		return r.next()
	case r.set:
		return r.u
	}
	return 0.5
}

// Set makes every following draw return u.
func (r *FakeRand) Set(u float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.u, r.set, r.next = u, true, nil
}

// SetFunc makes every following draw return f's next result; f is called
// under r's lock, one call at a time.
func (r *FakeRand) SetFunc(f func() float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next = f
}

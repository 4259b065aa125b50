// Package fakeclock is a manually advanced clock for the tests of this
// module's stores, which accept an injected clock. It is internal: a
// store's users give their own func() time.Time.
package fakeclock

import (
	"sync"
	"time"
)

// defaultStart is where a zero Clock starts: a realistic epoch, so that
// stores compute with today's magnitudes (float64 microseconds have a
// resolution of 0.25µs there), and not aligned to any window.
var defaultStart = time.Date(2025, time.March, 14, 15, 9, 26, 535897000, time.UTC)

// Clock is a manually advanced clock. Its zero value reads
// 2025-03-14T15:09:26.535897Z. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
	set bool
}

// New returns a Clock reading start (the zero time selects the zero
// value's start).
func New(start time.Time) *Clock {
	c := &Clock{}
	if !start.IsZero() {
		c.now, c.set = start, true
	}
	return c
}

// Now returns the clock's current time. The result carries no monotonic
// reading, so differences between readings are exactly the advances made.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.set {
		c.now, c.set = defaultStart, true
	}
	return c.now
}

// Advance moves the clock forward by d. A negative d moves it back, which
// tests of clock steps may want.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.set {
		c.now, c.set = defaultStart, true
	}
	c.now = c.now.Add(d)
}

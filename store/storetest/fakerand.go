package storetest

import "sync"

// FakeRand is a source of the random values a store draws for
// the suppressed strategy (package store/suppressed), chosen by the suite: give its Float64
// method as the store's Rand option and the FakeRand as [Harness.Rand].
// Its zero value returns 0.5 until the suite chooses. It is safe for
// concurrent use.
type FakeRand struct {
	mu   sync.Mutex
	next func() float64
	u    float64
	set  bool
}

// Float64 returns the next value: 0.5 for the zero value, else the one
// the suite chose for this draw.
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

// always makes every following draw return u.
func (r *FakeRand) always(u float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.u, r.set, r.next = u, true, nil
}

// drawFrom makes every following draw return f's next result; f is
// called under r's lock, one call at a time.
func (r *FakeRand) drawFrom(f func() float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next = f
}

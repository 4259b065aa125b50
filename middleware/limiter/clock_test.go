package limiter

import (
	"testing"
	"time"
)

// TestDefaultNow checks the default clock against the wall clock: never
// before a reading taken just before it nor after one taken just after
// it, never going back, and anchored again once anchorSpan has passed.
func TestDefaultNow(t *testing.T) {
	var last time.Time
	for range 1000 {
		before := time.Now()
		got := defaultNow()
		after := time.Now()
		if got.Before(before.Add(-time.Millisecond)) || got.After(after.Add(time.Millisecond)) {
			t.Fatalf("defaultNow %v outside [%v, %v]", got, before, after)
		}
		if got.Before(last) {
			t.Fatalf("defaultNow went back from %v to %v", last, got)
		}
		last = got
	}
	old := time.Now().Add(-2 * anchorSpan)
	anchor.Store(&old)
	got := defaultNow()
	if a := anchor.Load(); a == &old || got.Sub(*a) != 0 {
		t.Errorf("an anchor older than anchorSpan was kept: anchor %v, now %v", *a, got)
	}
	if d := time.Since(got); d < 0 || d > time.Second {
		t.Errorf("defaultNow after an old anchor: %v from the wall clock", d)
	}
}

package limiter

import (
	"sync/atomic"
	"time"
)

// anchorSpan is how long one reading of the wall clock anchors the
// default clock: a wall clock stepped (by NTP, or by hand) shows in the
// decisions' Reset times within that long.
const anchorSpan = time.Second

// anchor is the last reading of the wall clock the default clock counts
// from.
var anchor atomic.Pointer[time.Time]

// defaultNow is the limiter's clock without Options.Clock: the wall clock
// read at most once per anchorSpan, advanced by the monotonic clock in
// between, which is read at half the cost (a decision reads the time once
// for its Reset, and that read is a visible part of an in-process
// decision). Its times carry a monotonic reading, as time.Now's do.
func defaultNow() time.Time {
	if a := anchor.Load(); a != nil {
		if d := time.Since(*a); d >= 0 && d < anchorSpan {
			return a.Add(d)
		}
	}
	t := time.Now()
	anchor.Store(&t)
	return t
}

package contract

import (
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// Span returns the longest window of a validated limit: its Period, or
// for a calendar limit ([store.Limit.Calendar]) the longest its calendar
// unit lasts (a day of 25 hours, a week and an hour, 31 days and an hour).
// It stands for the period wherever the stores need one: the
// de-duplication bound, a key's longest lifetime.
func Span(l store.Limit) time.Duration {
	switch l.Calendar {
	case "":
		return l.Period
	case "day":
		return 25 * time.Hour
	case "week":
		return 7*24*time.Hour + time.Hour
	}
	return 31*24*time.Hour + time.Hour
}

// Window returns the calendar window of a validated calendar limit that
// holds the time t (µs since the Unix epoch): its start and end, in µs,
// the local midnights of l's Location (UTC when nil) that open the day,
// the week (Monday) or the month (the 1st) holding t and the next one.
func Window(l store.Limit, t int64) (start, end int64) {
	loc := l.Location
	if loc == nil {
		loc = time.UTC
	}
	local := time.UnixMicro(t).In(loc)
	y, m, d := local.Date()
	var s, e time.Time
	switch l.Calendar {
	case "day":
		s, e = midnight(y, m, d, loc), midnight(y, m, d+1, loc)
	case "week":
		d -= (int(local.Weekday()) + 6) % 7 // back to Monday
		s, e = midnight(y, m, d, loc), midnight(y, m, d+7, loc)
	default: // month
		s, e = midnight(y, m, 1, loc), midnight(y, m+1, 1, loc)
	}
	// The window holds t whatever the zone's rules.
	return min(s.UnixMicro(), t), max(e.UnixMicro(), t+1)
}

// midnight returns the first instant of the day y-m-d (normalized as
// time.Date does) in loc: its midnight, or, where the clocks skip
// midnight (daylight saving time starting at 00:00), the instant they
// jump to.
func midnight(y int, m time.Month, d int, loc *time.Location) time.Time {
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	wy, wm, wd := time.Date(y, m, d, 12, 0, 0, 0, loc).Date()
	if ty, tm, td := t.Date(); ty != wy || tm != wm || td != wd {
		// time.Date resolved the missing midnight to the evening
		// before: the day starts where that zone period ends.
		_, end := t.ZoneBounds()
		if !end.IsZero() {
			t = end
		}
	}
	return t
}

// Bounds returns the starts of four consecutive calendar windows of a
// validated calendar limit: the one before the window holding t, that
// window, and the two after it. The Redis store passes them to its
// script, which picks the window holding the server's time, so that a
// skew between the two clocks of up to a window is harmless.
func Bounds(l store.Limit, t int64) [4]int64 {
	s, e := Window(l, t)
	p, _ := Window(l, s-1)
	_, n := Window(l, e)
	return [4]int64{p, s, e, n}
}

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
		s, e = time.Date(y, m, d, 0, 0, 0, 0, loc), time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	case "week":
		d -= (int(local.Weekday()) + 6) % 7 // back to Monday
		s, e = time.Date(y, m, d, 0, 0, 0, 0, loc), time.Date(y, m, d+7, 0, 0, 0, 0, loc)
	default: // month
		s, e = time.Date(y, m, 1, 0, 0, 0, 0, loc), time.Date(y, m+1, 1, 0, 0, 0, 0, loc)
	}
	// Where a midnight does not exist (a daylight saving change at
	// midnight), time.Date gives the instant the day starts; the window
	// holds t all the same.
	return min(s.UnixMicro(), t), max(e.UnixMicro(), t+1)
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

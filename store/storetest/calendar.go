package storetest

import (
	"fmt"
	"strings"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// calendarLimit returns a fixed-window limit of rate per calendar window
// in loc.
func calendarLimit(rate int64, calendar string, loc *time.Location) store.Limit {
	return store.Limit{Algorithm: store.FixedWindow, Rate: rate, Calendar: calendar, Location: loc}
}

// withinSince reports whether got is want modulo m, give or take the
// slack of real time (exactly with an exact clock), for a got that counts
// down in the store's time from a moment at or after start: with real
// time it may also be short of want by the time passed since start.
func (e *env) withinSince(got, want, m time.Duration, start time.Time) bool {
	d := ((got-want)%m + m) % m
	if e.h.Exact {
		return d == 0
	}
	return d <= slack || d >= m-slack-time.Since(start)
}

// testCalendar: a calendar limit counts like a fixed window that ends at
// the calendar's boundary: of 3 a day, a fresh key admits 3 (Remaining 2,
// 1, 0) and refuses the next with RetryAfter equal to ResetAfter, the
// time to the next UTC midnight (at most a day, and the same as a
// one-day fixed window's, which is aligned at UTC midnights). With an
// exact clock, a microsecond before it the key is still refused, and at
// it the key is fresh. With KeyTTLs, the state lives until the boundary.
func testCalendar(e *env) {
	day := calendarLimit(3, "day", nil)
	k := e.key()
	for i := int64(2); i >= 0; i-- {
		e.check("fresh key, 3 a day", e.take(req(k, 1, day)), expect{allowed: true, remaining: i, resetAfter: -1})
	}
	d := e.deny(req(k, 1, day))
	if d.RetryAfter != d.ResetAfter || d.RetryAfter > 24*time.Hour || d.LimitID != "fixed_window/day" {
		e.Errorf("3 used of 3 a day: got %s, want RetryAfter = ResetAfter <= 24h and LimitID fixed_window/day", show(d))
	}
	aligned := e.take(req(e.key(), 1, limit(store.FixedWindow, 3, 24*time.Hour)))
	e.near("the day's end against a one-day fixed window's", d.RetryAfter, aligned.ResetAfter)
	if e.h.KeyTTLs != nil {
		for name, ttl := range e.storedKeys().State {
			if ttl <= 0 || ttl > d.ResetAfter+slack {
				e.Errorf("state key %s: got TTL %s, want > 0 and <= %s (the day's end)", name, ttl, d.ResetAfter)
			}
		}
	}
	if !e.h.Exact {
		return
	}
	e.advance(d.RetryAfter - time.Microsecond)
	e.deny(req(k, 1, day))
	e.advance(time.Microsecond)
	e.check("the next day", e.take(req(k, 1, day)), expect{allowed: true, remaining: 2, resetAfter: 24 * time.Hour})
}

// testCalendarZones: the windows follow the limit's time zone and unit.
// After one unit each, a day in Kolkata (UTC+5:30) ends 5h30m before a
// day in UTC, modulo a day; a day in Kathmandu (UTC+5:45) 5h45m; a week
// and a month in UTC end on a UTC midnight (modulo a day the same as the
// day's end), a week at most 7 days and a month at most 31 days away.
func testCalendarZones(e *env) {
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		e.Skipf("time zone database: %v", err)
	}
	kathmandu, err := time.LoadLocation("Asia/Kathmandu")
	if err != nil {
		e.Skipf("time zone database: %v", err)
	}
	reset := func(l store.Limit) time.Duration {
		return e.allow(req(e.key(), 1, l)).ResetAfter
	}
	const dayLen = 24 * time.Hour
	start := time.Now()
	utc := reset(calendarLimit(5, "day", nil))
	for _, tc := range []struct {
		name   string
		l      store.Limit
		offset time.Duration
		most   time.Duration
	}{
		{"day in Kolkata", calendarLimit(5, "day", kolkata), -(5*time.Hour + 30*time.Minute), dayLen},
		{"day in Kathmandu", calendarLimit(5, "day", kathmandu), -(5*time.Hour + 45*time.Minute), dayLen},
		{"week in UTC", calendarLimit(5, "week", nil), 0, 7 * dayLen},
		{"month in UTC", calendarLimit(5, "month", nil), 0, 31 * dayLen},
	} {
		got := reset(tc.l)
		if !e.withinSince(got, utc+tc.offset, dayLen, start) || got <= 0 || got > tc.most+slack {
			e.Errorf("%s: got ResetAfter %s, want %s modulo a day (UTC day: %s), at most %s", tc.name, got, utc+tc.offset, utc, tc.most)
		}
	}
}

// testCalendarMixed: one request may hold a calendar limit beside limits
// of aligned windows: of 5/h and 3 a day, 3 units are admitted and the
// next is refused by the day, which decides. With overrides, a scale of 2
// makes 3 a day 6.
func testCalendarMixed(e *env) {
	e.windowRoom(store.FixedWindow, 10*time.Second, time.Hour)
	limits := []store.Limit{limit(store.FixedWindow, 5, time.Hour), calendarLimit(3, "day", nil)}
	k := e.key()
	for i := 0; i < 3; i++ {
		e.allow(req(k, 1, limits...))
	}
	d := e.deny(req(k, 1, limits...))
	if d.LimitID != "fixed_window/day" || len(d.PerLimit) != 2 || d.PerLimit[0].Remaining != 2 {
		e.Errorf("3 used of 5/h and 3 a day: got %s, want a refusal by fixed_window/day with 2 left of the hour", show(d))
	}
	// An override scales a calendar limit as any other.
	if _, ok := e.h.Store.(store.OverrideStore); !ok {
		return
	}
	vip := e.key()
	e.setOverride(vip, store.Override{Kind: store.OverrideScale, Scale: 2, TTL: time.Hour})
	r := req(vip, 1, calendarLimit(3, "day", nil))
	r.ApplyOverride = true
	for i := 1; i <= 7; i++ {
		d := e.overridden(fmt.Sprintf("3 a day scaled by 2, request %d", i), r, false, store.OverrideScale, 2, 0)
		if d.Allowed != (i <= 6) {
			e.Errorf("3 a day scaled by 2, request %d: got %s, want admitted for the first 6", i, show(d))
		}
	}
}

// testCalendarInvalid: calendar limits are checked, each error naming the
// field: an unknown Calendar, a Calendar with another algorithm than the
// fixed window or with a Period, a Location without a Calendar
// (ErrInvalidLimit); a Partial request with a calendar limit, and a stack
// with one (ErrInvalidRequest).
func testCalendarInvalid(e *env) {
	day := calendarLimit(3, "day", nil)
	for _, tc := range []struct {
		name  string
		l     store.Limit
		field string
	}{
		{"unknown calendar", calendarLimit(3, "year", nil), "Calendar"},
		{"calendar of GCRA", store.Limit{Rate: 3, Calendar: "day"}, "Calendar"},
		{"calendar with a period", store.Limit{Algorithm: store.FixedWindow, Rate: 3, Period: time.Hour, Calendar: "day"}, "Period"},
		{"location without calendar", store.Limit{Algorithm: store.FixedWindow, Rate: 3, Period: time.Hour, Location: time.UTC}, "Location"},
	} {
		_, err := e.h.Store.Take(e.ctx, req(e.key(), 1, tc.l))
		if !isErr(err, store.ErrInvalidLimit) || !strings.Contains(err.Error(), tc.field) {
			e.Errorf("%s: got error %v, want ErrInvalidLimit naming %s", tc.name, err, tc.field)
		}
	}
	if _, err := e.h.Store.Take(e.ctx, partial(e.key(), 2, day)); !isErr(err, store.ErrInvalidRequest) {
		e.Errorf("Partial with a calendar limit: got error %v, want ErrInvalidRequest", err)
	}
	if ms, ok := e.h.Store.(store.MultiStore); ok {
		if _, err := ms.TakeMulti(e.ctx, []store.Request{req(e.key(), 1, day)}); !isErr(err, store.ErrInvalidRequest) {
			e.Errorf("stack with a calendar limit: got error %v, want ErrInvalidRequest", err)
		}
	}
	e.allow(req(e.key(), 1, day)) // the valid limit is admitted: the checks above are not vacuous
}

// testCalendarMonths (exact clock): consecutive months in UTC last whole
// days, 28 to 31 of them, and not all the same (three in a row never do);
// weeks last 7 days. Each window is measured from its first unit's
// ResetAfter, taken at the previous window's end.
func testCalendarMonths(e *env) {
	e.needExact()
	for _, tc := range []struct {
		calendar string
		lo, hi   time.Duration
	}{
		{"month", 28 * 24 * time.Hour, 31 * 24 * time.Hour},
		{"week", 7 * 24 * time.Hour, 7 * 24 * time.Hour},
	} {
		l := calendarLimit(1, tc.calendar, nil)
		k := e.key()
		e.advance(e.allow(req(k, 1, l)).ResetAfter) // to the start of a window
		var lengths []time.Duration
		for i := 0; i < 3; i++ {
			d := e.allow(req(k, 1, l))
			lengths = append(lengths, d.ResetAfter)
			if d.ResetAfter < tc.lo || d.ResetAfter > tc.hi || d.ResetAfter%(24*time.Hour) != 0 {
				e.Errorf("%s %d: got ResetAfter %s at its start, want whole days from %s to %s", tc.calendar, i+1, d.ResetAfter, tc.lo, tc.hi)
			}
			e.deny(req(k, 1, l))
			e.advance(d.ResetAfter)
		}
		if tc.calendar == "month" && lengths[0] == lengths[1] && lengths[1] == lengths[2] {
			e.Errorf("three months in a row: got %v, want lengths that differ", lengths)
		}
	}
}

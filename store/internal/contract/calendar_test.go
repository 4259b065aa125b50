package contract

import (
	"testing"
	"time"
	_ "time/tzdata" // the zones below, wherever the tests run

	"github.com/ratekeeper/ratekeeper/store"
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("LoadLocation(%q): %v", name, err)
	}
	return loc
}

// TestWindow pins calendar windows to real boundaries: local midnights
// across daylight saving changes (a 23-hour and a 25-hour day in New York
// and Berlin, a week with an extra hour), months of 28, 29, 30 and 31
// days, and instants on a boundary.
func TestWindow(t *testing.T) {
	ny, berlin := zone(t, "America/New_York"), zone(t, "Europe/Berlin")
	utc := func(y int, m time.Month, d, h int) time.Time { return time.Date(y, m, d, h, 0, 0, 0, time.UTC) }
	for _, tc := range []struct {
		name       string
		calendar   string
		loc        *time.Location
		at         time.Time
		start, end time.Time
		length     time.Duration
	}{
		{"UTC day", "day", nil, time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC), utc(2025, 3, 14, 0), utc(2025, 3, 15, 0), 24 * time.Hour},
		{"New York, spring forward", "day", ny, time.Date(2025, 3, 9, 12, 0, 0, 0, ny), utc(2025, 3, 9, 5), utc(2025, 3, 10, 4), 23 * time.Hour},
		{"New York, fall back", "day", ny, time.Date(2025, 11, 2, 1, 30, 0, 0, ny), utc(2025, 11, 2, 4), utc(2025, 11, 3, 5), 25 * time.Hour},
		{"New York, the day before spring forward", "day", ny, time.Date(2025, 3, 8, 23, 59, 0, 0, ny), utc(2025, 3, 8, 5), utc(2025, 3, 9, 5), 24 * time.Hour},
		{"Berlin, spring forward", "day", berlin, time.Date(2025, 3, 30, 3, 30, 0, 0, berlin), utc(2025, 3, 29, 23), utc(2025, 3, 30, 22), 23 * time.Hour},
		{"Berlin, fall back", "day", berlin, time.Date(2025, 10, 26, 23, 0, 0, 0, berlin), utc(2025, 10, 25, 22), utc(2025, 10, 26, 23), 25 * time.Hour},
		{"Berlin, a week with the fall back", "week", berlin, time.Date(2025, 10, 26, 12, 0, 0, 0, berlin), utc(2025, 10, 19, 22), utc(2025, 10, 26, 23), 7*24*time.Hour + time.Hour},
		{"UTC week from a Monday midnight", "week", nil, utc(2025, 3, 10, 0), utc(2025, 3, 10, 0), utc(2025, 3, 17, 0), 7 * 24 * time.Hour},
		{"UTC week, Sunday's last microsecond", "week", nil, utc(2025, 3, 17, 0).Add(-time.Microsecond), utc(2025, 3, 10, 0), utc(2025, 3, 17, 0), 7 * 24 * time.Hour},
		{"January", "month", nil, utc(2025, 1, 31, 23), utc(2025, 1, 1, 0), utc(2025, 2, 1, 0), 31 * 24 * time.Hour},
		{"February", "month", nil, utc(2025, 2, 1, 0), utc(2025, 2, 1, 0), utc(2025, 3, 1, 0), 28 * 24 * time.Hour},
		{"February of a leap year", "month", nil, utc(2024, 2, 29, 12), utc(2024, 2, 1, 0), utc(2024, 3, 1, 0), 29 * 24 * time.Hour},
		{"April", "month", nil, utc(2025, 4, 15, 0), utc(2025, 4, 1, 0), utc(2025, 5, 1, 0), 30 * 24 * time.Hour},
		{"March in Berlin", "month", berlin, time.Date(2025, 3, 31, 23, 59, 0, 0, berlin), utc(2025, 2, 28, 23), utc(2025, 3, 31, 22), 31*24*time.Hour - time.Hour},
		{"December into January", "month", ny, time.Date(2025, 12, 31, 23, 0, 0, 0, ny), utc(2025, 12, 1, 5), utc(2026, 1, 1, 5), 31 * 24 * time.Hour},
	} {
		l := store.Limit{Algorithm: store.FixedWindow, Rate: 1, Calendar: tc.calendar, Location: tc.loc}
		if err := l.Validate(); err != nil {
			t.Fatalf("%s: Validate: %v", tc.name, err)
		}
		s, e := Window(l, tc.at.UnixMicro())
		if s != tc.start.UnixMicro() || e != tc.end.UnixMicro() {
			t.Errorf("%s: got [%s, %s), want [%s, %s)", tc.name, time.UnixMicro(s).UTC(), time.UnixMicro(e).UTC(), tc.start, tc.end)
		}
		if got := time.Duration(e-s) * time.Microsecond; got != tc.length {
			t.Errorf("%s: got a window of %s, want %s", tc.name, got, tc.length)
		}
		if got := time.Duration(e-s) * time.Microsecond; got > Span(l) {
			t.Errorf("%s: window of %s, longer than the span %s", tc.name, got, Span(l))
		}
		b := Bounds(l, tc.at.UnixMicro())
		if b[1] != s || b[2] != e || b[0] >= b[1] || b[3] <= b[2] {
			t.Errorf("%s: Bounds got %v, want the windows around [%d, %d)", tc.name, b, s, e)
		}
		if ps, pe := Window(l, b[0]); ps != b[0] || pe != s {
			t.Errorf("%s: the window before: got [%d, %d), want [%d, %d)", tc.name, ps, pe, b[0], s)
		}
		if ns, ne := Window(l, e); ns != e || ne != b[3] {
			t.Errorf("%s: the window after: got [%d, %d), want [%d, %d)", tc.name, ns, ne, e, b[3])
		}
	}
}

// TestWindowMissingMidnight: in a zone whose daylight saving time began
// at midnight (São Paulo, 4 November 2018), the day starts when the clock
// jumps to 01:00, and the window still holds every instant of the day.
func TestWindowMissingMidnight(t *testing.T) {
	sp := zone(t, "America/Sao_Paulo")
	l := store.Limit{Algorithm: store.FixedWindow, Rate: 1, Calendar: "day", Location: sp}
	for _, at := range []time.Time{
		time.Date(2018, 11, 4, 1, 0, 0, 0, sp),
		time.Date(2018, 11, 4, 12, 0, 0, 0, sp),
		time.Date(2018, 11, 3, 23, 59, 59, 0, sp),
	} {
		s, e := Window(l, at.UnixMicro())
		if !(s <= at.UnixMicro() && at.UnixMicro() < e) {
			t.Errorf("%s: got [%s, %s), want a window holding it", at, time.UnixMicro(s).In(sp), time.UnixMicro(e).In(sp))
		}
	}
	s, e := Window(l, time.Date(2018, 11, 4, 12, 0, 0, 0, sp).UnixMicro())
	if got := time.Duration(e-s) * time.Microsecond; got != 23*time.Hour {
		t.Errorf("4 November 2018 in São Paulo: got a day of %s, want 23h", got)
	}
}

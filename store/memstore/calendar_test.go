package memstore

import (
	"context"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, wherever the tests run

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/fakeclock"
)

// TestCalendarBoundaries: a refusal by a calendar limit waits for the
// real boundary: a 23-hour day in New York when daylight saving time
// starts, a 25-hour day in Berlin when it ends, a February of 29 days in
// a leap year and of 28 otherwise, and a week from Monday midnight.
func TestCalendarBoundaries(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		start    time.Time
		calendar string
		loc      *time.Location
		retry    time.Duration
	}{
		{"New York, spring forward", time.Date(2025, 3, 9, 0, 30, 0, 0, ny), "day", ny, 22*time.Hour + 30*time.Minute},
		{"Berlin, fall back", time.Date(2025, 10, 26, 0, 0, 0, 0, berlin), "day", berlin, 25 * time.Hour},
		{"February of a leap year", time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC), "month", nil, 29 * 24 * time.Hour},
		{"February", time.Date(2025, 2, 1, 0, 0, 0, 0, time.UTC), "month", nil, 28 * 24 * time.Hour},
		{"week from a Wednesday noon in Berlin", time.Date(2025, 3, 26, 12, 0, 0, 0, berlin), "week", berlin, 4*24*time.Hour + 12*time.Hour - time.Hour},
	} {
		clk := fakeclock.New(tc.start)
		s, err := New(Options{Clock: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		r := store.Request{Key: "k", Limits: []store.Limit{{Algorithm: store.FixedWindow, Rate: 2, Calendar: tc.calendar, Location: tc.loc}}}
		for i := 0; i < 2; i++ {
			if d, err := s.Take(context.Background(), r); err != nil || !d.Allowed {
				t.Fatalf("%s: take %d: got %+v, %v, want admitted", tc.name, i+1, d, err)
			}
		}
		d, err := s.Take(context.Background(), r)
		if err != nil || d.Allowed || d.RetryAfter != tc.retry || d.ResetAfter != tc.retry {
			t.Errorf("%s: got %+v, %v, want refused with RetryAfter and ResetAfter %s", tc.name, d, err, tc.retry)
		}
		clk.Advance(tc.retry)
		if d, err := s.Take(context.Background(), r); err != nil || !d.Allowed || d.Remaining != 1 {
			t.Errorf("%s: at the boundary: got %+v, %v, want admitted with 1 remaining", tc.name, d, err)
		}
	}
}

package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// TestCalendarBoundaries: on Redis, a refusal by a calendar limit waits
// for the real boundary (the scripts on a fake clock, the store computing
// the windows from the same clock): a 23-hour day in New York, a 25-hour
// day in Berlin, Februaries of 29 and 28 days. The state key expires at
// the boundary.
func TestCalendarBoundaries(t *testing.T) {
	requireServer(t)
	ny, berlin := mustZone(t, "America/New_York"), mustZone(t, "Europe/Berlin")
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
	} {
		s, clock := newClockedStore(t, tc.start.UnixMicro(), true)
		ctx := context.Background()
		r := store.Request{Key: "k", Limits: []store.Limit{{Algorithm: store.FixedWindow, Rate: 2, Calendar: tc.calendar, Location: tc.loc}}}
		for i := 0; i < 2; i++ {
			if d, err := s.Take(ctx, r); err != nil || !d.Allowed {
				t.Fatalf("%s: take %d: got %+v, %v, want admitted", tc.name, i+1, d, err)
			}
		}
		d, err := s.Take(ctx, r)
		if err != nil || d.Allowed || d.RetryAfter != tc.retry || d.ResetAfter != tc.retry {
			t.Errorf("%s: got %+v, %v, want refused with RetryAfter and ResetAfter %s", tc.name, d, err, tc.retry)
		}
		keys, err := s.StateKeys(r)
		if err != nil {
			t.Fatal(err)
		}
		// Real TTLs run on real time since the script set them.
		if ttl := s.client.PTTL(ctx, keys[0]).Val(); ttl > tc.retry || ttl < tc.retry-time.Second {
			t.Errorf("%s: state key TTL %s, want %s (the boundary) or a little less", tc.name, ttl, tc.retry)
		}
		clock.advance(tc.retry.Microseconds())
		if d, err := s.Take(ctx, r); err != nil || !d.Allowed || d.Remaining != 1 {
			t.Errorf("%s: at the boundary: got %+v, %v, want admitted with 1 remaining", tc.name, d, err)
		}
	}
}

// TestCalendarSkew: the store's clock may differ from the server's by up
// to a window: the script picks the window that holds the server's time
// among the four the store sends, and refuses with an error beyond them.
func TestCalendarSkew(t *testing.T) {
	requireServer(t)
	start := time.Date(2025, 3, 14, 23, 59, 59, 0, time.UTC)
	s, clock := newClockedStore(t, start.UnixMicro(), true)
	ctx := context.Background()
	r := store.Request{Key: "k", Limits: []store.Limit{{Algorithm: store.FixedWindow, Rate: 2, Calendar: "day"}}}
	// The store's clock is two seconds ahead: in the next day already.
	s.clock = func() time.Time { return time.UnixMicro(clock.now).Add(2 * time.Second) }
	d, err := s.Take(ctx, r)
	if err != nil || !d.Allowed || d.ResetAfter != time.Second {
		t.Errorf("store clock 2s ahead, a second before midnight: got %+v, %v, want admitted with the server's day ending in 1s", d, err)
	}
	// Three days behind: no window sent holds the server's time.
	s.clock = func() time.Time { return time.UnixMicro(clock.now).Add(-72 * time.Hour) }
	if _, err := s.Take(ctx, r); err == nil {
		t.Error("store clock 3 days behind: got no error, want the script to refuse")
	}
}

package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// TestWindowTTLAfterPeriodChange: a named window limit keeps its key when
// a policy reload changes its period. The lean scripts leave a key's TTL
// alone while it holds the current window; the first take under the new
// period must set the TTL that period calls for, or the key expires at the
// old window's end and its count with it. Before the fix, a fixed window
// of 3 per hour admitted 3 more requests 2 s after a reload from 100 per
// 2 s.
func TestWindowTTLAfterPeriodChange(t *testing.T) {
	for _, alg := range []store.Algorithm{store.FixedWindow, store.SlidingWindowCounter} {
		t.Run(alg.String(), func(t *testing.T) {
			t.Parallel()
			s, c := newStore(t, Options{})
			ctx := context.Background()
			short := store.Limit{Name: "api", Algorithm: alg, Rate: 100, Period: 2 * time.Second}
			long := store.Limit{Name: "api", Algorithm: alg, Rate: 3, Period: time.Hour}
			// The hourly window must not end during the test.
			if left := time.Until(time.Now().Truncate(time.Hour).Add(time.Hour)); left < 30*time.Second {
				time.Sleep(left + 100*time.Millisecond)
			}
			take := func(l store.Limit) store.Decision {
				t.Helper()
				d, err := s.Take(ctx, store.Request{Key: "client", Limits: []store.Limit{l}})
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			take(short)
			take(short)
			if d := take(long); !d.Allowed || d.Remaining != 0 {
				t.Fatalf("first take after the reload: allowed %v, remaining %d; want admitted with 0 left (the window's 2 units carried over)", d.Allowed, d.Remaining)
			}
			keys := prefixKeys(t, c, s.prefix)
			if len(keys) != 1 {
				t.Fatalf("keys %v, want the limit's one state key", keys)
			}
			ttl, err := c.PTTL(ctx, keys[0]).Result()
			if err != nil {
				t.Fatal(err)
			}
			// The fixed window's key lives to the end of the hour, the
			// counter's an hour past it; both far past the old windows.
			want := min(time.Until(time.Now().Truncate(time.Hour).Add(time.Hour))-time.Second, time.Minute)
			if ttl < want {
				t.Errorf("%s: PTTL %v after the first take under the hourly period, want at least %v", keys[0], ttl, want)
			}
			// Past every TTL the old period set (2 s windows; the
			// counter's key lives to the end of the next window).
			time.Sleep(4200 * time.Millisecond)
			for i := range 3 {
				if d := take(long); d.Allowed {
					t.Errorf("take %d, 4 s after the reload: admitted with %d left; the hour's 3 units were used", i, d.Remaining)
				}
			}
		})
	}
}

package clientstate_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/internal/clientstate"
	"github.com/ratekeeper/ratekeeper/internal/redistest"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
	"github.com/ratekeeper/ratekeeper/store/redisstore"
)

// stores returns the memory store (on a clock that stands still) and the
// Redis store (on a redis-server of its own, real time).
func stores(t *testing.T) map[string]store.Store {
	t.Helper()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	mem, err := memstore.New(memstore.Options{Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	srv := redistest.Require(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	var b [6]byte
	_, _ = rand.Read(b[:])
	rs, err := redisstore.New(c, redisstore.Options{Prefix: "rkstate-" + hex.EncodeToString(b[:])})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]store.Store{"memory": mem, "redis": rs}
}

// TestReadNothingUsedHasNoFutureReset pins the admin API's and the CLI's
// view of a client with nothing used: a peek at cost 1 described the state
// after one hypothetical unit, so they showed a reset an emission interval
// (or a whole window) in the future. Read reports the full capacity and a
// ResetAfter of zero, for every algorithm and for two limits; with one
// unit used, the reset of that unit alone (20 s of a 3/min GCRA, not 40 s;
// the log's window from the unit, not from now).
func TestReadNothingUsedHasNoFutureReset(t *testing.T) {
	ctx := context.Background()
	for name, st := range stores(t) {
		cases := []struct {
			name   string
			limits []store.Limit
			// used is ResetAfter with one unit taken; zero: not checked.
			used time.Duration
		}{
			{"gcra", []store.Limit{{Algorithm: store.GCRA, Rate: 3, Period: time.Minute}}, 20 * time.Second},
			{"sliding window log", []store.Limit{{Algorithm: store.SlidingWindowLog, Rate: 3, Period: time.Minute}}, time.Minute},
			{"sliding window counter", []store.Limit{{Algorithm: store.SlidingWindowCounter, Rate: 3, Period: time.Minute}}, 0},
			{"fixed window", []store.Limit{{Algorithm: store.FixedWindow, Rate: 3, Period: time.Minute}}, 0},
			{"two gcra limits", []store.Limit{{Name: "s", Algorithm: store.GCRA, Rate: 3, Period: time.Minute}, {Name: "h", Algorithm: store.GCRA, Rate: 100, Period: time.Hour}}, 20 * time.Second},
			{"two log limits", []store.Limit{{Name: "s", Algorithm: store.SlidingWindowLog, Rate: 3, Period: time.Minute}, {Name: "h", Algorithm: store.SlidingWindowLog, Rate: 100, Period: time.Hour}}, time.Minute},
		}
		for _, tc := range cases {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				req := store.Request{Key: "client-" + tc.name, Limits: tc.limits}
				d, err := clientstate.Read(ctx, st, req)
				if err != nil {
					t.Fatal(err)
				}
				if !d.Allowed || d.Remaining != 3 || d.Capacity != 3 || d.ResetAfter != 0 {
					t.Fatalf("nothing used: got allowed %v, %d of %d remaining, reset after %s; want 3 of 3 and 0", d.Allowed, d.Remaining, d.Capacity, d.ResetAfter)
				}
				if _, err := st.Take(ctx, req); err != nil {
					t.Fatal(err)
				}
				d, err = clientstate.Read(ctx, st, req)
				if err != nil {
					t.Fatal(err)
				}
				// The counter's estimate reaches 0 at the end of the window
				// after the unit's: at most two periods.
				if d.Remaining != 2 || d.ResetAfter <= 0 || d.ResetAfter > 2*time.Minute {
					t.Fatalf("one used: got %d remaining, reset after %s; want 2 and at most two periods", d.Remaining, d.ResetAfter)
				}
				if tc.used > 0 && (d.ResetAfter > tc.used || d.ResetAfter < tc.used-time.Second) {
					t.Errorf("one used: got reset after %s, want %s (less the time since the take)", d.ResetAfter, tc.used)
				}
			})
		}
	}
}

// TestReadRefusedIsUnchanged: a full limit is reported as the store's
// refusal says, nothing added.
func TestReadRefusedIsUnchanged(t *testing.T) {
	ctx := context.Background()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			req := store.Request{Key: "full", Limits: []store.Limit{{Algorithm: store.GCRA, Rate: 2, Period: time.Minute}}}
			for range 2 {
				if _, err := st.Take(ctx, req); err != nil {
					t.Fatal(err)
				}
			}
			d, err := clientstate.Read(ctx, st, req)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed || d.Remaining != 0 || d.ResetAfter < 59*time.Second || d.ResetAfter > time.Minute || d.RetryAfter <= 0 {
				t.Errorf("got %+v, want refused, 0 remaining, reset after a minute", d)
			}
		})
	}
}

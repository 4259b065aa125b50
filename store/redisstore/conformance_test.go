package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/internal/redistest"

	"github.com/ratekeeper/ratekeeper/store/storetest"
)

// keyTTLs returns every key under prefix, by kind, with its remaining
// time to live: expired keys are omitted, a key without TTL has a negative
// duration.
func keyTTLs(c *redis.Client, prefix string) func(ctx context.Context) (storetest.StoredKeys, error) {
	return func(ctx context.Context) (storetest.StoredKeys, error) {
		return redistest.StoredKeys(ctx, c, prefix+":")
	}
}

// TestConformance runs the store conformance suite against the local
// redis-server on real time, through a client with go-redis's default
// options and through one that cuts socket I/O at context deadlines (whose
// lone calls the store sends from the caller's goroutine).
func TestConformance(t *testing.T) {
	srv := requireServer(t)
	for _, honoured := range []bool{false, true} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%t", honoured), func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) storetest.Harness {
				c := newClient(t, srv, &redis.Options{ContextTimeoutEnabled: honoured})
				prefix := randomPrefix(t)
				rnd := &storetest.FakeRand{}
				s, err := newRedis(c, Options{Prefix: prefix, Timeout: 5 * time.Second, Rand: rnd.Float64})
				if err != nil {
					t.Fatal(err)
				}
				if s.pipes.direct != honoured {
					t.Fatalf("direct sending: got %t, want %t", s.pipes.direct, honoured)
				}
				return storetest.Harness{Store: s, Advance: time.Sleep, KeyTTLs: keyTTLs(c, prefix), Rand: rnd}
			})
		})
	}
}

// TestConformanceExact runs the suite with the scripts on a fake clock, so
// that it asserts exact durations and microsecond boundaries. Key TTLs are
// checked by TestConformance (real time) only: here keys keep long TTLs.
func TestConformanceExact(t *testing.T) {
	requireServer(t)
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		s, clock := newClockedStore(t, time.Date(2025, time.March, 14, 15, 9, 26, 535897000, time.UTC).UnixMicro(), false)
		rnd := &storetest.FakeRand{}
		s.rand = rnd.Float64
		return storetest.Harness{
			Store:   s,
			Advance: func(d time.Duration) { clock.advance(d.Microseconds()) },
			Exact:   true,
			Rand:    rnd,
			// Overrides are set with a plain SET PX, outside the shim.
			RealTimeOverrides: true,
			RealTimeListing:   true,
			RealTimeStacks:    true, // the stacked scripts run outside the shim
		}
	})
}

package integration

import (
	"context"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store/storetest"
)

// TestRedisConformance runs the store conformance suite against the Redis
// store on a real server. Time passes for real (Advance sleeps), so the
// suite treats timings as inexact.
func TestRedisConformance(t *testing.T) {
	srv := sharedRedis(t)
	c := newClient(t, srv)
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		prefix := randomPrefix(t)
		return storetest.Harness{
			Store:   newStore(t, c, prefix),
			Advance: time.Sleep,
			Exact:   false,
			KeyTTLs: func(ctx context.Context) (map[string]time.Duration, error) {
				return scanTTLs(ctx, c, prefix)
			},
		}
	})
}

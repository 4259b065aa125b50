package integration

import (
	"context"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/internal/redistest"
	"github.com/ratekeeper/ratekeeper/store/redisstore"
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
		rnd := &storetest.FakeRand{}
		return storetest.Harness{
			Store:   newStoreWith(t, c, redisstore.Options{Prefix: prefix, Timeout: 10 * time.Second, Rand: rnd.Float64}),
			Rand:    rnd,
			Advance: time.Sleep,
			Exact:   false,
			KeyTTLs: func(ctx context.Context) (storetest.StoredKeys, error) {
				return redistest.StoredKeys(ctx, c, prefix)
			},
		}
	})
}

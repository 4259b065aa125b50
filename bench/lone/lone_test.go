// Package lone measures a lone caller on Redis: one decision at a time
// over 10k keys, for PING, go-redis/redis_rate and the Redis store's Take
// of every algorithm, through go-redis's default client and through the
// client the README recommends (ContextTimeoutEnabled). The loops are
// serial so that a tool such as callgrind can count the client's
// instructions per decision, with two fixed -test.benchtime=Nx runs and
// their difference; run against a redis-server of your own:
//
//	LONE_ADDR=127.0.0.1:6379 go test -run '^$' -bench . -benchmem ./lone/
package lone

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/redisstore"
)

// keys are 10k clients.
var keys = func() []string {
	ks := make([]string, 10_000)
	for i := range ks {
		ks[i] = fmt.Sprintf("ip:10.%d.%d.%d", i>>16&0xff, i>>8&0xff, i&0xff)
	}
	return ks
}()

// client returns a go-redis client of LONE_ADDR with the default options,
// and ContextTimeoutEnabled when ctxTO is set.
func client(b *testing.B, ctxTO bool) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: os.Getenv("LONE_ADDR"), ContextTimeoutEnabled: ctxTO})
	b.Cleanup(func() { c.Close() })
	return c
}

// BenchmarkLone runs every case at one caller. Each ratekeeper case has
// its own key prefix; redis_rate's keys are its own.
func BenchmarkLone(b *testing.B) {
	if os.Getenv("LONE_ADDR") == "" {
		b.Skip("LONE_ADDR is not set: these cases need a Redis server to measure against")
	}
	ctx := context.Background()
	b.Run("ping", func(b *testing.B) {
		c := client(b, false)
		for i := 0; i < b.N; i++ {
			if err := c.Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("redis_rate", func(b *testing.B) {
		l := redis_rate.NewLimiter(client(b, false))
		lim := redis_rate.Limit{Rate: 1 << 30, Burst: 1 << 30, Period: time.Hour}
		for i := 0; i < b.N; i++ {
			if _, err := l.Allow(ctx, keys[i%len(keys)], lim); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, alg := range store.Algorithms {
		for _, to := range []bool{false, true} {
			b.Run(fmt.Sprintf("rk/%s/ctxto=%t", alg, to), func(b *testing.B) {
				s, err := redisstore.New(client(b, to), redisstore.Options{Prefix: fmt.Sprintf("lone%d", time.Now().UnixNano()), Timeout: time.Second})
				if err != nil {
					b.Fatal(err)
				}
				req := store.Request{Limits: []store.Limit{{Algorithm: alg, Rate: 1 << 30, Period: time.Hour}}}
				for i := 0; i < b.N; i++ {
					req.Key = keys[i%len(keys)]
					if _, err := s.Take(ctx, req); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

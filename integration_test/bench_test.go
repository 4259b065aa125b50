package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
)

// benchKeys is the number of distinct client keys the benchmarks spread
// their calls over.
const benchKeys = 4096

// runCallers performs b.N calls of op from exactly callers goroutines (op
// gets the call's sequence number) and reports the first error.
func runCallers(b *testing.B, callers int, op func(i int) error) {
	b.Helper()
	var (
		next     atomic.Int64
		firstErr atomic.Pointer[error]
		wg       sync.WaitGroup
	)
	b.ResetTimer()
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				if err := op(int(i)); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if err := firstErr.Load(); err != nil {
		b.Fatalf("call failed: %v", *err)
	}
}

// benchClient returns a default go-redis client with a pool large enough
// for callers, so that the benchmark measures the store, not pool waits.
func benchClient(b *testing.B, srv *redisServer, callers int) *redis.Client {
	b.Helper()
	addr, err := srv.addr(context.Background())
	if err != nil {
		b.Fatalf("redis address: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: max(callers, 10)})
	b.Cleanup(func() { _ = c.Close() })
	return c
}

func benchKeyNames() []string {
	keys := make([]string, benchKeys)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	return keys
}

// BenchmarkRedisPing is the floor for the store benchmarks: one PING round
// trip to the same server at the same concurrency. Compare Take against it
// as a ratio within one run; absolute figures on a shared machine vary.
func BenchmarkRedisPing(b *testing.B) {
	srv := sharedRedis(b)
	for _, callers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			c := benchClient(b, srv, callers)
			ctx := context.Background()
			b.ReportAllocs()
			runCallers(b, callers, func(int) error { return c.Ping(ctx).Err() })
		})
	}
}

// BenchmarkRedisStoreTake measures Take on a real Redis at 1, 16 and 64
// concurrent callers, spread over benchKeys keys, for every algorithm.
func BenchmarkRedisStoreTake(b *testing.B) {
	srv := sharedRedis(b)
	keys := benchKeyNames()
	for _, alg := range store.Algorithms {
		for _, callers := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("%s/callers=%d", alg, callers), func(b *testing.B) {
				c := benchClient(b, srv, callers)
				s := newStore(b, c, randomPrefix(b))
				limits := []store.Limit{{Algorithm: alg, Rate: 1000, Period: time.Minute}}
				ctx := context.Background()
				b.ReportAllocs()
				runCallers(b, callers, func(i int) error {
					_, err := s.Take(ctx, store.Request{Key: keys[i%len(keys)], Limits: limits})
					return err
				})
			})
		}
	}
}

// BenchmarkRedisStoreTakeMultiLimit measures a two-limit policy (per minute
// and per hour) at 16 callers.
func BenchmarkRedisStoreTakeMultiLimit(b *testing.B) {
	srv := sharedRedis(b)
	keys := benchKeyNames()
	for _, alg := range []store.Algorithm{store.GCRA, store.SlidingWindowLog} {
		b.Run(alg.String(), func(b *testing.B) {
			const callers = 16
			c := benchClient(b, srv, callers)
			s := newStore(b, c, randomPrefix(b))
			limits := []store.Limit{
				{Name: "minute", Algorithm: alg, Rate: 100, Period: time.Minute},
				{Name: "hour", Algorithm: alg, Rate: 1000, Period: time.Hour},
			}
			ctx := context.Background()
			b.ReportAllocs()
			runCallers(b, callers, func(i int) error {
				_, err := s.Take(ctx, store.Request{Key: keys[i%len(keys)], Limits: limits})
				return err
			})
		})
	}
}

// BenchmarkMiddlewareRedis measures the whole hot path: key function,
// Redis decision, headers and the wrapped handler, at 1 and 64 callers.
func BenchmarkMiddlewareRedis(b *testing.B) {
	srv := sharedRedis(b)
	keys := benchKeyNames()
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("gcra/callers=%d", callers), func(b *testing.B) {
			c := benchClient(b, srv, callers)
			s := newStore(b, c, randomPrefix(b))
			l, err := middleware.New(s, func(r *http.Request) (string, error) {
				return r.Header.Get("X-Client"), nil
			}, store.PerMinute(1000), middleware.Options{})
			if err != nil {
				b.Fatalf("middleware.New: %v", err)
			}
			h := l.Handler(okHandler)
			reqs := make([]*http.Request, len(keys))
			for i, k := range keys {
				reqs[i] = httptest.NewRequest(http.MethodGet, "/", nil)
				reqs[i].Header.Set("X-Client", k)
			}
			b.ReportAllocs()
			runCallers(b, callers, func(i int) error {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, reqs[i%len(reqs)])
				if rec.Code != http.StatusOK && rec.Code != http.StatusTooManyRequests {
					return fmt.Errorf("status %d", rec.Code)
				}
				if rec.Header().Get("X-Ratelimit-Remaining") == "" {
					return fmt.Errorf("status %d without a store decision", rec.Code)
				}
				return nil
			})
		})
	}
}

package redisstore

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store"
)

// benchKeys is the key spread of the Take benchmarks: client IPs.
var benchKeys = func() []string {
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = "203.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256)
	}
	return keys
}()

// BenchmarkTake measures Take against the local redis-server with 1, 16
// and 64 concurrent callers over 10,000 keys and a two-limit policy.
func BenchmarkTake(b *testing.B) {
	srv := requireServer(b)
	for _, alg := range store.Algorithms {
		limits := []store.Limit{
			{Name: "second", Algorithm: alg, Rate: 50, Period: time.Second},
			{Name: "minute", Algorithm: alg, Rate: 1000, Period: time.Minute},
		}
		for _, workers := range []int{1, 16, 64} {
			b.Run(alg.String()+"/callers="+strconv.Itoa(workers), func(b *testing.B) {
				c := newClient(b, srv, &redis.Options{PoolSize: 64})
				s, err := newRedis(c, Options{Prefix: randomPrefix(b), Timeout: time.Second})
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				if _, err := s.Take(ctx, store.Request{Key: "warm", Limits: limits}); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				var next atomic.Int64
				var failed atomic.Pointer[error]
				var wg sync.WaitGroup
				for w := 0; w < workers; w++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							i := next.Add(1) - 1
							if i >= int64(b.N) {
								return
							}
							req := store.Request{Key: benchKeys[i%int64(len(benchKeys))], Limits: limits}
							if _, err := s.Take(ctx, req); err != nil {
								failed.Store(&err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				if err := failed.Load(); err != nil {
					b.Fatal(*err)
				}
				_ = c.Del(ctx, prefixKeys(b, c, s.prefix)...).Err()
			})
		}
	}
}

func BenchmarkEncodeKey(b *testing.B) {
	inputs := map[string]string{
		"safe":    "203.0.113.7",
		"escaped": "2001:db8::1",
		"hashed":  strings.Repeat("x", 200),
	}
	for name, in := range inputs {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				_ = encodeKey(in)
			}
		})
	}
}

// BenchmarkArgs measures building a take's keys and arguments for the full
// script: the client-side work of a Take besides the network.
func BenchmarkArgs(b *testing.B) {
	s, err := newRedis(nilClient(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	req := store.Request{Key: "203.0.113.7", Limits: []store.Limit{store.PerSecond(10), store.PerMinute(100)}}
	sc := &s.scripts.byAlgorithm[store.GCRA][full]
	base := keyBase(s.prefix, encodeKey(req.Key))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		args := s.fullArgs(modeTake, base, sc, &req, 1)
		if len(args) != 3+6+9+12 {
			b.Fatalf("unexpected command shape: %d arguments", len(args))
		}
	}
}

func BenchmarkDecodeReply(b *testing.B) {
	limits := []store.Limit{store.PerSecond(10), store.PerMinute(100)}
	v := replyOf("", 1, 0, 9, 100000, 0, 0, 0, 0, 0, 9, 100000, 99, 600000)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r, err := decodeReply(v, limits, 1)
		if err != nil {
			b.Fatal(err)
		}
		_ = r.decision(limits)
	}
}

// BenchmarkTakeMulti measures a stacked decision against the local
// redis-server, one caller over 10,000 keys: each identity's own limit of
// every algorithm stacked with a route-wide GCRA limit that never
// refuses, the stack a middleware with a route group's limit and a
// per-client limit decides.
func BenchmarkTakeMulti(b *testing.B) {
	srv := requireServer(b)
	for _, alg := range store.Algorithms {
		b.Run(alg.String(), func(b *testing.B) {
			c := newClient(b, srv, nil)
			s, err := newRedis(c, Options{Prefix: randomPrefix(b), Timeout: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			ms := s
			route := store.Request{Key: "route:/api", Limits: []store.Limit{{Rate: 1 << 30, Period: time.Second}}}
			stacks := make([][]store.Request, len(benchKeys))
			for i, k := range benchKeys {
				stacks[i] = []store.Request{{Key: k, Limits: []store.Limit{{Algorithm: alg, Rate: 1 << 30, Period: time.Hour}}}, route}
			}
			ctx := context.Background()
			if _, err := ms.TakeMulti(ctx, stacks[0]); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				d, err := ms.TakeMulti(ctx, stacks[i%len(stacks)])
				if err != nil {
					b.Fatal(err)
				}
				if !d.Allowed {
					b.Fatal("refused")
				}
			}
			b.StopTimer()
			_ = c.Del(ctx, prefixKeys(b, c, s.prefix)...).Err()
		})
	}
}

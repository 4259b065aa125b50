// Package inprocess compares the memory store's Take with
// golang.org/x/time/rate's Allow, the in-process baseline, one call at a
// time over 10k keys:
//
//	go test -run '^$' -bench . -benchmem ./inprocess/
//
// Both loops are serial, so that their instruction counts can be compared
// under a tool such as callgrind with a fixed -test.benchtime=200000x
// when the machine is too busy for wall-clock figures.
//
// BenchmarkMiddleware does the same for the HTTP middlewares: ours on the
// memory store beside go-limiter's httplimit, httprate, ulule's and a
// hand-written x/time/rate one, over 1 and 10k clients, admitting and
// refusing (run it with -cpu 1,2); BenchmarkMiddlewareOneCaller keeps to
// one caller at any -cpu, as the compare command's "1 caller" groups do.
package inprocess

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
	"golang.org/x/time/rate"
)

// keys are 10k clients, as many distinct keys as a busy service sees in a
// window.
var keys = func() []string {
	ks := make([]string, 10_000)
	for i := range ks {
		ks[i] = fmt.Sprintf("ip:10.%d.%d.%d", i>>16&0xff, i>>8&0xff, i&0xff)
	}
	return ks
}()

// BenchmarkTake: the memory store's Take under one limit of 100 per second
// (burst 100) for each algorithm, keys taken in turn. Every key is seen
// once before the timer starts, so the figures are those of known keys.
func BenchmarkTake(b *testing.B) {
	ctx := context.Background()
	for _, alg := range store.Algorithms {
		b.Run(alg.String(), func(b *testing.B) {
			s, err := memstore.New(memstore.Options{})
			if err != nil {
				b.Fatal(err)
			}
			req := store.Request{Limits: []store.Limit{{Algorithm: alg, Rate: 100, Period: time.Second}}}
			for _, k := range keys {
				req.Key = k
				if _, err := s.Take(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req.Key = keys[i%len(keys)]
				if _, err := s.Take(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkXRateAllow: x/time/rate as a user would write per-client
// limiting, one rate.Limiter of 100 per second (burst 100) per key in a
// map under a mutex, over the same keys, each seen once before the timer
// starts.
func BenchmarkXRateAllow(b *testing.B) {
	var mu sync.Mutex
	m := make(map[string]*rate.Limiter)
	get := func(k string) *rate.Limiter {
		mu.Lock()
		l, ok := m[k]
		if !ok {
			l = rate.NewLimiter(rate.Every(10*time.Millisecond), 100)
			m[k] = l
		}
		mu.Unlock()
		return l
	}
	for _, k := range keys {
		get(k).Allow()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		get(keys[i%len(keys)]).Allow()
	}
}

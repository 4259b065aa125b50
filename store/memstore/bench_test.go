package memstore

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// benchKeys is the key spread: 10k clients, as many distinct keys as a busy
// service sees in a window.
var benchKeys = func() []string {
	ks := make([]string, 10_000)
	for i := range ks {
		ks[i] = fmt.Sprintf("ip:10.%d.%d.%d", i>>16&0xff, i>>8&0xff, i&0xff)
	}
	return ks
}()

// benchTake runs Take from parallel goroutines over benchKeys with the
// real clock. Each goroutine starts at its own offset in the key list.
func benchTake(b *testing.B, limits []store.Limit, peek bool) {
	b.Helper()
	s, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	var worker atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(worker.Add(1)) * 7919
		r := store.Request{Limits: limits}
		for pb.Next() {
			r.Key = benchKeys[i%len(benchKeys)]
			i++
			var err error
			if peek {
				_, err = s.Peek(ctx, r)
			} else {
				_, err = s.Take(ctx, r)
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkTake: one limit of 100 per second per key, every algorithm.
func BenchmarkTake(b *testing.B) {
	for _, alg := range store.Algorithms {
		b.Run(alg.String(), func(b *testing.B) {
			benchTake(b, []store.Limit{{Algorithm: alg, Rate: 100, Period: time.Second}}, false)
		})
	}
}

// BenchmarkTakeTwoLimits: 10 per second AND 1000 per hour per key.
func BenchmarkTakeTwoLimits(b *testing.B) {
	for _, alg := range store.Algorithms {
		b.Run(alg.String(), func(b *testing.B) {
			benchTake(b, []store.Limit{
				{Name: "second", Algorithm: alg, Rate: 10, Period: time.Second},
				{Name: "hour", Algorithm: alg, Rate: 1000, Period: time.Hour},
			}, false)
		})
	}
}

// BenchmarkPeek: read-only decisions, GCRA.
func BenchmarkPeek(b *testing.B) {
	benchTake(b, []store.Limit{{Rate: 100, Period: time.Second}}, true)
}

// BenchmarkNewKeys: every request from a new key, at the cap: the cost of
// insertion, sweeping and refusal under a key flood.
func BenchmarkNewKeys(b *testing.B) {
	s, err := New(Options{MaxKeys: 100_000})
	if err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := store.Request{Limits: []store.Limit{{Rate: 10, Period: time.Second}}}
		for pb.Next() {
			r.Key = "flood:" + fmt.Sprint(n.Add(1))
			s.Take(ctx, r) // refusals at the cap are expected
		}
	})
}

package hybrid_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/hybrid"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// BenchmarkTakeHot measures the fast path: 64 hot keys, each goroutine
// walking through them, over a memory store as backend (which the fast
// path never calls once a key holds a lease). "admitted" keys have a
// limit far above the load, "refused" keys are spent and answered from the
// deny cache. Run with -cpu 1 for the one-core figure.
func BenchmarkTakeHot(b *testing.B) {
	for _, tc := range []struct {
		name string
		lim  store.Limit
	}{
		{"admitted", store.Limit{Rate: 1 << 30, Period: time.Hour}},
		{"refused", store.Limit{Rate: 1, Period: time.Hour}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			m, err := memstore.New(memstore.Options{})
			if err != nil {
				b.Fatal(err)
			}
			s, err := hybrid.New(m, hybrid.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			reqs := make([]store.Request, 64)
			for i := range reqs {
				reqs[i] = store.Request{Key: "client-" + strconv.Itoa(i), Limits: []store.Limit{tc.lim}}
				for range 2 { // learn the lease, or the refusal
					if _, err := s.Take(ctx, reqs[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
			var next atomic.Uint32
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(17))
				for pb.Next() {
					if _, err := s.Take(ctx, reqs[i&63]); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}

package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/lua"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// fakeClock drives a store whose scripts read the time from a hash in Redis
// instead of TIME, so that tests control the clock to the microsecond.
type fakeClock struct {
	t   testing.TB
	c   *redis.Client
	key string
	now int64 // µs since the Unix epoch
}

// newClockedStore returns a store on the shared server whose scripts take
// their time from the returned clock. Keys expire in real time while the
// scripts see the fake clock, which may run slower, so unless realTTL is
// set the scripts also give every state key a TTL of one hour: state kept
// past its TTL decides exactly as absent state, so only expiry changes.
func newClockedStore(t testing.TB, start int64, realTTL bool) (*Store, *fakeClock) {
	t.Helper()
	s, c := newStore(t, Options{})
	fc := &fakeClock{t: t, c: c, key: s.prefix + ":clock"}
	for _, alg := range store.Algorithms {
		src, err := lua.Source(alg.String())
		if err != nil {
			t.Fatal(err)
		}
		const timeCall = "redis.call('TIME')"
		if strings.Count(src, timeCall) != 1 {
			t.Fatalf("%s: want exactly one %s in the script", alg, timeCall)
		}
		src = strings.Replace(src, timeCall, "redis.call('HMGET', '"+fc.key+"', 's', 'u')", 1)
		if !realTTL {
			const ttlFunc = "local function ttl_ms(us)\n"
			if strings.Count(src, ttlFunc) != 1 {
				t.Fatalf("%s: want exactly one %q in the script", alg, ttlFunc)
			}
			src = strings.Replace(src, ttlFunc, ttlFunc+"  if us then return 3600000 end\n", 1)
		}
		s.scripts[alg] = redis.NewScript(src)
	}
	fc.set(start)
	return s, fc
}

// set moves the clock to us.
func (fc *fakeClock) set(us int64) {
	fc.t.Helper()
	fc.now = us
	if err := fc.c.HSet(context.Background(), fc.key, "s", us/1e6, "u", us%1e6).Err(); err != nil {
		fc.t.Fatal(err)
	}
}

func (fc *fakeClock) advance(d int64) { fc.t.Helper(); fc.set(fc.now + d) }

// sameDecision compares the fields both stores report.
func sameDecision(a, b store.Decision) bool {
	return a.Allowed == b.Allowed && a.Limit == b.Limit && a.Remaining == b.Remaining &&
		a.ResetAfter == b.ResetAfter && a.RetryAfter == b.RetryAfter &&
		a.Policy == b.Policy && a.Index == b.Index
}

func fmtDecision(d store.Decision) string {
	return fmt.Sprintf("{allowed %v limit %d remaining %d reset %s retry %s policy %s index %d}",
		d.Allowed, d.Limit, d.Remaining, d.ResetAfter, d.RetryAfter, d.Policy, d.Index)
}

// TestMatchesMemstore runs random operation sequences against the Redis
// scripts and the in-memory store on the same clock and requires the same
// decision every time: both implement the semantics of package store with
// the same arithmetic.
func TestMatchesMemstore(t *testing.T) {
	requireServer(t)
	configs := []struct {
		name   string
		limits []store.Limit
	}{
		{"3 per second", []store.Limit{{Rate: 3, Period: time.Second}}},
		{"6 per second", []store.Limit{{Rate: 6, Period: time.Second}}},
		{"7 per 1001ms", []store.Limit{{Rate: 7, Period: 1001 * time.Millisecond}}},
		{"burst", []store.Limit{{Rate: 2, Period: time.Second, Burst: 5}}},
		{"1000 per minute", []store.Limit{{Rate: 1000, Period: time.Minute}}},
		{"1 per hour", []store.Limit{{Rate: 1, Period: time.Hour}}},
		{"two limits", []store.Limit{{Name: "short", Rate: 3, Period: 250 * time.Millisecond}, {Name: "long", Rate: 10, Period: 3 * time.Second}}},
		{"trip on reaching the rate", []store.Limit{{Rate: 5, Period: time.Second, Threshold: store.ThresholdReach}}},
		{"three limits", []store.Limit{{Name: "a", Rate: 5, Period: time.Second}, {Name: "b", Rate: 9, Period: 2 * time.Second}, {Name: "c", Rate: 13, Period: 7 * time.Second}}},
	}
	// A fixed start on a window boundary, then random offsets.
	const start = 1_767_225_600_000_000
	for _, alg := range store.Algorithms {
		for ci, cfg := range configs {
			t.Run(alg.String()+"/"+cfg.name, func(t *testing.T) {
				limits := make([]store.Limit, len(cfg.limits))
				copy(limits, cfg.limits)
				minCap := int64(1 << 40)
				for i := range limits {
					limits[i].Algorithm = alg
					if alg != store.GCRA && alg != store.TokenBucket {
						limits[i].Burst = 0
					}
					minCap = min(minCap, limits[i].Capacity())
				}
				if err := (store.Request{Key: "k", Limits: limits}).Validate(); err != nil {
					t.Skipf("not a valid configuration for %s: %v", alg, err)
				}
				rng := rand.New(rand.NewPCG(uint64(alg), uint64(ci)))
				rs, clock := newClockedStore(t, start+rng.Int64N(5_000_000), false)
				ms, err := memstore.New(memstore.Options{Clock: func() time.Time { return time.UnixMicro(clock.now) }})
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				shortest := limits[0].Period.Microseconds()
				for _, l := range limits {
					shortest = min(shortest, l.Period.Microseconds())
				}
				var last store.Decision
				var admitted, denied int
				for step := 0; step < 150; step++ {
					switch r := rng.IntN(10); {
					case r < 3:
					case r < 5:
						clock.advance(1 + rng.Int64N(shortest/4))
					case r < 6:
						clock.advance(rng.Int64N(3 * shortest))
					case r < 8 && !last.Allowed && last.RetryAfter > 0:
						// Exactly the advertised wait, or a microsecond less.
						clock.advance(last.RetryAfter.Microseconds() - rng.Int64N(2))
					default:
						clock.advance(1)
					}
					req := store.Request{Key: "k", Limits: limits, Cost: 1}
					if rng.IntN(4) == 0 {
						req.Cost = 1 + rng.Int64N(minCap)
					}
					op := "take"
					if rng.IntN(5) == 0 {
						op = "peek"
					}
					var got, want store.Decision
					var gerr, werr error
					if op == "take" {
						got, gerr = rs.Take(ctx, req)
						want, werr = ms.Take(ctx, req)
					} else {
						got, gerr = rs.Peek(ctx, req)
						want, werr = ms.Peek(ctx, req)
					}
					if gerr != nil || werr != nil {
						t.Fatalf("step %d: errors: redis %v, memory %v", step, gerr, werr)
					}
					if !sameDecision(got, want) {
						t.Fatalf("step %d (%s cost %d at +%dµs): got %s, want %s (memstore)",
							step, op, req.Cost, clock.now-start, fmtDecision(got), fmtDecision(want))
					}
					last = got
					if got.Allowed {
						admitted++
					} else {
						denied++
					}
				}
				if admitted == 0 || denied == 0 {
					t.Fatalf("%d admitted, %d denied: want both outcomes exercised", admitted, denied)
				}
			})
		}
	}
}

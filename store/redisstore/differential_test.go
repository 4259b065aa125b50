package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/lua"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
	"github.com/ratekeeper/ratekeeper/store/memstore"
	"github.com/ratekeeper/ratekeeper/store/suppressed"
)

// fakeClock drives a store whose scripts read the time from a hash in Redis
// instead of TIME, so that tests control the clock to the microsecond.
type fakeClock struct {
	t   testing.TB
	c   *redis.Client
	key string
	now int64 // µs since the Unix epoch
}

// clockShim is placed before a script to run it on a fake clock: a local
// named redis shadows the global for the whole script, answers TIME from
// the hash CLOCK (fields s and u) and, unless the TTLs stay real, emulates
// key expiry on that clock (for redis.pcall too). Every key the script gives a TTL (SET ... PX,
// PEXPIRE) then keeps a real TTL of one hour while its fake expiry in ms
// is kept in CLOCK under "x:<key>" (dropped when the key is found deleted);
// a key is deleted when the script touches it after that expiry, and PTTL
// answers from it, as Redis does on its own clock (a key lives while
// now <= expiry, in whole ms).
const clockShim = `local redis = (function(real)
  local clock, emulate = CLOCK, EMULATE
  local function ms()
    local t = real.call('HMGET', clock, 's', 'u')
    return math.floor((tonumber(t[1]) * 1000000 + tonumber(t[2])) / 1000)
  end
  local function call(cmd, ...)
    local a = {...}
    if cmd == 'TIME' then
      return real.call('HMGET', clock, 's', 'u')
    end
    if not emulate then
      return real.call(cmd, ...)
    end
    local k = a[1]
    local x = 'x:' .. k
    local e = tonumber(real.call('HGET', clock, x))
    if e and (ms() > e or real.call('EXISTS', k) == 0) then
      real.call('DEL', k)
      real.call('HDEL', clock, x)
      e = nil
    end
    if cmd == 'PTTL' then
      if real.call('EXISTS', k) == 0 then
        return -2
      end
      if not e then
        return real.call('PTTL', k)
      end
      return e - ms()
    elseif cmd == 'PEXPIRE' then
      real.call('HSET', clock, x, ms() + tonumber(a[2]))
      return real.call('PEXPIRE', k, 3600000)
    elseif cmd == 'SET' then
      local px, nx = nil, false
      for i = 3, #a do
        if a[i] == 'PX' then
          px = tonumber(a[i + 1])
        elseif a[i] == 'NX' then
          nx = true
        end
      end
      if nx and real.call('EXISTS', k) == 1 then
        return false
      end
      if px then
        real.call('HSET', clock, x, ms() + px)
        return real.call('SET', k, a[2], 'PX', 3600000)
      end
      real.call('HDEL', clock, x)
      return real.call('SET', k, a[2])
    end
    return real.call(cmd, ...)
  end
  -- pcall is call that hands an error back as Redis does: {err = ...}.
  local function pcall_(...)
    local ok, r = pcall(call, ...)
    if ok then
      return r
    end
    if type(r) == 'table' then
      return r
    end
    return {err = tostring(r)}
  end
  return setmetatable({call = call, pcall = pcall_}, {__index = real})
end)(redis)
`

// newClockedStore returns a store on the shared server whose scripts take
// their time from the returned clock. Unless realTTL is set, key expiry
// follows the fake clock too (see clockShim), so that blocks, strike
// counters and every other TTL behave as on a server whose clock is the
// fake one; with realTTL keys keep the TTLs the scripts give them, in real
// time.
func newClockedStore(t testing.TB, start int64, realTTL bool) (*redisStore, *fakeClock) {
	t.Helper()
	// The deny cache measures time on the local clock: off for a store
	// on a fake one.
	s, c := newStore(t, Options{DenyCacheSize: -1})
	fc := &fakeClock{t: t, c: c, key: s.prefix + ":clock"}
	shim := strings.Replace(clockShim, "CLOCK", "'"+fc.key+"'", 1)
	shim = strings.Replace(shim, "EMULATE", strconv.FormatBool(!realTTL), 1)
	// The script table is shared by every store: the clocked store gets
	// its own copy.
	table := *s.scripts
	s.scripts = &table
	for alg := range table.byAlgorithm {
		for v := range variants {
			if table.byAlgorithm[alg][v].src == "" {
				continue // the suppressed strategy has only its full script
			}
			name := scriptName(store.Algorithm(alg)) + scriptSuffix[v]
			src, err := lua.Source(name)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Count(src, "redis.call('TIME')") != 1 {
				t.Fatalf("%s: want exactly one TIME call in the script", name)
			}
			table.byAlgorithm[alg][v] = newScript(shim + src)
		}
	}
	src, err := lua.Source("refund")
	if err != nil {
		t.Fatal(err)
	}
	table.refund = newScript(shim + src) // settlements run on the clock too
	if src, err = lua.Source("slots"); err != nil {
		t.Fatal(err)
	}
	table.slots = newScript(shim + src) // and in-flight caps
	for _, sc := range []struct {
		sc   *script
		name string
	}{{&table.stacked, "stacked"}, {&table.stackedLean, "stacked/lean"}, {&table.stackedLeanWindows, "stacked/lean-windows"}} {
		if src, err = lua.Source(sc.name); err != nil {
			t.Fatal(err)
		}
		if strings.Count(src, "redis.call('TIME')") != 1 {
			t.Fatalf("%s: want exactly one TIME call in the script", sc.name)
		}
		*sc.sc = newScript(shim + src) // and stacked decisions
	}
	// Stacked batches too, which the clocked lean stacked scripts'
	// calls then travel in.
	for _, sc := range []struct {
		sc, lone *script
		name     string
	}{{&table.stackedLeanBatch, &table.stackedLean, "stacked/lean-batch"}, {&table.stackedLeanWindowsBatch, &table.stackedLeanWindows, "stacked/lean-windows-batch"}} {
		if src, err = lua.Source(sc.name); err != nil {
			t.Fatal(err)
		}
		if strings.Count(src, "redis.call('TIME')") != 1 {
			t.Fatalf("%s: want exactly one TIME call in the script", sc.name)
		}
		*sc.sc = newScript(shim + src)
		sc.sc.perCall = true
		sc.lone.batch = sc.sc
	}
	fc.set(start)
	s.clock = func() time.Time { return time.UnixMicro(fc.now) }
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

// sameDecision compares every field of two decisions, PerLimit included.
func sameDecision(a, b store.Decision) bool {
	if a.Allowed != b.Allowed || a.Capacity != b.Capacity || a.Remaining != b.Remaining ||
		a.ResetAfter != b.ResetAfter || a.NextAfter != b.NextAfter || a.RetryAfter != b.RetryAfter ||
		a.LimitID != b.LimitID || a.Index != b.Index || a.Blocked != b.Blocked ||
		a.BlockStarted != b.BlockStarted || a.Duplicate != b.Duplicate ||
		a.Suppression != b.Suppression || a.Suppressed != b.Suppressed || a.Granted != b.Granted || !a.Taken.Equal(b.Taken) ||
		(a.PerLimit == nil) != (b.PerLimit == nil) || len(a.PerLimit) != len(b.PerLimit) {
		return false
	}
	for i := range a.PerLimit {
		if a.PerLimit[i] != b.PerLimit[i] {
			return false
		}
	}
	return true
}

func fmtDecision(d store.Decision) string {
	return fmt.Sprintf("{allowed %v limit %d remaining %d reset %s next %s retry %s policy %s index %d per limit %v}",
		d.Allowed, d.Capacity, d.Remaining, d.ResetAfter, d.NextAfter, d.RetryAfter, d.LimitID, d.Index, d.PerLimit)
}

// TestMatchesMemstore runs random operation sequences against the Redis
// scripts and the in-memory store on the same clock and requires the same
// decision, every field of it, every time: both implement the semantics of
// package store with the same arithmetic. Configurations marked extended
// also draw de-duplication ids from a small pool, count refusals (window
// algorithms) and reset the key now and then; their limits block and
// escalate. Requests without either are partial grants now and then.
// GCRA and token bucket requests are settled now and then at another
// cost. Calendar configurations start before a daylight saving change or a
// month's end in their zone, and compare the windows' ends too.
func TestMatchesMemstore(t *testing.T) {
	requireServer(t)
	ny, berlin := mustZone(t, "America/New_York"), mustZone(t, "Europe/Berlin")
	configs := []struct {
		name     string
		limits   []store.Limit
		extended bool
		start    time.Time // zero: the common start
	}{
		{"3 per second", []store.Limit{{Rate: 3, Period: time.Second}}, false, time.Time{}},
		{"6 per second", []store.Limit{{Rate: 6, Period: time.Second}}, false, time.Time{}},
		{"7 per 1001ms", []store.Limit{{Rate: 7, Period: 1001 * time.Millisecond}}, false, time.Time{}},
		{"burst", []store.Limit{{Rate: 2, Period: time.Second, Burst: 5}}, false, time.Time{}},
		{"1000 per minute", []store.Limit{{Rate: 1000, Period: time.Minute}}, false, time.Time{}},
		{"1 per hour", []store.Limit{{Rate: 1, Period: time.Hour}}, false, time.Time{}},
		{"two limits", []store.Limit{{Name: "short", Rate: 3, Period: 250 * time.Millisecond}, {Name: "long", Rate: 10, Period: 3 * time.Second}}, false, time.Time{}},
		{"three limits", []store.Limit{{Name: "a", Rate: 5, Period: time.Second}, {Name: "b", Rate: 9, Period: 2 * time.Second}, {Name: "c", Rate: 13, Period: 7 * time.Second}}, false, time.Time{}},
		{"dedup and counted refusals", []store.Limit{{Rate: 4, Period: 700 * time.Millisecond}}, true, time.Time{}},
		{"block", []store.Limit{{Rate: 3, Period: time.Second, Block: 1500 * time.Millisecond}}, true, time.Time{}},
		{"escalating block", []store.Limit{{Rate: 2, Period: 500 * time.Millisecond, Block: 300 * time.Millisecond, BlockMax: 2 * time.Second}}, true, time.Time{}},
		{"two blocking limits", []store.Limit{
			{Name: "short", Rate: 3, Period: 250 * time.Millisecond, Block: 700 * time.Millisecond, BlockMax: 3 * time.Second},
			{Name: "long", Rate: 10, Period: 3 * time.Second, Block: 1500 * time.Millisecond},
		}, true, time.Time{}},
		// Calendar quotas (fixed windows only), from before a daylight
		// saving change or the end of a leap year's February.
		{"day in New York, spring forward", []store.Limit{{Rate: 5, Calendar: "day", Location: ny}}, false, time.Date(2025, 3, 8, 20, 0, 0, 0, ny)},
		{"day in Berlin, fall back", []store.Limit{{Rate: 5, Calendar: "day", Location: berlin}}, false, time.Date(2025, 10, 25, 18, 0, 0, 0, berlin)},
		{"week and month in Berlin, leap February", []store.Limit{{Name: "w", Rate: 20, Calendar: "week", Location: berlin}, {Name: "m", Rate: 40, Calendar: "month", Location: berlin}}, false, time.Date(2024, 2, 26, 0, 0, 0, 0, berlin)},
		{"3 per second and a day in New York, at midnight", []store.Limit{{Name: "s", Rate: 3, Period: time.Second}, {Name: "d", Rate: 10, Calendar: "day", Location: ny}}, false, time.Date(2025, 11, 2, 23, 59, 57, 0, ny)},
		{"blocking day in New York, fall back", []store.Limit{{Rate: 4, Calendar: "day", Location: ny, Block: 1500 * time.Millisecond}}, true, time.Date(2025, 11, 1, 21, 0, 0, 0, ny)},
	}
	// A fixed start on a window boundary, then random offsets.
	const start = 1_767_225_600_000_000
	for _, alg := range store.Algorithms {
		for ci, cfg := range configs {
			t.Run(alg.String()+"/"+cfg.name, func(t *testing.T) {
				limits := make([]store.Limit, len(cfg.limits))
				copy(limits, cfg.limits)
				minCap := int64(1 << 40)
				blocks := false
				for i := range limits {
					limits[i].Algorithm = alg
					if alg != store.GCRA && alg != store.TokenBucket {
						limits[i].Burst = 0
					}
					minCap = min(minCap, limits[i].Capacity())
					blocks = blocks || limits[i].Block > 0
				}
				if err := (store.Request{Key: "k", Limits: limits}).Validate(); err != nil {
					t.Skipf("not a valid configuration for %s: %v", alg, err)
				}
				window := alg == store.SlidingWindowLog || alg == store.SlidingWindowCounter || alg == store.FixedWindow
				rng := rand.New(rand.NewPCG(uint64(alg), uint64(ci)))
				from := int64(start)
				if !cfg.start.IsZero() {
					from = cfg.start.UnixMicro()
				}
				rs, clock := newClockedStore(t, from+rng.Int64N(5_000_000), false)
				ms, err := memstore.New(memstore.Options{Clock: func() time.Time { return time.UnixMicro(clock.now) }})
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				shortest := contract.Span(limits[0]).Microseconds()
				calendar := false
				for _, l := range limits {
					shortest = min(shortest, contract.Span(l).Microseconds())
					calendar = calendar || l.Calendar != ""
				}
				steps := 150
				if cfg.extended {
					steps = 400
				}
				var last store.Decision
				// The last admitted reservation not settled yet, as each
				// store answered it.
				var pending *struct {
					req       store.Request
					got, want store.Decision
				}
				var admitted, denied, started, blocked, duplicates, cut, settled int
				for step := 0; step < steps; step++ {
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
					if cfg.extended {
						if window && rng.IntN(3) == 0 {
							req.CountDenied = true
						}
						if rng.IntN(2) == 0 {
							req.DedupID = string(rune('a' + rng.IntN(4)))
						}
					}
					if !calendar && !req.CountDenied && req.DedupID == "" && rng.IntN(4) == 0 {
						// A partial grant of up to twice the capacity.
						req.Partial, req.Cost = true, 1+rng.Int64N(2*minCap)
					}
					if !calendar && !req.Partial && rng.IntN(3) == 0 {
						req.Reserve = true
					}
					op := "take"
					switch r := rng.IntN(100); {
					case r < 20:
						op = "peek"
					case r < 21 && cfg.extended:
						op = "reset"
					case r < 30 && !req.Partial && !calendar && (!window || pending != nil):
						op = "settle"
					}
					var got, want store.Decision
					var gerr, werr error
					switch op {
					case "take":
						got, gerr = rs.Take(ctx, req)
						want, werr = ms.Take(ctx, req)
					case "peek":
						got, gerr = rs.Peek(ctx, req)
						want, werr = ms.Peek(ctx, req)
					case "settle":
						// A settlement of an earlier reservation of this
						// cost (a window algorithm's: the last one), at an
						// actual cost of 0 to twice it.
						sr, gd, wd := req, store.Decision{Allowed: true}, store.Decision{Allowed: true}
						if window {
							sr, gd, wd = pending.req, pending.got, pending.want
							pending = nil
						}
						actual := rng.Int64N(2*contract.Cost(&sr) + 1)
						gerr, werr = rs.Settle(ctx, sr, gd, actual), ms.(store.Refunder).Settle(ctx, sr, wd, actual)
						if gerr != nil || werr != nil {
							t.Fatalf("step %d: settle errors: redis %v, memory %v", step, gerr, werr)
						}
						settled++
						continue
					case "reset":
						gerr, werr = rs.Reset(ctx, req), ms.Reset(ctx, req)
						// On the fake clock Redis keeps expired keys (with
						// real TTLs of an hour), so whether anything was
						// left to reset can differ; whether the reset
						// worked is compared by the next decisions.
						if errors.Is(gerr, store.ErrNotFound) {
							gerr = nil
						}
						if errors.Is(werr, store.ErrNotFound) {
							werr = nil
						}
						if gerr != nil || werr != nil {
							t.Fatalf("step %d: reset errors: redis %v, memory %v", step, gerr, werr)
						}
						continue
					}
					if gerr != nil || werr != nil {
						t.Fatalf("step %d: errors: redis %v, memory %v", step, gerr, werr)
					}
					if !sameDecision(got, want) {
						t.Fatalf("step %d (%s cost %d counted %v id %q partial %v at +%dµs): got %s granted %d, want %s granted %d (memstore)",
							step, op, req.Cost, req.CountDenied, req.DedupID, req.Partial, clock.now-start, fmtFull(got), got.Granted, fmtFull(want), want.Granted)
					}
					last = got
					if op == "take" && req.Reserve && got.Allowed && !got.Duplicate {
						pending = &struct {
							req       store.Request
							got, want store.Decision
						}{req, got, want}
					}
					switch {
					case got.Allowed:
						admitted++
					default:
						denied++
					}
					if got.BlockStarted {
						started++
					}
					if got.Blocked && !got.BlockStarted {
						blocked++
					}
					if got.Duplicate {
						duplicates++
					}
					if req.Partial && got.Allowed && got.Granted < req.Cost {
						cut++
					}
				}
				if settled == 0 && !calendar {
					t.Fatal("no settlement: want settlements exercised")
				}
				if cut == 0 && !calendar {
					t.Fatal("no partial grant below its request: want partial grants exercised")
				}
				if admitted == 0 || denied == 0 {
					t.Fatalf("%d admitted, %d denied: want both outcomes exercised", admitted, denied)
				}
				if cfg.extended && duplicates == 0 {
					t.Fatal("no duplicate: want de-duplication exercised")
				}
				if blocks && (started < 2 || blocked == 0) {
					t.Fatalf("%d blocks started, %d requests refused by a running block: want both exercised", started, blocked)
				}
			})
		}
	}
}

// TestMatchesMemstoreSuppressed runs random operation sequences of the
// suppressed strategy against the Redis script and the in-memory store on
// the same clock, both drawing the same random values, and requires the
// same decision every time, suppression factor included.
func TestMatchesMemstoreSuppressed(t *testing.T) {
	requireServer(t)
	configs := []struct {
		name   string
		limits []store.Limit
		dedup  bool
	}{
		{"3 per second, hard 6", []store.Limit{{Rate: 3, Period: time.Second}}, false},
		{"10 per second, hard 13", []store.Limit{{Rate: 10, Period: time.Second, Burst: 13}}, false},
		{"7 per 1001ms, hard 7", []store.Limit{{Rate: 7, Period: 1001 * time.Millisecond, Burst: 7}}, false},
		{"20 per 50ms", []store.Limit{{Rate: 20, Period: 50 * time.Millisecond}}, false},
		{"two limits", []store.Limit{{Name: "short", Rate: 3, Period: 250 * time.Millisecond}, {Name: "long", Rate: 10, Period: 3 * time.Second, Burst: 12}}, false},
		{"dedup", []store.Limit{{Rate: 4, Period: 700 * time.Millisecond}}, true},
	}
	const start = 1_767_225_600_000_000
	for ci, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			// Each configured limit is Rate (the soft limit) per Period
			// under the hard limit Burst (0: twice Rate): the counting
			// limit is a sliding window counter of Burst.
			limits := make([]store.Limit, len(cfg.limits))
			softs := map[string]int64{}
			minCap, shortest := int64(1<<40), int64(1<<62)
			for i, l := range cfg.limits {
				hard := l.Burst
				if hard == 0 {
					hard = 2 * l.Rate
				}
				limits[i] = store.Limit{Name: l.Name, Algorithm: store.SlidingWindowCounter, Rate: hard, Period: l.Period}
				softs[limits[i].ID()] = l.Rate
				minCap = min(minCap, hard)
				shortest = min(shortest, l.Period.Microseconds())
			}
			opts := suppressed.Options{Soft: func(l store.Limit) int64 { return softs[l.ID()] }}
			rng := rand.New(rand.NewPCG(99, uint64(ci)))
			var u float64
			draw := func() float64 { return u }
			rs, clock := newClockedStore(t, start+rng.Int64N(5_000_000), false)
			rs.rand = draw
			mem, err := memstore.New(memstore.Options{Clock: func() time.Time { return time.UnixMicro(clock.now) }, Rand: draw})
			if err != nil {
				t.Fatal(err)
			}
			rss, err := suppressed.New(rs, opts)
			if err != nil {
				t.Fatal(err)
			}
			ms, err := suppressed.New(mem, opts)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			var admitted, hard, drawn, between int
			for step := 0; step < 600; step++ {
				switch r := rng.IntN(10); {
				case r < 4:
				case r < 7:
					clock.advance(1 + rng.Int64N(shortest/20))
				case r < 8:
					clock.advance(rng.Int64N(2 * shortest))
				default:
					clock.advance(1 + rng.Int64N(200))
				}
				u = rng.Float64()
				req := store.Request{Key: "k", Limits: limits, Cost: 1}
				if rng.IntN(5) == 0 {
					req.Cost = 1 + rng.Int64N(minCap)
				}
				if cfg.dedup && rng.IntN(2) == 0 {
					req.DedupID = string(rune('a' + rng.IntN(4)))
				}
				var got, want store.Decision
				var gerr, werr error
				op := "take"
				if rng.IntN(5) == 0 {
					op = "peek"
					got, gerr = rss.Peek(ctx, req)
					want, werr = ms.Peek(ctx, req)
				} else {
					got, gerr = rss.Take(ctx, req)
					want, werr = ms.Take(ctx, req)
				}
				if gerr != nil || werr != nil {
					t.Fatalf("step %d: errors: redis %v, memory %v", step, gerr, werr)
				}
				if !sameDecision(got, want) {
					t.Fatalf("step %d (%s cost %d id %q draw %v at +%dµs): got %s, want %s (memstore)",
						step, op, req.Cost, req.DedupID, u, clock.now-start, fmtFull(got), fmtFull(want))
				}
				switch {
				case got.Allowed:
					admitted++
				case got.Suppressed:
					drawn++
				default:
					hard++
				}
				if got.Suppression > 0 && got.Suppression < 1 {
					between++
				}
			}
			if softs[limits[0].ID()] == limits[0].Rate {
				// No room between the limits: a plain hard limit.
				drawn, between = -1, -1
			}
			if admitted == 0 || hard == 0 || drawn == 0 || between == 0 {
				t.Fatalf("%d admitted, %d refused by the hard limit, %d suppressed, %d between the limits: want every regime exercised",
					admitted, hard, drawn, between)
			}
		})
	}
}

// mustZone loads a time zone or fails the test.
func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("LoadLocation(%q): %v", name, err)
	}
	return loc
}

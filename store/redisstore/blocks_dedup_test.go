package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store"
)

// windowAlgorithms are the algorithms that support CountDenied.
var windowAlgorithms = []store.Algorithm{store.SlidingWindowLog, store.SlidingWindowCounter, store.FixedWindow}

// withAlgorithm returns a copy of limits using alg.
func withAlgorithm(limits []store.Limit, alg store.Algorithm) []store.Limit {
	out := make([]store.Limit, len(limits))
	copy(out, limits)
	for i := range out {
		out[i].Algorithm = alg
	}
	return out
}

// mustTake runs Take and fails the test on an error.
func mustTake(t *testing.T, s *redisStore, req store.Request) store.Decision {
	t.Helper()
	d, err := s.Take(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// mustPeek runs Peek and fails the test on an error.
func mustPeek(t *testing.T, s *redisStore, req store.Request) store.Decision {
	t.Helper()
	d, err := s.Peek(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// fmtFull formats a decision with the block and de-duplication fields.
func fmtFull(d store.Decision) string {
	return fmt.Sprintf("%s blocked %v started %v duplicate %v suppression %v suppressed %v per-limit %v",
		fmtDecision(d), d.Blocked, d.BlockStarted, d.Duplicate, d.Suppression, d.Suppressed, d.PerLimit)
}

// wantBlocked fails unless d is a refusal by a block of scope at index
// with retry after, started by this request when started is set.
func wantBlocked(t *testing.T, d store.Decision, scope string, index int, limit int64, retry time.Duration, started bool) {
	t.Helper()
	if d.Allowed || !d.Blocked || d.BlockStarted != started || d.Duplicate || d.LimitID != scope ||
		d.Index != index || d.Capacity != limit || d.Remaining != 0 || d.RetryAfter != retry || d.ResetAfter != retry {
		t.Fatalf("got %s, want blocked by %q (index %d, limit %d) for %s, started %v",
			fmtFull(d), scope, index, limit, retry, started)
	}
}

// blockLeft returns what remains of key's block (0 when it has none),
// read apart from any limit's wait: a peek with a blocking limit of its
// own that admits, so that the block alone decides RetryAfter.
func blockLeft(t *testing.T, s *redisStore, key string) time.Duration {
	t.Helper()
	probe := store.Limit{Name: "probe", Algorithm: store.FixedWindow, Rate: 1000, Period: time.Hour, Block: time.Millisecond}
	d, err := s.Peek(context.Background(), store.Request{Key: key, Limits: []store.Limit{probe}})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Blocked {
		return 0
	}
	return d.RetryAfter
}

// limitsWait returns what req's limits alone make it wait: the RetryAfter
// of a peek with the same limits (the same state) without their blocks,
// and without a de-duplication id; 0 when they admit it.
func limitsWait(t *testing.T, s *redisStore, req store.Request) time.Duration {
	t.Helper()
	ls := make([]store.Limit, len(req.Limits))
	for i, l := range req.Limits {
		l.Block, l.BlockMax = 0, 0
		ls[i] = l
	}
	req.Limits, req.DedupID = ls, ""
	d, err := s.Peek(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return d.RetryAfter
}

// exhaust takes until a request is refused and returns that refusal.
func exhaust(t *testing.T, s *redisStore, req store.Request) store.Decision {
	t.Helper()
	for i := 0; i < 100; i++ {
		if d := mustTake(t, s, req); !d.Allowed {
			return d
		}
	}
	t.Fatal("100 takes admitted, want a refusal")
	return store.Decision{}
}

func TestBlockOutlivesWindow(t *testing.T) {
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			s, clock := newClockedStore(t, aligned, false)
			limit := store.Limit{Name: "login", Algorithm: alg, Rate: 2, Period: time.Second, Block: 10 * time.Second}
			req := store.Request{Key: "user", Limits: []store.Limit{limit}}
			for i := 0; i < 2; i++ {
				if d := mustTake(t, s, req); !d.Allowed || d.Blocked {
					t.Fatalf("take %d: got %s, want admitted", i, fmtFull(d))
				}
			}
			wantBlocked(t, mustTake(t, s, req), "login", 0, 2, 10*time.Second, true)
			// The counting window empties after 2s at most; the block stays,
			// its retry time running down with the clock.
			for _, at := range []time.Duration{time.Millisecond, 3 * time.Second, 9*time.Second + 999*time.Millisecond} {
				clock.set(aligned + at.Microseconds())
				wantBlocked(t, mustTake(t, s, req), "login", 0, 2, 10*time.Second-at, false)
				wantBlocked(t, mustPeek(t, s, req), "login", 0, 2, 10*time.Second-at, false)
			}
			// The block key lives while the clock is within its last
			// millisecond, but no longer blocks then (PTTL 0).
			clock.set(aligned + 10*time.Second.Microseconds())
			if d := mustTake(t, s, req); !d.Allowed || d.Blocked {
				t.Fatalf("after the block: got %s, want admitted", fmtFull(d))
			}
		})
	}
}

func TestBlockRealTime(t *testing.T) {
	// Production scripts on the server clock: RetryAfter of a blocked key
	// is the block key's PTTL and runs down; waiting it out admits.
	ctx := context.Background()
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			s, c := newStore(t, Options{})
			const block = 400 * time.Millisecond
			req := store.Request{Key: "rt", Limits: []store.Limit{{Name: "b", Algorithm: alg, Rate: 1, Period: 100 * time.Millisecond, Block: block}}}
			first := exhaust(t, s, req)
			wantBlocked(t, first, "b", 0, 1, block, true)
			blockKey := keyBase(s.prefix, "rt") + tagBlock
			var last time.Duration = block
			for i := 0; i < 3; i++ {
				time.Sleep(60 * time.Millisecond)
				start := time.Now()
				d := mustTake(t, s, req)
				pttl, err := c.PTTL(ctx, blockKey).Result()
				if err != nil {
					t.Fatal(err)
				}
				// The PTTL read after the take can only be smaller, by at
				// most the time the two calls took (and a millisecond of
				// rounding).
				took := time.Since(start).Round(time.Millisecond) + time.Millisecond
				if !d.Blocked || d.RetryAfter%time.Millisecond != 0 || d.RetryAfter < pttl || d.RetryAfter > pttl+took {
					t.Fatalf("take %d: got %s, want blocked with RetryAfter equal to the PTTL %s", i, fmtFull(d), pttl)
				}
				if d.RetryAfter >= last-50*time.Millisecond {
					t.Fatalf("take %d: RetryAfter %s after %s 60ms earlier, want it to run down", i, d.RetryAfter, last)
				}
				last = d.RetryAfter
			}
			time.Sleep(last)
			if d := mustTake(t, s, req); !d.Allowed {
				t.Fatalf("after waiting RetryAfter: got %s, want admitted", fmtFull(d))
			}
		})
	}
}

func TestBlockStartedOnceUnderConcurrency(t *testing.T) {
	// 100 concurrent attempts, 5 per minute, 15 minute block.
	const attempts = 100
	tests := []struct {
		alg      store.Algorithm
		admitted int
	}{
		{store.SlidingWindowLog, 5},
		{store.SlidingWindowLog, 4},
		{store.SlidingWindowCounter, 5},
		{store.FixedWindow, 5},
		{store.FixedWindow, 4},
		{store.GCRA, 5},
		{store.TokenBucket, 5},
	}
	for _, tt := range tests {
		name := tt.alg.String() + "/" + strconv.Itoa(tt.admitted)
		t.Run(name, func(t *testing.T) {
			srv := requireServer(t)
			c := newClient(t, srv, &redis.Options{PoolSize: 32})
			s, err := newRedis(c, Options{Prefix: randomPrefix(t), Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			// Fixed windows are aligned to the clock: start far from a
			// boundary of the minute.
			if tt.alg == store.FixedWindow || tt.alg == store.SlidingWindowCounter {
				if sec := time.Now().Second(); sec > 55 {
					time.Sleep(time.Duration(61-sec) * time.Second)
				}
			}
			limit := store.Limit{Name: "five", Algorithm: tt.alg, Rate: int64(tt.admitted), Period: time.Minute, Block: 15 * time.Minute}
			req := store.Request{Key: "burst", Limits: []store.Limit{limit}}
			decisions := make([]store.Decision, attempts)
			errs := make([]error, attempts)
			var start, wg sync.WaitGroup
			start.Add(1)
			for i := 0; i < attempts; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					start.Wait()
					decisions[i], errs[i] = s.Take(context.Background(), req)
				}()
			}
			start.Done()
			wg.Wait()
			var admitted, blocked, started int
			for i, d := range decisions {
				if errs[i] != nil {
					t.Fatal(errs[i])
				}
				switch {
				case d.Allowed:
					admitted++
				case d.Blocked:
					blocked++
					if d.RetryAfter <= 14*time.Minute || d.RetryAfter > 15*time.Minute || d.LimitID != "five" {
						t.Fatalf("got %s, want a block of about 15m by five", fmtFull(d))
					}
				default:
					t.Fatalf("got %s, want admitted or blocked", fmtFull(d))
				}
				if d.BlockStarted {
					started++
				}
			}
			if admitted != tt.admitted || started != 1 || blocked != attempts-tt.admitted {
				t.Fatalf("got %d admitted, %d blocked, %d block starts; want %d, %d, 1",
					admitted, blocked, started, tt.admitted, attempts-tt.admitted)
			}
		})
	}
}

func TestBlockEscalation(t *testing.T) {
	const sec = time.Second
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			s, clock := newClockedStore(t, aligned, false)
			limit := store.Limit{Name: "esc", Algorithm: alg, Rate: 1, Period: sec, Block: sec, BlockMax: 8 * sec}
			req := store.Request{Key: "offender", Limits: []store.Limit{limit}}
			// offend fills the limit, starts a block and returns its
			// duration; then waits RetryAfter, the later of the block's
			// end and the limit's wait, and 2s more (every algorithm is
			// clear again by then).
			offend := func() time.Duration {
				t.Helper()
				d := exhaust(t, s, req)
				if !d.BlockStarted {
					t.Fatalf("got %s, want a block started", fmtFull(d))
				}
				block := blockLeft(t, s, req.Key)
				if want := max(block, limitsWait(t, s, req)); d.RetryAfter != want {
					t.Fatalf("got RetryAfter %s, want %s (the later of the block %s and the limit's wait)", d.RetryAfter, want, block)
				}
				clock.advance((d.RetryAfter + 2*sec).Microseconds())
				return block
			}
			for i, want := range []time.Duration{sec, 2 * sec, 4 * sec, 8 * sec, 8 * sec} {
				if got := offend(); got != want {
					t.Fatalf("block %d: got %s, want %s", i+1, got, want)
				}
			}
			// Strikes are kept for the last block's duration plus BlockMax
			// (16s from its start, 10s of which have passed): still
			// escalated just before they lapse...
			clock.advance((6*sec - 2*time.Millisecond).Microseconds())
			if got := offend(); got != 8*sec {
				t.Fatalf("block before the strikes lapse: got %s, want 8s", got)
			}
			// ... and forgotten after.
			clock.advance((6*sec + time.Millisecond).Microseconds())
			if got := offend(); got != sec {
				t.Fatalf("block after the strikes lapsed: got %s, want 1s", got)
			}
		})
	}
}

func TestBlockChoice(t *testing.T) {
	// Among the refusing limits that block, the longest block wins (ties:
	// the earliest); limits that admit never block.
	const min = time.Minute
	tests := []struct {
		name      string
		limits    []store.Limit
		wantScope string
		wantIndex int
		wantRetry time.Duration
	}{
		{"longest", []store.Limit{
			{Name: "a", Rate: 1, Period: time.Hour, Block: min},
			{Name: "b", Rate: 1, Period: time.Hour, Block: 5 * min},
			{Name: "c", Rate: 1, Period: time.Hour},
		}, "b", 1, 5 * min},
		{"tie goes to the earliest", []store.Limit{
			{Name: "a", Rate: 1, Period: time.Hour},
			{Name: "b", Rate: 1, Period: time.Hour, Block: 2 * min},
			{Name: "c", Rate: 1, Period: time.Hour, Block: 2 * min},
		}, "b", 1, 2 * min},
		{"admitting limit does not block", []store.Limit{
			{Name: "a", Rate: 1, Period: time.Hour},
			{Name: "b", Rate: 100, Period: time.Hour, Block: time.Hour},
		}, "", 0, 0},
		{"block max equal to block does not escalate", []store.Limit{
			{Name: "a", Rate: 1, Period: time.Hour, Block: 3 * min},
			{Name: "b", Rate: 1, Period: time.Hour, Block: 2 * min, BlockMax: 2 * min},
		}, "a", 0, 3 * min},
		// The strike counter is set to 1 below: b's second block lasts 4m.
		{"escalated duration counts", []store.Limit{
			{Name: "a", Rate: 1, Period: time.Hour, Block: 3 * min},
			{Name: "b", Rate: 1, Period: time.Hour, Block: 2 * min, BlockMax: 10 * min},
		}, "b", 1, 4 * min},
	}
	for _, tt := range tests {
		for _, alg := range store.Algorithms {
			t.Run(tt.name+"/"+alg.String(), func(t *testing.T) {
				s, clock := newClockedStore(t, aligned, false)
				req := store.Request{Key: "choice", Limits: withAlgorithm(tt.limits, alg)}
				strikes := keyBase(s.prefix, "choice") + tagStrikes
				if err := clock.c.Set(context.Background(), strikes, 1, time.Hour).Err(); err != nil {
					t.Fatal(err)
				}
				if d := mustTake(t, s, req); !d.Allowed {
					t.Fatalf("first take: got %s, want admitted", fmtFull(d))
				}
				d := mustTake(t, s, req)
				if tt.wantScope == "" {
					if d.Allowed || d.Blocked || d.BlockStarted {
						t.Fatalf("got %s, want a refusal without a block", fmtFull(d))
					}
					return
				}
				// The limits' wait (an hour) outlasts the block: RetryAfter
				// is that wait, and the block is read apart.
				wantBlocked(t, d, tt.wantScope, tt.wantIndex, 1, max(tt.wantRetry, limitsWait(t, s, req)), true)
				if got := blockLeft(t, s, req.Key); got != tt.wantRetry {
					t.Fatalf("block: got %s, want %s", got, tt.wantRetry)
				}
				if len(d.PerLimit) != len(tt.limits) {
					t.Fatalf("got per-limit %v, want %d entries", d.PerLimit, len(tt.limits))
				}
			})
		}
	}
}

func TestBlockedByAnotherPolicy(t *testing.T) {
	// The block belongs to the key: a request with other blocking limits is
	// refused too, naming the scope, with Index -1 and its first limit's
	// capacity. A request none of whose limits blocks is not subject to it.
	s, clock := newClockedStore(t, aligned, false)
	login := store.Request{Key: "alice", Limits: []store.Limit{{Name: "login", Algorithm: store.FixedWindow, Rate: 3, Period: time.Minute, Block: time.Hour}}}
	api := store.Request{Key: "alice", Limits: []store.Limit{
		{Name: "api", Algorithm: store.FixedWindow, Rate: 100, Period: time.Minute},
		{Name: "api-hour", Algorithm: store.FixedWindow, Rate: 1000, Period: time.Hour, Block: time.Minute},
	}}
	plain := store.Request{Key: "alice", Limits: []store.Limit{{Name: "plain", Algorithm: store.FixedWindow, Rate: 100, Period: time.Minute}}}
	other := store.Request{Key: "bob", Limits: api.Limits}
	wantBlocked(t, exhaust(t, s, login), "login", 0, 3, time.Hour, true)
	clock.advance(time.Minute.Microseconds())
	d := mustTake(t, s, api)
	wantBlocked(t, d, "login", -1, 100, 59*time.Minute, false)
	if len(d.PerLimit) != 2 || d.PerLimit[0].Remaining != 100 || d.PerLimit[1].Remaining != 1000 {
		t.Fatalf("got per-limit %v, want both limits untouched", d.PerLimit)
	}
	if d := mustTake(t, s, other); !d.Allowed {
		t.Fatalf("another key: got %s, want admitted", fmtFull(d))
	}
	if d := mustTake(t, s, plain); !d.Allowed || d.Blocked {
		t.Fatalf("a limit that does not block: got %s, want admitted", fmtFull(d))
	}
}

func TestCountDenied(t *testing.T) {
	const min = time.Minute
	for _, alg := range windowAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			s, clock := newClockedStore(t, aligned, false)
			limits := []store.Limit{{Name: "tries", Algorithm: alg, Rate: 3, Period: min}}
			counted := store.Request{Key: "counted", Limits: limits, CountDenied: true}
			plain := store.Request{Key: "plain", Limits: limits}
			for i := 0; i < 8; i++ {
				mustTake(t, s, counted)
				mustTake(t, s, plain)
				clock.advance(time.Second.Microseconds())
			}
			// 8 attempts at 0..7s, 3 of them admitted.
			var dc, dp store.Decision
			switch alg {
			case store.FixedWindow:
				// A new window at 60s: both start from scratch.
				clock.set(aligned + 60*time.Second.Microseconds())
				dc, dp = mustPeek(t, s, counted), mustPeek(t, s, plain)
				if !dc.Allowed || !dp.Allowed {
					t.Fatalf("new window: got %s and %s, want both admitted", fmtFull(dc), fmtFull(dp))
				}
				clock.set(aligned + 60*time.Second.Microseconds() - 1)
				dc, dp = mustPeek(t, s, counted), mustPeek(t, s, plain)
				if dc.Allowed || dp.Allowed || dc.RetryAfter != time.Microsecond {
					t.Fatalf("end of the window: got %s and %s, want both refused for 1µs", fmtFull(dc), fmtFull(dp))
				}
			case store.SlidingWindowLog:
				// At 61s the window (1s, 61s] holds the units at 2s (plain)
				// or 2..7s (counted): counted fits once at most 2 are left,
				// when the third newest (5s) leaves at 65s.
				clock.set(aligned + 61*time.Second.Microseconds())
				dc, dp = mustPeek(t, s, counted), mustPeek(t, s, plain)
				if dc.Allowed || dc.RetryAfter != 4*time.Second {
					t.Fatalf("counted: got %s, want refused for 4s", fmtFull(dc))
				}
				if !dp.Allowed || dp.Remaining != 1 {
					t.Fatalf("plain: got %s, want admitted, 1 remaining after the peek's unit", fmtFull(dp))
				}
			case store.SlidingWindowCounter:
				// At 90s the previous window weighs 1/2: 8 counted units
				// give 4, 3 admitted ones 1.5. Counted fits once 8·(60-e)/60
				// <= 2, at e = 45s.
				clock.set(aligned + 90*time.Second.Microseconds())
				dc, dp = mustPeek(t, s, counted), mustPeek(t, s, plain)
				if dc.Allowed || dc.RetryAfter != 15*time.Second {
					t.Fatalf("counted: got %s, want refused for 15s", fmtFull(dc))
				}
				if !dp.Allowed {
					t.Fatalf("plain: got %s, want admitted", fmtFull(dp))
				}
			}
			if dc.Blocked || dc.Duplicate {
				t.Fatalf("got %s, want no block or duplicate", fmtFull(dc))
			}
		})
	}
}

func TestCountDeniedWhileBlocked(t *testing.T) {
	ctx := context.Background()
	for _, alg := range windowAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			s, clock := newClockedStore(t, aligned, false)
			// The wide limit keeps the sliding log's trim (largest rate +
			// cost) out of the count.
			limits := []store.Limit{
				{Name: "pin", Algorithm: alg, Rate: 2, Period: time.Hour, Block: time.Second},
				{Name: "wide", Algorithm: alg, Rate: 100, Period: time.Hour},
			}
			for _, countDenied := range []bool{false, true} {
				req := store.Request{Key: "k" + strconv.FormatBool(countDenied), Limits: limits, CountDenied: countDenied}
				mustTake(t, s, req)
				mustTake(t, s, req)
				// RetryAfter is the later of the block's remaining time and
				// pin's wait, computed without the request (a peek before
				// it, since a counted refusal changes the wait).
				wait := limitsWait(t, s, req)
				wantBlocked(t, mustTake(t, s, req), "pin", 0, 2, max(time.Second, wait), true)
				clock.advance(1000)
				for i := 0; i < 2; i++ {
					wait = limitsWait(t, s, req)
					wantBlocked(t, mustTake(t, s, req), "pin", 0, 2, max(time.Second-time.Millisecond, wait), false)
				}
				if got := blockLeft(t, s, req.Key); got != time.Second-time.Millisecond {
					t.Fatalf("CountDenied %v: block: got %s left, want 999ms (not extended)", countDenied, got)
				}
				keys, err := s.StateKeys(req)
				if err != nil {
					t.Fatal(err)
				}
				var got int64
				if alg == store.SlidingWindowLog {
					got, err = clock.c.ZCard(ctx, keys[0]).Result()
				} else {
					got, err = clock.c.HGet(ctx, keys[0], "cur").Int64()
				}
				if err != nil {
					t.Fatal(err)
				}
				want := int64(2)
				if countDenied {
					want = 5 // the refusal that started the block and two while blocked
				}
				if got != want {
					t.Fatalf("CountDenied %v: got %d units recorded, want %d", countDenied, got, want)
				}
				clock.advance(time.Second.Microseconds())
			}
		})
	}
}

func TestCountDeniedLogBounded(t *testing.T) {
	// A flood of counted refusals keeps the sliding log at its newest
	// (largest rate + cost) members, and decisions stay exact.
	ctx := context.Background()
	s, clock := newClockedStore(t, aligned, false)
	limits := []store.Limit{
		{Name: "minute", Algorithm: store.SlidingWindowLog, Rate: 3, Period: time.Minute},
		{Name: "hour", Algorithm: store.SlidingWindowLog, Rate: 10, Period: time.Hour},
	}
	req := store.Request{Key: "flood", Limits: limits, CountDenied: true, Cost: 2}
	keys, err := s.StateKeys(req)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		d := mustTake(t, s, req)
		if d.Allowed != (i == 0) {
			t.Fatalf("take %d: got %s, want only the first admitted", i, fmtFull(d))
		}
		n, err := clock.c.ZCard(ctx, keys[0]).Result()
		if err != nil {
			t.Fatal(err)
		}
		if want := min(int64(2*(i+1)), 12); n != want {
			t.Fatalf("take %d: got %d members, want %d", i, n, want)
		}
		clock.advance(time.Second.Microseconds())
	}
	// 400 units at 0..199s, 2 per second, 12 kept. A request of cost 2
	// fits the hour once at most 8 units are left in it: once the 9th
	// newest (at 195s) has left, at 3795s. The trim dropped units long
	// before that one, so the answer is exact.
	clock.set(aligned + 200*time.Second.Microseconds())
	d := mustPeek(t, s, req)
	if d.Allowed || d.LimitID != "hour" || d.RetryAfter != time.Hour-5*time.Second || d.PerLimit[0].Remaining != 0 {
		t.Fatalf("got %s, want refused by hour for 59m55s", fmtFull(d))
	}
}

func TestDedup(t *testing.T) {
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			s, clock := newClockedStore(t, aligned, false)
			limits := []store.Limit{{Name: "orders", Algorithm: alg, Rate: 2, Period: time.Minute}}
			req := func(id string) store.Request { return store.Request{Key: "shop", Limits: limits, DedupID: id} }
			long := strings.Repeat("L", 300)
			steps := []struct {
				op        string
				id        string
				allowed   bool
				duplicate bool
				remaining int64
			}{
				{"take", "a", true, false, 1},
				{"take", "a", true, true, 1},
				{"peek", "a", true, true, 1},
				{"peek", "b", true, false, 0},
				{"take", long, true, false, 0},
				{"take", "b", false, false, 0},
				{"take", "a", true, true, 0}, // over the limit, yet a repeat
				{"take", long, true, true, 0},
				{"take", long[:299] + "M", false, false, 0},
			}
			for i, st := range steps {
				var d store.Decision
				if st.op == "take" {
					d = mustTake(t, s, req(st.id))
				} else {
					d = mustPeek(t, s, req(st.id))
				}
				if d.Allowed != st.allowed || d.Duplicate != st.duplicate || d.Remaining != st.remaining || d.Blocked {
					t.Fatalf("step %d (%s %.10q): got %s, want allowed %v duplicate %v remaining %d",
						i, st.op, st.id, fmtFull(d), st.allowed, st.duplicate, st.remaining)
				}
				if d.Duplicate && d.RetryAfter != 0 {
					t.Fatalf("step %d: duplicate with RetryAfter %s, want 0", i, d.RetryAfter)
				}
			}
			// Ids are remembered for the longest period, then forgotten.
			clock.advance(time.Minute.Microseconds() - 1)
			if d := mustPeek(t, s, req("a")); !d.Duplicate {
				t.Fatalf("just before the period ends: got %s, want a duplicate", fmtFull(d))
			}
			clock.advance(1)
			clock.advance(time.Minute.Microseconds()) // every algorithm clear again
			if d := mustTake(t, s, req("a")); !d.Allowed || d.Duplicate {
				t.Fatalf("after the period: got %s, want admitted as new", fmtFull(d))
			}
		})
	}
}

func TestDedupMixedPeriods(t *testing.T) {
	// Policies with different periods share a key's ids: an id remembered
	// for an hour outlives a later one remembered for a second.
	s, clock := newClockedStore(t, aligned, false)
	hour := []store.Limit{{Name: "h", Algorithm: store.FixedWindow, Rate: 10, Period: time.Hour}}
	second := []store.Limit{{Name: "s", Algorithm: store.FixedWindow, Rate: 10, Period: time.Second}}
	mustTake(t, s, store.Request{Key: "k", Limits: hour, DedupID: "long"})
	clock.advance(1000)
	mustTake(t, s, store.Request{Key: "k", Limits: second, DedupID: "short"})
	clock.advance(2 * time.Second.Microseconds())
	if d := mustPeek(t, s, store.Request{Key: "k", Limits: hour, DedupID: "long"}); !d.Duplicate {
		t.Fatalf("id remembered for an hour, 2s later: got %s, want a duplicate", fmtFull(d))
	}
	if d := mustPeek(t, s, store.Request{Key: "k", Limits: hour, DedupID: "short"}); d.Duplicate {
		t.Fatalf("id remembered for a second, 2s later: got %s, want it forgotten", fmtFull(d))
	}
}

func TestDedupHashBounded(t *testing.T) {
	// Distinct ids over a long time: expired ids are pruned, so the hash
	// holds at most about twice the live ids.
	ctx := context.Background()
	s, clock := newClockedStore(t, aligned, false)
	limits := []store.Limit{{Algorithm: store.FixedWindow, Rate: 1000, Period: time.Second}}
	dedupKey := keyBase(s.prefix, "ids") + tagDedup
	var most int64
	for i := 0; i < 300; i++ {
		d := mustTake(t, s, store.Request{Key: "ids", Limits: limits, DedupID: "id-" + strconv.Itoa(i)})
		if !d.Allowed || d.Duplicate {
			t.Fatalf("take %d: got %s, want admitted", i, fmtFull(d))
		}
		n, err := clock.c.HLen(ctx, dedupKey).Result()
		if err != nil {
			t.Fatal(err)
		}
		most = max(most, n)
		clock.advance(100 * time.Millisecond.Microseconds())
	}
	// 10 ids live at a time; pruning when above 2·10 + 16, plus the mark.
	if most > 2*10+16+2 {
		t.Fatalf("hash grew to %d fields, want at most %d", most, 2*10+16+2)
	}
	if most < 20 {
		t.Fatalf("hash peaked at %d fields: the test does not reach the pruning", most)
	}
}

func TestDedupBlockPrecedence(t *testing.T) {
	// A block refuses even a remembered id; a refused id is not remembered.
	s, _ := newClockedStore(t, aligned, false)
	limits := []store.Limit{{Name: "l", Algorithm: store.FixedWindow, Rate: 2, Period: time.Minute, Block: time.Hour}}
	req := func(id string) store.Request { return store.Request{Key: "k", Limits: limits, DedupID: id} }
	mustTake(t, s, req("a"))
	mustTake(t, s, req("b"))
	wantBlocked(t, mustTake(t, s, req("c")), "l", 0, 2, time.Hour, true)
	wantBlocked(t, mustTake(t, s, req("a")), "l", 0, 2, time.Hour, false)
	wantBlocked(t, mustPeek(t, s, req("a")), "l", 0, 2, time.Hour, false)
	if err := s.Reset(context.Background(), req("")); err != nil {
		t.Fatal(err)
	}
	// Reset forgot the ids too: "a" counts again; "c" was never admitted.
	for _, id := range []string{"a", "c"} {
		if d := mustTake(t, s, req(id)); !d.Allowed || d.Duplicate {
			t.Fatalf("%s after Reset: got %s, want admitted as new", id, fmtFull(d))
		}
	}
}

func TestPeekWithBlocksAndDedup(t *testing.T) {
	// Peek reports an existing block or a remembered id, else the limits'
	// verdict (no block where a take would start one), and writes nothing.
	ctx := context.Background()
	c := newClient(t, requireServer(t), &redis.Options{DB: 8})
	s, err := newRedis(c, Options{Prefix: randomPrefix(t), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	limits := []store.Limit{{Name: "l", Algorithm: store.SlidingWindowLog, Rate: 2, Period: time.Hour, Block: time.Hour, BlockMax: 4 * time.Hour}}
	req := func(id string) store.Request {
		return store.Request{Key: "peek", Limits: limits, DedupID: id, CountDenied: true}
	}
	unchanged := func(when string, peek func()) {
		t.Helper()
		assertUnchanged(t, c, s.prefix, when, peek)
	}
	mustTake(t, s, req("a"))
	mustTake(t, s, req("b"))
	unchanged("full, not blocked", func() {
		d := mustPeek(t, s, req("c"))
		if d.Allowed || d.Blocked || d.BlockStarted {
			t.Fatalf("got %s, want a refusal without a block", fmtFull(d))
		}
		if d := mustPeek(t, s, req("a")); !d.Allowed || !d.Duplicate {
			t.Fatalf("got %s, want a duplicate", fmtFull(d))
		}
	})
	d := mustTake(t, s, req("c"))
	if !d.BlockStarted {
		t.Fatalf("got %s, want a block started", fmtFull(d))
	}
	unchanged("blocked", func() {
		for _, id := range []string{"a", "c", ""} {
			if d := mustPeek(t, s, req(id)); !d.Blocked || d.BlockStarted || d.LimitID != "l" || d.RetryAfter <= 0 {
				t.Fatalf("id %q: got %s, want blocked", id, fmtFull(d))
			}
		}
	})
	for _, key := range []string{tagBlock, tagStrikes, tagDedup} {
		if n, err := c.Exists(ctx, keyBase(s.prefix, "peek")+key).Result(); err != nil || n != 1 {
			t.Fatalf("%s key: exists %d (%v), want 1", key, n, err)
		}
	}
}

func TestResetDeletesKeyState(t *testing.T) {
	ctx := context.Background()
	for _, alg := range windowAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			s, c := newStore(t, Options{})
			limits := []store.Limit{{Name: "l", Algorithm: alg, Rate: 1, Period: time.Hour, Block: time.Hour, BlockMax: 2 * time.Hour}}
			req := store.Request{Key: "r", Limits: limits, DedupID: "x", CountDenied: true}
			mustTake(t, s, req)
			if d := mustTake(t, s, store.Request{Key: "r", Limits: limits, DedupID: "y"}); !d.BlockStarted {
				t.Fatalf("got %s, want a block started", fmtFull(d))
			}
			if err := s.Reset(ctx, store.Request{Key: "r", Limits: limits}); err != nil {
				t.Fatal(err)
			}
			if keys := prefixKeys(t, c, s.prefix); len(keys) != 0 {
				t.Fatalf("after Reset: got keys %q, want none", keys)
			}
			if d := mustTake(t, s, req); !d.Allowed || d.Duplicate || d.Blocked {
				t.Fatalf("after Reset: got %s, want admitted as new", fmtFull(d))
			}
			// Strikes were forgotten: the next block is the first one.
			if d := mustTake(t, s, store.Request{Key: "r", Limits: limits}); !d.BlockStarted || d.RetryAfter < time.Hour {
				t.Fatalf("after Reset: got %s, want a block started, RetryAfter >= 1h", fmtFull(d))
			}
			if left := blockLeft(t, s, "r"); left > time.Hour || left < time.Hour-time.Minute {
				t.Fatalf("after Reset: got a block of %s left, want a first (1h) block", left)
			}
		})
	}
}

func TestTTLOnBlockStrikesAndDedupKeys(t *testing.T) {
	// Every key of the new state has a TTL: block (its duration), strikes
	// (duration + BlockMax), de-duplication hash (the longest period).
	ctx := context.Background()
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			s, c := newStore(t, Options{})
			const block, blockMax = 700 * time.Millisecond, 3 * time.Second
			limits := []store.Limit{
				{Name: "fast", Algorithm: alg, Rate: 2, Period: 250 * time.Millisecond, Block: block, BlockMax: blockMax},
				{Name: "slow", Algorithm: alg, Rate: 50, Period: 2 * time.Second},
			}
			window := alg == store.SlidingWindowLog || alg == store.SlidingWindowCounter || alg == store.FixedWindow
			started := false
			for i := 0; i < 6; i++ {
				req := store.Request{Key: "ttl", Limits: limits, DedupID: "id-" + strconv.Itoa(i), CountDenied: window && i%2 == 1}
				started = mustTake(t, s, req).BlockStarted || started
			}
			if !started {
				t.Fatal("no block started; the traffic does not trip the limit")
			}
			base := keyBase(s.prefix, "ttl")
			bounds := map[string]time.Duration{
				base + tagBlock:   block,
				base + tagStrikes: block + blockMax,
				base + tagDedup:   2 * time.Second,
			}
			seen := 0
			for _, k := range prefixKeys(t, c, s.prefix) {
				ttl, err := c.PTTL(ctx, k).Result()
				if err != nil {
					t.Fatal(err)
				}
				limit, ok := bounds[k]
				switch {
				case ok:
					seen++
				default:
					limit = maxTTL(limits)
				}
				if ttl == -1 || ttl > limit {
					t.Fatalf("key %q: got PTTL %d, want a TTL of at most %s", k, ttl, limit)
				}
			}
			if seen != len(bounds) {
				t.Fatalf("found %d of the block, strike and de-duplication keys, want all %d", seen, len(bounds))
			}
		})
	}
}

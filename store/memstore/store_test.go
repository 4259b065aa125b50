package memstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/fakeclock"
)

var ctx = context.Background()

// newTestStore returns a store on a fake clock.
func newTestStore(t *testing.T, opts Options) (*memStore, *fakeclock.Clock) {
	t.Helper()
	clk := &fakeclock.Clock{}
	opts.Clock = clk.Now
	s, err := newMem(opts)
	if err != nil {
		t.Fatalf("newMem(%+v): got error %v, want nil", opts, err)
	}
	return s, clk
}

func perSecond(alg store.Algorithm, n int64) store.Limit {
	return store.Limit{Algorithm: alg, Rate: n, Period: time.Second}
}

func mustTake(t *testing.T, s *memStore, r store.Request) store.Decision {
	t.Helper()
	d, err := s.Take(ctx, r)
	if err != nil {
		t.Fatalf("Take(%q): got error %v, want nil", r.Key, err)
	}
	return d
}

func TestNewOptions(t *testing.T) {
	tests := []struct {
		name       string
		opts       Options
		wantShards int
		wantMax    int64
	}{
		{"defaults", Options{}, defaultShards, defaultMaxKeys},
		{"shards above the cap", Options{MaxKeys: 10, Shards: 64}, 10, 10},
		{"uneven split", Options{MaxKeys: 10, Shards: 3}, 3, 10},
		{"one shard", Options{MaxKeys: 7, Shards: 1}, 1, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := newMem(tt.opts)
			if err != nil {
				t.Fatalf("got error %v, want nil", err)
			}
			if len(s.shards) != tt.wantShards {
				t.Errorf("shards: got %d, want %d", len(s.shards), tt.wantShards)
			}
			if s.budget.max != tt.wantMax {
				t.Errorf("cap: got %d, want %d", s.budget.max, tt.wantMax)
			}
		})
	}
	for _, opts := range []Options{{MaxKeys: -1}, {Shards: -1}} {
		if _, err := newMem(opts); err == nil {
			t.Errorf("newMem(%+v): got nil error, want an error", opts)
		}
	}
}

// TestExpiryMatchesRedisTTL: each state expires exactly when the Redis
// store's key would (before its millisecond rounding).
func TestExpiryMatchesRedisTTL(t *testing.T) {
	tests := []struct {
		alg    store.Algorithm
		limits []store.Limit
		cost   int64
		want   time.Duration
	}{
		{store.GCRA, []store.Limit{perSecond(store.GCRA, 4)}, 1, 250 * time.Millisecond},
		{store.TokenBucket, []store.Limit{perSecond(store.TokenBucket, 4)}, 3, 750 * time.Millisecond},
		{store.TokenBucket, []store.Limit{{Algorithm: store.TokenBucket, Rate: 1, Period: time.Second, Burst: 5}}, 5, 5 * time.Second},
		{store.SlidingWindowLog, []store.Limit{{Name: "a", Algorithm: store.SlidingWindowLog, Rate: 3, Period: time.Second}, {Name: "b", Algorithm: store.SlidingWindowLog, Rate: 9, Period: 3 * time.Second}}, 1, 3 * time.Second},
		{store.SlidingWindowCounter, []store.Limit{perSecond(store.SlidingWindowCounter, 4)}, 1, 2*time.Second - 250*time.Millisecond},
		{store.FixedWindow, []store.Limit{perSecond(store.FixedWindow, 4)}, 1, 750 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.alg.String(), func(t *testing.T) {
			s, clk := newTestStore(t, Options{})
			// Move to 250ms into a second: windows are aligned to it.
			clk.Advance(time.Second - time.Duration(clk.Now().Nanosecond()) + 250*time.Millisecond)
			mustTake(t, s, store.Request{Key: "k", Limits: tt.limits, Cost: tt.cost})
			ttls, _ := keyTTLs(s)(ctx)
			if len(ttls) != 1 {
				t.Fatalf("got states %v, want exactly one", ttls)
			}
			for k, ttl := range ttls {
				if ttl != tt.want {
					t.Errorf("state %s: got TTL %s, want %s", k, ttl, tt.want)
				}
			}
			clk.Advance(tt.want - time.Microsecond)
			if ttls, _ := keyTTLs(s)(ctx); len(ttls) == 0 {
				t.Fatalf("a microsecond before expiry: got no state, want it kept")
			}
			clk.Advance(time.Microsecond)
			if ttls, _ := keyTTLs(s)(ctx); len(ttls) != 0 {
				t.Fatalf("at expiry: got states %v, want none", ttls)
			}
		})
	}
}

// TestBucketExpiryNeverChangesADecision pins a bug: a bucket expired at
// the ceiling of its refill time, when float64 refill was still a hair
// below capacity, so a whole-capacity request was admitted a microsecond
// before its RetryAfter. Expiry now waits for the float64 refill.
func TestBucketExpiryNeverChangesADecision(t *testing.T) {
	s, clk := newTestStore(t, Options{})
	l := store.Limit{Algorithm: store.TokenBucket, Rate: 6, Period: 700 * time.Millisecond, Burst: 8}
	r := store.Request{Key: "k", Limits: []store.Limit{l}, Cost: 8}
	for i := 0; i < 200; i++ {
		d := mustTake(t, s, r)
		if d.Allowed {
			clk.Advance(time.Duration(1+i*7919%400_000) * time.Microsecond)
			continue
		}
		clk.Advance(d.RetryAfter - time.Microsecond)
		if d2 := mustTake(t, s, r); d2.Allowed {
			t.Fatalf("round %d: admitted a microsecond before RetryAfter %s", i, d.RetryAfter)
		}
		clk.Advance(time.Microsecond)
	}
}

// TestIncrementalSweep: a write that creates state examines a few
// records and drops their states expired for longer than sweepGrace (and
// not those expired more recently); a full sweep drops every expired
// state, leaves minExp exact and rebuilds the map after a large shrink.
func TestIncrementalSweep(t *testing.T) {
	s, clk := newTestStore(t, Options{MaxKeys: 5000, Shards: 1})
	l := perSecond(store.FixedWindow, 1)
	for i := 0; i < 2000; i++ {
		mustTake(t, s, store.Request{Key: fmt.Sprint("old", i), Limits: []store.Limit{l}})
	}
	// Expired, but within the grace: the incremental sweep keeps them.
	clk.Advance(time.Second)
	for i := 0; i < 20; i++ {
		mustTake(t, s, store.Request{Key: fmt.Sprint("early", i), Limits: []store.Limit{l}})
	}
	if got := s.Len(); got != 2020 {
		t.Fatalf("Len after 20 insertions among 2000 states expired within the grace: got %d, want 2020", got)
	}
	clk.Advance(sweepGrace * time.Microsecond)
	for i := 0; i < 100; i++ {
		mustTake(t, s, store.Request{Key: fmt.Sprint("new", i), Limits: []store.Limit{l}})
	}
	// Each of the 100 insertions examined up to sweepBatch records, most
	// of them expired.
	if got, max := s.Len(), 2120-100; got > max {
		t.Fatalf("Len after 100 insertions among 2020 expired states: got %d, want <= %d", got, max)
	}
	checkCounts(t, s)
	sh := &s.shards[0]
	sh.lock()
	defer sh.mu.Unlock()
	now := s.now() + 2*time.Second.Microseconds() // every state has expired
	held := sh.size
	if got := sh.sweep(now, nil); got != held {
		t.Fatalf("full sweep after every state expired: got %d dropped, want %d", got, held)
	}
	if sh.index.len() != 0 || sh.index.segs != nil || sh.lru.next != &sh.lru {
		t.Fatalf("after a full sweep: got %d records in %d segments, want 0, 0 (index dropped)", sh.index.len(), len(sh.index.segs))
	}
	if sh.minExp != math.MaxInt64 || sh.pubMinExp.Load() != math.MaxInt64 {
		t.Fatalf("minExp of an empty shard: got %d (published %d), want the maximum", sh.minExp, sh.pubMinExp.Load())
	}
	s.budget.give(held)
}

// TestSweepLeavesMinExpExact: minExp is a lower bound that goes stale
// when the state holding it is rewritten; a full sweep makes it the
// earliest expiry again, so that the next one waits until something has
// certainly expired.
func TestSweepLeavesMinExpExact(t *testing.T) {
	s, clk := newTestStore(t, Options{Shards: 1})
	short := store.Request{Key: "a", Limits: []store.Limit{{Rate: 10, Period: time.Second}}}
	long := store.Request{Key: "b", Limits: []store.Limit{{Rate: 1, Period: time.Hour}}}
	mustTake(t, s, short) // expires 100ms from now
	mustTake(t, s, long)
	start := s.now()
	clk.Advance(50 * time.Millisecond)
	mustTake(t, s, short) // 1.5 units used: now expires 200ms from start
	sh := &s.shards[0]
	sh.lock()
	defer sh.mu.Unlock()
	if want := start + 100_000; sh.minExp != want {
		t.Fatalf("minExp before the sweep: got %d, want %d (the first expiry, now stale)", sh.minExp, want)
	}
	if got := sh.sweep(s.now(), nil); got != 0 {
		t.Fatalf("sweep with nothing expired: got %d dropped, want 0", got)
	}
	if want := start + 200_000; sh.minExp != want || sh.pubMinExp.Load() != want {
		t.Fatalf("minExp after the sweep: got %d (published %d), want %d", sh.minExp, sh.pubMinExp.Load(), want)
	}
}

// TestSharding: keys spread over shards, and all states of one key live
// in its one record, so that a multi-limit take holds one lock.
func TestSharding(t *testing.T) {
	s, _ := newTestStore(t, Options{Shards: 8})
	a := store.Limit{Name: "a", Rate: 5, Period: time.Second}
	b := store.Limit{Name: "b", Rate: 5, Period: time.Minute}
	for i := 0; i < 400; i++ {
		mustTake(t, s, store.Request{Key: fmt.Sprint("user:", i), Limits: []store.Limit{a, b}})
	}
	used := 0
	for i := range s.shards {
		if s.shards[i].index.len() > 0 {
			used++
		}
	}
	forEachRecord(s, func(_ *shard, r *record) {
		if len(r.states) != 2 || r.find(store.GCRA, "a") < 0 || r.find(store.GCRA, "b") < 0 {
			t.Errorf("key %q: got %d states, want those of a and b", r.key, len(r.states))
		}
	})
	if used < 6 {
		t.Fatalf("400 keys over 8 shards: got %d shards used, want most", used)
	}
	checkCounts(t, s)
}

// TestClockSteppedBack: a clock that jumps back does not rewind the store:
// counts are kept and decisions stay as strict as before.
func TestClockSteppedBack(t *testing.T) {
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			s, clk := newTestStore(t, Options{})
			r := store.Request{Key: "k", Limits: []store.Limit{perSecond(alg, 2)}}
			mustTake(t, s, r)
			mustTake(t, s, r)
			clk.Advance(-time.Hour)
			d := mustTake(t, s, r)
			if d.Allowed || d.RetryAfter <= 0 {
				t.Fatalf("after the clock stepped back: got %+v, want denied with a RetryAfter", d)
			}
			clk.Advance(time.Hour + 2*time.Second)
			if d := mustTake(t, s, r); !d.Allowed {
				t.Fatalf("once the clock caught up: got denied, want allowed")
			}
		})
	}
}

// TestConcurrentMixed (run with -race): takes, peeks, resets and Len from
// many goroutines on shared keys of every algorithm, while the clock is
// still: each key admits exactly its rate.
func TestConcurrentMixed(t *testing.T) {
	s, _ := newTestStore(t, Options{Shards: 4})
	const keys, rate, workers = 20, 7, 16
	var mu sync.Mutex
	admitted := map[string]int{}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rep := 0; rep < 2; rep++ {
				for _, alg := range store.Algorithms {
					for k := 0; k < keys; k++ {
						key := fmt.Sprintf("%s/%d", alg, (k+w)%keys)
						r := store.Request{Key: key, Limits: []store.Limit{perSecond(alg, rate), {Name: "wide", Algorithm: alg, Rate: 100, Period: time.Second}}}
						if _, err := s.Peek(ctx, r); err != nil {
							t.Errorf("Peek: got error %v, want nil", err)
							return
						}
						d, err := s.Take(ctx, r)
						if err != nil {
							t.Errorf("Take: got error %v, want nil", err)
							return
						}
						if d.Allowed {
							mu.Lock()
							admitted[key]++
							mu.Unlock()
						}
						if w%4 == 0 {
							scratch := store.Request{Key: "scratch-" + key, Limits: r.Limits}
							if _, err := s.Take(ctx, scratch); err != nil {
								t.Errorf("Take: got error %v, want nil", err)
							}
							// Workers share scratch keys: one may find the
							// state another has just reset.
							if err := s.Reset(ctx, scratch); err != nil && !errors.Is(err, store.ErrNotFound) {
								t.Errorf("Reset: got error %v, want nil or ErrNotFound", err)
							}
							s.Len()
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	for alg := range store.Algorithms {
		for k := 0; k < keys; k++ {
			key := fmt.Sprintf("%s/%d", store.Algorithms[alg], k)
			if admitted[key] != rate {
				t.Errorf("key %s: got %d admitted, want %d", key, admitted[key], rate)
			}
		}
	}
}

// TestRunLog: the sliding window log keeps runs sorted, counts and finds
// entries by cumulative counts, and gives memory back after pruning.
func TestRunLog(t *testing.T) {
	var l runLog
	for ts := int64(1); ts <= 10_000; ts++ {
		l.add(ts, 2)
	}
	l.add(10_000, 3) // same microsecond: merged into the last run
	if got := len(l.live()); got != 10_000 {
		t.Fatalf("runs: got %d, want 10000", got)
	}
	idx, before := l.after(9_990)
	if count := l.total() - before; count != 10*2+3 {
		t.Fatalf("entries after 9990: got %d, want 23", count)
	}
	if got := l.kth(idx, before, 3); got != 9_992 {
		t.Fatalf("3rd entry after 9990: got %d, want 9992", got)
	}
	if got := l.kth(idx, before, 23); got != 10_000 {
		t.Fatalf("23rd entry after 9990: got %d, want 10000", got)
	}
	l.prune(9_990)
	if got := len(l.live()); got != 10 {
		t.Fatalf("runs after pruning: got %d, want 10", got)
	}
	if cap(l.runs) > 256 {
		t.Fatalf("capacity after pruning 9990 of 10000 runs: got %d, want <= 256", cap(l.runs))
	}
	if got := l.total() - l.base; got != 23 {
		t.Fatalf("entries kept: got %d, want 23", got)
	}
	l.add(9_000, 1) // a clock that stepped back: recorded at the newest time
	if got := l.newest(); got != 10_000 {
		t.Fatalf("newest after an out-of-order add: got %d, want 10000", got)
	}
}

// TestSteadyStateAllocs: an admitted take or a peek on an existing key
// with one limit allocates nothing, for every algorithm; a multi-limit
// decision allocates its PerLimit slice only.
func TestSteadyStateAllocs(t *testing.T) {
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			s, clk := newTestStore(t, Options{})
			one := store.Request{Key: "user:42", Limits: []store.Limit{{Algorithm: alg, Rate: 1 << 30, Period: time.Second}}}
			multi := store.Request{Key: "user:42", Limits: []store.Limit{
				{Name: "a", Algorithm: alg, Rate: 1 << 30, Period: time.Second},
				{Name: "b", Algorithm: alg, Rate: 1 << 30, Period: time.Minute},
			}}
			mustTake(t, s, one)
			mustTake(t, s, multi)
			if d := mustTake(t, s, one); !d.Allowed {
				t.Fatalf("take under a limit of 2^30 per second: got %+v, want admitted (the path measured)", d)
			}
			for _, tc := range []struct {
				name string
				f    func()
				want float64
			}{
				{"take", func() { s.Take(ctx, one); clk.Advance(time.Microsecond) }, 0},
				{"peek", func() { s.Peek(ctx, one) }, 0},
				{"take, two limits", func() { s.Take(ctx, multi) }, 1},
			} {
				want := tc.want
				if alg == store.SlidingWindowLog && tc.name == "take, two limits" {
					want = 2 // and the log's ID, joined from both limits
				}
				if got := testing.AllocsPerRun(500, tc.f); got > want {
					t.Errorf("%s: got %.1f allocations, want <= %.0f", tc.name, got, want)
				}
			}
		})
	}
}

// TestLookupRecent: the record the shard's lookup found last answers the
// next lookup of its key only: other keys, a key whose hash matches the
// recent one's but whose bytes differ, and a key removed since are found
// (or not) in the index.
func TestLookupRecent(t *testing.T) {
	s, _ := newTestStore(t, Options{Shards: 1})
	l := store.Limit{Rate: 2, Period: time.Hour}
	a, b := store.Request{Key: "a", Limits: []store.Limit{l}}, store.Request{Key: "b", Limits: []store.Limit{l}}
	// Each key keeps its own count while the recent record changes.
	for i, step := range []struct {
		r       store.Request
		allowed bool
		rem     int64
	}{{a, true, 1}, {b, true, 1}, {b, true, 0}, {a, true, 0}, {b, false, 0}, {a, false, 0}} {
		if d := mustTake(t, s, step.r); d.Allowed != step.allowed || d.Remaining != step.rem {
			t.Fatalf("take %d, of %s: got allowed %v, Remaining %d, want %v, %d", i+1, step.r.Key, d.Allowed, d.Remaining, step.allowed, step.rem)
		}
	}
	sh, ha := s.locate("a")
	_, hb := s.locate("b")
	ra, rb := sh.index.get("a", ha), sh.index.get("b", hb)
	if got := sh.lookup("b", hb); got != rb {
		t.Fatalf("lookup(b): got %p, want b's record %p", got, rb)
	}
	// A hash that matches while the key does not (a collision) falls
	// back to the index.
	sh.recentHash = ha
	if got := sh.lookup("a", ha); got != ra {
		t.Fatalf("lookup(a) with b's record recent under a's hash: got %p, want a's record %p", got, ra)
	}
	if err := s.Reset(ctx, a); err != nil {
		t.Fatal(err)
	}
	if sh.recent == ra {
		t.Fatal("after Reset(a): a's removed record is still the recent one")
	}
	if got := sh.lookup("a", ha); got != nil {
		t.Fatalf("lookup(a) after Reset(a): got %p, want nil", got)
	}
	if d := mustTake(t, s, a); !d.Allowed || d.Remaining != 1 {
		t.Fatalf("Take(a) after Reset(a): got %+v, want allowed with Remaining 1 (a fresh key)", d)
	}
	if d := mustTake(t, s, b); d.Allowed {
		t.Fatalf("Take(b) after Reset(a): got %+v, want refused (b's count kept)", d)
	}
}

package memstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/storetest"
)

var ctx = context.Background()

// newTestStore returns a store on a fake clock.
func newTestStore(t *testing.T, opts Options) (*Store, *storetest.FakeClock) {
	t.Helper()
	clk := &storetest.FakeClock{}
	opts.Clock = clk.Now
	s, err := New(opts)
	if err != nil {
		t.Fatalf("New(%+v): got error %v, want nil", opts, err)
	}
	return s, clk
}

func perSecond(alg store.Algorithm, n int64) store.Limit {
	return store.Limit{Algorithm: alg, Rate: n, Period: time.Second}
}

func mustTake(t *testing.T, s *Store, r store.Request) store.Decision {
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
		wantLimits []int // per shard; nil: not checked
	}{
		{"defaults", Options{}, DefaultShards, nil},
		{"shards above the cap", Options{MaxKeys: 10, Shards: 64}, 10, []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
		{"uneven split", Options{MaxKeys: 10, Shards: 3}, 3, []int{4, 3, 3}},
		{"one shard", Options{MaxKeys: 7, Shards: 1}, 1, []int{7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.opts)
			if err != nil {
				t.Fatalf("got error %v, want nil", err)
			}
			if len(s.shards) != tt.wantShards {
				t.Fatalf("shards: got %d, want %d", len(s.shards), tt.wantShards)
			}
			total := 0
			for i := range s.shards {
				sh := &s.shards[i]
				total += sh.limit
				if tt.wantLimits != nil && sh.limit != tt.wantLimits[i] {
					t.Errorf("shard %d limit: got %d, want %d", i, sh.limit, tt.wantLimits[i])
				}
			}
			want := tt.opts.MaxKeys
			if want == 0 {
				want = DefaultMaxKeys
			}
			if total != want {
				t.Errorf("sum of shard limits: got %d, want %d", total, want)
			}
		})
	}
	for _, opts := range []Options{{MaxKeys: -1}, {Shards: -1}} {
		if _, err := New(opts); err == nil {
			t.Errorf("New(%+v): got nil error, want an error", opts)
		}
	}
}

// TestKeyCap: at MaxKeys, a new key is refused with a capacity error and
// nothing is recorded; existing keys, peeks and denials keep working; once
// states expire, new keys fit again.
func TestKeyCap(t *testing.T) {
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			s, clk := newTestStore(t, Options{MaxKeys: 3, Shards: 1})
			l := perSecond(alg, 1)
			for i := 0; i < 3; i++ {
				mustTake(t, s, store.Request{Key: fmt.Sprint("k", i), Limits: []store.Limit{l}})
			}
			_, err := s.Take(ctx, store.Request{Key: "new", Limits: []store.Limit{l}})
			var be *store.BackendError
			switch {
			case !errors.As(err, &be):
				t.Fatalf("new key at the cap: got error %v, want a *store.BackendError", err)
			case be.Kind != store.KindCapacity || be.Op != "take":
				t.Fatalf("new key at the cap: got Kind %q Op %q, want %q %q", be.Kind, be.Op, store.KindCapacity, "take")
			case !errors.Is(err, store.ErrTooManyKeys) || !errors.Is(err, store.ErrStoreUnavailable):
				t.Fatalf("new key at the cap: got %v, want it to match ErrTooManyKeys and ErrStoreUnavailable", err)
			}
			if got := s.Len(); got != 3 {
				t.Fatalf("Len after the refusal: got %d, want 3", got)
			}
			if d, err := s.Peek(ctx, store.Request{Key: "new", Limits: []store.Limit{l}}); err != nil || !d.Allowed {
				t.Fatalf("Peek of a new key at the cap: got %+v, %v, want allowed, nil", d, err)
			}
			if d := mustTake(t, s, store.Request{Key: "k0", Limits: []store.Limit{l}}); d.Allowed {
				t.Fatalf("existing exhausted key at the cap: got allowed, want denied")
			}
			clk.Advance(2 * l.Period) // every state has expired (the sliding counter lives two windows)
			for i := 0; i < 3; i++ {
				if d := mustTake(t, s, store.Request{Key: fmt.Sprint("fresh", i), Limits: []store.Limit{l}}); !d.Allowed {
					t.Fatalf("new key %d after expiry: got denied, want allowed", i)
				}
			}
			if got := s.Len(); got != 3 {
				t.Fatalf("Len after replacing expired states: got %d, want 3", got)
			}
		})
	}
}

// TestKeyCapAllOrNothing: a multi-limit request that needs more new states
// than fit is refused whole.
func TestKeyCapAllOrNothing(t *testing.T) {
	s, _ := newTestStore(t, Options{MaxKeys: 3, Shards: 1})
	a := store.Limit{Name: "a", Rate: 5, Period: time.Second}
	b := store.Limit{Name: "b", Rate: 5, Period: time.Minute}
	mustTake(t, s, store.Request{Key: "x", Limits: []store.Limit{a, b}})
	if _, err := s.Take(ctx, store.Request{Key: "y", Limits: []store.Limit{a, b}}); !errors.Is(err, store.ErrTooManyKeys) {
		t.Fatalf("two new states with room for one: got %v, want ErrTooManyKeys", err)
	}
	if got := s.Len(); got != 2 {
		t.Fatalf("Len: got %d, want 2 (nothing of the refused request stored)", got)
	}
	if d := mustTake(t, s, store.Request{Key: "x", Limits: []store.Limit{a, b}}); !d.Allowed || d.Remaining != 3 {
		t.Fatalf("existing key: got %+v, want allowed with 3 remaining", d)
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

// TestIncrementalSweep: inserting a state examines a few others and drops
// the expired ones; a shard at its cap sweeps itself whole and rebuilds
// its map after a large shrink.
func TestIncrementalSweep(t *testing.T) {
	s, clk := newTestStore(t, Options{MaxKeys: 5000, Shards: 1})
	l := perSecond(store.FixedWindow, 1)
	for i := 0; i < 2000; i++ {
		mustTake(t, s, store.Request{Key: fmt.Sprint("old", i), Limits: []store.Limit{l}})
	}
	clk.Advance(time.Second)
	for i := 0; i < 100; i++ {
		mustTake(t, s, store.Request{Key: fmt.Sprint("new", i), Limits: []store.Limit{l}})
	}
	// Each of the 100 insertions examined up to sweepBatch entries, most of
	// them expired.
	if got, max := s.Len(), 2100-100; got > max {
		t.Fatalf("Len after 100 insertions among 2000 expired states: got %d, want <= %d", got, max)
	}
	sh := &s.shards[0]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.now() + 2*time.Second.Microseconds() // every state has expired
	sh.limit = len(sh.m)                          // full: the next room check sweeps everything
	if !sh.room(now, 1) {
		t.Fatalf("room after every state expired: got false, want true")
	}
	if len(sh.m) != 0 || sh.peak != 0 {
		t.Fatalf("after a full sweep: got %d states, peak %d, want 0, 0 (map rebuilt)", len(sh.m), sh.peak)
	}
	if sh.minExp != 1<<63-1 {
		t.Fatalf("minExp of an empty shard: got %d, want the maximum", sh.minExp)
	}
}

// TestFullSweepOnlyWhenSomethingExpired: at the cap, a shard whose
// earliest expiry lies ahead refuses without scanning.
func TestFullSweepOnlyWhenSomethingExpired(t *testing.T) {
	s, _ := newTestStore(t, Options{MaxKeys: 2, Shards: 1})
	l := store.Limit{Rate: 1, Period: time.Hour}
	mustTake(t, s, store.Request{Key: "a", Limits: []store.Limit{l}})
	mustTake(t, s, store.Request{Key: "b", Limits: []store.Limit{l}})
	sh := &s.shards[0]
	if sh.minExp <= s.now() {
		t.Fatalf("minExp: got %d, want after now %d", sh.minExp, s.now())
	}
	if _, err := s.Take(ctx, store.Request{Key: "c", Limits: []store.Limit{l}}); !errors.Is(err, store.ErrTooManyKeys) {
		t.Fatalf("third key: got %v, want ErrTooManyKeys", err)
	}
}

// TestSharding: keys spread over shards, and all states of one key share
// its shard so that a multi-limit take holds one lock.
func TestSharding(t *testing.T) {
	s, _ := newTestStore(t, Options{Shards: 8})
	a := store.Limit{Name: "a", Rate: 5, Period: time.Second}
	b := store.Limit{Name: "b", Rate: 5, Period: time.Minute}
	for i := 0; i < 400; i++ {
		mustTake(t, s, store.Request{Key: fmt.Sprint("user:", i), Limits: []store.Limit{a, b}})
	}
	used := 0
	for i := range s.shards {
		sh := &s.shards[i]
		if len(sh.m) > 0 {
			used++
		}
		for k := range sh.m {
			other := stateKey{k.key, "a"}
			if k.id == "a" {
				other.id = "b"
			}
			if _, ok := sh.m[other]; !ok {
				t.Fatalf("key %q: state %q in shard %d, state %q elsewhere", k.key, k.id, i, other.id)
			}
		}
	}
	if used < 6 {
		t.Fatalf("400 keys over 8 shards: got %d shards used, want most", used)
	}
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
							if err := s.Reset(ctx, scratch); err != nil {
								t.Errorf("Reset: got error %v, want nil", err)
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

// TestSteadyStateAllocs: a take or peek on an existing key with one limit
// allocates nothing, for every algorithm; a multi-limit decision
// allocates its PerLimit slice only.
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

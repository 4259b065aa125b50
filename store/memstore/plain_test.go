package memstore

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// TestPlainPathMatchesGeneral: Take, which decides plain requests on its
// own path, and the general path alone give the same decisions, errors,
// state counts and evictions over random sequences of plain and other
// requests on a few keys, with the clock jumping past expiries and the
// amortized sweep's grace, in a store small enough to evict.
func TestPlainPathMatchesGeneral(t *testing.T) {
	limits := []store.Limit{
		{Algorithm: store.GCRA, Rate: 5, Period: time.Second},
		{Algorithm: store.TokenBucket, Rate: 2, Period: 100 * time.Millisecond, Burst: 6},
		{Algorithm: store.FixedWindow, Rate: 3, Period: time.Second},
		{Algorithm: store.SlidingWindowCounter, Rate: 4, Period: 500 * time.Millisecond},
		{Algorithm: store.SlidingWindowLog, Rate: 3, Period: time.Second},
		{Name: "burst", Algorithm: store.GCRA, Rate: 3, Period: 200 * time.Millisecond},
		{Name: "log", Algorithm: store.SlidingWindowLog, Rate: 4, Period: 300 * time.Millisecond},
	}
	steps := []time.Duration{0, 0, time.Millisecond, 37 * time.Millisecond, 150 * time.Millisecond, 600 * time.Millisecond, 1500 * time.Millisecond, 3 * time.Second}
	for _, cfg := range []Options{{MaxKeys: 12, Shards: 1}, {MaxKeys: 1000, Shards: 4}} {
		for seed := uint64(1); seed <= 20; seed++ {
			t.Run(fmt.Sprintf("max%d/shards%d/seed%d", cfg.MaxKeys, cfg.Shards, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 99))
				plain, clk := newTestStore(t, cfg)
				general, clk2 := newTestStore(t, cfg)
				for i := 0; i < 3000; i++ {
					l := limits[rng.IntN(len(limits))]
					req := store.Request{
						Key:    fmt.Sprint("k", rng.IntN(8)),
						Limits: []store.Limit{l},
						Cost:   int64(rng.IntN(4)),
					}
					switch rng.IntN(12) {
					case 0: // a block: a key state
						req.Limits[0].Block = 250 * time.Millisecond
					case 1: // a remembered id: a key state
						req.DedupID = fmt.Sprint("id", rng.IntN(3))
					case 2: // counted refusals, on window algorithms
						if l.Algorithm == store.FixedWindow || l.Algorithm == store.SlidingWindowCounter {
							req.CountDenied = true
						}
					case 3: // more than the capacity: an error
						req.Cost = 7
					case 4: // two limits of one algorithm
						second := l
						second.Name, second.Period = "second", 2*l.Period
						req.Limits = append(req.Limits, second)
					}
					got, gotErr := plain.Take(ctx, req)
					want, wantErr := general.decide(req, true)
					if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
						t.Fatalf("step %d, %+v:\nTake:    %+v, %v\ngeneral: %+v, %v", i, req, got, gotErr, want, wantErr)
					}
					// Expired state is dropped a few records at a time, picked
					// at random, so only live state and (with one shard, where
					// a full store drops every expired state before evicting)
					// evictions are the same.
					if p, g := liveStates(plain), liveStates(general); p != g {
						t.Fatalf("step %d, %+v: Take leaves %d live states, the general path %d", i, req, p, g)
					}
					if cfg.Shards == 1 && plain.Evictions() != general.Evictions() {
						t.Fatalf("step %d, %+v: Take leaves %d evictions, the general path %d", i, req, plain.Evictions(), general.Evictions())
					}
					step := steps[rng.IntN(len(steps))]
					clk.Advance(step)
					clk2.Advance(step)
				}
			})
		}
	}
}

// liveStates counts s's live states as for MaxKeys.
func liveStates(s *memStore) int {
	now := s.now()
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.lock()
		sh.index.each(func(r *record) {
			for j := range r.states {
				if r.states[j].exp > now {
					n++
				}
			}
			if ks := r.ks; ks != nil && ks.exp > now {
				n++
				for _, e := range ks.ids {
					if e.exp > now {
						n++
					}
				}
			}
		})
		sh.mu.Unlock()
	}
	return n
}

// TestPlainTakeAllocs: a plain Take of a known key allocates nothing, for
// every algorithm it decides.
func TestPlainTakeAllocs(t *testing.T) {
	s, clk := newTestStore(t, Options{})
	for _, alg := range []store.Algorithm{store.GCRA, store.TokenBucket, store.FixedWindow, store.SlidingWindowCounter, store.SlidingWindowLog} {
		req := store.Request{Key: "k", Limits: []store.Limit{{Algorithm: alg, Rate: 1000, Period: 10 * time.Millisecond}}}
		// A log holds the entries of one period: fill it first, so that
		// each Take below drops an entry as it adds one.
		for range 50 {
			mustTake(t, s, req)
			clk.Advance(time.Millisecond)
		}
		allocs := testing.AllocsPerRun(100, func() {
			clk.Advance(time.Millisecond)
			if _, err := s.Take(ctx, req); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations a Take, want 0", alg, allocs)
		}
	}
}

// TestPlainPathManyLimits: limits beyond what the plan cache holds are
// decided as before, on the general path.
func TestPlainPathManyLimits(t *testing.T) {
	plain, clk := newTestStore(t, Options{})
	general, clk2 := newTestStore(t, Options{})
	for round := 0; round < 3; round++ {
		for i := int64(1); i <= 600; i++ {
			req := store.Request{Key: fmt.Sprint("k", i%7), Limits: []store.Limit{{Rate: i, Period: time.Second}}}
			got, gotErr := plain.Take(ctx, req)
			want, wantErr := general.decide(req, true)
			if gotErr != nil || wantErr != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d, rate %d: Take %+v, %v; general path %+v, %v", round, i, got, gotErr, want, wantErr)
			}
		}
		clk.Advance(300 * time.Millisecond)
		clk2.Advance(300 * time.Millisecond)
	}
}

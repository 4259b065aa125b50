package memstore

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// hotOf returns the hot record of key's shard and the record of key.
func hotOf(s *memStore, key string) (hot, r *record) {
	sh, h := s.locate(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.hot, sh.index.get(key, h)
}

// TestHotRecord: a key taken again and again becomes its shard's hot
// record, for GCRA, the token bucket and the fixed window, and whatever else reads the
// key's state (Peek, the general path, Reset, a sweep, eviction) finds the
// counts its Takes left, as if they had stayed in the record.
func TestHotRecord(t *testing.T) {
	for _, alg := range []store.Algorithm{store.GCRA, store.TokenBucket, store.FixedWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			s, clk := newTestStore(t, Options{Shards: 1})
			l := store.Limit{Algorithm: alg, Rate: 10, Period: time.Second}
			req := store.Request{Key: "k", Limits: []store.Limit{l}}
			for i := 0; i < 4; i++ {
				mustTake(t, s, req)
			}
			hot, r := hotOf(s, "k")
			if hot == nil || hot != r {
				t.Fatalf("after four Takes of one key: hot record %p, want the key's %p", hot, r)
			}
			// Peek (the general path, under lock) sees the four units:
			// a fifth would leave 5.
			p, err := s.Peek(ctx, req)
			if err != nil || !p.Allowed || p.Remaining != 5 {
				t.Fatalf("Peek of a hot key: allowed %v, remaining %d, %v; want true, 5", p.Allowed, p.Remaining, err)
			}
			if hot, _ := hotOf(s, "k"); hot != nil {
				t.Fatalf("Peek left the hot record in place")
			}
			// The record holds the counts again: the next plain Takes
			// continue from them, and make it hot again.
			for want := int64(5); want >= 3; want-- {
				if d := mustTake(t, s, req); !d.Allowed || d.Remaining != want {
					t.Fatalf("Take after Peek: allowed %v, remaining %d; want true, %d", d.Allowed, d.Remaining, want)
				}
			}
			// A request with a block takes the general path from the hot
			// counts: 3 left, cost 3 fits, then nothing.
			blocked := req
			blocked.Limits = []store.Limit{l}
			blocked.Limits[0].Block = time.Minute
			blocked.Cost = 3
			if hot, _ := hotOf(s, "k"); hot == nil {
				t.Fatalf("the key is not hot before the general path")
			}
			if d, err := s.Take(ctx, blocked); err != nil || !d.Allowed || d.Remaining != 0 {
				t.Fatalf("general-path Take of a hot key: %+v, %v; want admitted, 0 left", d, err)
			}
			if d := mustTake(t, s, req); d.Allowed {
				t.Fatalf("Take past the limit admitted: %+v", d)
			}
			checkCounts(t, s)

			// Reset forgets the hot counts.
			clk.Advance(time.Minute) // past the block (never started) and the state
			for i := 0; i < 4; i++ {
				mustTake(t, s, req)
			}
			if err := s.Reset(ctx, req); err != nil {
				t.Fatalf("Reset of a hot key: %v", err)
			}
			if d := mustTake(t, s, req); d.Remaining != 9 {
				t.Fatalf("Take after Reset: remaining %d, want 9", d.Remaining)
			}
		})
	}
}

// TestHotRecordNotForOtherStates: a sliding window's record, a record of
// two states and one with a key state never become hot.
func TestHotRecordNotForOtherStates(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	hour := time.Hour
	for _, tc := range []struct {
		key  string
		reqs []store.Request
	}{
		{"counter", []store.Request{{Key: "counter", Limits: []store.Limit{{Algorithm: store.SlidingWindowCounter, Rate: 99, Period: hour}}}}},
		{"log", []store.Request{{Key: "log", Limits: []store.Limit{{Algorithm: store.SlidingWindowLog, Rate: 99, Period: hour}}}}},
		{"two", []store.Request{
			{Key: "two", Limits: []store.Limit{{Rate: 99, Period: hour}}},
			{Key: "two", Limits: []store.Limit{{Rate: 99, Period: 2 * hour}}},
		}},
		{"dedup", []store.Request{
			{Key: "dedup", Limits: []store.Limit{{Rate: 99, Period: hour}}, DedupID: "a"},
			{Key: "dedup", Limits: []store.Limit{{Rate: 99, Period: hour}}},
		}},
	} {
		for i := 0; i < 4; i++ {
			for _, r := range tc.reqs {
				mustTake(t, s, r)
			}
			// The last request alone, again: a repeat.
			mustTake(t, s, tc.reqs[len(tc.reqs)-1])
		}
		if hot, r := hotOf(s, tc.key); hot != nil && hot == r {
			t.Errorf("%s: the record became hot", tc.key)
		}
	}
}

// TestHotRecordEvictedAndSwept: a hot record evicted by a decision in
// another shard, or dropped once expired by one in its own, is accounted
// for with the counts its Takes left: the eviction counts a live key, the
// expired one is dropped without counting.
func TestHotRecordEvictedAndSwept(t *testing.T) {
	limits := []store.Limit{{Rate: 10, Period: time.Second}}
	s, clk := newTestStore(t, Options{MaxKeys: 2, Shards: 2})
	// x, hot, in one shard, then w and y in the other: x, older by more
	// than the list's precision and still live, makes room for y.
	// Six units: the last three (at least) are counted on the shard's
	// line alone, and the record's own counts, read without them, have
	// expired by the time room is made.
	x, w, y := keysInShards(s)
	for i := 0; i < 6; i++ {
		mustTake(t, s, store.Request{Key: x, Limits: limits})
	}
	if hot, r := hotOf(s, x); hot == nil || hot != r {
		t.Fatalf("key %s is not hot", x)
	}
	clk.Advance(450 * time.Millisecond) // 6 units drain in 600ms
	mustTake(t, s, store.Request{Key: w, Limits: limits})
	mustTake(t, s, store.Request{Key: y, Limits: limits})
	if got := s.Evictions(); got != 1 {
		t.Fatalf("evictions after making room for %s: %d, want 1", y, got)
	}
	if hot, r := hotOf(s, x); hot != nil || r != nil {
		t.Fatalf("the evicted record: hot %p, indexed %p; want neither", hot, r)
	}
	checkCounts(t, s)

	// An expired hot record is dropped to make room, not evicted.
	s2, clk2 := newTestStore(t, Options{MaxKeys: 1, Shards: 1})
	for i := 0; i < 3; i++ {
		mustTake(t, s2, store.Request{Key: "a", Limits: limits})
	}
	if hot, r := hotOf(s2, "a"); hot == nil || hot != r {
		t.Fatalf("key a is not hot")
	}
	clk2.Advance(time.Minute)
	mustTake(t, s2, store.Request{Key: "b", Limits: limits})
	if got := s2.Evictions(); got != 0 {
		t.Fatalf("evictions after an expired hot key made room: %d, want 0", got)
	}
	if got := s2.Len(); got != 1 {
		t.Fatalf("Len: %d, want 1", got)
	}
	checkCounts(t, s2)
}

// keysInShards returns three keys of a store of two shards: the first in
// one shard, the other two in the other.
func keysInShards(s *memStore) (a, b, c string) {
	var found []string
	a = "k0"
	for i := 1; len(found) < 2; i++ {
		k := "k" + string(rune('0'+i%10)) + string(rune('a'+i/10))
		if s.shardFor(k) != s.shardFor(a) {
			found = append(found, k)
		}
	}
	return a, found[0], found[1]
}

// TestHotRecordConcurrent: plain Takes of one key from many goroutines,
// while others Peek it and take it on the general path (with a
// de-duplication id, which also gives the key a key state) admit exactly
// the limit's capacity between them. Run it with -race.
func TestHotRecordConcurrent(t *testing.T) {
	for _, alg := range []store.Algorithm{store.GCRA, store.TokenBucket, store.FixedWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			s, _ := newTestStore(t, Options{Shards: 2})
			const capacity = 1000
			l := []store.Limit{{Algorithm: alg, Rate: capacity, Period: time.Hour}}
			var admitted atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			run := func(n int, req func(i int) store.Request, peek bool) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for i := 0; i < n; i++ {
						r := req(i)
						if peek {
							if _, err := s.Peek(ctx, r); err != nil {
								t.Error(err)
								return
							}
							continue
						}
						d, err := s.Take(ctx, r)
						if err != nil {
							t.Error(err)
							return
						}
						if d.Allowed {
							admitted.Add(1)
						}
					}
				}()
			}
			plain := func(int) store.Request { return store.Request{Key: "k", Limits: l} }
			for range 8 {
				run(200, plain, false)
			}
			for range 2 {
				run(100, plain, true)
			}
			for g := range 2 {
				run(100, func(i int) store.Request {
					return store.Request{Key: "k", Limits: l, DedupID: string(rune('a'+g)) + string(rune('0'+i%10)) + string(rune('0'+i/10))}
				}, false)
			}
			close(start)
			wg.Wait()
			if got := admitted.Load(); got != capacity {
				t.Fatalf("admitted %d of 2,000 Takes, want exactly %d", got, capacity)
			}
			checkCounts(t, s)
		})
	}
}

package memstore

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// TestFullStoreEvictsInsteadOfFailingOpen pins a bug: a store holding
// MaxKeys states refused new keys with ErrTooManyKeys, on which callers
// fail open, so 40 clients sending 3 requests each under a limit of 1,
// with MaxKeys 16, were admitted 88 times, 48 over the limit. A full store
// now evicts the least recently used key. Client after client, each
// client's state lives through its own requests: every first request is
// admitted, every later one refused, and every client after the 16th
// evicts one. A working set that fits is never evicted. Round robin over
// more clients than MaxKeys is what no bounded store can limit: an LRU of
// 16 keys forgets each client before it returns.
func TestFullStoreEvictsInsteadOfFailingOpen(t *testing.T) {
	const maxKeys, each = 16, 3
	tests := []struct {
		name         string
		clients      int
		roundRobin   bool
		wantAdmitted int
		wantEvicted  uint64
	}{
		{"client after client", 40, false, 40, 40 - maxKeys},
		{"round robin that fits", maxKeys, true, maxKeys, 0},
		{"round robin over more clients than fit", 40, true, 40 * each, 40*each - maxKeys},
	}
	for _, alg := range store.Algorithms {
		for _, shards := range []int{1, 0} {
			for _, tt := range tests {
				t.Run(fmt.Sprintf("%s/shards=%d/%s", alg, shards, tt.name), func(t *testing.T) {
					s, clk := newTestStore(t, Options{MaxKeys: maxKeys, Shards: shards})
					l := store.Limit{Algorithm: alg, Rate: 1, Period: time.Minute}
					admitted := 0
					take := func(client, n int) {
						t.Helper()
						d := mustTake(t, s, store.Request{Key: fmt.Sprint("client-", client), Limits: []store.Limit{l}})
						clk.Advance(time.Microsecond) // a strict order of use
						if d.Allowed {
							admitted++
						}
						if want := n == 0 || tt.wantAdmitted == tt.clients*each; d.Allowed != want {
							t.Errorf("client %d, request %d: got Allowed %t, want %t", client, n+1, d.Allowed, want)
						}
					}
					if tt.roundRobin {
						for n := 0; n < each; n++ {
							for c := 0; c < tt.clients; c++ {
								take(c, n)
							}
						}
					} else {
						for c := 0; c < tt.clients; c++ {
							for n := 0; n < each; n++ {
								take(c, n)
							}
						}
					}
					if admitted != tt.wantAdmitted {
						t.Errorf("admitted: got %d, want %d", admitted, tt.wantAdmitted)
					}
					if got := s.Evictions(); got != tt.wantEvicted {
						t.Errorf("Evictions: got %d, want %d", got, tt.wantEvicted)
					}
					if got := s.Len(); got != min(tt.clients, maxKeys) {
						t.Errorf("Len: got %d, want %d", got, min(tt.clients, maxKeys))
					}
					checkCounts(t, s)
				})
			}
		}
	}
}

// TestMaxKeysIsExact pins a bug: MaxKeys was split evenly over the shards
// and a shard refused new keys at its share, so with the default MaxKeys
// 2,955 of 1,000,000 distinct keys were refused while the store held fewer
// than MaxKeys. The cap is now global: MaxKeys distinct keys fit however
// unevenly they hash, and one more evicts exactly one, the least recently
// used.
func TestMaxKeysIsExact(t *testing.T) {
	const maxKeys, shards = 4096, 64
	s, clk := newTestStore(t, Options{MaxKeys: maxKeys, Shards: shards})
	l := store.Limit{Rate: 1, Period: time.Hour}
	key := func(i int) store.Request {
		return store.Request{Key: fmt.Sprint("key-", i), Limits: []store.Limit{l}}
	}
	for i := 0; i < maxKeys; i++ {
		d, err := s.Take(ctx, key(i))
		if err != nil || !d.Allowed {
			t.Fatalf("key %d of %d: got %+v, %v, want admitted", i+1, maxKeys, d, err)
		}
		clk.Advance(time.Microsecond)
	}
	fullest := 0
	for i := range s.shards {
		fullest = max(fullest, s.shards[i].index.len())
	}
	if fullest <= maxKeys/shards {
		t.Fatalf("fullest shard: got %d keys, want more than an even share of %d (the case the bug refused)", fullest, maxKeys/shards)
	}
	if got, ev := s.Len(), s.Evictions(); got != maxKeys || ev != 0 {
		t.Fatalf("after %d distinct keys: got Len %d, Evictions %d, want %d, 0", maxKeys, got, ev, maxKeys)
	}
	if d := mustTake(t, s, key(maxKeys)); !d.Allowed {
		t.Fatalf("one key more: got %+v, want admitted", d)
	}
	if got, ev := s.Len(), s.Evictions(); got != maxKeys || ev != 1 {
		t.Fatalf("after one key more: got Len %d, Evictions %d, want %d, 1", got, ev, maxKeys)
	}
	if d, _ := s.Peek(ctx, key(0)); !d.Allowed {
		t.Errorf("the least recently used key: got %+v, want it evicted (fresh)", d)
	}
	for _, i := range []int{1, maxKeys - 1} {
		if d, _ := s.Peek(ctx, key(i)); d.Allowed {
			t.Errorf("key %d: got %+v, want it still limited", i, d)
		}
	}
	checkCounts(t, s)
}

// TestEvictionDropsExpiredStateFirst: a full store makes room with
// expired state, in any shard, before it evicts a key whose state still
// matters.
func TestEvictionDropsExpiredStateFirst(t *testing.T) {
	s, clk := newTestStore(t, Options{MaxKeys: 8, Shards: 4})
	short := store.Limit{Rate: 1, Period: time.Second}
	long := store.Limit{Name: "long", Rate: 1, Period: time.Hour}
	for i := 0; i < 4; i++ {
		mustTake(t, s, store.Request{Key: fmt.Sprint("short-", i), Limits: []store.Limit{short}})
		mustTake(t, s, store.Request{Key: fmt.Sprint("long-", i), Limits: []store.Limit{long}})
	}
	clk.Advance(time.Second) // the short states have expired
	for i := 0; i < 4; i++ {
		if d := mustTake(t, s, store.Request{Key: fmt.Sprint("new-", i), Limits: []store.Limit{long}}); !d.Allowed {
			t.Fatalf("new key %d: got %+v, want admitted", i, d)
		}
	}
	if got := s.Evictions(); got != 0 {
		t.Errorf("Evictions: got %d, want 0 (expired state made the room)", got)
	}
	for i := 0; i < 4; i++ {
		if d, _ := s.Peek(ctx, store.Request{Key: fmt.Sprint("long-", i), Limits: []store.Limit{long}}); d.Allowed {
			t.Errorf("long-%d: got %+v, want still limited", i, d)
		}
	}
	checkCounts(t, s)
}

// TestEvictionFollowsLeastRecentUse: across shards, the keys evicted are
// those least recently taken; a refused Take is a use, a Peek is not.
func TestEvictionFollowsLeastRecentUse(t *testing.T) {
	s, clk := newTestStore(t, Options{MaxKeys: 8, Shards: 8})
	l := store.Limit{Rate: 1, Period: time.Hour}
	req := func(prefix string, i int) store.Request {
		return store.Request{Key: fmt.Sprint(prefix, i), Limits: []store.Limit{l}}
	}
	step := func(r store.Request, peek bool) {
		t.Helper()
		var err error
		if peek {
			_, err = s.Peek(ctx, r)
		} else {
			_, err = s.Take(ctx, r)
		}
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Microsecond)
	}
	for i := 0; i < 8; i++ {
		step(req("old-", i), false)
	}
	clk.Advance(recencyUS * time.Microsecond) // past the list's precision
	for i := 0; i < 4; i++ {
		step(req("old-", i), false)  // refused, and a use
		step(req("old-", i+4), true) // a peek, not a use
	}
	for i := 0; i < 4; i++ {
		step(req("new-", i), false)
	}
	if got := s.Evictions(); got != 4 {
		t.Fatalf("Evictions: got %d, want 4", got)
	}
	for i := 0; i < 8; i++ {
		d, _ := s.Peek(ctx, req("old-", i))
		if evicted := i >= 4; d.Allowed != evicted {
			t.Errorf("old-%d: got Allowed %t, want %t (evicted: %t)", i, d.Allowed, evicted, evicted)
		}
	}
	checkCounts(t, s)
}

// TestEvictionTakesTheWholeKey: an evicted key loses all its states at
// once, limit states, block and remembered ids, and counts as one
// eviction.
func TestEvictionTakesTheWholeKey(t *testing.T) {
	s, clk := newTestStore(t, Options{MaxKeys: 6, Shards: 2})
	limits := []store.Limit{
		{Name: "a", Rate: 1, Period: time.Hour, Block: time.Hour},
		{Name: "b", Rate: 5, Period: time.Hour},
	}
	x := store.Request{Key: "x", Limits: limits, DedupID: "1"}
	mustTake(t, s, x)
	x.DedupID = ""
	if d := mustTake(t, s, x); !d.BlockStarted {
		t.Fatalf("second take of x: got %+v, want a block started", d)
	}
	if got := s.Len(); got != 4 {
		t.Fatalf("Len with x's two limits, block and id: got %d, want 4", got)
	}
	clk.Advance(time.Microsecond)
	one := []store.Limit{{Rate: 1, Period: time.Hour}}
	mustTake(t, s, store.Request{Key: "y", Limits: one})
	mustTake(t, s, store.Request{Key: "z", Limits: one})
	mustTake(t, s, store.Request{Key: "w", Limits: one})
	if got, ev := s.Len(), s.Evictions(); got != 3 || ev != 1 {
		t.Fatalf("after a key more: got Len %d, Evictions %d, want 3, 1 (x evicted whole)", got, ev)
	}
	if d, _ := s.Peek(ctx, x); !d.Allowed || d.Remaining != 0 || d.PerLimit[1].Remaining != 4 {
		t.Fatalf("x after its eviction: got %+v, want a fresh key", d)
	}
	checkCounts(t, s)
}

// TestRequestLargerThanStore: a request that needs more states than
// MaxKeys allows, counting what its key already holds, fails with a
// capacity error, records nothing and evicts nothing. A refusal whose
// block does not fit stays a refusal.
func TestRequestLargerThanStore(t *testing.T) {
	s, _ := newTestStore(t, Options{MaxKeys: 2, Shards: 1})
	one := store.Request{Key: "a", Limits: []store.Limit{{Rate: 1, Period: time.Hour}}}
	mustTake(t, s, one)
	three := store.Request{Key: "b", Limits: []store.Limit{
		{Name: "x", Rate: 5, Period: time.Hour},
		{Name: "y", Rate: 5, Period: time.Hour},
		{Name: "z", Rate: 5, Period: time.Hour},
	}}
	_, err := s.Take(ctx, three)
	var be *store.BackendError
	switch {
	case !errors.As(err, &be):
		t.Fatalf("three states in a store of two: got error %v, want a *store.BackendError", err)
	case be.Kind != "capacity" || be.Op != "take":
		t.Fatalf("three states in a store of two: got Kind %q Op %q, want %q %q", be.Kind, be.Op, "capacity", "take")
	case !errors.Is(err, store.ErrTooManyKeys) || !errors.Is(err, store.ErrStoreUnavailable):
		t.Fatalf("three states in a store of two: got %v, want it to match ErrTooManyKeys and ErrStoreUnavailable", err)
	}
	if got, ev := s.Len(), s.Evictions(); got != 1 || ev != 0 {
		t.Fatalf("after the refusal: got Len %d, Evictions %d, want 1, 0 (nothing recorded, nothing evicted)", got, ev)
	}
	if d, _ := s.Peek(ctx, one); d.Allowed {
		t.Fatalf("key a after the refusal: got %+v, want still limited", d)
	}
	if d, err := s.Peek(ctx, three); err != nil || !d.Allowed {
		t.Fatalf("Peek of the request that does not fit: got %+v, %v, want allowed, nil", d, err)
	}
	checkCounts(t, s)
}

// TestConcurrentEviction (run with -race): a flood of distinct keys from
// many goroutines into a small store across shards; the store never holds
// more than MaxKeys states, never refuses, and evicts exactly one key per
// key beyond MaxKeys.
func TestConcurrentEviction(t *testing.T) {
	const maxKeys, workers, each = 64, 8, 2000
	s, err := newMem(Options{MaxKeys: maxKeys, Shards: 8})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var over atomic.Int64
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			default:
				if n := s.Len(); n > maxKeys {
					over.Store(int64(n))
				}
			}
		}
	}()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				r := store.Request{Key: fmt.Sprintf("w%d-%d", w, i), Limits: []store.Limit{{Rate: 1, Period: time.Hour}}}
				if d, err := s.Take(ctx, r); err != nil || !d.Allowed {
					t.Errorf("Take(%q): got %+v, %v, want admitted", r.Key, d, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	if n := over.Load(); n != 0 {
		t.Errorf("Len during the flood: got %d, want <= %d", n, maxKeys)
	}
	if got, ev := s.Len(), s.Evictions(); got != maxKeys || ev != workers*each-maxKeys {
		t.Errorf("after %d distinct keys: got Len %d, Evictions %d, want %d, %d", workers*each, got, ev, maxKeys, workers*each-maxKeys)
	}
	checkCounts(t, s)
}

// TestEvictingTakeAllocs: at the cap, a new key takes the memory of the
// key it evicts.
func TestEvictingTakeAllocs(t *testing.T) {
	s, _ := newTestStore(t, Options{MaxKeys: 1024, Shards: 1})
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = fmt.Sprint("key-", i)
	}
	l := []store.Limit{{Rate: 1, Period: time.Hour}}
	i := 0
	take := func() {
		s.Take(ctx, store.Request{Key: keys[i%len(keys)], Limits: l})
		i++
	}
	for i < 2048 {
		take()
	}
	if got := testing.AllocsPerRun(1000, take); got > 0.1 {
		t.Errorf("Take of a new key at the cap: got %.2f allocations, want none", got)
	}
}

// TestEvictionRecencyPrecision: a key taken again less than recencyUS
// after the Take that placed it keeps its place in the eviction order;
// taken again at recencyUS or later, it moves to the front.
func TestEvictionRecencyPrecision(t *testing.T) {
	l := store.Limit{Rate: 10, Period: time.Hour}
	req := func(key string) store.Request { return store.Request{Key: key, Limits: []store.Limit{l}} }
	for _, tt := range []struct {
		again   time.Duration
		evicted string
	}{
		{recencyUS*time.Microsecond - time.Microsecond, "a"},
		{recencyUS * time.Microsecond, "b"},
	} {
		t.Run(tt.again.String(), func(t *testing.T) {
			s, clk := newTestStore(t, Options{MaxKeys: 2, Shards: 1})
			mustTake(t, s, req("a"))
			clk.Advance(time.Microsecond)
			mustTake(t, s, req("b"))
			clk.Advance(tt.again - time.Microsecond) // a's placement + again
			mustTake(t, s, req("a"))
			clk.Advance(time.Microsecond)
			mustTake(t, s, req("c"))
			if got := s.Evictions(); got != 1 {
				t.Fatalf("Evictions: got %d, want 1", got)
			}
			for _, k := range []string{"a", "b"} {
				d, err := s.Peek(ctx, req(k))
				if err != nil {
					t.Fatal(err)
				}
				if fresh := d.Remaining == 9; fresh != (k == tt.evicted) {
					t.Errorf("%s taken again %s after a was placed: %s has %d remaining, want %s evicted", k, tt.again, k, d.Remaining, tt.evicted)
				}
			}
			checkCounts(t, s)
		})
	}
}

// TestEvictWaitsForBusyShard: when the only records to evict are in
// another shard that is held for a moment, a new key waits for it rather
// than being refused, and evicts one of them.
func TestEvictWaitsForBusyShard(t *testing.T) {
	for _, holderFirst := range []bool{true, false} {
		s, err := newMem(Options{MaxKeys: 2, Shards: 2})
		if err != nil {
			t.Fatal(err)
		}
		// Long enough for a loaded machine: the shard is held for 1ms.
		s.evictWait = time.Minute
		l := []store.Limit{{Rate: 1, Period: time.Hour}}
		// Two old keys fill the store, both in the busy shard; the new
		// key's shard comes after it, or before it: both orders must
		// wait.
		busy := &s.shards[0]
		if !holderFirst {
			busy = &s.shards[1]
		}
		_, fresh := fillShard(t, s, busy, l)
		busy.mu.Lock()
		got := make(chan error, 1)
		go func() {
			d, err := s.Take(ctx, store.Request{Key: fresh, Limits: l})
			if err == nil && !d.Allowed {
				err = fmt.Errorf("refused: %+v", d)
			}
			got <- err
		}()
		time.Sleep(time.Millisecond)
		busy.mu.Unlock()
		if err := <-got; err != nil {
			t.Fatalf("holder first %v: Take(%q) while the old keys' shard was busy: %v, want admitted", holderFirst, fresh, err)
		}
		if n, ev := s.Len(), s.Evictions(); n != 2 || ev != 1 {
			t.Fatalf("holder first %v: got Len %d, Evictions %d, want 2, 1", holderFirst, n, ev)
		}
		checkCounts(t, s)
	}
}

// TestEvictGivesUp: a new key waits for a busy shard for evictWait at
// most, then is refused with ErrTooManyKeys, nothing evicted or recorded.
func TestEvictGivesUp(t *testing.T) {
	s, err := newMem(Options{MaxKeys: 2, Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	s.evictWait = 2 * time.Millisecond
	l := []store.Limit{{Rate: 1, Period: time.Hour}}
	busy := &s.shards[0]
	olds, fresh := fillShard(t, s, busy, l)
	busy.mu.Lock()
	start := time.Now()
	_, err = s.Take(ctx, store.Request{Key: fresh, Limits: l})
	waited := time.Since(start)
	busy.mu.Unlock()
	if !errors.Is(err, store.ErrTooManyKeys) {
		t.Fatalf("Take(%q) while the only records' shard stays busy: got %v, want ErrTooManyKeys", fresh, err)
	}
	if waited < s.evictWait {
		t.Fatalf("Take(%q) gave up after %v, want at least %v", fresh, waited, s.evictWait)
	}
	if n, ev := s.Len(), s.Evictions(); n != 2 || ev != 0 {
		t.Fatalf("after the refusal: got Len %d, Evictions %d, want 2, 0", n, ev)
	}
	for _, k := range olds {
		if d, _ := s.Peek(ctx, store.Request{Key: k, Limits: l}); d.Allowed {
			t.Fatalf("Peek(%q) after the refusal: got %+v, want still limited (its state kept)", k, d)
		}
	}
	checkCounts(t, s)
}

// fillShard fills s, a store of two shards and MaxKeys 2, with two keys of
// shard busy under limits l, admitted, and returns them and a key of the
// other shard.
func fillShard(t *testing.T, s *memStore, busy *shard, l []store.Limit) (olds []string, fresh string) {
	t.Helper()
	for i := 0; len(olds) < 2 || fresh == ""; i++ {
		k := fmt.Sprint("key-", i)
		switch {
		case s.shardFor(k) != busy:
			fresh = k
		case len(olds) < 2:
			olds = append(olds, k)
		}
	}
	for _, k := range olds {
		if d, err := s.Take(ctx, store.Request{Key: k, Limits: l}); err != nil || !d.Allowed {
			t.Fatalf("Take(%q): got %+v, %v, want admitted", k, d, err)
		}
	}
	return olds, fresh
}

package memstore

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// checkCounts asserts the store's bookkeeping while nothing runs: every
// shard's size is the sum of its records' sizes, its map and its list hold
// the same non-empty records, and the budget counts every state of every
// shard.
func checkCounts(t *testing.T, s *memStore) {
	t.Helper()
	total := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.lock()
		size, n := 0, 0
		for r := sh.lru.next; r != &sh.lru; r = r.next {
			n++
			size += r.size()
			if r.size() == 0 {
				t.Errorf("shard %d: empty record %q kept", i, r.key)
			}
			if sh.index.get(r.key, keyHash(s.seed, r.key)) != r {
				t.Errorf("shard %d: record %q listed but not indexed", i, r.key)
			}
		}
		if n != sh.index.len() {
			t.Errorf("shard %d: got %d records listed, %d indexed, want the same", i, n, sh.index.len())
		}
		if size != sh.size {
			t.Errorf("shard %d: got size %d counted, want %d (held)", i, sh.size, size)
		}
		total += size
		sh.mu.Unlock()
	}
	if got := s.Len(); got != total {
		t.Errorf("Len: got %d, want %d (the states held by every shard)", got, total)
	}
}

// findRecord returns the record of key, or nil.
func findRecord(s *memStore, key string) *record {
	sh, h := s.locate(key)
	sh.lock()
	defer sh.mu.Unlock()
	return sh.index.get(key, h)
}

// TestBlockWholeMilliseconds: a block set at t for d ends at ⌊t⌋ms + d,
// as a Redis key with PX d does; RetryAfter is its remaining time rounded
// up to the millisecond, so that waiting it always ends the block.
func TestBlockWholeMilliseconds(t *testing.T) {
	s, clk := newTestStore(t, Options{})
	// The limit's own wait (a second) ends before the block, which then
	// alone decides RetryAfter.
	l := store.Limit{Name: "b", Rate: 1, Period: time.Second, Block: 2 * time.Second}
	r := store.Request{Key: "k", Limits: []store.Limit{l}}
	mustTake(t, s, r)
	start := s.now() // 897µs past a whole millisecond
	if start%1000 == 0 {
		t.Fatalf("clock start %d is a whole millisecond; the test needs one that is not", start)
	}
	d := mustTake(t, s, r)
	if !d.BlockStarted || d.RetryAfter != 2*time.Second {
		t.Fatalf("block start: got %+v, want BlockStarted with RetryAfter 2s", d)
	}
	sub := time.Duration(start%1000) * time.Microsecond
	tests := []struct {
		at        time.Duration // after start
		blocked   bool
		remaining time.Duration
	}{
		{time.Microsecond, true, 2 * time.Second},
		{time.Millisecond - sub - time.Microsecond, true, 2 * time.Second},
		{time.Millisecond - sub, true, 2*time.Second - time.Millisecond},
		{2*time.Second - sub - time.Microsecond, true, time.Millisecond},
		{2*time.Second - sub, false, 0},
	}
	for _, tt := range tests {
		clk.Advance(time.Duration(start-s.now())*time.Microsecond + tt.at) // to start + tt.at
		d, err := s.Peek(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if d.Blocked != tt.blocked || (tt.blocked && d.RetryAfter != tt.remaining) {
			t.Errorf("%s after the block started: got Blocked %t, RetryAfter %s, want %t, %s", tt.at, d.Blocked, d.RetryAfter, tt.blocked, tt.remaining)
		}
	}
}

// TestStrikesLastThroughTheirLastMillisecond: a strike counter set at t
// for d still counts while ⌊now⌋ms <= ⌊t⌋ms + d, as a Redis key exists
// while its PTTL is 0, and lapses a microsecond later.
func TestStrikesLastThroughTheirLastMillisecond(t *testing.T) {
	for _, tt := range []struct {
		name   string
		after  time.Duration // after the end of ⌊t⌋ms + d
		second time.Duration // the next block
	}{
		{"in the last millisecond", 999 * time.Microsecond, 2 * time.Second},
		{"after it", time.Millisecond, time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, clk := newTestStore(t, Options{})
			l := store.Limit{Name: "b", Rate: 1, Period: time.Millisecond, Block: time.Second, BlockMax: 4 * time.Second}
			r := store.Request{Key: "k", Limits: []store.Limit{l}}
			mustTake(t, s, r)
			start := s.now()
			if d := mustTake(t, s, r); d.RetryAfter != time.Second {
				t.Fatalf("first block: got %+v, want RetryAfter 1s", d)
			}
			// Strikes end at ⌊start⌋ms + 1s + 4s; move to the start of
			// that millisecond, then by tt.after.
			end := (start/1000 + 5000) * 1000
			clk.Advance(time.Duration(end-start)*time.Microsecond + tt.after)
			mustTake(t, s, r)
			if d := mustTake(t, s, r); !d.BlockStarted || d.RetryAfter != tt.second {
				t.Fatalf("next block: got %+v, want BlockStarted with RetryAfter %s", d, tt.second)
			}
		})
	}
}

// TestCountDeniedLogStaysBounded: a flood of counted refusals keeps the
// sliding window log at its newest (largest rate + cost) entries, and the
// decisions are those of the untrimmed log: RetryAfter is set by the
// (capacity − cost + 1)-th newest entry.
func TestCountDeniedLogStaysBounded(t *testing.T) {
	s, clk := newTestStore(t, Options{})
	a := store.Limit{Name: "a", Algorithm: store.SlidingWindowLog, Rate: 3, Period: time.Second}
	b := store.Limit{Name: "b", Algorithm: store.SlidingWindowLog, Rate: 5, Period: 2 * time.Second}
	r := store.Request{Key: "k", Limits: []store.Limit{a, b}, CountDenied: true}
	for i := 0; i < 1000; i++ {
		mustTake(t, s, r)
		clk.Advance(100 * time.Microsecond)
	}
	var lg *runLog
	if r := findRecord(s, "k"); r != nil && len(r.states) == 1 {
		lg = r.states[0].log
	}
	if lg == nil {
		t.Fatal("no log stored")
	}
	if n := lg.total() - lg.base; n != 5+1 {
		t.Fatalf("entries after 1000 counted attempts: got %d, want 6 (largest rate + cost)", n)
	}
	if runs := len(lg.runs); runs > 16 {
		t.Fatalf("runs kept: got %d, want a handful", runs)
	}
	// The entries are 100µs apart, the newest 100µs ago. a (3 per 1s)
	// admits once its 3rd newest entry leaves its window, 999.7ms from
	// now; b (5 per 2s) once its 5th newest does, 1999.5ms from now.
	d, err := s.Peek(ctx, store.Request{Key: "k", Limits: []store.Limit{a, b}})
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed || d.LimitID != "b" || d.RetryAfter != 2*time.Second-500*time.Microsecond {
		t.Fatalf("peek after the flood: got %+v, want refused by b with RetryAfter 1.9995s (its 5th newest entry leaving)", d)
	}
}

// TestRunLogTrim: trimming keeps the newest entries, splitting a run when
// the cut falls inside it.
func TestRunLogTrim(t *testing.T) {
	var l runLog
	l.add(10, 4)
	l.add(20, 3)
	l.add(30, 2)
	l.trim(4) // 2 of the run at 20, the run at 30
	if got := l.total() - l.base; got != 4 {
		t.Fatalf("entries after trim(4): got %d, want 4", got)
	}
	idx, before := l.after(0)
	for k, want := range []int64{20, 20, 30, 30} {
		if got := l.kth(idx, before, int64(k+1)); got != want {
			t.Errorf("entry %d after trim: got %d, want %d", k+1, got, want)
		}
	}
	l.trim(10) // fewer than 10: nothing to do
	if got := l.total() - l.base; got != 4 {
		t.Fatalf("entries after trim(10): got %d, want 4", got)
	}
	l.prune(20)
	if got := l.total() - l.base; got != 2 {
		t.Fatalf("entries after pruning to 20: got %d, want 2", got)
	}
}

// TestKeyStateCountsTowardMaxKeys: a key's block or de-duplication state
// is one state and each remembered id one more. An admission whose id
// does not fit fails with ErrTooManyKeys and records nothing; a refusal
// whose block does not fit is refused without the block. Expired ids are
// swept when the cap is reached.
func TestKeyStateCountsTowardMaxKeys(t *testing.T) {
	s, clk := newTestStore(t, Options{MaxKeys: 5, Shards: 1})
	l := store.Limit{Rate: 10, Period: time.Second}
	with := func(key, id string) store.Request {
		return store.Request{Key: key, Limits: []store.Limit{l}, DedupID: id}
	}
	mustTake(t, s, with("k", "1")) // limit state, key state, id
	mustTake(t, s, with("k", "2")) // id
	if got := s.Len(); got != 4 {
		t.Fatalf("Len after two ids: got %d, want 4", got)
	}
	mustTake(t, s, with("k", "3"))
	_, err := s.Take(ctx, with("k", "4"))
	if !errors.Is(err, store.ErrTooManyKeys) {
		t.Fatalf("a fourth id at the cap: got error %v, want ErrTooManyKeys", err)
	}
	if d, _ := s.Peek(ctx, with("k", "")); d.Remaining != 6 {
		t.Fatalf("after the refused id: got Remaining %d, want 6 (nothing recorded)", d.Remaining)
	}
	if d := mustTake(t, s, with("k", "2")); !d.Duplicate {
		t.Fatalf("a remembered id at the cap: got %+v, want a Duplicate", d)
	}
	checkCounts(t, s)

	// A refusal that would start a block on a key without key state.
	b := store.Limit{Name: "b", Rate: 1, Period: time.Second, Block: time.Minute}
	rb := store.Request{Key: "x", Limits: []store.Limit{b}}
	s2, _ := newTestStore(t, Options{MaxKeys: 1, Shards: 1})
	mustTake(t, s2, rb)
	if d := mustTake(t, s2, rb); d.Allowed || d.Blocked {
		t.Fatalf("refusal at the cap: got %+v, want refused without a block", d)
	}
	if got := s2.Len(); got != 1 {
		t.Fatalf("Len: got %d, want 1 (the block did not fit)", got)
	}

	clk.Advance(time.Second) // every id has expired
	for i := 0; i < 3; i++ {
		if _, err := s.Take(ctx, with("k", fmt.Sprint("new", i))); err != nil {
			t.Fatalf("new id %d after the old ones expired: got error %v, want nil", i, err)
		}
	}
	checkCounts(t, s)
}

// TestDedupIDsArePruned: a key admitting a new id every 100ms under a
// 1-second limit holds about 10 live ids; expired ones are pruned once
// the key holds twice the live ids plus 16, so the map stays small.
func TestDedupIDsArePruned(t *testing.T) {
	s, clk := newTestStore(t, Options{Shards: 1})
	l := store.Limit{Rate: 100, Period: time.Second}
	for i := 0; i < 2000; i++ {
		d := mustTake(t, s, store.Request{Key: "k", Limits: []store.Limit{l}, DedupID: fmt.Sprint(i)})
		if !d.Allowed || d.Duplicate {
			t.Fatalf("id %d: got %+v, want admitted", i, d)
		}
		clk.Advance(100 * time.Millisecond)
	}
	ks := findRecord(s, "k").ks
	if n := len(ks.ids); n > 2*11+16 {
		t.Fatalf("ids held: got %d, want <= %d", n, 2*11+16)
	}
	checkCounts(t, s)
	if err := s.Reset(ctx, store.Request{Key: "k", Limits: []store.Limit{l}}); err != nil {
		t.Fatal(err)
	}
	if got := s.Len(); got != 0 {
		t.Fatalf("Len after Reset: got %d, want 0", got)
	}
	checkCounts(t, s)
}

// TestLongDedupIDsAreHashed: ids longer than 128 bytes are kept as their
// SHA-256, apart from short ids even of the same bytes.
func TestLongDedupIDsAreHashed(t *testing.T) {
	s, _ := newTestStore(t, Options{Shards: 1})
	l := store.Limit{Rate: 10, Period: time.Second}
	long := strings.Repeat("x", 4096)
	sum := dedupKeyOf(long).id
	for _, id := range []string{long, sum, long + "y"} {
		if d := mustTake(t, s, store.Request{Key: "k", Limits: []store.Limit{l}, DedupID: id}); d.Duplicate {
			t.Fatalf("id of %d bytes: got a Duplicate, want a new id", len(id))
		}
	}
	for k := range findRecord(s, "k").ks.ids {
		if len(k.id) > maxDedupIDLen {
			t.Errorf("kept an id of %d bytes, want at most %d", len(k.id), maxDedupIDLen)
		}
	}
	if d := mustTake(t, s, store.Request{Key: "k", Limits: []store.Limit{l}, DedupID: long}); !d.Duplicate {
		t.Fatalf("the long id again: got %+v, want a Duplicate", d)
	}
}

// TestBlockedAndKeyStateAllocs: a key whose limit has a Block, a blocked
// key and a duplicate decide without allocating.
func TestBlockedAndKeyStateAllocs(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	free := store.Request{Key: "free", Limits: []store.Limit{{Rate: 1 << 30, Period: time.Second, Block: time.Minute}}}
	blocked := store.Request{Key: "blocked", Limits: []store.Limit{{Rate: 1, Period: time.Hour, Block: time.Hour}}}
	dup := store.Request{Key: "dup", Limits: []store.Limit{{Rate: 10, Period: time.Hour}}, DedupID: "once"}
	mustTake(t, s, free)
	mustTake(t, s, blocked)
	mustTake(t, s, blocked)
	mustTake(t, s, dup)
	for _, tc := range []struct {
		name string
		r    store.Request
	}{{"limit with a Block", free}, {"blocked key", blocked}, {"duplicate", dup}} {
		if got := testing.AllocsPerRun(200, func() { s.Take(ctx, tc.r) }); got > 0 {
			t.Errorf("%s: got %.1f allocations, want 0", tc.name, got)
		}
	}
}

// TestConcurrentKeyStates (run with -race): blocks, counted refusals,
// de-duplication and resets from many goroutines keep the counts right;
// exactly one take per block reports BlockStarted.
func TestConcurrentKeyStates(t *testing.T) {
	s, clk := newTestStore(t, Options{Shards: 4, MaxKeys: 10_000})
	var wg sync.WaitGroup
	var mu sync.Mutex
	started := map[string]int{}
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				key := fmt.Sprint("k", i%10)
				r := store.Request{
					Key:         key,
					Limits:      []store.Limit{{Name: "a", Algorithm: store.FixedWindow, Rate: 5, Period: time.Hour, Block: time.Hour, BlockMax: 4 * time.Hour}},
					CountDenied: w%2 == 0,
					DedupID:     fmt.Sprint(w, "/", i%7),
				}
				d, err := s.Take(ctx, r)
				if err != nil {
					t.Errorf("Take: got error %v, want nil", err)
					return
				}
				if d.BlockStarted {
					mu.Lock()
					started[key]++
					mu.Unlock()
				}
				if i%50 == 49 && w == 0 {
					if err := s.Reset(ctx, store.Request{Key: "scratch", Limits: r.Limits}); !errors.Is(err, store.ErrNotFound) {
						t.Errorf("Reset of a key never taken: got error %v, want ErrNotFound", err)
					}
					clk.Advance(time.Microsecond)
				}
			}
		}()
	}
	wg.Wait()
	for k, n := range started {
		if n != 1 {
			t.Errorf("key %s: got %d BlockStarted, want 1", k, n)
		}
	}
	if len(started) != 10 {
		t.Errorf("keys blocked: got %d, want 10", len(started))
	}
	checkCounts(t, s)
}

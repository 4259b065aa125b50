package storetest

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// testPeek: a peek answers what the take right after it answers, records
// nothing (a key only ever peeked at is fresh), and peeks interleaved with
// takes change no later decision: two keys driven by the same takes, one
// of them also peeked at, decide alike.
func testPeek(e *env, alg store.Algorithm) {
	l := limit(alg, 5, time.Hour)
	e.windowRoom(alg, 10*time.Second, l.Period)
	k := e.key()
	for i, c := range []int64{2, 1, 2, 1, 3} {
		r := req(k, c, l)
		p := e.peek(r)
		e.sameDecision(fmt.Sprintf("request %d (cost %d): take after peek", i, c), e.take(r), p)
	}

	k2 := e.key()
	for i := 0; i < 10; i++ {
		e.check("peek of the whole capacity", e.peek(req(k2, 5, l)), expect{allowed: true, remaining: 0, resetAfter: -1})
	}
	e.check("take after ten peeks", e.take(req(k2, 5, l)), expect{allowed: true, remaining: 0, resetAfter: -1})

	a, b := e.key(), e.key()
	for i, c := range []int64{1, 2, 1, 3, 1, 1} {
		e.peek(req(a, 1, l))
		e.peek(req(a, 5, l))
		e.peek(req(a, c, l))
		da := e.take(req(a, c, l))
		db := e.take(req(b, c, l))
		e.sameDecision(fmt.Sprintf("take %d (cost %d) on the peeked key, compared with the other", i, c), da, db)
	}
}

// testPeekCreatesNothing (needs KeyTTLs): peeks on fresh keys create no
// storage key at all, even with a de-duplication id, a limit with a Block
// or CountDenied; after a take, peeks add no key and extend no TTL.
func testPeekCreatesNothing(e *env, alg store.Algorithm) {
	e.needKeyTTLs()
	la := named("a", alg, 3, time.Hour)
	lb := named("b", alg, 5, 2*time.Hour)
	e.windowRoom(alg, 10*time.Second, 2*time.Hour, time.Hour)
	k1, k2 := e.key(), e.key()
	e.peek(req(k1, 1, la))
	e.peek(req(k2, 3, la, lb))
	blocks := req(e.key(), 1, blocking("c", alg, 1, time.Hour, time.Second, 4*time.Second))
	blocks.DedupID = "id"
	blocks.CountDenied = windowAlg(alg)
	e.peek(blocks)
	if states := e.keys(); len(states) != 0 {
		e.Fatalf("after peeks on fresh keys: got keys %q, want none", sortedKeys(states))
	}
	e.allow(req(k1, 1, la))
	before := e.keys()
	if len(before) == 0 {
		e.Fatalf("after an admitted take: got no state keys, want at least one")
	}
	e.peek(req(k1, 1, la))
	e.peek(req(k1, 2, la, lb))
	e.peek(req(k2, 1, la))
	e.peek(withID(req(k1, 1, la), "id"))
	after := e.keys()
	if strings.Join(sortedKeys(before), "\n") != strings.Join(sortedKeys(after), "\n") {
		e.Errorf("state keys after peeks: got %q, want %q", sortedKeys(after), sortedKeys(before))
		return
	}
	for k, ttl := range after {
		if ttl > before[k] {
			e.Errorf("key %q: TTL got %s after peeks, want <= %s (peeks extend nothing)", k, ttl, before[k])
		}
	}
}

// testReset: Reset makes a key fresh under the given limits, leaves other
// keys alone, and (except for the sliding window log, whose log belongs to
// the set of limits of a request) leaves the key's state under other
// limits alone. With KeyTTLs, no state key survives resetting everything.
func testReset(e *env, alg store.Algorithm) {
	la := named("a", alg, 2, time.Hour)
	lb := named("b", alg, 2, time.Hour)
	e.windowRoom(alg, 10*time.Second, time.Hour)
	k, other := e.key(), e.key()
	e.exhaust(req(k, 1, la), 2)
	e.exhaust(req(other, 1, la), 2)
	e.exhaust(req(k, 1, lb), 2)
	e.exhaust(req(k, 1, la, lb), 2)

	e.reset(req(k, 0, la))
	e.check("after Reset", e.take(req(k, 1, la)), expect{allowed: true, remaining: 1, resetAfter: -1})
	e.deny(req(other, 1, la))
	if alg != store.SlidingWindowLog {
		e.deny(req(k, 1, lb))
	}

	e.reset(req(k, 1, la, lb))
	e.check("after Reset of both limits", e.take(req(k, 1, la, lb)), expect{allowed: true, remaining: 1, resetAfter: -1, limitID: "a"})

	if e.h.KeyTTLs == nil {
		return
	}
	if alg == store.SlidingWindowLog {
		e.reset(req(k, 1, la))
		e.reset(req(k, 1, lb))
	}
	e.reset(req(k, 1, la, lb))
	e.reset(req(other, 1, la))
	if states := e.keys(); len(states) != 0 {
		e.Errorf("after resetting every key: got state keys %q, want none", sortedKeys(states))
	}
}

// testResetNotFound: Reset reports ErrNotFound when nothing is stored for
// the key and limits: a key never taken, a key just reset, a key with
// state under other limits only (which the Reset leaves alone) and, with
// KeyTTLs (a store whose keys expire with their state), a key whose state
// has expired. A Reset that forgets anything returns nil, and a block is
// the key's, whatever limits the Reset names.
func testResetNotFound(e *env, alg store.Algorithm) {
	la := named("a", alg, 2, time.Hour)
	lb := named("b", alg, 2, time.Hour)
	e.windowRoom(alg, 10*time.Second, time.Hour)
	e.resetNotFound("a key never taken", req(e.key(), 0, la))

	k := e.key()
	e.allow(req(k, 1, la))
	e.resetNotFound("a key with state under another limit only", req(k, 0, lb))
	e.check("the state after a Reset under another limit", e.take(req(k, 1, la)), expect{allowed: true, remaining: 0, resetAfter: -1})
	e.reset(req(k, 0, la))
	e.resetNotFound("a key just reset", req(k, 0, la))

	blk := blocking("blk", alg, 1, time.Hour, pick(e, time.Minute, 5*time.Second), 0)
	kb := e.key()
	e.allow(req(kb, 1, blk))
	if d := e.take(req(kb, 1, blk)); !d.BlockStarted {
		e.Fatalf("second request under a limit of 1 with a Block: got %s, want a block started", show(d))
	}
	e.reset(req(kb, 0, lb)) // forgets the block, not blk's state
	e.resetNotFound("a key whose block was reset", req(kb, 0, lb))
	e.reset(req(kb, 0, blk))
	e.resetNotFound("a key whose block and state were reset", req(kb, 0, blk))

	if e.h.KeyTTLs == nil {
		return
	}
	short := named("s", alg, 1, pick(e, time.Second, 100*time.Millisecond))
	ks := e.key()
	e.allow(req(ks, 1, short))
	e.past(lifetime(req(ks, 1, short)))
	e.resetNotFound("a key whose state has expired", req(ks, 0, short))
}

// testIsolation: exhausting a key leaves similar keys (a prefix of it, an
// extension, a case change, a trailing NUL) untouched and, for the
// per-limit algorithms, the same key under other limit IDs too.
func testIsolation(e *env, alg store.Algorithm) {
	l := limit(alg, 2, time.Hour)
	e.windowRoom(alg, 10*time.Second, 2*time.Hour, time.Hour)
	k := e.key()
	if n, _ := e.exhaust(req(k, 1, l), 2); n != 2 {
		e.Fatalf("fresh key, rate 2: got %d admitted, want 2", n)
	}
	for _, o := range []string{k + "x", k[:len(k)-1], k + "\x00", "x" + k, strings.ToUpper(k), k + " "} {
		e.check(fmt.Sprintf("key %q next to exhausted %q", o, k), e.take(req(o, 1, l)), expect{allowed: true, remaining: 1, resetAfter: -1})
	}
	if alg == store.SlidingWindowLog {
		return
	}
	for _, o := range []store.Limit{named("x", alg, 2, time.Hour), limit(alg, 2, 2*time.Hour)} {
		e.check(fmt.Sprintf("limit %q on a key exhausted under %q", o.ID(), l.ID()), e.take(req(k, 1, o)), expect{allowed: true, remaining: 1, resetAfter: -1})
	}
}

// testHostileKeys: keys made of storage-key syntax (hash-tag braces,
// separators, ":op:"), escapes, NUL and invalid UTF-8 bytes, and 10 KB keys
// differing in their last byte are each limited on their own: the first
// request of every key is admitted, the second denied, and resetting one
// frees that one only.
func testHostileKeys(e *env, alg store.Algorithm) {
	l := limit(alg, 1, time.Hour)
	e.windowRoom(alg, 10*time.Second, l.Period)
	long := strings.Repeat("k", 10<<10)
	hostile := []string{
		"{", "}", "{}", "}{", "{{", ":", "::", "a:b", "a%3Ab", `a\:b`, `\`,
		"\x00", "a\x00b", "\x00\x00", "\xff\xfe\xfd", "\xc3", "é", "\u2028",
		"{a}:b", ":op:1", "*", "?", "[", " ", "\r\n", "%", "%%",
		long, long[:len(long)-1] + "j", long + "k", "{" + long,
	}
	var keys []string
	for _, h := range hostile {
		keys = append(keys, e.prefix+h, h+e.prefix)
	}
	for _, k := range keys {
		e.check(fmt.Sprintf("first request of key %q", trim(k)), e.take(req(k, 1, l)), expect{allowed: true, remaining: 0, resetAfter: -1})
	}
	for _, k := range keys {
		if d := e.take(req(k, 1, l)); d.Allowed {
			e.Errorf("second request of key %q: got allowed, want denied", trim(k))
		}
	}
	e.reset(req(keys[0], 0, l))
	e.allow(req(keys[0], 1, l))
	e.deny(req(keys[1], 1, l))
}

func trim(k string) string {
	if len(k) > 48 {
		return fmt.Sprintf("%s...(%d bytes)", k[:32], len(k))
	}
	return k
}

// testConcurrent: concurrent takes on one key admit exactly as many as a
// serial run: 64 goroutines × 2 takes of cost 1 against rate 20, 32 takes
// of cost 3 (6 fit), and 64 takes against two limits (the smaller, 20,
// decides). Every decision is checked.
func testConcurrent(e *env, alg store.Algorithm) {
	e.windowRoom(alg, 10*time.Second, time.Hour)
	l := limit(alg, 20, time.Hour)
	for _, tc := range []struct {
		name       string
		cost       int64
		limits     []store.Limit
		goroutines int
		each       int
		want       int64
	}{
		{"cost 1", 1, []store.Limit{l}, 64, 2, 20},
		{"cost 3", 3, []store.Limit{l}, 32, 1, 6},
		{"two limits", 1, []store.Limit{named("a", alg, 30, time.Hour), named("b", alg, 20, time.Hour)}, 64, 1, 20},
	} {
		r := req(e.key(), tc.cost, tc.limits...)
		var admitted atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := 0; g < tc.goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := 0; i < tc.each; i++ {
					d, err := e.h.Store.Take(e.ctx, r)
					if err != nil {
						e.Errorf("%s: Take: got error %v, want nil", tc.name, err)
						return
					}
					e.checkDecision("Take", r, d)
					if d.Allowed {
						admitted.Add(1)
					}
				}
			}()
		}
		close(start)
		wg.Wait()
		if got := admitted.Load(); got != tc.want {
			e.Errorf("%s: %d concurrent takes: got %d admitted, want %d", tc.name, tc.goroutines*tc.each, got, tc.want)
		}
		e.deny(r)
	}
}

// testTTL (needs KeyTTLs): after admitted takes on single- and multi-limit
// requests, every state key has a TTL above zero, no longer than the
// longest lifetime of the state it holds (time to refill for GCRA and the
// token bucket, two windows for the sliding counter, the longest period
// otherwise) and not shorter than the time its state still matters. Once
// the longest lifetime has passed, no state key remains.
func testTTL(e *env, alg store.Algorithm) {
	e.needKeyTTLs()
	la := named("a", alg, 3, 500*time.Millisecond)
	lb := named("b", alg, 5, time.Second)
	if bucketLike(alg) {
		lb.Burst = 6
	}
	e.windowRoom(alg, time.Second, lb.Period, la.Period)
	k1, k2, k3 := e.key(), e.key(), e.key()
	reqs := []store.Request{req(k1, 1, la, lb), req(k2, 2, la), req(k3, 1, lb), req(k1, 2, la, lb)}
	start := time.Now()
	var longest, surest time.Duration
	shortest := time.Duration(1<<63 - 1)
	for _, r := range reqs {
		e.allow(r)
		longest = max(longest, lifetime(r))
		shortest = min(shortest, minLifetime(r))
		surest = max(surest, minLifetime(r))
	}
	states := e.keys()
	elapsed := time.Since(start)
	if len(states) == 0 && (e.h.Exact || elapsed < surest-ttlSlack) {
		e.Fatalf("%s after %d admitted takes: got no state keys, want at least one", elapsed, len(reqs))
	}
	low := shortest - elapsed - ttlSlack
	for _, k := range sortedKeys(states) {
		switch ttl := states[k]; {
		case ttl < 0 || (ttl == 0 && e.h.Exact):
			e.Errorf("key %q: got TTL %s, want > 0 (every key expires)", k, ttl)
		case ttl > longest+ttlSlack:
			e.Errorf("key %q: got TTL %s, want <= %s (the longest lifetime of its state)", k, ttl, longest)
		case ttl < low:
			e.Errorf("key %q: got TTL %s, want >= %s (its state still matters that long)", k, ttl, low)
		}
	}
	e.past(longest)
	if states := e.keys(); len(states) != 0 {
		e.Errorf("%s after the takes: got state keys %q, want none", longest, sortedKeys(states))
	}
}

// minLifetime returns how long a request's state surely matters right
// after it was admitted on a fresh key: the time to refill its cost for
// GCRA and the token bucket, the longest period for the log (one log per
// limit set), one period for the sliding counter (to the end of the next
// window), and nothing for the fixed window (its window may be ending).
func minLifetime(r store.Request) time.Duration {
	m := time.Duration(1<<63 - 1)
	var longest time.Duration
	for _, l := range r.Limits {
		longest = max(longest, l.Period)
		switch l.Algorithm {
		case store.GCRA, store.TokenBucket:
			m = min(m, ceilDiv(l.Period, contract.Cost(&r), l.Rate))
		case store.SlidingWindowCounter:
			m = min(m, l.Period)
		case store.FixedWindow:
			m = 0
		}
	}
	if r.Limits[0].Algorithm == store.SlidingWindowLog {
		return longest
	}
	return m
}

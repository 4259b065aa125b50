package redisstore

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// TestDenyCacheNeverRefusesWhatRedisAdmits drives a store with the deny
// cache through random takes (several keys, limits and costs, every
// algorithm) and checks every refusal it answers from the cache against a
// store without the cache on the same Redis: a Peek there must refuse too.
// Cached refusals close to their end are skipped, since time may free the
// capacity between the two calls.
func TestDenyCacheNeverRefusesWhatRedisAdmits(t *testing.T) {
	ctx := context.Background()
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			cached, c := newStore(t, Options{})
			plain, err := newRedis(c, Options{Prefix: cached.prefix, Timeout: 2 * time.Second, DenyCacheSize: -1})
			if err != nil {
				t.Fatal(err)
			}
			limits := []store.Limit{
				{Algorithm: alg, Rate: 3, Period: 300 * time.Millisecond},
				{Algorithm: alg, Rate: 5, Period: time.Second},
			}
			rng := rand.New(rand.NewPCG(1, uint64(alg)))
			hits, checked := 0, 0
			var slowest time.Duration // the longest Take that Redis answered
			deadline := time.Now().Add(1500 * time.Millisecond)
			for time.Now().Before(deadline) {
				req := store.Request{
					Key:    []string{"a", "b", "c"}[rng.IntN(3)],
					Limits: limits[rng.IntN(2):][:1],
					Cost:   int64(1 + rng.IntN(2)),
				}
				if rng.IntN(40) == 0 {
					if err := cached.Reset(ctx, req); err != nil && !errors.Is(err, store.ErrNotFound) {
						t.Fatal(err)
					}
					continue
				}
				start := time.Now()
				d := mustTake(t, cached, req)
				if !d.Cached {
					slowest = max(slowest, time.Since(start))
					continue
				}
				hits++
				if d.Allowed || d.RetryAfter <= 0 {
					t.Fatalf("cached decision %s: want a refusal with a RetryAfter", fmtFull(d))
				}
				if d.RetryAfter < 30*time.Millisecond {
					continue
				}
				p := mustPeek(t, plain, req)
				if elapsed := time.Since(start); elapsed >= d.RetryAfter-slowest {
					// A stalled machine. A cached wait counts from when
					// Redis's refusal came back, so it may outlast Redis's
					// own by as long as that call took (slowest bounds
					// it), and the peek came too late to tell.
					continue
				}
				checked++
				if p.Allowed {
					t.Fatalf("the cache refused %+v (RetryAfter %s) but Redis admits it: %s", req, d.RetryAfter, fmtFull(p))
				}
				time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
			}
			if hits == 0 || checked == 0 {
				t.Fatalf("the traffic never hit the cache (%d hits, %d checked)", hits, checked)
			}
			t.Logf("%d cached refusals, %d checked against Redis", hits, checked)
		})
	}
}

// TestDenyCacheResetAndChangedLimit: a Reset through the same store
// forgets the cached refusal at once, and a changed limit (a raise) is
// asked afresh instead of answered from a refusal under the old limit.
func TestDenyCacheResetAndChangedLimit(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t, Options{})
	small := store.Request{Key: "k", Limits: []store.Limit{{Name: "l", Rate: 1, Period: time.Hour}}}
	mustTake(t, s, small)
	if d := mustTake(t, s, small); d.Allowed || d.Cached {
		t.Fatalf("second take: got %s, want refused by Redis", fmtFull(d))
	}
	if d := mustTake(t, s, small); d.Allowed || !d.Cached {
		t.Fatalf("third take: got %s, want the cached refusal", fmtFull(d))
	}
	raised := store.Request{Key: "k", Limits: []store.Limit{{Name: "l", Rate: 5, Period: time.Hour}}}
	if d := mustTake(t, s, raised); !d.Allowed || d.Cached || d.Remaining != 3 {
		t.Fatalf("raised limit: got %s, want admitted by Redis with 3 remaining", fmtFull(d))
	}
	if err := s.Reset(ctx, small); err != nil {
		t.Fatal(err)
	}
	if d := mustTake(t, s, small); !d.Allowed || d.Cached {
		t.Fatalf("after Reset: got %s, want admitted", fmtFull(d))
	}
}

// TestDenyCacheLookupBeforeTheRefusal: a caller that read the clock before
// another call's refusal was sent, and looks it up afterwards, gets the
// refusal's waits as Redis answered them, never longer (it used to add
// the difference, reporting a RetryAfter and ResetAfter beyond what the
// limit can ever ask for).
func TestDenyCacheLookupBeforeTheRefusal(t *testing.T) {
	c := newDenyCache(16)
	li := newLimitInfo(store.Limit{Rate: 20, Period: time.Hour})
	sent := time.Now()
	refusal := store.Decision{Capacity: 20, RetryAfter: 3 * time.Minute, ResetAfter: time.Hour, LimitID: li.id}
	c.store("k", li, 1, sent, sent, refusal)
	for _, at := range []time.Duration{-5 * time.Millisecond, -time.Microsecond, 0} {
		d, ok := c.lookup("k", li, 1, sent.Add(at))
		if !ok {
			t.Fatalf("lookup %s from the sending: got no refusal, want the cached one", at)
		}
		if d.RetryAfter != refusal.RetryAfter || d.ResetAfter != refusal.ResetAfter {
			t.Fatalf("lookup %s from the sending: got RetryAfter %s, ResetAfter %s, want %s, %s", at, d.RetryAfter, d.ResetAfter, refusal.RetryAfter, refusal.ResetAfter)
		}
	}
	d, ok := c.lookup("k", li, 1, sent.Add(200*time.Millisecond))
	if !ok || d.RetryAfter != 3*time.Minute-200*time.Millisecond || d.ResetAfter != time.Hour-200*time.Millisecond {
		t.Fatalf("lookup 200ms later: got %v, %+v, want RetryAfter 2m59.8s, ResetAfter 59m59.8s", ok, d)
	}
}

// TestDenyCacheWaitsCountFromTheAnswer: a refusal answered 3 ms after
// its call was sent is answered from the cache until the sending time plus
// its RetryAfter (Redis admits nothing before then), with waits that end
// 3 ms later, when Redis's own end has certainly passed: never longer
// than Redis answered.
func TestDenyCacheWaitsCountFromTheAnswer(t *testing.T) {
	c := newDenyCache(16)
	li := newLimitInfo(store.Limit{Rate: 20, Period: time.Hour})
	sent := time.Now()
	const retry, reset, late = 200 * time.Millisecond, time.Second, 3 * time.Millisecond
	c.store("k", li, 1, sent, sent.Add(late), store.Decision{Capacity: 20, RetryAfter: retry, ResetAfter: reset, LimitID: li.id})
	for _, tc := range []struct {
		at, retry, reset time.Duration
	}{
		{0, retry, reset},
		{time.Millisecond, retry, reset},
		{late, retry, reset},
		{late + 100*time.Millisecond, retry - 100*time.Millisecond, reset - 100*time.Millisecond},
		{retry - time.Microsecond, late + time.Microsecond, reset - retry + late + time.Microsecond},
	} {
		d, ok := c.lookup("k", li, 1, sent.Add(tc.at))
		if !ok || d.RetryAfter != tc.retry || d.NextAfter != tc.retry || d.ResetAfter != tc.reset {
			t.Fatalf("lookup %s from the sending: got %v, %+v; want RetryAfter and NextAfter %s, ResetAfter %s", tc.at, ok, d, tc.retry, tc.reset)
		}
	}
	if d, ok := c.lookup("k", li, 1, sent.Add(retry)); ok {
		t.Fatalf("lookup at the sending plus RetryAfter: got the cached %+v, want none (Redis may admit it)", d)
	}
}

// TestDenyCacheAsksAgain pins the Reset made through another process that
// did not reach this one: a cached refusal answered until its RetryAfter
// (3 minutes here). It now answers for 250 ms; then Redis is asked again.
func TestDenyCacheAsksAgain(t *testing.T) {
	c := newDenyCache(16)
	li := newLimitInfo(store.Limit{Rate: 20, Period: time.Hour})
	sent := time.Now()
	c.store("k", li, 1, sent, sent, store.Decision{Capacity: 20, RetryAfter: 3 * time.Minute, ResetAfter: time.Hour, LimitID: li.id})
	if _, ok := c.lookup("k", li, 1, sent.Add(249*time.Millisecond)); !ok {
		t.Fatal("lookup 249ms later: got no refusal, want the cached one")
	}
	if d, ok := c.lookup("k", li, 1, sent.Add(250*time.Millisecond)); ok {
		t.Fatalf("lookup 250ms later: got the cached %+v, want none (ask Redis again)", d)
	}
}

// A cached refusal answers only a request Redis would answer the same
// way: one of the refused cost. A request of another cost has another
// wait (and, above a cost of 1, units remaining that grow while it runs),
// so it is asked of Redis.
func TestDenyCacheAnswersOnlyTheRefusedCost(t *testing.T) {
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			cached, c := newStore(t, Options{})
			plain, err := newRedis(c, Options{Prefix: cached.prefix, Timeout: 2 * time.Second, DenyCacheSize: -1})
			if err != nil {
				t.Fatal(err)
			}
			lim := []store.Limit{{Algorithm: alg, Rate: 10, Period: time.Hour}}
			one := store.Request{Key: "k", Limits: lim}
			for range 10 {
				mustTake(t, cached, one)
			}
			if d := mustTake(t, cached, one); d.Allowed || d.Cached {
				t.Fatalf("11th unit: got %s, want a refusal from Redis", fmtFull(d))
			}
			near := func(what string, got, want store.Decision) {
				t.Helper()
				if got.Allowed != want.Allowed || got.Remaining != want.Remaining || got.Capacity != want.Capacity {
					t.Fatalf("%s: got %s, Redis says %s", what, fmtFull(got), fmtFull(want))
				}
				if diff := got.RetryAfter - want.RetryAfter; diff < -50*time.Millisecond || diff > 50*time.Millisecond {
					t.Fatalf("%s: got RetryAfter %s, Redis says %s", what, got.RetryAfter, want.RetryAfter)
				}
			}
			// The refused cost again: from the cache, as Redis says it.
			d := mustTake(t, cached, one)
			if !d.Cached {
				t.Fatalf("the refused cost again: got %s, want it from the cache", fmtFull(d))
			}
			near("the refused cost again", d, mustPeek(t, plain, one))
			// Another cost: Redis's own answer, with its own wait.
			four := store.Request{Key: "k", Limits: lim, Cost: 4}
			d = mustTake(t, cached, four)
			if d.Cached {
				t.Fatalf("cost 4 after a refused cost 1: got %s from the cache, want Redis's answer", fmtFull(d))
			}
			near("cost 4", d, mustPeek(t, plain, four))
			// A refusal of cost 4 is not cached either.
			if d = mustTake(t, cached, four); d.Cached {
				t.Fatalf("cost 4 again: got %s from the cache, want Redis's answer", fmtFull(d))
			}
		})
	}
}

// TestDenyCacheLatest: the cache knows the latest end of any refusal it
// stored, across evictions and forget, and a lookup after it misses
// without taking a shard's lock (here held by the test), while a lookup
// before it still finds its refusal.
func TestDenyCacheLatest(t *testing.T) {
	c := newDenyCache(denyShards) // one entry per shard: storing evicts
	li := &limitInfo{limit: 1}
	start := time.Now()
	refusal := func(retry time.Duration) store.Decision {
		return store.Decision{RetryAfter: retry, ResetAfter: retry}
	}
	if _, ok := c.lookup("k0", li, 1, start); ok {
		t.Fatal("a lookup in an empty cache found a refusal")
	}
	longest := time.Duration(0)
	for i := range 4 * denyShards {
		retry := time.Duration(1+i%7) * time.Millisecond
		longest = max(longest, retry)
		c.store("k"+strconv.Itoa(i), li, 1, start, start, refusal(retry))
	}
	c.store("k0", li, 1, start, start, refusal(time.Second))
	// A shorter refusal stored later leaves the latest end at k0's. Its
	// key is in another shard than k0: with one entry per shard, storing
	// it in k0's would evict k0 (shards follow a seed drawn per cache).
	other := "k1"
	for i := 2; c.shard(other) == c.shard("k0"); i++ {
		other = "k" + strconv.Itoa(i)
	}
	c.store(other, li, 1, start, start, refusal(time.Millisecond))
	want := int64(start.Sub(c.base) + time.Second)
	if got := c.latest.Load(); got != want {
		t.Fatalf("latest %d, want %d (the end of k0's refusal)", got, want)
	}
	if _, ok := c.lookup("k0", li, 1, start.Add(time.Microsecond)); !ok {
		t.Fatal("k0's refusal was not found before it ended")
	}
	c.forget("k0")
	if _, ok := c.lookup("k0", li, 1, start.Add(time.Microsecond)); ok {
		t.Fatal("k0's refusal was found after forget")
	}

	// Every shard locked: a lookup after the latest end must not wait.
	for i := range c.shards {
		c.shards[i].mu.Lock()
	}
	done := make(chan bool, 1)
	go func() {
		_, ok := c.lookup("k2", li, 1, start.Add(time.Second))
		done <- ok
	}()
	waited := false
	select {
	case ok := <-done:
		if ok {
			t.Error("a lookup after every refusal ended found one")
		}
	case <-time.After(5 * time.Second):
		waited = true
		t.Error("a lookup after every refusal ended waited for a shard's lock")
	}
	for i := range c.shards {
		c.shards[i].mu.Unlock()
	}
	if waited {
		<-done
	}
}

// TestDenyCacheWaitsEndWhenRedisAdmits: a client that waits a cached
// refusal's RetryAfter is admitted then. The calls travel 30 ms before
// Redis runs them (a hook delays every command), so the script's clock
// reads 30 ms after the call was sent; waits counted from the sending
// ended 30 ms before the server's, and the retry was refused again. A
// cached wait is also never longer than the one Redis answered.
func TestDenyCacheWaitsEndWhenRedisAdmits(t *testing.T) {
	srv := requireServer(t)
	for _, alg := range leanAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			c := newClient(t, srv, nil)
			c.AddHook(&shaHook{delay: 30 * time.Millisecond})
			s, err := newRedis(c, Options{Prefix: randomPrefix(t), Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			plain, err := newRedis(newClient(t, srv, nil), Options{Prefix: s.prefix, Timeout: 5 * time.Second, DenyCacheSize: -1})
			if err != nil {
				t.Fatal(err)
			}
			const period = 400 * time.Millisecond
			req := store.Request{Key: "k", Limits: []store.Limit{{Algorithm: alg, Rate: 1, Period: period}}}
			if alg == store.FixedWindow {
				// Start just after a window starts (at a multiple of the
				// period on the server's clock), so that the three takes
				// fall in one window.
				now, err := plain.client.Time(context.Background()).Result()
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(period - time.Duration(now.UnixMicro()%period.Microseconds())*time.Microsecond + 5*time.Millisecond)
			}
			if d := mustTake(t, s, req); !d.Allowed {
				t.Fatalf("first take: got %s, want admitted", fmtFull(d))
			}
			refused := mustTake(t, s, req)
			if refused.Allowed || refused.Cached {
				t.Fatalf("second take: got %s, want refused by Redis", fmtFull(refused))
			}
			d := mustTake(t, s, req)
			if d.Allowed || !d.Cached {
				t.Fatalf("third take: got %s, want the cached refusal", fmtFull(d))
			}
			if d.RetryAfter > refused.RetryAfter || d.NextAfter > refused.NextAfter {
				t.Fatalf("cached refusal %s waits longer than Redis answered (%s)", fmtFull(d), fmtFull(refused))
			}
			time.Sleep(d.RetryAfter)
			if p := mustPeek(t, plain, req); !p.Allowed {
				t.Fatalf("after the cached RetryAfter %s: Redis refuses %s, want admitted", d.RetryAfter, fmtFull(p))
			}
		})
	}
}

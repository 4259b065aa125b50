package redisstore

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store"
)

// limitsFor returns a two-limit policy for alg, one of them sub-second.
// The slow one's key outlives the test's takes and scan: a bucket's key
// lives until its units drain, 1.2s for the two admitted here.
func limitsFor(alg store.Algorithm) []store.Limit {
	return []store.Limit{
		{Name: "fast", Algorithm: alg, Rate: 2, Period: 250 * time.Millisecond},
		{Name: "slow", Algorithm: alg, Rate: 50, Period: 30 * time.Second},
	}
}

// maxTTL is the longest TTL a state key of limits may carry.
func maxTTL(limits []store.Limit) time.Duration {
	var longest time.Duration
	for _, l := range limits {
		d := l.Period
		switch l.Algorithm {
		case store.SlidingWindowCounter:
			d = 2 * l.Period
		case store.GCRA, store.TokenBucket:
			d = time.Duration(float64(l.Period) * float64(l.Capacity()) / float64(l.Rate))
		}
		longest = max(longest, d)
	}
	return longest + time.Millisecond
}

func TestTTLOnEveryKey(t *testing.T) {
	ctx := context.Background()
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			s, c := newStore(t, Options{})
			req := store.Request{Key: "ttl", Limits: limitsFor(alg)}
			first := time.Now()
			for i := 0; i < 4; i++ { // admitted, admitted, refused, refused
				d, err := s.Take(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed != (i < 2) {
					t.Logf("take %d: allowed %v (a window boundary passed)", i, d.Allowed)
				}
			}
			keys := prefixKeys(t, c, s.prefix)
			scanned := time.Now()
			var state int
			for _, k := range keys {
				ttl, err := c.PTTL(ctx, k).Result()
				if err != nil {
					t.Fatal(err)
				}
				limit := maxTTL(req.Limits)
				state++
				// -1 is a key without TTL; -2 a key that expired since
				// SCAN, and 0 one expiring within the millisecond: both
				// had a TTL.
				if ttl == -1 || ttl > limit {
					t.Fatalf("key %q: got PTTL %d, want a TTL of at most %s", k, ttl, limit)
				}
			}
			wantState := len(req.Limits)
			if alg == store.SlidingWindowLog {
				wantState = 1
			}
			if alg == store.SlidingWindowLog {
				// One key for both limits, kept as long as the longest
				// period (30s).
				if state != wantState {
					t.Fatalf("got %d state keys (%q), want %d", state, keys, wantState)
				}
				return
			}
			if alg != store.FixedWindow {
				// A bucket's key lives until its two admitted units have
				// drained (the fast limit's: 250ms), a sliding window
				// counter's for at least a period after its last write.
				// A limit's key may be gone only when the scan came that
				// long after the first take (a stalled machine).
				if state > wantState {
					t.Fatalf("got %d state keys (%q), want %d", state, keys, wantState)
				}
				for _, l := range req.Limits {
					if slices.ContainsFunc(keys, func(k string) bool { return strings.HasSuffix(k, ":"+l.Name) }) {
						continue
					}
					life := l.Period
					if alg == store.GCRA || alg == store.TokenBucket {
						life = 2 * l.Period / time.Duration(l.Rate)
					}
					if scanned.Sub(first) < life {
						t.Fatalf("no key of limit %q (%q), which lives %v after the first take; the scan came %v after it", l.Name, keys, life, scanned.Sub(first))
					}
					t.Logf("limit %q's key expired before the scan (%v after the first take)", l.Name, scanned.Sub(first))
				}
				return
			}
			// A fixed window's key lives until its window ends: a
			// limit's key is gone when one of its windows ended between
			// the first take and the scan (a loaded machine stretches
			// that time; the slow limit's 30s windows end in it too, if
			// rarely), and only then.
			if state > wantState {
				t.Fatalf("got %d state keys (%q), want at most %d", state, keys, wantState)
			}
			for _, l := range req.Limits {
				if slices.ContainsFunc(keys, func(k string) bool { return strings.HasSuffix(k, ":"+l.Name) }) {
					continue
				}
				if first.UnixNano()/int64(l.Period) == scanned.UnixNano()/int64(l.Period) {
					t.Fatalf("no key of limit %q (%q), whose window has not ended since the first take", l.Name, keys)
				}
				t.Logf("limit %q's window ended between the first take and the scan (%v later): its key expired", l.Name, scanned.Sub(first))
			}
		})
	}
}

func TestTTLSubMillisecondRemainder(t *testing.T) {
	// A fixed window 300µs from its end still gets a TTL, of 1ms: never
	// PEXPIRE 0, which would delete the key. The script and PTTL run in one
	// transaction so that real time cannot expire the key in between.
	ctx := context.Background()
	s, clock := newClockedStore(t, aligned+time.Second.Microseconds()-300, true)
	req := store.Request{Key: "edge", Limits: []store.Limit{{Algorithm: store.FixedWindow, Rate: 5, Period: time.Second}}}
	if err := req.Validate(); err != nil {
		t.Fatal(err)
	}
	cmd := s.command(modeTake, &req, 1)
	if err := clock.c.ScriptLoad(ctx, cmd.sc.src).Err(); err != nil {
		t.Fatal(err)
	}
	var ttl *redis.DurationCmd
	var run *redis.Cmd
	_, err := clock.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		run = p.Do(ctx, cmd.args...)
		ttl = p.PTTL(ctx, cmd.key)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := decodeLean(run.Val(), cmd.li); err != nil || !d.Allowed {
		t.Fatalf("got %+v, %v; want an admission", d, err)
	}
	// Inside EXEC expiry is judged at the transaction's start, so the key
	// exists; PTTL reads the real clock and may already round down to 0.
	// A missing key (-2) or one without TTL (-1) fails.
	if got := ttl.Val(); got < 0 || got > time.Millisecond {
		t.Fatalf("got PTTL %d, want 0 or 1ms", got)
	}
}

// snapshot returns every key under prefix with its serialized value.
func snapshot(t *testing.T, c *redis.Client, prefix string) map[string]string {
	t.Helper()
	out := make(map[string]string)
	for _, k := range prefixKeys(t, c, prefix) {
		v, err := c.Dump(context.Background(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	return out
}

func TestPeekWritesNothing(t *testing.T) {
	ctx := context.Background()
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			// A database of its own, so that DBSIZE sees only this test's
			// keys, and limits long enough that none of them expires.
			c := newClient(t, requireServer(t), &redis.Options{DB: 7})
			s, err := newRedis(c, Options{Prefix: randomPrefix(t), Timeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			req := store.Request{Key: "peek", Limits: []store.Limit{
				{Name: "a", Algorithm: alg, Rate: 2, Period: time.Hour},
				{Name: "b", Algorithm: alg, Rate: 50, Period: 2 * time.Hour},
			}}
			check := func(when string) {
				t.Helper()
				assertUnchanged(t, c, s.prefix, when, func() {
					for i := 0; i < 3; i++ {
						if _, err := s.Peek(ctx, req); err != nil {
							t.Fatal(err)
						}
					}
				})
			}
			check("fresh key")
			for i := 0; i < 3; i++ {
				if _, err := s.Take(ctx, req); err != nil {
					t.Fatal(err)
				}
			}
			check("existing state")
		})
	}
}

func TestPeekPredictsTake(t *testing.T) {
	ctx := context.Background()
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			s, _ := newClockedStore(t, aligned+12345, false)
			req := store.Request{Key: "predict", Limits: []store.Limit{{Algorithm: alg, Rate: 3, Period: time.Minute}}}
			for i := 0; i < 5; i++ {
				p, err := s.Peek(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				d, err := s.Take(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if !sameDecision(p, d) {
					t.Fatalf("call %d: peek %s, take %s; want equal", i, fmtDecision(p), fmtDecision(d))
				}
			}
		})
	}
}

func TestReset(t *testing.T) {
	ctx := context.Background()
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			s, c := newStore(t, Options{})
			req := store.Request{Key: "reset", Limits: []store.Limit{
				{Name: "a", Algorithm: alg, Rate: 3, Period: time.Hour},
				{Name: "b", Algorithm: alg, Rate: 4, Period: time.Hour},
			}}
			other := store.Request{Key: "other", Limits: req.Limits}
			for i := 0; i < 3; i++ {
				if _, err := s.Take(ctx, req); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Take(ctx, other); err != nil {
				t.Fatal(err)
			}
			if err := s.Reset(ctx, req); err != nil {
				t.Fatal(err)
			}
			keys, err := s.StateKeys(req)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := c.Exists(ctx, keys...).Result(); err != nil || n != 0 {
				t.Fatalf("after Reset: %d of %q exist (%v), want none", n, keys, err)
			}
			d, err := s.Take(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if !d.Allowed || d.Remaining != 2 {
				t.Fatalf("after Reset: got %s, want admitted with 2 remaining", fmtDecision(d))
			}
			d, err = s.Peek(ctx, other)
			if err != nil {
				t.Fatal(err)
			}
			if d.Remaining != 1 {
				t.Fatalf("other key after Reset: got remaining %d, want 1 (untouched)", d.Remaining)
			}
		})
	}
}

func TestScriptFlush(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t, Options{})
	req := store.Request{Key: "flush", Limits: []store.Limit{{Rate: 10, Period: time.Hour}}}
	if _, err := s.Take(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for _, alg := range store.Algorithms {
		for _, sc := range s.scripts.byAlgorithm[alg] {
			if ok, err := c.ScriptExists(ctx, sc.sha).Result(); err != nil || ok[0] {
				t.Fatalf("%s: script still cached after SCRIPT FLUSH (%v)", alg, err)
			}
		}
	}
	d, err := s.Take(ctx, req)
	if err != nil {
		t.Fatalf("take after SCRIPT FLUSH: %v", err)
	}
	if !d.Allowed || d.Remaining != 8 {
		t.Fatalf("take after SCRIPT FLUSH: got %s, want admitted with 8 remaining", fmtDecision(d))
	}
	if ok, err := c.ScriptExists(ctx, s.scripts.byAlgorithm[store.GCRA][lean].sha).Result(); err != nil || !ok[0] {
		t.Fatalf("script not cached again after the EVAL fallback (%v)", err)
	}
}

// TestNoKeyPerRequest: admitted takes leave only state keys behind, one
// per limit (or one log), never a key per request.
func TestNoKeyPerRequest(t *testing.T) {
	ctx := context.Background()
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			s, c := newStore(t, Options{})
			req := store.Request{Key: "perreq", Limits: []store.Limit{{Algorithm: alg, Rate: 1000, Period: time.Hour}}}
			for i := 0; i < 50; i++ {
				if d, err := s.Take(ctx, req); err != nil || !d.Allowed {
					t.Fatalf("take %d: %v, %v", i, d, err)
				}
			}
			if keys := prefixKeys(t, c, s.prefix); len(keys) != 1 {
				t.Fatalf("got keys %q after 50 takes, want one state key", keys)
			}
		})
	}
}

func TestErrorKinds(t *testing.T) {
	ctx := context.Background()
	t.Run("connection refused", func(t *testing.T) {
		s, err := newRedis(nilClient(), Options{Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Take(ctx, store.Request{Key: "k", Limits: []store.Limit{store.PerSecond(1)}})
		var be *store.BackendError
		if !errors.As(err, &be) || be.Kind != "connection" || be.Op != "take" {
			t.Fatalf("got %v, want a take BackendError of kind connection", err)
		}
		if !errors.Is(err, store.ErrStoreUnavailable) {
			t.Fatalf("got %v, want it to match ErrStoreUnavailable", err)
		}
	})
	// State the script cannot read belongs to one key: it is repaired,
	// never a store error (TestPoisonedStateIsRepaired covers every
	// algorithm).
	t.Run("wrong type", func(t *testing.T) {
		s, c := newStore(t, Options{})
		req := store.Request{Key: "k", Limits: []store.Limit{{Algorithm: store.FixedWindow, Rate: 1, Period: time.Second}}}
		keys, err := s.StateKeys(req)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Set(ctx, keys[0], "not a hash", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		d, err := s.Take(ctx, req)
		if err != nil || !d.Allowed || !d.Repaired {
			t.Fatalf("got %+v, %v; want admitted and repaired, no error", d, err)
		}
	})
	t.Run("corrupt state", func(t *testing.T) {
		s, c := newStore(t, Options{})
		req := store.Request{Key: "k", Limits: []store.Limit{{Rate: 1, Period: time.Second}}}
		keys, err := s.StateKeys(req)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Set(ctx, keys[0], "garbage", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		d, err := s.Peek(ctx, req)
		if err != nil || !d.Allowed || d.Repaired {
			t.Fatalf("got %+v, %v; want admitted as a fresh key, no error", d, err)
		}
		if v := c.Get(ctx, keys[0]).Val(); v != "garbage" {
			t.Fatalf("got %q after a peek, want the state untouched", v)
		}
		d, err = s.Take(ctx, req)
		if err != nil || !d.Allowed || !d.Repaired {
			t.Fatalf("got %+v, %v; want admitted and repaired, no error", d, err)
		}
	})
}

func TestConcurrentTakesAdmitExactly(t *testing.T) {
	ctx := context.Background()
	const limit, workers, each = 37, 8, 10
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			s, _ := newStore(t, Options{})
			req := store.Request{Key: "race", Limits: []store.Limit{
				{Name: "main", Algorithm: alg, Rate: limit, Period: time.Hour},
				{Name: "loose", Algorithm: alg, Rate: 1000, Period: time.Hour},
			}}
			var admitted atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < each; i++ {
						d, err := s.Take(ctx, req)
						if err != nil {
							errs <- err
							return
						}
						if d.Allowed {
							admitted.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if got := admitted.Load(); got != limit {
				t.Fatalf("got %d admitted, want exactly %d", got, limit)
			}
			d, err := s.Peek(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if d.PerLimit[1].Remaining != 1000-limit {
				t.Fatalf("loose limit: got remaining %d, want %d (only admitted takes recorded)", d.PerLimit[1].Remaining, 1000-limit)
			}
		})
	}
}

func TestSlidingLogSharedAndPruned(t *testing.T) {
	ctx := context.Background()
	s, clock := newClockedStore(t, aligned, false)
	limits := []store.Limit{
		{Name: "burst", Algorithm: store.SlidingWindowLog, Rate: 2, Period: time.Second},
		{Name: "hour", Algorithm: store.SlidingWindowLog, Rate: 5, Period: time.Hour},
	}
	req := store.Request{Key: "log", Limits: limits}
	keys, err := s.StateKeys(req)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 {
		t.Fatalf("got %d state keys, want one log shared by both limits", len(keys))
	}
	take := func(cost int64) store.Decision {
		t.Helper()
		d, err := s.Take(ctx, store.Request{Key: "log", Limits: limits, Cost: cost})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	card := func() int64 {
		t.Helper()
		n, err := clock.c.ZCard(ctx, keys[0]).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	take(2)
	if d := take(1); d.Allowed || d.LimitID != "burst" {
		t.Fatalf("got %s, want a refusal by burst", fmtDecision(d))
	}
	clock.advance(time.Second.Microseconds())
	take(2)
	clock.advance(time.Second.Microseconds())
	take(1)
	if d := take(1); d.Allowed || d.LimitID != "hour" || d.RetryAfter != time.Hour-2*time.Second {
		t.Fatalf("got %s, want a refusal by hour until the first units leave", fmtDecision(d))
	}
	if n := card(); n != 5 {
		t.Fatalf("got %d entries, want 5 (kept for the hour)", n)
	}
	// After an hour the first two units are pruned by the next admission.
	clock.advance(time.Hour.Microseconds() - 2*time.Second.Microseconds())
	take(1)
	if n := card(); n != 4 {
		t.Fatalf("got %d entries after an hour, want 4 (two pruned, one added)", n)
	}
	// Another limit set on the same key keeps its own log.
	other := []store.Limit{{Name: "burst", Algorithm: store.SlidingWindowLog, Rate: 2, Period: time.Second}}
	d, err := s.Peek(ctx, store.Request{Key: "log", Limits: other})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Allowed || d.Remaining != 1 {
		t.Fatalf("other limit set: got %s, want admitted with 1 remaining (own log)", fmtDecision(d))
	}
}

func TestSlidingLogLargeCost(t *testing.T) {
	// Cost above one ZADD chunk: every unit is a member.
	ctx := context.Background()
	s, c := newStore(t, Options{})
	req := store.Request{Key: "big", Limits: []store.Limit{{Algorithm: store.SlidingWindowLog, Rate: 5000, Period: time.Hour}}, Cost: 2500}
	for i, want := range []bool{true, true, false} {
		d, err := s.Take(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != want {
			t.Fatalf("take %d: got allowed %v, want %v", i, d.Allowed, want)
		}
	}
	keys, err := s.StateKeys(req)
	if err != nil {
		t.Fatal(err)
	}
	members, err := c.ZRange(ctx, keys[0], 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 5000 {
		t.Fatalf("got %d members, want 5000", len(members))
	}
	sort.Strings(members)
	for i := 1; i < len(members); i++ {
		if members[i] == members[i-1] {
			t.Fatalf("duplicate member %q", members[i])
		}
	}
}

// assertUnchanged runs f and fails the test if it changed the database:
// its size, or the serialized value of any key under prefix.
func assertUnchanged(t *testing.T, c *redis.Client, prefix, when string, f func()) {
	t.Helper()
	ctx := context.Background()
	before := snapshot(t, c, prefix)
	size, err := c.DBSize(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	f()
	after := snapshot(t, c, prefix)
	sizeAfter, err := c.DBSize(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if sizeAfter != size || len(after) != len(before) {
		t.Fatalf("%s: DBSIZE %d -> %d, keys %d -> %d; want unchanged", when, size, sizeAfter, len(before), len(after))
	}
	for k, v := range before {
		if after[k] != v {
			t.Fatalf("%s: key %q changed", when, k)
		}
	}
}

// TestWindowTTLSetWhenTheWindowStarts: the lean scripts of the fixed
// window and the sliding window counter give a key its TTL when a take
// starts the key's window, and leave it alone on the window's later takes
// (the expiry instant a take would set is the same for the whole window).
// A TTL set by hand in between shows which take set one.
func TestWindowTTLSetWhenTheWindowStarts(t *testing.T) {
	ctx := context.Background()
	sec := time.Second.Microseconds()
	for _, tc := range []struct {
		alg store.Algorithm
		end time.Duration // the TTL's end from the window's start
	}{
		{store.FixedWindow, 10 * time.Second},
		{store.SlidingWindowCounter, 20 * time.Second},
	} {
		t.Run(tc.alg.String(), func(t *testing.T) {
			s, clock := newClockedStore(t, aligned+sec/10, true)
			req := store.Request{Key: "w", Limits: []store.Limit{{Algorithm: tc.alg, Rate: 100, Period: 10 * time.Second}}}
			take := func() {
				t.Helper()
				if d, err := s.Take(ctx, req); err != nil || !d.Allowed {
					t.Fatalf("take: got %+v, %v; want an admission", d, err)
				}
			}
			ttl := func(key string) time.Duration {
				t.Helper()
				d, err := clock.c.PTTL(ctx, key).Result()
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			take() // starts the window, 100ms in
			var key string
			for _, k := range prefixKeys(t, clock.c, s.prefix) {
				if k != clock.key {
					key = k
				}
			}
			if key == "" {
				t.Fatal("no state key after a take")
			}
			want := tc.end - 100*time.Millisecond
			if got := ttl(key); got <= want-time.Second || got > want {
				t.Fatalf("after the window's first take: got PTTL %s, want about %s", got, want)
			}
			if err := clock.c.PExpire(ctx, key, time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			clock.set(aligned + 5*sec) // the same window
			take()
			if got := ttl(key); got <= 59*time.Minute {
				t.Fatalf("after a take later in the window: got PTTL %s, want the hour set by hand (the window's TTL is already set)", got)
			}
			clock.set(aligned + 10*sec + sec/10) // the next window
			take()
			if got := ttl(key); got <= want-time.Second || got > want {
				t.Fatalf("after the next window's first take: got PTTL %s, want about %s", got, want)
			}
		})
	}
}

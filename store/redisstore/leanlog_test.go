package redisstore

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store"
)

// TestLeanLogMatchesFull runs the lean sliding window log script and the
// full one on copies of the same random log, on the fake clock, and
// requires the same decision (every field, the repaired flag included),
// the same units inside the window and the same TTL. The logs hold units
// before, at and after the cutoff, in the future, scored beyond any time
// or at -inf, under members written by the store or by hand, with or
// without a TTL; or the key holds another type or a placeholder. Costs go
// up to the capacity, past one ZADD chunk. A refused take may prune units
// outside the window (the lean script does, the full one does not), so
// after a refusal only the window is compared; after anything else, the
// whole log.
func TestLeanLogMatchesFull(t *testing.T) {
	ctx := context.Background()
	s, clock := newClockedStore(t, aligned, false)
	c := clock.c
	rng := rand.New(rand.NewPCG(7, 11))
	var admitted, refused, repaired, peeks int
	for it := 0; it < 600; it++ {
		now := int64(aligned) + rng.Int64N(1e9)
		clock.set(now)
		capacity := []int64{1, 2, 3, 5, 40, 2500}[rng.IntN(6)]
		period := []time.Duration{time.Millisecond, 250 * time.Millisecond, time.Second, time.Minute}[rng.IntN(4)]
		p := period.Microseconds()
		cost := int64(1)
		switch rng.IntN(4) {
		case 0:
			cost = 1 + rng.Int64N(capacity)
		case 1:
			cost = capacity
		}
		mode := modeTake
		if rng.IntN(4) == 0 {
			mode = modePeek
		}
		limits := []store.Limit{{Algorithm: store.SlidingWindowLog, Rate: capacity, Period: period}}
		lreq := store.Request{Key: "lean", Limits: limits, Cost: cost}
		freq := store.Request{Key: "full", Limits: limits, Cost: cost}
		lc, fc := leanFullCommands(t, s, mode, &lreq, &freq, cost)
		// One nonce, so that both record the same members.
		if mode == modeTake {
			nonce := "n" + strconv.Itoa(it)
			lc.args[len(lc.args)-1] = nonce
			fc.args[3+fc.args[2].(int)+2] = nonce
		}

		// The state, written to both keys.
		var (
			kind    = rng.IntN(12)
			members []redis.Z
			what    string
			persist = rng.IntN(3) == 0
		)
		for _, k := range []string{lc.key, fc.key} {
			if err := c.Del(ctx, k).Err(); err != nil {
				t.Fatal(err)
			}
			c.HDel(ctx, clock.key, "x:"+k)
		}
		switch kind {
		case 0:
			what = "absent"
		case 1:
			what = "a string"
		case 2:
			what = "a placeholder"
		case 3:
			what = "a list"
		default:
			n := rng.IntN(int(min(capacity+4, 50)))
			if capacity == 2500 && rng.IntN(4) == 0 {
				n = 2490 + rng.IntN(20)
			}
			damaged := kind == 4
			for i := 0; i < n; i++ {
				var score float64
				switch r := rng.IntN(30); {
				case r == 0 && damaged:
					score = math.Inf(1)
				case r == 1 && damaged:
					score = 1e300
				case r == 2:
					score = math.Inf(-1)
				case r == 3:
					score = float64(now - p)
				case r == 4:
					score = float64(now - p + 1)
				case r == 5:
					score = float64(now + rng.Int64N(p))
				case r < 12:
					score = float64(now - p - rng.Int64N(3*p))
				default:
					score = float64(now - rng.Int64N(p))
				}
				member := fmt.Sprintf("%.0f:h%d:1", score, i)
				if rng.IntN(5) == 0 {
					member = "hand-" + strconv.Itoa(i)
				}
				members = append(members, redis.Z{Score: score, Member: member})
			}
			what = fmt.Sprintf("%d units (damaged %v)", n, damaged)
		}
		for _, k := range []string{lc.key, fc.key} {
			var err error
			switch kind {
			case 1:
				err = c.Set(ctx, k, "not a set", 0).Err()
			case 2:
				err = c.Set(ctx, k, placeholder, 0).Err()
			case 3:
				err = c.LPush(ctx, k, "x").Err()
			default:
				if len(members) > 0 {
					err = c.ZAdd(ctx, k, members...).Err()
				}
			}
			if err == nil && kind != 0 && !persist {
				err = c.PExpire(ctx, k, time.Hour).Err()
			}
			if err != nil {
				t.Fatal(err)
			}
		}

		where := fmt.Sprintf("iteration %d: %s cost %d of %d per %s, %s", it, mode, cost, capacity, period, what)
		got := leanAsFull(t, c, where, lc, &lreq, fc, &freq, cost)
		switch {
		case mode == modePeek:
			peeks++
		case got.Allowed:
			admitted++
		default:
			refused++
		}
		if got.Repaired {
			repaired++
		}

		// The state each left.
		if tl, tf := c.Type(ctx, lc.key).Val(), c.Type(ctx, fc.key).Val(); tl != tf {
			t.Fatalf("%s: lean left a %s, full a %s", where, tl, tf)
		}
		from := "-inf"
		if mode == modeTake && !got.Allowed {
			from = "(" + strconv.FormatInt(now-p, 10)
		}
		units := func(k string) []redis.Z {
			t.Helper()
			z, err := c.ZRangeByScoreWithScores(ctx, k, &redis.ZRangeBy{Min: from, Max: "+inf"}).Result()
			if err != nil && c.Type(ctx, k).Val() == "zset" {
				t.Fatal(err)
			}
			return z
		}
		if l, f := units(lc.key), units(fc.key); !reflect.DeepEqual(l, f) {
			t.Fatalf("%s: lean left %v, full %v", where, l, f)
		}
		sameExpiry(t, clock, where, lc.key, fc.key)
	}
	if admitted == 0 || refused == 0 || repaired == 0 || peeks == 0 {
		t.Fatalf("%d admitted, %d refused, %d repaired, %d peeks: want each exercised", admitted, refused, repaired, peeks)
	}
}

// leanFullCommands returns the lean command of lreq, a plain request, and the
// full script's command of freq, the same request under another key.
func leanFullCommands(t *testing.T, s *redisStore, mode string, lreq, freq *store.Request, cost int64) (lc, fc command) {
	t.Helper()
	if err := lreq.Validate(); err != nil {
		t.Fatal(err)
	}
	lc = s.command(mode, lreq, cost)
	if lc.variant != lean {
		t.Fatal("not the lean script")
	}
	fc = command{variant: full, sc: &s.scripts.byAlgorithm[lreq.Limits[0].Algorithm][full], li: lc.li}
	fc.args = s.fullArgs(mode, keyOf(s.prefix, freq.Key, ""), fc.sc, freq, cost)
	fc.key = fc.args[3+4].(string)
	return lc, fc
}

// leanAsFull runs the lean command lc of lreq and the full command fc of
// freq, each script loaded first, and fails unless both decide alike (the
// repaired flag included); it returns the lean decision.
func leanAsFull(t *testing.T, c *redis.Client, where string, lc command, lreq *store.Request, fc command, freq *store.Request, cost int64) store.Decision {
	t.Helper()
	run := func(cmd command, req *store.Request) store.Decision {
		t.Helper()
		ctx := context.Background()
		if err := c.ScriptLoad(ctx, cmd.sc.src).Err(); err != nil {
			t.Fatal(err)
		}
		v, err := c.Do(ctx, cmd.args...).Result()
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		d, err := cmd.decode(v, req, cost)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		return d
	}
	got, want := run(lc, lreq), run(fc, freq)
	if got.Allowed != want.Allowed || got.Remaining != want.Remaining || got.ResetAfter != want.ResetAfter ||
		got.RetryAfter != want.RetryAfter || got.NextAfter != want.NextAfter || got.Repaired != want.Repaired ||
		got.Capacity != want.Capacity {
		t.Fatalf("%s: lean %s repaired %v, full %s repaired %v", where, fmtDecision(got), got.Repaired, fmtDecision(want), want.Repaired)
	}
	return got
}

// sameExpiry fails unless the keys lean and full have the same TTL on the
// clock: a fake expiry in ms (see clockShim), or none.
func sameExpiry(t *testing.T, clock *fakeClock, where, lean, full string) {
	t.Helper()
	ctx, c := context.Background(), clock.c
	xl, errl := c.HGet(ctx, clock.key, "x:"+lean).Result()
	xf, errf := c.HGet(ctx, clock.key, "x:"+full).Result()
	if xl != xf || (errl == nil) != (errf == nil) {
		t.Fatalf("%s: lean left expiry %q, full %q", where, xl, xf)
	}
	if pl, pf := c.PTTL(ctx, lean).Val() > 0, c.PTTL(ctx, full).Val() > 0; pl != pf {
		t.Fatalf("%s: lean left a TTL %v, full %v", where, pl, pf)
	}
}

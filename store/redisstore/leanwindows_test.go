package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// TestLeanWindowsMatchFull runs the same sequences of takes and peeks of a
// plain fixed window and a plain sliding window counter through the lean
// script and through the full one, each on its own key, on one fake
// clock, and requires the same decision, the same fields in the key's
// hash and the same TTL after every step. The clock moves by less than a
// window, past one or past several; costs go up to the capacity; now and
// then both keys are changed by hand alike: deleted, a field p of another
// period written (as a reload that changed a named limit's period leaves
// it), or the key made another type. A take inside the window the key
// holds writes only its count (cur) and leaves the TTL, which must leave
// the key as the full script's rewrite of every field does.
func TestLeanWindowsMatchFull(t *testing.T) {
	ctx := context.Background()
	s, clock := newClockedStore(t, aligned, false)
	c := clock.c
	for _, alg := range []store.Algorithm{store.FixedWindow, store.SlidingWindowCounter} {
		rng := rand.New(rand.NewPCG(3, uint64(alg)))
		now := int64(aligned) + rng.Int64N(1e9)
		var admitted, refused, peeks, inWindow, rolled, changed int
		for it := range 800 {
			capacity := []int64{1, 3, 10, 100}[it/200]
			period := []time.Duration{time.Second, 250 * time.Millisecond, time.Minute, 10 * time.Second}[it/200]
			p := period.Microseconds()
			switch r := rng.IntN(10); {
			case r < 6:
				now += rng.Int64N(p / 8)
			case r < 9:
				now += p/2 + rng.Int64N(p)
			default:
				now += 2*p + rng.Int64N(3*p)
			}
			clock.set(now)
			cost := int64(1)
			if rng.IntN(4) == 0 {
				cost = 1 + rng.Int64N(capacity)
			}
			mode := modeTake
			if rng.IntN(6) == 0 {
				mode = modePeek
			}
			limits := []store.Limit{{Algorithm: alg, Rate: capacity, Period: period}}
			lreq := store.Request{Key: "lean", Limits: limits, Cost: cost}
			freq := store.Request{Key: "full", Limits: limits, Cost: cost}
			lc, fc := leanFullCommands(t, s, mode, &lreq, &freq, cost)
			if it%200 == 0 {
				// A new sequence, of another limit: fresh keys.
				for _, k := range []string{lc.key, fc.key} {
					if err := c.Del(ctx, k).Err(); err != nil {
						t.Fatal(err)
					}
					c.HDel(ctx, clock.key, "x:"+k)
				}
			}

			what := "as left"
			if rng.IntN(12) == 0 {
				changed++
				kind := rng.IntN(3)
				for _, k := range []string{lc.key, fc.key} {
					var err error
					switch kind {
					case 0:
						what = "deleted"
						err = c.Del(ctx, k).Err()
						c.HDel(ctx, clock.key, "x:"+k)
					case 1:
						what = "another period's p"
						if c.Exists(ctx, k).Val() == 1 && c.Type(ctx, k).Val() == "hash" {
							err = c.HSet(ctx, k, "p", strconv.FormatInt(p+1000, 10)).Err()
						}
					case 2:
						what = "a list"
						if err = c.Del(ctx, k).Err(); err == nil {
							err = c.LPush(ctx, k, "x").Err()
						}
						c.HDel(ctx, clock.key, "x:"+k)
					}
					if err != nil {
						t.Fatal(err)
					}
				}
			}
			before := c.HGet(ctx, lc.key, "w").Val()

			where := fmt.Sprintf("%v, step %d: %s cost %d of %d per %s, key %s", alg, it, mode, cost, capacity, period, what)
			got := leanAsFull(t, c, where, lc, &lreq, fc, &freq, cost)
			switch {
			case mode == modePeek:
				peeks++
			case got.Allowed:
				admitted++
				if after := c.HGet(ctx, lc.key, "w").Val(); after == before && what == "as left" {
					inWindow++
				} else {
					rolled++
				}
			default:
				refused++
			}

			if tl, tf := c.Type(ctx, lc.key).Val(), c.Type(ctx, fc.key).Val(); tl != tf {
				t.Fatalf("%s: lean left a %s, full a %s", where, tl, tf)
			}
			if c.Type(ctx, lc.key).Val() == "hash" {
				if l, f := c.HGetAll(ctx, lc.key).Val(), c.HGetAll(ctx, fc.key).Val(); !reflect.DeepEqual(l, f) {
					t.Fatalf("%s: lean left %v, full %v", where, l, f)
				}
			}
			sameExpiry(t, clock, where, lc.key, fc.key)
		}
		if admitted == 0 || refused == 0 || peeks == 0 || inWindow == 0 || rolled == 0 || changed == 0 {
			t.Fatalf("%v: %d admitted (%d inside the key's window, %d not), %d refused, %d peeks, %d changed by hand: want each exercised",
				alg, admitted, inWindow, rolled, refused, peeks, changed)
		}
		t.Logf("%v: %d admitted (%d inside the key's window, %d not), %d refused, %d peeks, %d changed by hand", alg, admitted, inWindow, rolled, refused, peeks, changed)
	}
}

package redisstore

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/internal/redistest"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/storetest"
)

// stackOf returns an IP part of ipRate and a route part of routeRate per
// hour, with algorithms a and b (an hour, so that a fixed window seldom
// ends inside a test).
func stackOf(a, b store.Algorithm, ipRate, routeRate int64) []store.Request {
	return []store.Request{
		{Key: "ip:203.0.113.7", Limits: []store.Limit{{Name: "ip", Algorithm: a, Rate: ipRate, Period: time.Hour}}},
		{Key: "route:/search", Limits: []store.Limit{{Name: "route", Algorithm: b, Rate: routeRate, Period: time.Hour}}},
	}
}

// remaining peeks how many units part i of reqs has left.
func remaining(t *testing.T, s store.Store, reqs []store.Request, i int) int64 {
	t.Helper()
	d, err := s.Peek(context.Background(), reqs[i])
	if err != nil {
		t.Fatal(err)
	}
	if !d.Allowed {
		return 0
	}
	return d.Remaining + 1 // a peek reports what would be left after it
}

// checkStack runs 3·total stacked takes of reqs (limits tight and loose)
// and checks that the admissions are exactly the tighter capacity, that
// refusals charged nothing, and that the deciding part is right.
func checkStack(t *testing.T, s store.MultiStore, reqs []store.Request, tight int, loose int64) {
	t.Helper()
	ctx := context.Background()
	admitted := 0
	for n := 0; n < 3*int(reqs[tight].Limits[0].Rate); n++ {
		md, err := s.TakeMulti(ctx, reqs)
		if err != nil {
			t.Fatal(err)
		}
		if md.Allowed {
			admitted++
		}
		if md.Part != tight {
			t.Fatalf("take %d: deciding part %d (%+v), want %d", n, md.Part, md.Parts, tight)
		}
		if !md.Allowed && md.RetryAfter <= 0 {
			t.Fatalf("take %d: refused with RetryAfter %s", n, md.RetryAfter)
		}
	}
	if want := int(reqs[tight].Limits[0].Rate); admitted != want {
		t.Fatalf("admitted %d, want %d", admitted, want)
	}
	other := 1 - tight
	if got, want := remaining(t, s, reqs, other), loose-int64(admitted); got != want {
		t.Fatalf("part %d has %d left, want %d: refused requests were charged", other, got, want)
	}
}

func TestTakeMultiAllOrNothing(t *testing.T) {
	for _, a := range store.Algorithms {
		for _, b := range []store.Algorithm{store.GCRA, store.FixedWindow} {
			t.Run(fmt.Sprintf("%s+%s", a, b), func(t *testing.T) {
				s, c := newStore(t, Options{})
				checkStack(t, s, stackOf(a, b, 3, 20), 0, 20)
				s2, _ := newStore(t, Options{})
				checkStack(t, s2, stackOf(a, b, 20, 3), 1, 20)
				ttls, err := redistest.KeyTTLs(context.Background(), c, s.prefix)
				if err != nil {
					t.Fatal(err)
				}
				for k, ttl := range ttls {
					if ttl <= 0 {
						t.Errorf("key %s has TTL %s", k, ttl)
					}
				}
			})
		}
	}
}

func TestTakeMultiHeldPartIsNotCharged(t *testing.T) {
	s, _ := newStore(t, Options{})
	ctx := context.Background()
	reqs := stackOf(store.GCRA, store.GCRA, 10, 1)
	if md, err := s.TakeMulti(ctx, reqs); err != nil || !md.Allowed || md.Part != 1 {
		t.Fatalf("first take: got %+v, %v; want admitted, decided by the route", md, err)
	}
	md, err := s.TakeMulti(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if md.Allowed || md.Part != 1 || md.LimitID != "route" {
		t.Fatalf("second take: got %+v, want refused by the route", md)
	}
	if ip := md.Parts[0]; !ip.Allowed || ip.Remaining != 9 {
		t.Fatalf("IP part of a refused stack: got %+v, want admitting with 9 left (the request not recorded)", ip)
	}
	if got := remaining(t, s, reqs, 0); got != 9 {
		t.Fatalf("IP has %d left, want 9", got)
	}
}

func TestTakeMultiInvalid(t *testing.T) {
	s, _ := newStore(t, Options{})
	reqs := stackOf(store.GCRA, store.GCRA, 1, 1)
	dup := []store.Request{reqs[0], reqs[0]}
	withID := []store.Request{reqs[0], reqs[1]}
	withID[1].DedupID = "x"
	for name, rs := range map[string][]store.Request{"empty": nil, "same key": dup, "dedup": withID} {
		if _, err := s.TakeMulti(context.Background(), rs); err == nil {
			t.Errorf("%s: got no error", name)
		}
	}
}

// ringStore returns a store on a one-shard Ring over the shared server:
// a client whose sharding the store does not know, so that every part is
// its own step and refusals are refunded.
func ringStore(t *testing.T) (*redisStore, *redis.Client) {
	t.Helper()
	srv := requireServer(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"one": srv.addr}})
	t.Cleanup(func() { _ = ring.Close() })
	s, err := newRedis(ring, Options{Prefix: randomPrefix(t), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s, newClient(t, srv, nil)
}

func TestTakeMultiRefund(t *testing.T) {
	for _, a := range store.Algorithms {
		t.Run(a.String(), func(t *testing.T) {
			s, c := ringStore(t)
			ctx := context.Background()
			// The IP part admits first; the route refuses after 2.
			reqs := stackOf(a, store.GCRA, 5, 2)
			refused := 0
			for n := 0; n < 6; n++ {
				md, err := s.TakeMulti(ctx, reqs)
				if err != nil {
					t.Fatal(err)
				}
				if !md.Allowed {
					refused++
					if md.Refunded != 1 || md.Part != 1 {
						t.Fatalf("refusal %d: Refunded %d, part %d; want 1 and the route", n, md.Refunded, md.Part)
					}
					if ip := md.Parts[0]; ip.Remaining != 3 {
						t.Fatalf("refusal %d: IP part reports %d left, want 3", n, ip.Remaining)
					}
				}
			}
			if got, want := s.Refunds(), uint64(refused); got != want || refused != 4 {
				t.Fatalf("Refunds() = %d after %d refusals, want %d and 4", got, refused, want)
			}
			if got := remaining(t, s, reqs, 0); got != 3 {
				t.Fatalf("IP has %d left after 2 admissions and %d refunded refusals, want 3", got, refused)
			}
			ttls, err := redistest.KeyTTLs(ctx, c, s.prefix)
			if err != nil {
				t.Fatal(err)
			}
			receipts := 0
			for k, ttl := range ttls {
				if ttl <= 0 {
					t.Errorf("key %s has TTL %s", k, ttl)
				}
				if v, _ := c.Get(ctx, k).Result(); v == "refunded" {
					receipts++
					// (2 steps + 3 refund attempts + 1) × the 2 s Timeout.
					if ttl > 12*time.Second {
						t.Errorf("receipt %s lives %s, want at most 12s", k, ttl)
					}
				}
			}
			if receipts != refused {
				t.Fatalf("%d used receipts, want %d", receipts, refused)
			}
		})
	}
}

func TestRefundAtMostOnce(t *testing.T) {
	s, _ := ringStore(t)
	ctx := context.Background()
	reqs := stackOf(store.GCRA, store.GCRA, 5, 5)
	parts := []stackPart{s.stackPart(&reqs[0], true), s.stackPart(&reqs[1], true)}
	parts[0].receipt = keyBase(s.prefix, encodeKey(reqs[0].Key)) + "receipt:test"
	out := make([]store.Decision, 2)
	if ok, err := s.runStep(ctx, modeTake, stackStep{parts: parts, g: []int{0}, receiptMS: 2000, out: out}); err != nil || !ok {
		t.Fatalf("take: %v, %v", ok, err)
	}
	if got := remaining(t, s, reqs, 0); got != 4 {
		t.Fatalf("after the take: %d left, want 4", got)
	}
	// A second refund is what a resend after a lost reply does.
	for i, want := range []int{refundApplied, refundApplied} {
		if got := s.refund(ctx, &parts[0]); got != want {
			t.Fatalf("refund %d: got %d, want %d", i, got, want)
		}
		if got := remaining(t, s, reqs, 0); got != 5 {
			t.Fatalf("after refund %d: %d left, want 5", i, got)
		}
	}
	// A part that never recorded has no receipt: nothing is given back.
	parts[1].receipt = keyBase(s.prefix, encodeKey(reqs[1].Key)) + "receipt:none"
	if got := s.refund(ctx, &parts[1]); got != refundNothing {
		t.Fatalf("refund without a take: got %d, want %d", got, refundNothing)
	}
}

func TestHashSlot(t *testing.T) {
	// Values from the Redis Cluster specification's CRC16 test vector and
	// CLUSTER KEYSLOT.
	for tag, want := range map[string]int{"123456789": 0x31C3 & 16383, "foo": 12182, "bar": 5061, "": 0} {
		if got := hashSlot(tag); got != want {
			t.Errorf("hashSlot(%q) = %d, want %d", tag, got, want)
		}
	}
}

// TestRefundFailureIsCounted: a refund Redis never answers is counted as
// unrefunded, and the receipt stays as it was: the units stay charged
// (until they expire), never given back twice.
func TestRefundFailureIsCounted(t *testing.T) {
	srv := requireServer(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"one": srv.addr}})
	prefix := randomPrefix(t)
	s, err := newRedis(ring, Options{Prefix: prefix, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	reqs := stackOf(store.FixedWindow, store.GCRA, 5, 5)
	parts := []stackPart{s.stackPart(&reqs[0], true)}
	parts[0].receipt = keyBase(prefix, encodeKey(reqs[0].Key)) + "receipt:test"
	out := make([]store.Decision, 1)
	if ok, err := s.runStep(ctx, modeTake, stackStep{parts: parts, g: []int{0}, receiptMS: 2000, out: out}); err != nil || !ok {
		t.Fatalf("take: %v, %v", ok, err)
	}
	_ = ring.Close()
	md := store.MultiDecision{Parts: out}
	s.refundSteps(ctx, parts, [][]int{{0}}, &md)
	if md.Unrefunded != 1 || md.Refunded != 0 || s.Unrefunded() != 1 || s.Refunds() != 0 {
		t.Fatalf("refund on a closed client: %d unrefunded, %d refunded (store: %d, %d); want 1, 0", md.Unrefunded, md.Refunded, s.Unrefunded(), s.Refunds())
	}
	c := newClient(t, srv, nil)
	if v, err := c.Get(ctx, parts[0].receipt).Result(); err != nil || v == "refunded" {
		t.Fatalf("receipt after a failed refund: %q, %v; want the take's time", v, err)
	}
	if got := remaining(t, newStoreOn(t, c, prefix), reqs, 0); got != 4 {
		t.Fatalf("after a failed refund: %d left, want 4 (still charged)", got)
	}
}

// newStoreOn returns a store on c with prefix.
func newStoreOn(t *testing.T, c *redis.Client, prefix string) *redisStore {
	t.Helper()
	s, err := newRedis(c, Options{Prefix: prefix, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTakeMultiLaterStepsPeeked: when an early step refuses, the later
// ones are only peeked (nothing written) and described without the
// request, as on a single node.
func TestTakeMultiLaterStepsPeeked(t *testing.T) {
	s, _ := ringStore(t)
	ctx := context.Background()
	reqs := stackOf(store.GCRA, store.FixedWindow, 1, 5)
	if md, err := s.TakeMulti(ctx, reqs); err != nil || !md.Allowed {
		t.Fatalf("first take: %+v, %v", md, err)
	}
	for n := 0; n < 3; n++ {
		md, err := s.TakeMulti(ctx, reqs)
		if err != nil {
			t.Fatal(err)
		}
		if md.Allowed || md.Part != 0 || md.Refunded != 0 {
			t.Fatalf("take %d: %+v, want refused by the IP step, nothing refunded", n, md)
		}
		if route := md.Parts[1]; !route.Allowed || route.Remaining != 4 {
			t.Fatalf("take %d: route part %+v, want admitting with 4 left", n, route)
		}
	}
	if got := remaining(t, s, reqs, 1); got != 4 {
		t.Fatalf("route has %d left, want 4: peeks wrote", got)
	}
	if s.Refunds() != 0 {
		t.Fatalf("Refunds() = %d, want 0", s.Refunds())
	}
}

// TestStackConformanceSteps runs the suite through a Ring client: every
// part of a stack is a step of its own, and refusals are refunded.
func TestStackConformanceSteps(t *testing.T) {
	srv := requireServer(t)
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"one": srv.addr}})
		t.Cleanup(func() { _ = ring.Close() })
		prefix := randomPrefix(t)
		s, err := newRedis(ring, Options{Prefix: prefix, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return storetest.Harness{Store: s, Advance: time.Sleep, KeyTTLs: keyTTLs(newClient(t, srv, nil), prefix)}
	})
}

// TestLeanStackMatchesStacked runs the same takes and peeks of stacks of
// plain parts of every algorithm the lean stacked script decides through
// it and through the general one, each on its own keys, and compares the
// decisions and the state keys' TTLs: the lean script must answer and
// write as the general one does. Some keys start unreadable (another
// type, a malformed value, a placeholder), which both repair alike.
//
// Each stack runs on a fake clock of its own (the clock moves between
// rounds, never between the two scripts of one), so that times compare
// to the microsecond and a window boundary cannot fall between the two
// calls; the keys' TTLs stay real.
func TestLeanStackMatchesStacked(t *testing.T) {
	ctx := context.Background()
	gcra := store.Limit{Name: "route", Rate: 9, Period: time.Hour}
	stacks := map[string]struct {
		limits []store.Limit
		script stackScript
	}{
		"gcra+token_bucket": {[]store.Limit{{Name: "ip", Rate: 5, Period: time.Hour}, {Name: "route", Algorithm: store.TokenBucket, Rate: 12, Period: time.Hour, Burst: 8}}, stackLean},
		"fixed_window+gcra": {[]store.Limit{{Name: "ip", Algorithm: store.FixedWindow, Rate: 6, Period: 2 * time.Second}, gcra}, stackLeanWindows},
		"counter+gcra":      {[]store.Limit{{Name: "ip", Algorithm: store.SlidingWindowCounter, Rate: 6, Period: 2 * time.Second}, gcra}, stackLeanWindows},
		"counter+fixed":     {[]store.Limit{{Name: "ip", Algorithm: store.SlidingWindowCounter, Rate: 7, Period: time.Second}, {Name: "route", Algorithm: store.FixedWindow, Rate: 10, Period: 3 * time.Second}}, stackLeanWindows},
		"log+gcra":          {[]store.Limit{{Name: "ip", Algorithm: store.SlidingWindowLog, Rate: 6, Period: 2 * time.Second}, {Name: "route", Rate: 200, Period: time.Minute}}, stackLeanWindows},
		"counter+log":       {[]store.Limit{{Name: "ip", Algorithm: store.SlidingWindowCounter, Rate: 7, Period: time.Second}, {Name: "route", Algorithm: store.SlidingWindowLog, Rate: 10, Period: 3 * time.Second}}, stackLeanWindows},
		"log+fixed+tb": {[]store.Limit{
			{Name: "a", Algorithm: store.SlidingWindowLog, Rate: 8, Period: time.Hour},
			{Name: "b", Algorithm: store.FixedWindow, Rate: 9, Period: time.Hour},
			{Name: "c", Algorithm: store.TokenBucket, Rate: 100, Period: time.Hour, Burst: 10},
		}, stackLeanWindows},
		"unnamed log+gcra": {[]store.Limit{{Algorithm: store.SlidingWindowLog, Rate: 6, Period: 2 * time.Second}, {Rate: 200, Period: time.Minute}}, stackLeanWindows},
		"unnamed tb+gcra":  {[]store.Limit{{Algorithm: store.TokenBucket, Rate: 6, Period: time.Hour}, {Rate: 9, Period: time.Hour}}, stackLean},
		"fixed+counter+tb": {[]store.Limit{
			{Name: "a", Algorithm: store.FixedWindow, Rate: 8, Period: time.Hour},
			{Name: "b", Algorithm: store.SlidingWindowCounter, Rate: 9, Period: time.Hour},
			{Name: "c", Algorithm: store.TokenBucket, Rate: 100, Period: time.Hour, Burst: 10},
		}, stackLeanWindows},
	}
	for name, stack := range stacks {
		limits, want := stack.limits, stack.script
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, clock := newClockedStore(t, aligned+12345, true)
			rdb := clock.c
			key := func(lean bool, i int) string { return fmt.Sprintf("%s-%v-%d", name, lean, i) }
			stateKey := func(lean bool, i int) string {
				req := store.Request{Key: key(lean, i), Limits: limits[i : i+1]}
				keys := s.stackPart(&req, true).keys
				return keys[len(keys)-1].(string)
			}
			// Unreadable state in the first part's key: a list, where
			// every algorithm reads a string or a hash.
			for _, lean := range []bool{true, false} {
				if err := rdb.RPush(ctx, stateKey(lean, 0), "x").Err(); err != nil {
					t.Fatal(err)
				}
			}
			rng := rand.New(rand.NewPCG(1, 2))
			admitted, repairs := 0, 0
			const rounds = 40
			for n := range rounds {
				cost := int64(1 + rng.IntN(3))
				mode := modeTake
				if rng.IntN(5) == 0 {
					mode = modePeek
				}
				if n == 20 {
					// A malformed value in the last part's key, a
					// placeholder in the first's.
					for _, lean := range []bool{true, false} {
						k := stateKey(lean, len(limits)-1)
						if err := rdb.Del(ctx, k).Err(); err != nil {
							t.Fatal(err)
						}
						var err error
						if limits[len(limits)-1].Algorithm == store.FixedWindow || limits[len(limits)-1].Algorithm == store.SlidingWindowCounter {
							err = rdb.HSet(ctx, k, "w", "soon", "cur", "1").Err()
						} else {
							err = rdb.Set(ctx, k, "short", time.Hour).Err()
						}
						if err != nil {
							t.Fatal(err)
						}
						if err := rdb.Set(ctx, stateKey(lean, 0), "\x00rk:absent", time.Hour).Err(); err != nil {
							t.Fatal(err)
						}
					}
				}
				if n >= 30 {
					// State left without a TTL (written by hand): a
					// refusal gives it the one its state calls for.
					for _, lean := range []bool{true, false} {
						for i := range limits {
							if err := rdb.Persist(ctx, stateKey(lean, i)).Err(); err != nil {
								t.Fatal(err)
							}
						}
					}
				}
				var got [2][]store.Decision
				// The writes' span in real time, which the TTLs count
				// in: a stall between the two steps (a loaded machine)
				// separates their TTLs by as much.
				stepsFrom := time.Now()
				for v, lean := range []bool{true, false} {
					reqs := make([]store.Request, len(limits))
					parts := make([]stackPart, len(limits))
					g := make([]int, len(limits))
					for i := range limits {
						reqs[i] = store.Request{Key: key(lean, i), Limits: limits[i : i+1], Cost: cost}
						// As TakeMulti builds them: without the full
						// script's call when a lean script decides.
						parts[i] = s.stackPart(&reqs[i], !lean)
						g[i] = i
					}
					st := &stackStep{parts: parts, g: g, out: make([]store.Decision, len(limits))}
					got[v] = st.out
					kind := st.lean()
					if kind != want {
						t.Fatalf("the step runs stacked script %d, want %d", kind, want)
					}
					if !lean {
						kind = stackGeneral
					}
					if _, err := s.runStepWith(ctx, mode, st, kind); err != nil {
						t.Fatalf("%s %d (lean %v): %v", mode, n, lean, err)
					}
				}
				steps := time.Since(stepsFrom)
				for i := range limits {
					a, b := got[0][i], got[1][i]
					if a.LimitID != limits[i].ID() {
						t.Fatalf("%s %d, part %d: limit %q, want %q", mode, n, i, a.LimitID, limits[i].ID())
					}
					if !sameDecision(a, b) {
						t.Fatalf("%s %d (cost %d), part %d: lean %+v, general %+v", mode, n, cost, i, a, b)
					}
					readFrom := time.Now()
					ta, err := rdb.PTTL(ctx, stateKey(true, i)).Result()
					if err != nil {
						t.Fatal(err)
					}
					tb, err := rdb.PTTL(ctx, stateKey(false, i)).Result()
					if err != nil {
						t.Fatal(err)
					}
					// Redis counts a TTL from its cached time, which
					// its cron refreshes every 100 ms (hz 10) when a
					// command does not: two writes a few ms apart were
					// seen 80-113 ms apart under load.
					slack := 150*time.Millisecond + steps + time.Since(readFrom)
					// The TTLs are real while the scripts run on the fake
					// clock: a state due to expire (in real time) a few
					// ms after it was written may be gone from one side
					// only, written a little earlier; it counts as a TTL
					// of 0. A key without a TTL (-1) matches only one.
					expiring := false
					for _, ttl := range []*time.Duration{&ta, &tb} {
						if *ttl == -2 {
							*ttl, expiring = 0, true
						}
					}
					if (ta == -1) != (tb == -1) || absDuration(ta-tb) > slack {
						t.Fatalf("%s %d, part %d: state TTL %v (lean), %v (general), %v apart in real time", mode, n, i, ta, tb, slack-150*time.Millisecond)
					}
					if limits[i].Algorithm == store.SlidingWindowLog && !expiring {
						// The logs' units: the same scores (their members
						// carry each call's own nonce).
						var units [2][]float64
						for v, lean := range []bool{true, false} {
							k := stateKey(lean, i)
							if typ := rdb.Type(ctx, k).Val(); typ != "zset" {
								units[v] = append(units[v], -1) // another type (or none) stands for itself
								continue
							}
							zs, err := rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
							if err != nil {
								t.Fatal(err)
							}
							for _, z := range zs {
								units[v] = append(units[v], z.Score)
							}
						}
						if !slices.Equal(units[0], units[1]) {
							t.Fatalf("%s %d, part %d: log units %v (lean), %v (general)", mode, n, i, units[0], units[1])
						}
					}
					if a := limits[i].Algorithm; (a == store.FixedWindow || a == store.SlidingWindowCounter) && !expiring {
						// The windows' state: keys of the same type, and
						// hashes of the same fields and values.
						var types [2]string
						var hashes [2]map[string]string
						for v, lean := range []bool{true, false} {
							k := stateKey(lean, i)
							types[v] = rdb.Type(ctx, k).Val()
							if types[v] == "hash" {
								hashes[v] = rdb.HGetAll(ctx, k).Val()
							}
						}
						if types[0] != types[1] || !maps.Equal(hashes[0], hashes[1]) {
							t.Fatalf("%s %d, part %d: window state %s %v (lean), %s %v (general)", mode, n, i, types[0], hashes[0], types[1], hashes[1])
						}
					}
				}
				for _, d := range got[0] {
					if d.Repaired {
						repairs++
					}
				}
				allowed := true
				for _, d := range got[0] {
					allowed = allowed && d.Allowed
				}
				if allowed && mode == modeTake {
					admitted++
				}
				clock.advance(rng.Int64N(300_000))
			}
			if admitted == 0 || admitted == rounds {
				t.Fatalf("%d of %d stacks admitted: the sequence should reach both verdicts", admitted, rounds)
			}
			if repairs == 0 {
				t.Fatal("no part reported a repair: the unreadable keys were not read")
			}
		})
	}
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// leanPart reports a part that a lean stacked script decides.
func leanPart(req *store.Request) bool {
	st := stackStep{parts: []stackPart{{req: req}}, g: []int{0}}
	return st.lean() != stackGeneral
}

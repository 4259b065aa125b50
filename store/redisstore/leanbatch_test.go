package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/internal/redistest"
	"github.com/ratekeeper/ratekeeper/lua"
	"github.com/ratekeeper/ratekeeper/store"
)

// leanAlgorithms are the algorithms with lean scripts, so lean batches.
var leanAlgorithms = []store.Algorithm{store.GCRA, store.TokenBucket, store.SlidingWindowLog, store.SlidingWindowCounter, store.FixedWindow}

// TestLeanBatchMatchesLone: for every algorithm, a random run of takes and
// peeks (mixed within a batch but for the sliding window log, whose peeks
// have one argument fewer) over four keys, two of them holding state no
// algorithm can read (a string, a list), decided by lean batches of one
// to seven requests under one prefix and by the lean script, one call per
// request, under another, answers the same decisions (admitted,
// remaining, repaired) and leaves the same keys with TTLs. The limit is 20
// a day, so the few milliseconds between the two runs cannot change a
// decision, and the first refusals come a third to a half of the way
// through: until then a request decided with another's cost or mode shows
// in its remaining count, and after it the refusals are compared.
func TestLeanBatchMatchesLone(t *testing.T) {
	ctx := context.Background()
	c, table := scriptClient(t)
	for _, alg := range leanAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			lone := &table.byAlgorithm[alg][lean]
			batch := lone.batch
			if batch == nil {
				t.Fatalf("%v: the lean script has no batch", alg)
			}
			loadScripts(t, c, lone, batch)
			rng := rand.New(rand.NewPCG(uint64(alg)+1, 7))
			pa, pb := randomPrefix(t), randomPrefix(t)
			for _, p := range []string{pa, pb} {
				if err := c.Set(ctx, p+":k2", "garbage", 0).Err(); err != nil {
					t.Fatal(err)
				}
				if err := c.RPush(ctx, p+":k3", "x").Err(); err != nil {
					t.Fatal(err)
				}
			}
			seq, repairs := 0, 0
			var layouts [3]int // batches sent with 0, 1 and more shared argument lists
			withOwn := 0       // and with arguments of each request's own after the lists
			// argsOf returns a request's lean arguments.
			argsOf := func(mode string, cost int) []any {
				a := []any{mode, cost, 20, int64(24 * time.Hour / time.Microsecond), 20}
				if alg == store.SlidingWindowLog && mode == modeTake {
					seq++
					a = append(a, fmt.Sprintf("n%d", seq))
				}
				return a
			}
			for round := range 40 {
				n := 1 + rng.IntN(7)
				mode := modeTake
				if rng.IntN(4) == 0 {
					mode = modePeek // one argument fewer for the log: its own batch
				}
				var keysA []string
				var argsA []any
				var want [][]any
				for range n {
					k := fmt.Sprintf(":k%d", rng.IntN(4))
					m := mode
					if alg != store.SlidingWindowLog && rng.IntN(3) == 0 {
						m = modePeek
					}
					a := argsOf(m, 1+rng.IntN(2))
					keysA = append(keysA, pa+k)
					argsA = append(argsA, a...)
					v, err := c.EvalSha(ctx, lone.sha, []string{pb + k}, a...).Result()
					if err != nil {
						t.Fatalf("round %d: lone call: %v", round, err)
					}
					want = append(want, v.([]any))
				}
				// Even rounds send the command the store builds, which
				// shares argument lists where that is shorter; odd ones
				// every request's arguments in order.
				per := len(argsA) / n
				cmd := []any{argEvalSHA, batch.shaArg, n}
				for _, k := range keysA {
					cmd = append(cmd, k)
				}
				if round%2 == 0 {
					calls := make([]*call, n)
					for i := range calls {
						calls[i] = newTestCall(lone, append([]any{argEvalSHA, lone.shaArg, argOne, keysA[i]}, argsA[i*per:(i+1)*per]...))
					}
					cmd = leanBatchArgs(batch, calls, per)
				} else {
					cmd = append(append(cmd, per, 0, 0), argsA...)
				}
				lists := cmd[3+n+1].(int)
				layouts[min(lists, 2)]++
				if cmd[3+n+2].(int) > 0 {
					withOwn++
				}
				v, err := c.Do(ctx, cmd...).Result()
				if err != nil {
					t.Fatalf("round %d: lean batch (%d shared lists): %v", round, lists, err)
				}
				got := batchReplies(t, v, n)
				for i := range got {
					g, ok := got[i].([]any)
					if !ok || len(g) != len(want[i]) {
						t.Fatalf("round %d, request %d: got %v, want %v", round, i, got[i], want[i])
					}
					// allowed, remaining, repaired: the times may differ
					// by the microseconds between the two runs.
					for _, j := range []int{0, 1, 4} {
						if g[j] != want[i][j] {
							t.Fatalf("round %d, request %d (%v): element %d: batch %v, lone %v", round, i, keysA[i], j, g, want[i])
						}
					}
					// reset, retry and the sixth: within the seconds
					// between the runs, so a compact admission that
					// misplaced one shows.
					for j := 2; j < len(g); j++ {
						if j == 4 {
							continue
						}
						if d := g[j].(int64) - want[i][j].(int64); d > 5e6 || d < -5e6 {
							t.Fatalf("round %d, request %d (%v): element %d: batch %v, lone %v", round, i, keysA[i], j, g, want[i])
						}
					}
					if g[4] == int64(1) {
						repairs++
					}
				}
			}
			if repairs != 2 {
				t.Errorf("%d requests repaired unreadable state, want 2 (one per such key)", repairs)
			}
			if layouts[0] == 0 || layouts[1] == 0 || layouts[2] == 0 {
				t.Errorf("batches with 0, 1 and more shared argument lists: %v, want each layout", layouts)
			}
			// The log's takes share their lists and send each nonce
			// after them; no other algorithm has an argument of its own.
			if (withOwn > 0) != (alg == store.SlidingWindowLog) {
				t.Errorf("%d batches sent arguments of each request's own after the lists", withOwn)
			}
			for _, k := range []string{":k0", ":k1", ":k2", ":k3"} {
				ta, tb := c.PTTL(ctx, pa+k).Val(), c.PTTL(ctx, pb+k).Val()
				if (ta > 0) != (tb > 0) || ta == -1 {
					t.Errorf("key %s: TTL %v after batches, %v after lone calls; want both set or both absent", k, ta, tb)
				}
			}
		})
	}
}

// batchReplies splits v, the reply of a lean batch of n requests, into
// the requests' elements as the store reads them, failing t when it is
// not well formed. A compact admission comes back as the lean reply it
// stands for, {1, remaining, reset, 0, 0[, next]}.
func batchReplies(t *testing.T, v any, n int) []any {
	t.Helper()
	flat, ok := v.([]any)
	if !ok || !wellFormedBatch(flat, n) {
		t.Fatalf("a lean batch of %d requests answered %T %v", n, v, v)
	}
	out := make([]any, n)
	for i, at := 0, 0; i < n; i++ {
		var slot []any
		out[i], at = batchItem(flat, at, &slot)
		switch p := out[i].(type) {
		case *[]any:
			if p != &slot {
				t.Fatalf("request %d: batchItem returned a pointer to another slot", i)
			}
			out[i] = *p
		case *admission:
			if (*[]any)(p) != &slot {
				t.Fatalf("request %d: batchItem returned a pointer to another slot", i)
			}
			out[i] = append([]any{int64(1), slot[0], slot[1], int64(0), int64(0)}, slot[2:]...)
		}
	}
	return out
}

// TestLeanBatchAdmissionsCompact: in a lean batch, an admission that
// repaired nothing answers its two integers (three for the sliding window
// log and counter) after their number, and the store decodes them as the
// lean reply it stands for; a refusal and a repair answer the full lean
// reply.
func TestLeanBatchAdmissionsCompact(t *testing.T) {
	ctx := context.Background()
	c, table := scriptClient(t)
	for _, alg := range leanAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			lone := &table.byAlgorithm[alg][lean]
			batch := lone.batch
			loadScripts(t, c, lone, batch)
			p := randomPrefix(t)
			if err := c.Set(ctx, p+":bad", "garbage", 0).Err(); err != nil {
				t.Fatal(err)
			}
			l := store.Limit{Algorithm: alg, Rate: 2, Period: time.Hour}
			li := newLimitInfo(l)
			period := int64(time.Hour / time.Microsecond)
			keys := []string{p + ":a", p + ":a", p + ":a", p + ":bad"}
			// The command the store builds: one shared list, and for the
			// log's takes each nonce after it.
			calls := make([]*call, len(keys))
			for i, k := range keys {
				a := []any{argEvalSHA, lone.shaArg, argOne, k, modeTake, int64(1), int64(2), period, int64(2)}
				if alg == store.SlidingWindowLog {
					a = append(a, fmt.Sprintf("n%d", i))
				}
				calls[i] = newTestCall(lone, a)
			}
			cmd := leanBatchArgs(batch, calls, len(calls[0].args)-4)
			wantOwn := 0
			if alg == store.SlidingWindowLog {
				wantOwn = 1
			}
			if m, e := cmd[3+len(keys)+1], cmd[3+len(keys)+2]; m != 1 || e != wantOwn {
				t.Fatalf("command %v: %v lists and %v arguments of each request's own, want 1 and %d", cmd, m, e, wantOwn)
			}
			v, err := c.Do(ctx, cmd...).Result()
			if err != nil {
				t.Fatal(err)
			}
			flat := v.([]any)
			if !wellFormedBatch(flat, len(keys)) {
				t.Fatalf("reply %v is not well formed", flat)
			}
			ints := int64(2) // the compact admission's
			full := int64(5)
			if alg == store.SlidingWindowLog || alg == store.SlidingWindowCounter {
				ints, full = 3, 6
			}
			// admitted, admitted, refused (a limit of 2), repaired and admitted
			wantCounts := []int64{ints, ints, full, full}
			wantAllowed := []bool{true, true, false, true}
			wantRemaining := []int64{1, 0, 0, 1}
			var slots [4][]any
			for i, at := 0, 0; i < len(keys); i++ {
				if got := flat[at]; got != wantCounts[i] {
					t.Fatalf("request %d: count %v, want %d (reply %v)", i, got, wantCounts[i], flat)
				}
				var item any
				item, at = batchItem(flat, at, &slots[i])
				if _, compact := item.(*admission); compact != (wantCounts[i] == ints) {
					t.Errorf("request %d: batchItem answered %T", i, item)
				}
				d, err := decodeLean(item, li)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				if d.Allowed != wantAllowed[i] || d.Remaining != wantRemaining[i] || d.Repaired != (i == 3) || d.Capacity != 2 {
					t.Errorf("request %d: %+v, want allowed %v, remaining %d", i, d, wantAllowed[i], wantRemaining[i])
				}
				if d.Allowed && (d.RetryAfter != 0 || d.ResetAfter <= 0 || d.NextAfter < 0) {
					t.Errorf("request %d: admitted with %+v", i, d)
				}
			}
		})
	}
}

// TestWellFormedBatch: the store accepts a lean batch's reply only when
// it holds one element per request, each a count and that many integers
// or a string, and nothing after them.
func TestWellFormedBatch(t *testing.T) {
	five := []any{int64(5), int64(1), int64(9), int64(100), int64(0), int64(0)}
	six := []any{int64(6), int64(0), int64(0), int64(7), int64(8), int64(0), int64(9)}
	cat := func(parts ...[]any) []any {
		var out []any
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		flat  []any
		calls int
		want  bool
	}{
		{"two replies", cat(five, six), 2, true},
		{"compact admissions", []any{int64(2), int64(9), int64(100), int64(3), int64(8), int64(200), int64(7)}, 2, true},
		{"reply, error, reply", cat(five, []any{"ERR x"}, six), 3, true},
		{"errors only", []any{"READONLY a", "READONLY b"}, 2, true},
		{"one request short", cat(five), 2, false},
		{"one request over", cat(five, six), 1, false},
		{"count past the end", five[:4], 1, false},
		{"count 0", []any{int64(0)}, 1, false},
		{"count 9", append([]any{int64(9)}, make([]any, 9)...), 1, false},
		{"negative count", []any{int64(-1), int64(1)}, 1, false},
		{"not an integer", []any{int64(2), int64(1), "x"}, 1, false},
		{"nested array", []any{[]any{int64(1)}}, 1, false},
		{"empty", nil, 1, false},
	} {
		if got := wellFormedBatch(tc.flat, tc.calls); got != tc.want {
			t.Errorf("%s: wellFormedBatch = %v, want %v", tc.name, got, tc.want)
		}
	}
	flat := cat(five, []any{"ERR x"}, six)
	var slots [3][]any
	v, at := batchItem(flat, 0, &slots[0])
	if p, ok := v.(*[]any); !ok || p != &slots[0] {
		t.Fatalf("first item: %T, want a pointer to its slot", v)
	}
	if r := slots[0]; len(r) != 5 || cap(r) != 5 || r[1] != int64(9) || at != 6 {
		t.Errorf("first item: %v (next %d), want the five integers and 6", r, at)
	}
	if v, at = batchItem(flat, at, &slots[1]); v != "ERR x" || at != 7 || slots[1] != nil {
		t.Errorf("second item: %v (next %d), want the error string and 7, its slot untouched", v, at)
	}
	if v, at = batchItem(flat, at, &slots[2]); len(*v.(*[]any)) != 6 || at != len(flat) {
		t.Errorf("third item: %v (next %d), want the six integers and the end", v, at)
	}
	// decodeLean reads a batch item as it reads a lone call's reply, and
	// a compact admission as the lean reply it stands for.
	li := newLimitInfo(store.Limit{Rate: 10, Period: time.Second})
	lone, errLone := decodeLean(five[1:], li)
	batched, errBatched := decodeLean(&slots[0], li)
	if errLone != nil || errBatched != nil || !reflect.DeepEqual(lone, batched) || !lone.Allowed || lone.Remaining != 9 {
		t.Errorf("decodeLean: lone reply %+v (%v), batch item %+v (%v); want the same decision", lone, errLone, batched, errBatched)
	}
	compact := []any{int64(2), int64(9), int64(100)}
	var slot []any
	v, at = batchItem(compact, 0, &slot)
	if _, ok := v.(*admission); !ok || at != 3 {
		t.Fatalf("compact admission: %T (next %d), want an *admission and 3", v, at)
	}
	if d, err := decodeLean(v, li); err != nil || !reflect.DeepEqual(d, lone) {
		t.Errorf("compact admission: %+v (%v), want %+v", d, err, lone)
	}
	// The window algorithms' compact admission carries the time until
	// one unit more; a count the layouts do not have is refused.
	wli := newLimitInfo(store.Limit{Algorithm: store.SlidingWindowCounter, Rate: 10, Period: time.Second})
	wfull, err := decodeLean([]any{int64(1), int64(9), int64(1000000), int64(0), int64(0), int64(50000)}, wli)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		item admission
		li   *limitInfo
		want *store.Decision
	}{
		{"window with next", admission{int64(9), int64(1000000), int64(50000)}, wli, &wfull},
		{"window without next", admission{int64(9), int64(1000000)}, wli, nil},
		{"bucket with next", admission{int64(9), int64(100), int64(5)}, li, nil},
		{"one integer", admission{int64(9)}, li, nil},
		{"remaining over the limit", admission{int64(11), int64(100)}, li, nil},
		{"negative reset", admission{int64(9), int64(-1)}, li, nil},
		{"not an integer", admission{int64(9), "x"}, li, nil},
	} {
		d, err := decodeLean(&tc.item, tc.li)
		if tc.want == nil {
			if !errors.Is(err, errBadReply) {
				t.Errorf("%s: %+v, %v; want errBadReply", tc.name, d, err)
			}
		} else if err != nil || !reflect.DeepEqual(d, *tc.want) {
			t.Errorf("%s: %+v (%v), want %+v", tc.name, d, err, *tc.want)
		}
	}
}

// TestLeanBatchFailureStopsNothing: a request of a lean batch that fails
// (here malformed arguments) answers its error as a string; the requests
// before and after it are decided and recorded as if it were not there.
func TestLeanBatchFailureStopsNothing(t *testing.T) {
	table, err := builtinScripts()
	if err != nil {
		t.Fatal(err)
	}
	// The error element reaches go-redis as a string in the reply's
	// slice under either protocol.
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			ctx := context.Background()
			c := newClient(t, requireServer(t), &redis.Options{Protocol: proto})
			p := randomPrefix(t)
			period := int64(time.Hour / time.Microsecond)
			loadScripts(t, c, &table.leanBatch[store.GCRA])
			v, err := c.EvalSha(ctx, table.leanBatch[store.GCRA].sha, []string{p + ":a", p + ":b", p + ":c"},
				5, 0, 0,
				modeTake, 1, 10, period, 10,
				modeTake, 0, 10, period, 10, // cost 0: malformed
				modeTake, 3, 10, period, 10).Result()
			if err != nil {
				t.Fatalf("lean batch: %v", err)
			}
			got := batchReplies(t, v, 3)
			if e, ok := got[1].(string); !ok || !strings.HasPrefix(e, "ERR ") || !strings.Contains(e, "malformed arguments") {
				t.Fatalf("request 2: got %T %v, want the malformed-arguments error as a string", got[1], got[1])
			}
			for i, want := range map[int]int64{0: 9, 2: 7} {
				r, ok := got[i].([]any)
				if !ok || r[0] != int64(1) || r[1] != want {
					t.Errorf("request %d: got %v, want admitted with %d remaining", i+1, got[i], want)
				}
			}
			if n := c.Exists(ctx, p+":a", p+":c").Val(); n != 2 {
				t.Errorf("%d of the two decided keys exist, want 2", n)
			}
			if n := c.Exists(ctx, p+":b").Val(); n != 0 {
				t.Errorf("the failed request's key exists")
			}
		})
	}
}

// TestLeanBatchMalformedList: a shared list that fails its check fails
// each of its requests with the malformed-arguments error, and only
// those: the requests of the other list, before and after them, are
// decided and recorded, for a bucket and for a window algorithm (whose
// batch holds the repair functions once for all its requests).
func TestLeanBatchMalformedList(t *testing.T) {
	ctx := context.Background()
	c, table := scriptClient(t)
	period := int64(time.Hour / time.Microsecond)
	for _, alg := range []store.Algorithm{store.GCRA, store.FixedWindow} {
		batch := &table.leanBatch[alg]
		loadScripts(t, c, batch)
		p := randomPrefix(t)
		keys := []string{p + ":a", p + ":b", p + ":c", p + ":d", p + ":e"}
		v, err := c.EvalSha(ctx, batch.sha, keys, 5, 2, 0,
			modeTake, 1, 10, period, 10, // list 1
			modeTake, 1, 0, period, 10, // list 2: rate 0, malformed
			1, 2, 1, 2, 1).Result()
		if err != nil {
			t.Fatalf("%v: lean batch: %v", alg, err)
		}
		got := batchReplies(t, v, len(keys))
		for _, i := range []int{0, 2, 4} {
			if r, ok := got[i].([]any); !ok || r[0] != int64(1) || r[1] != int64(9) {
				t.Errorf("%v: request %d: got %v, want admitted with 9 remaining", alg, i+1, got[i])
			}
		}
		for _, i := range []int{1, 3} {
			if e, ok := got[i].(string); !ok || !strings.HasPrefix(e, "ERR ") || !strings.Contains(e, "ratekeeper: malformed arguments") {
				t.Errorf("%v: request %d: got %T %v, want the malformed-arguments error", alg, i+1, got[i], got[i])
			}
		}
		if n := c.Exists(ctx, p+":a", p+":c", p+":e").Val(); n != 3 {
			t.Errorf("%v: %d of the decided requests' keys exist, want 3", alg, n)
		}
		if n := c.Exists(ctx, p+":b", p+":d").Val(); n != 0 {
			t.Errorf("%v: %d keys of failed requests exist, want none", alg, n)
		}
	}
}

// TestLeanBatchSharedLists: requests of a lean batch that share argument
// lists are decided with their list's arguments; a list number that names
// no list fails its request alone; a command whose length does not match
// its counts fails as a whole, before deciding anything.
func TestLeanBatchSharedLists(t *testing.T) {
	ctx := context.Background()
	c, table := scriptClient(t)
	batch := &table.leanBatch[store.GCRA]
	loadScripts(t, c, batch)
	p := randomPrefix(t)
	period := int64(time.Hour / time.Microsecond)
	keys := []string{p + ":a", p + ":b", p + ":a", p + ":c", p + ":d", p + ":e", p + ":f", p + ":g"}
	v, err := c.EvalSha(ctx, batch.sha, keys, 5, 2, 0,
		modeTake, 1, 10, period, 10, // list 1
		modeTake, 4, 10, period, 10, // list 2
		1, 2, 2, 3, "x", 0, -1, 1.5).Result() // from c on, lists that do not exist
	if err != nil {
		t.Fatalf("lean batch: %v", err)
	}
	got := batchReplies(t, v, len(keys))
	for i, want := range map[int]int64{0: 9, 1: 6, 2: 5} {
		if r, ok := got[i].([]any); !ok || r[0] != int64(1) || r[1] != want {
			t.Errorf("request %d: got %v, want admitted with %d remaining", i+1, got[i], want)
		}
	}
	for _, i := range []int{3, 4, 5, 6, 7} {
		if e, ok := got[i].(string); !ok || e != "ERR ratekeeper: malformed arguments" {
			t.Errorf("request %d: got %T %v, want the malformed-arguments error", i+1, got[i], got[i])
		}
	}
	if n := c.Exists(ctx, p+":c", p+":d", p+":e", p+":f", p+":g").Val(); n != 0 {
		t.Errorf("%d keys of failed requests exist, want none", n)
	}
	for _, bad := range [][]any{
		{5, 1, 0, modeTake, 1, 10, period},                                     // a list too short
		{5, 2, 0, modeTake, 1, 10, period, 10, modeTake, 1, 10, period, 10, 1}, // a list number missing
		{5, 3, 0, modeTake, 1, 10, period, 10},                                 // more lists than requests
		{5, 0, 0, modeTake, 1, 10, period, 10},                                 // the second request's arguments missing
		{5, -1, 0, modeTake, 1, 10, period, 10},                                // a negative count of lists
		{5, 1.5, 0, modeTake, 1, 10, period, 10},                               // a count of lists that is not whole
		{0, 0, 0},                                                              // no arguments per request
		{2.5, 2, 0, modeTake, 1, modeTake, 1, modeTake, 1, 2},                  // a count of arguments that is not whole
		{5, 1},                                   // no count of each request's own
		{5, 1, 1, modeTake, 1, 10, period, "n1"}, // the same, the second's own missing
		{6, 1, 1, modeTake, 1, 10, period, 10, "n1"},                                    // the second's own missing
		{6, 1, 1, modeTake, 1, 10, period, 10, "n1", "n2", "n3"},                        // one own too many
		{6, 0, 1, modeTake, 1, 10, period, 10, "n1", modeTake, 1, 10, period, 10, "n2"}, // own arguments without lists
		{5, 1, 5, "n1", "n2"},                       // every argument each's own
		{5, 1, -1, modeTake, 1, 10, period, 10, 10}, // a negative count of own
		{5, 1, 0.5, modeTake, 1, 10, period, 10},    // a count of own that is not whole
	} {
		err := c.EvalSha(ctx, batch.sha, []string{p + ":e", p + ":f"}, bad...).Err()
		if err == nil || !strings.Contains(err.Error(), "malformed arguments") {
			t.Errorf("arguments %v: got %v, want the malformed-arguments error", bad, err)
		}
	}
	if n := c.Exists(ctx, p+":e", p+":f").Val(); n != 0 {
		t.Errorf("a malformed command wrote %d keys", n)
	}
}

// TestLeanBatchArgs: the store shares one argument list among calls with
// the same arguments, the distinct lists with a list number per call when
// that is shorter, and none otherwise (lists as many as the calls); the
// sliding window log's takes share their lists and send each nonce after
// them.
func TestLeanBatchArgs(t *testing.T) {
	sc := &script{shaArg: "sha"}
	callsOf := func(lists ...[]any) []*call {
		calls := make([]*call, len(lists))
		for i, l := range lists {
			calls[i] = &call{args: append([]any{argEvalSHA, "lone", argOne, fmt.Sprintf("k%d", i)}, l...)}
		}
		return calls
	}
	a := []any{argTake, int64(1), int64(10), int64(60e6), int64(10)}
	b := []any{argTake, int64(2), int64(10), int64(60e6), int64(10)}
	head := []any{argEvalSHA, "sha"}
	for _, tc := range []struct {
		name  string
		calls []*call
		want  []any
	}{
		{"one list", callsOf(a, a, a), append(append(head, 3, "k0", "k1", "k2", 5, 1, 0), a...)},
		{"two lists", callsOf(a, b, a, a), append(append(append(head, 4, "k0", "k1", "k2", "k3", 5, 2, 0), append(a, b...)...), 1, 2, 1, 1)},
		{"as many lists as calls", callsOf(a, b), append(append(head, 2, "k0", "k1", 5, 0, 0), append(a, b...)...)},
		{"nonces", callsOf(append(a[:5:5], "n1"), append(a[:5:5], "n2"), append(a[:5:5], "n3")),
			append(append(append(head, 3, "k0", "k1", "k2", 6, 1, 1), a...), "n1", "n2", "n3")},
		{"nonces, two lists", callsOf(append(a[:5:5], "n1"), append(b[:5:5], "n2"), append(a[:5:5], "n3"), append(a[:5:5], "n4")),
			append(append(append(head, 4, "k0", "k1", "k2", "k3", 6, 2, 1), append(a, b...)...), 1, 2, 1, 1, "n1", "n2", "n3", "n4")},
		{"nonces, as many lists as calls", callsOf(append(a[:5:5], "n1"), append(b[:5:5], "n2")),
			append(append(head, 2, "k0", "k1", 6, 0, 0), append(append(a[:5:5], "n1"), append(b[:5:5], "n2")...)...)},
		{"an int and an int64", callsOf([]any{argTake, 1}, []any{argTake, int64(1)}, []any{argTake, 1}, []any{argTake, 1}, []any{argTake, 1}),
			append(head, 5, "k0", "k1", "k2", "k3", "k4", 2, 2, 0, argTake, 1, argTake, int64(1), 1, 2, 1, 1, 1)},
		{"one argument", callsOf([]any{argTake}, []any{argTake}), append(head, 2, "k0", "k1", 1, 0, 0, argTake, argTake)},
		{"a take and a peek", callsOf(a, append([]any{argPeek}, a[1:]...), a, a, a),
			append(append(append(head, 5, "k0", "k1", "k2", "k3", "k4", 5, 2, 0), append(a, append([]any{argPeek}, a[1:]...)...)...), 1, 2, 1, 1, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			per := len(tc.calls[0].args) - 4
			if got := leanBatchArgs(sc, tc.calls, per); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %v\nwant %v", got, tc.want)
			}
		})
	}
}

// TestLeanBatchArgsKeepsEveryCallsOwn: whatever argument two calls differ
// in, each call is sent with its own arguments, in batches of every size
// up to well past the stack buffers of leanBatchArgs (64 calls, 8 lists).
func TestLeanBatchArgsKeepsEveryCallsOwn(t *testing.T) {
	sc := &script{shaArg: "sha"}
	for _, nonce := range []bool{false, true} {
		base := []any{argTake, int64(1), int64(10), int64(60e6), int64(10)}
		for field := range base {
			for _, n := range []int{2, 3, 5, 17, 64, 65, 200} {
				calls := make([]*call, n)
				for i := range calls {
					args := slices.Clone(base)
					if i%3 == 1 { // every third call differs in this field alone
						switch field {
						case 0:
							args[0] = argPeek
						default:
							args[field] = args[field].(int64) + 1
						}
					}
					if nonce {
						args = append(args, fmt.Sprintf("n%d", i))
					}
					calls[i] = &call{args: append([]any{argEvalSHA, "lone", argOne, fmt.Sprintf("k%d", i)}, args...)}
				}
				per := len(calls[0].args) - 4
				got := leanBatchArgs(sc, calls, per)
				if got[2] != n {
					t.Fatalf("field %d, %d calls: key count %v", field, n, got[2])
				}
				for i, c := range calls {
					if got[3+i] != c.args[3] {
						t.Fatalf("field %d, %d calls: key %d is %v, want %v", field, n, i, got[3+i], c.args[3])
					}
				}
				rest := got[3+n:]
				if rest[0] != per {
					t.Fatalf("field %d, %d calls: %v arguments per call, want %d", field, n, rest[0], per)
				}
				lists, e := rest[1].(int), rest[2].(int)
				rest = rest[3:]
				if len(got) > 3+n+3+n*per {
					t.Errorf("field %d, %d calls: %d arguments, longer than every call's own (%d)", field, n, len(got), 3+n+3+n*per)
				}
				if lists > 0 && nonce != (e == 1) || lists == 0 && e != 0 {
					t.Fatalf("field %d, %d calls: %d lists, %d arguments of each call's own", field, n, lists, e)
				}
				s := per - e
				// own: where the calls' own arguments start.
				own := lists * s
				if lists > 1 {
					own += n
				}
				for i, c := range calls {
					var sent []any
					switch lists {
					case 0:
						sent = rest[i*per : (i+1)*per]
					case 1:
						sent = slices.Concat(rest[:s], rest[own+i*e:own+(i+1)*e])
					default:
						k := rest[lists*s+i].(int)
						sent = slices.Concat(rest[(k-1)*s:k*s], rest[own+i*e:own+(i+1)*e])
					}
					if !reflect.DeepEqual(sent, c.args[4:]) {
						t.Fatalf("field %d, %d calls (%d lists): call %d sent %v, want %v", field, n, lists, i, sent, c.args[4:])
					}
				}
				if lists > 0 && len(rest) != own+n*e {
					t.Errorf("field %d, %d calls: %d arguments after the counts, want %d", field, n, len(rest), own+n*e)
				}
			}
		}
	}
}

// TestLeanBatchIncompleteReply: a request whose decide returns a nil
// among its five integers fails alone, with an error string; the flat
// reply keeps its other requests' elements. No lean script returns one
// today: the batch's driver runs here around a decide written for the
// test.
func TestLeanBatchIncompleteReply(t *testing.T) {
	src, err := lua.Source("gcra/lean-batch")
	if err != nil {
		t.Fatal(err)
	}
	const head = "local function decide(key, ARGV, cost, rate, p, cap)\n"
	i, j := strings.Index(src, head), strings.Index(src, "\n-- batch_error.lua")
	if i < 0 || j < i {
		t.Fatal("the lean batch script has no decide function before its driver")
	}
	j++
	src = src[:i] + head + "if key == 'hole' then\n  return 1, nil, 3, 0, 0\nend\nreturn 1, 2, 3, 0, 0\nend\n" + src[j:]
	ctx := context.Background()
	c := newClient(t, requireServer(t), nil)
	v, err := c.Eval(ctx, src, []string{"a", "hole", "c"}, 5, 1, 0, modeTake, 1, 10, int64(time.Hour/time.Microsecond), 10).Result()
	if err != nil {
		t.Fatalf("lean batch: %v", err)
	}
	got := batchReplies(t, v, 3)
	for _, i := range []int{0, 2} {
		if r, ok := got[i].([]any); !ok || len(r) != 5 || r[1] != int64(2) {
			t.Errorf("request %d: %v, want its five integers", i+1, got[i])
		}
	}
	if e, ok := got[1].(string); !ok || e != "ERR ratekeeper: incomplete lean reply" {
		t.Errorf("request 2: %T %v, want the incomplete-reply error", got[1], got[1])
	}
}

// TestRunMergesLeanCalls: a batch of calls, lean calls of two scripts
// among calls that are not lean, is sent as one command per script (and
// one per other call), and every call gets its own reply: a lean call
// its lean reply, a failed lean call its error, the other calls theirs.
func TestRunMergesLeanCalls(t *testing.T) {
	srv := requireServer(t)
	ctx := context.Background()
	c := newClient(t, srv, nil)
	h := &shaHook{}
	c.AddHook(h)
	s, err := newRedis(c, Options{Prefix: randomPrefix(t), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	p := randomPrefix(t)
	if err := c.Set(ctx, p+":plain", "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	period := int64(time.Hour / time.Microsecond)
	gcra := &s.scripts.byAlgorithm[store.GCRA][lean]
	fw := &s.scripts.byAlgorithm[store.FixedWindow][lean]
	leanCall := func(sc *script, key string, cost any) *call {
		return newTestCall(sc, []any{argEvalSHA, sc.shaArg, argOne, key, argTake, cost, int64(10), period, int64(10)})
	}
	calls := []*call{
		leanCall(gcra, p+":g1", int64(2)),
		newTestCall(nil, []any{"get", p + ":plain"}),
		leanCall(fw, p+":f1", int64(4)),
		leanCall(gcra, p+":g2", "x"), // malformed
		leanCall(gcra, p+":g1", int64(3)),
		leanCall(fw, p+":f1", int64(1)),
	}
	// The lean calls' remaining counts once admitted; the others' reply
	// or error.
	remaining := []int64{8, -1, 6, -1, 5, 5}
	want := []string{"", "v", "", "malformed arguments", "", ""}
	algs := []store.Algorithm{store.GCRA, 0, store.FixedWindow, 0, store.GCRA, store.FixedWindow}
	batch := append([]*call(nil), calls...)
	h.reset()
	s.pipes.one.run(batch)
	for i, cl := range calls {
		<-cl.done
		if remaining[i] >= 0 {
			d, err := decodeLean(cl.v, newLimitInfo(store.Limit{Algorithm: algs[i], Rate: 10, Period: time.Hour}))
			if cl.err != nil || err != nil || !d.Allowed || d.Remaining != remaining[i] {
				t.Errorf("call %d: got %+v (%v, %v), want admitted with %d remaining", i, d, cl.err, err, remaining[i])
			}
			cl.release()
			continue
		}
		got := fmt.Sprint(cl.v)
		if cl.err != nil {
			got = cl.err.Error()
		}
		if !strings.Contains(got, want[i]) {
			t.Errorf("call %d: got %q, want it to hold %q", i, got, want[i])
		}
		cl.release()
	}
	sent := h.counts()
	if sent[gcra.batch.sha] != 1 || sent[fw.batch.sha] != 1 || sent[gcra.sha] != 0 || sent[fw.sha] != 0 {
		t.Errorf("scripts sent: %v; want one lean batch of each script and no lone lean call", sent)
	}
}

// TestCrowdThroughLeanBatches: 64 callers taking from 8 keys through a
// client whose commands are slowed by 2 ms, so that calls queue and
// travel in lean batches, are admitted exactly as often as the limits
// allow, and the lean batches decided most of them.
func TestCrowdThroughLeanBatches(t *testing.T) {
	srv := requireServer(t)
	for _, alg := range leanAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			c := newClient(t, srv, &redis.Options{PoolSize: 8})
			h := &shaHook{delay: 2 * time.Millisecond}
			c.AddHook(h)
			s, err := newRedis(c, Options{Prefix: randomPrefix(t), Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			takeCrowd(t, s, alg, "crowd")
			sent := h.counts()
			if sent[s.scripts.leanBatch[alg].sha] == 0 {
				t.Errorf("no lean batch was sent: %v", sent)
			}
		})
	}
}

// crowdKeys, crowdLimit: takeCrowd's keys and each key's limit.
const crowdKeys, crowdLimit = 8, 25

// takeCrowd has 64 callers take 5 times each from crowdKeys keys of
// prefix (40 takes per key) under a limit of crowdLimit per hour of alg,
// and checks that each key admitted exactly crowdLimit (the GCRA and the
// token bucket admit their burst, which is the rate here) and that no
// take failed.
func takeCrowd(t *testing.T, s store.Store, alg store.Algorithm, prefix string) {
	t.Helper()
	admitted := crowdAdmitted(t, func(k int) (bool, error) {
		req := store.Request{Key: fmt.Sprintf("%s-%d", prefix, k), Limits: []store.Limit{{Algorithm: alg, Rate: crowdLimit, Period: time.Hour}}}
		d, err := s.Take(context.Background(), req)
		return d.Allowed, err
	})
	for k, n := range admitted {
		if n != crowdLimit {
			t.Errorf("key %s-%d: %d admitted, want %d", prefix, k, n, crowdLimit)
		}
	}
}

// crowdAdmitted has 64 callers take 5 times each from crowdKeys keys (40
// takes per key) through take, which decides one take of key k, and
// returns how many each key admitted; a failed take fails t.
func crowdAdmitted(t *testing.T, take func(k int) (bool, error)) [crowdKeys]int64 {
	t.Helper()
	const callers, each = 64, 5
	var admitted [crowdKeys]atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				k := (g + i) % crowdKeys
				ok, err := take(k)
				if err != nil {
					errs <- err
					return
				}
				if ok {
					admitted[k].Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("take: %v", err)
	}
	var out [crowdKeys]int64
	for k := range admitted {
		out[k] = admitted[k].Load()
	}
	return out
}

// scriptClient returns a client of the test server and the built-in
// scripts.
func scriptClient(t *testing.T) (*redis.Client, *scriptTable) {
	t.Helper()
	c := newClient(t, requireServer(t), nil)
	table, err := builtinScripts()
	if err != nil {
		t.Fatal(err)
	}
	return c, table
}

// loadScripts loads scripts into c's server.
func loadScripts(t *testing.T, c *redis.Client, scripts ...*script) {
	t.Helper()
	for _, sc := range scripts {
		if err := c.ScriptLoad(context.Background(), sc.src).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// newTestCall returns a call as pipes.do makes it, with both references
// held: the test waits for it and releases it.
func newTestCall(sc *script, args []any) *call {
	c := callPool.Get().(*call)
	c.ctx, c.sc, c.args, c.deadline = context.Background(), sc, args, time.Now().Add(5*time.Second)
	c.refs.Store(2)
	return c
}

// shaHook counts the script calls of each SHA, in and out of pipelines,
// and may slow every command and pipeline down by delay.
type shaHook struct {
	delay time.Duration
	mu    sync.Mutex
	n     map[string]int
}

func (h *shaHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *shaHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		time.Sleep(h.delay)
		return next(ctx, cmd)
	}
}

func (h *shaHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.count(cmd)
		}
		time.Sleep(h.delay)
		return next(ctx, cmds)
	}
}

func (h *shaHook) count(cmd redis.Cmder) {
	args := cmd.Args()
	if len(args) < 2 || cmd.Name() != "evalsha" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == nil {
		h.n = make(map[string]int)
	}
	h.n[fmt.Sprint(args[1])]++
}

func (h *shaHook) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n = nil
}

func (h *shaHook) counts() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int, len(h.n))
	for k, v := range h.n {
		out[k] = v
	}
	return out
}

// TestLeanBatchOnReplica: on a read-only replica a lean batch answers each
// request with the READONLY error it would meet alone, code first, as a
// string, and the batcher sends each such call again alone (as a lone
// call is retried until its budget), so that a failover under way can
// still answer it.
func TestLeanBatchOnReplica(t *testing.T) {
	primary := redistest.Require(t)
	host, port, _ := strings.Cut(primary.Addr, ":")
	ctx := context.Background()
	// A primary waits repl-diskless-sync-delay (5 s by default) for more
	// replicas before it sends the first one its data: without this, the
	// replica's link came up at about the wait's end, racing the deadline.
	pc := newClient(t, &server{Server: primary, addr: primary.Addr}, nil)
	if err := pc.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err(); err != nil {
		t.Fatal(err)
	}
	replica := redistest.Require(t, "--replicaof", host, port)
	c := newClient(t, &server{Server: replica, addr: replica.Addr}, nil)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(c.Info(ctx, "replication").Val(), "master_link_status:up") {
		if time.Now().After(deadline) {
			t.Fatal("the replica did not connect to its primary within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	table, err := builtinScripts()
	if err != nil {
		t.Fatal(err)
	}
	batch := &table.leanBatch[store.GCRA]
	loadScripts(t, c, batch)
	period := int64(time.Hour / time.Microsecond)
	v, err := c.EvalSha(ctx, batch.sha, []string{"a", "b"}, 5, 1, 0,
		modeTake, 1, 10, period, 10).Result()
	if err != nil {
		t.Fatalf("lean batch on a replica: %v", err)
	}
	for i, el := range batchReplies(t, v, 2) {
		if e, ok := el.(string); !ok || !strings.HasPrefix(e, "READONLY ") {
			t.Errorf("request %d: got %T %v, want a string starting with READONLY", i+1, el, el)
		}
	}

	h := &shaHook{delay: 2 * time.Millisecond}
	c.AddHook(h)
	s, err := newRedis(c, Options{Prefix: randomPrefix(t), Timeout: 100 * time.Millisecond, WarmUp: -1})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 16)
	took := make([]time.Duration, len(errs))
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			_, errs[i] = s.Take(ctx, store.Request{Key: fmt.Sprintf("r%d", i), Limits: []store.Limit{{Rate: 10, Period: time.Hour}}})
			took[i] = time.Since(start)
		}()
	}
	wg.Wait()
	// Retried alone until the budget, as a lone call is (pauses of 2, 4,
	// ... 32 ms, then it gives up with less than 64 ms left): each fails
	// with the replica's READONLY or, when its budget ran out first, a
	// timeout, after at least 30 ms.
	for i, err := range errs {
		if err == nil || strings.Contains(err.Error(), "ERR READONLY") ||
			!strings.Contains(err.Error(), "READONLY") && store.KindOf(err) != "timeout" {
			t.Errorf("take %d: got %v, want the replica's READONLY or a timeout", i, err)
		}
		if took[i] < 30*time.Millisecond {
			t.Errorf("take %d failed after %v: it was not retried", i, took[i])
		}
	}
	sent := h.counts()
	if sent[batch.sha] == 0 || sent[table.byAlgorithm[store.GCRA][lean].sha] == 0 {
		t.Errorf("scripts sent: %v; want lean batches, then their calls alone", sent)
	}
}

// TestLeanBatchCrossSlot: a plain client of a cluster-mode server (one
// node serving every slot) meets CROSSSLOT for a lean batch: its calls go
// on alone, each decided once, and the store sends no lean batch after
// that.
func TestLeanBatchCrossSlot(t *testing.T) {
	srv := redistest.Require(t, "--cluster-enabled", "yes", "--cluster-config-file", t.TempDir()+"/nodes.conf")
	ctx := context.Background()
	c := newClient(t, &server{Server: srv, addr: srv.Addr}, nil)
	if err := c.Do(ctx, "cluster", "addslotsrange", 0, 16383).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(c.ClusterInfo(ctx).Val(), "cluster_state:ok") {
		if time.Now().After(deadline) {
			t.Fatal("the cluster did not become ok within 5 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	h := &shaHook{delay: 2 * time.Millisecond}
	c.AddHook(h)
	s, err := newRedis(c, Options{Prefix: randomPrefix(t), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	takeCrowd(t, s, store.GCRA, "x")
	batchSHA := s.scripts.leanBatch[store.GCRA].sha
	if h.counts()[batchSHA] == 0 {
		t.Fatal("no lean batch was tried")
	}
	if s.pipes.merge.Load() {
		t.Fatal("merging is still on after CROSSSLOT")
	}
	h.reset()
	takeCrowd(t, s, store.GCRA, "y")
	if n := h.counts()[batchSHA]; n != 0 {
		t.Errorf("%d lean batches sent after CROSSSLOT, want none", n)
	}
}

// TestOneCallEach: with Options.OneCallEach a crowd's calls are never sent
// as a lean batch.
func TestOneCallEach(t *testing.T) {
	c := newClient(t, requireServer(t), nil)
	assertOneCallEach(t, c, Options{Prefix: randomPrefix(t), Timeout: 5 * time.Second, OneCallEach: true})
}

// TestLeanBatchAfterScriptFlush: after SCRIPT FLUSH a lean batch meets
// NOSCRIPT, which means it did not run, and is sent again with its source:
// every call is decided once.
func TestLeanBatchAfterScriptFlush(t *testing.T) {
	srv := redistest.Require(t)
	ctx := context.Background()
	c := newClient(t, &server{Server: srv, addr: srv.Addr}, nil)
	h := &shaHook{delay: 2 * time.Millisecond}
	c.AddHook(h)
	s, err := newRedis(c, Options{Prefix: randomPrefix(t), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const keys, limit = 4, 40
	var admitted [keys]atomic.Int64
	crowd := func() {
		var wg sync.WaitGroup
		for g := range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k := g % keys
				d, err := s.Take(ctx, store.Request{Key: fmt.Sprintf("f-%d", k), Limits: []store.Limit{{Rate: limit, Period: time.Hour}}})
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted[k].Add(1)
				}
			}()
		}
		wg.Wait()
	}
	crowd()
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	h.reset()
	crowd()
	if h.counts()[s.scripts.leanBatch[store.GCRA].sha] == 0 {
		t.Fatal("no lean batch was sent after the flush")
	}
	// 16 takes per key, all admitted, each counted once: a peek, which
	// answers as the next take would, leaves 40-17.
	for k := range admitted {
		if n := admitted[k].Load(); n != 16 {
			t.Errorf("key %d: %d admitted, want 16", k, n)
		}
		d, err := s.Peek(ctx, store.Request{Key: fmt.Sprintf("f-%d", k), Limits: []store.Limit{{Rate: limit, Period: time.Hour}}})
		if err != nil || d.Remaining != limit-17 {
			t.Errorf("key %d: peek %+v, %v; want %d remaining", k, d, err, limit-17)
		}
	}

	// A batch sent right after a flush meets NOSCRIPT itself.
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	sc := &s.scripts.byAlgorithm[store.GCRA][lean]
	period := int64(time.Hour / time.Microsecond)
	var calls []*call
	for i := range 3 {
		calls = append(calls, newTestCall(sc, []any{argEvalSHA, sc.shaArg, argOne, fmt.Sprintf("%s:ns%d", randomPrefix(t), i), argTake, int64(i + 1), int64(10), period, int64(10)}))
	}
	s.pipes.one.run(append([]*call(nil), calls...))
	for i, cl := range calls {
		<-cl.done
		if d, err := decodeLean(cl.v, newLimitInfo(store.Limit{Rate: 10, Period: time.Hour})); cl.err != nil || err != nil || !d.Allowed || d.Remaining != int64(10-(i+1)) {
			t.Errorf("call %d after the flush: got %v, %v; want admitted with %d remaining", i, cl.v, cl.err, 10-(i+1))
		}
		cl.release()
	}
}

// TestRingSendsNoLeanBatch: a Ring client sends a command to its first
// key's shard, so the store sends it one call per decision.
func TestRingSendsNoLeanBatch(t *testing.T) {
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"only": requireServer(t).addr}})
	t.Cleanup(func() { ring.Close() })
	assertOneCallEach(t, ring, Options{Prefix: randomPrefix(t), Timeout: 5 * time.Second})
}

// assertOneCallEach checks that a store over c with opts sends each of a
// crowd's 32 calls alone, through commands slowed down so that they
// queue, and no lean batch.
func assertOneCallEach(t *testing.T, c redis.UniversalClient, opts Options) {
	t.Helper()
	h := &shaHook{delay: 2 * time.Millisecond}
	c.AddHook(h)
	s, err := newRedis(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Take(context.Background(), store.Request{Key: fmt.Sprintf("one-%d", g), Limits: []store.Limit{{Rate: 10, Period: time.Hour}}}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	sent := h.counts()
	if sent[s.scripts.leanBatch[store.GCRA].sha] != 0 || sent[s.scripts.byAlgorithm[store.GCRA][lean].sha] != 32 {
		t.Errorf("scripts sent: %v; want 32 lone lean calls and no lean batch", sent)
	}
}

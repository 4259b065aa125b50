package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store"
)

// stackShapes are stacks of plain parts: the per-client part first, then
// route-wide parts whose keys every stack of a round shares. The first
// three are decided by the lean stacked script, the others by the lean
// stacked script of window parts. Some have as many parts and log parts
// as others, so the store sends them in one batch (see stackSignature).
var stackShapes = []struct {
	name   string
	limits []store.Limit
	kind   stackScript
}{
	{"gcra+token_bucket", []store.Limit{{Name: "ip", Rate: 5, Period: time.Hour}, {Name: "route", Algorithm: store.TokenBucket, Rate: 30, Period: time.Hour, Burst: 20}}, stackLean},
	{"token_bucket+gcra+gcra", []store.Limit{{Name: "ip", Algorithm: store.TokenBucket, Rate: 4, Period: time.Minute, Burst: 6}, {Name: "day", Rate: 9, Period: 24 * time.Hour}, {Name: "route", Rate: 40, Period: time.Hour}}, stackLean},
	{"token_bucket+gcra", []store.Limit{{Name: "ip", Algorithm: store.TokenBucket, Rate: 3, Period: time.Minute, Burst: 4}, {Name: "route", Rate: 30, Period: time.Hour}}, stackLean},
	{"fixed_window+gcra", []store.Limit{{Name: "ip", Algorithm: store.FixedWindow, Rate: 6, Period: 2 * time.Second}, {Name: "route", Rate: 30, Period: time.Hour}}, stackLeanWindows},
	{"counter+gcra", []store.Limit{{Name: "ip", Algorithm: store.SlidingWindowCounter, Rate: 4, Period: time.Second}, {Name: "route", Rate: 30, Period: time.Hour}}, stackLeanWindows},
	{"counter+log", []store.Limit{{Name: "ip", Algorithm: store.SlidingWindowCounter, Rate: 5, Period: time.Second}, {Name: "route", Algorithm: store.SlidingWindowLog, Rate: 25, Period: 3 * time.Second}}, stackLeanWindows},
	{"log+fixed+token_bucket", []store.Limit{
		{Name: "ip", Algorithm: store.SlidingWindowLog, Rate: 4, Period: time.Hour},
		{Name: "b", Algorithm: store.FixedWindow, Rate: 9, Period: time.Hour},
		{Name: "route", Algorithm: store.TokenBucket, Rate: 100, Period: time.Hour, Burst: 30},
	}, stackLeanWindows},
}

// stackSignature is what the store batches the calls of one lean stacked
// script by: their numbers of parts (keys and arguments) and of log parts
// (nonces).
func stackSignature(limits []store.Limit) int {
	logs := 0
	for _, l := range limits {
		if l.Algorithm == store.SlidingWindowLog {
			logs++
		}
	}
	return 100*len(limits) + logs
}

// stackStepOf returns the step of a stacked request of limits for client
// (the first part's key; the others are route-wide, keyed by side), as
// TakeMulti builds it when a lean stacked script decides it.
func stackStepOf(s *redisStore, side, client string, limits []store.Limit, cost int64) *stackStep {
	reqs := make([]store.Request, len(limits))
	st := &stackStep{parts: make([]stackPart, len(limits)), g: make([]int, len(limits)), out: make([]store.Decision, len(limits))}
	for i := range limits {
		key := side + ":route"
		if i == 0 {
			key = side + ":" + client
		}
		reqs[i] = store.Request{Key: key, Limits: limits[i : i+1], Cost: cost}
		st.parts[i] = s.stackPart(&reqs[i], false)
		st.g[i] = i
	}
	return st
}

// TestStackedBatchMatchesLone: for every stacked lean script, random runs
// of stacked takes and peeks (costs 1 to 3) over three clients and
// route-wide parts every stack shares, decided by stacked batches (one per
// stackSignature, as the store sends them, so mixing stacks of different
// algorithms) of one to six requests on one side and by the lean stacked
// script, one call per request, on another, answer the same decisions,
// every field of every part, on a fake clock that moves between batches.
// The batches share no argument list, one, and several; one client's
// unreadable state (a list) is repaired on both sides alike.
func TestStackedBatchMatchesLone(t *testing.T) {
	ctx := context.Background()
	for name, kind := range map[string]stackScript{"lean": stackLean, "windows": stackLeanWindows} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, clock := newClockedStore(t, aligned+12345, true)
			rdb := clock.c
			var shapes []int
			for i, sh := range stackShapes {
				if sh.kind == kind {
					shapes = append(shapes, i)
				}
			}
			lone := &s.scripts.stackedLean
			if kind == stackLeanWindows {
				lone = &s.scripts.stackedLeanWindows
			}
			batch := lone.batch
			if batch == nil || !batch.perCall {
				t.Fatal("the lean stacked script has no stacked batch")
			}
			loadScripts(t, rdb, lone, batch)
			// A list where the shapes' first part keeps a string or a
			// hash, for client c2 under the first shape, on both sides.
			for _, side := range []string{"A", "B"} {
				st := stackStepOf(s, side, "c2", stackShapes[shapes[0]].limits, 1)
				if err := rdb.RPush(ctx, st.parts[0].key, "x").Err(); err != nil {
					t.Fatal(err)
				}
			}
			rng := rand.New(rand.NewPCG(uint64(kind), 11))
			decided, refused, repaired, mixed := 0, 0, 0, 0
			var layouts [3]int // batches sent with 0, 1 and more shared argument lists
			for round := range 80 {
				n := 1 + rng.IntN(6)
				type req struct {
					shape  int
					client string
					mode   string
					cost   int64
				}
				reqs := make([]req, n)
				for i := range reqs {
					reqs[i] = req{shape: shapes[rng.IntN(len(shapes))], client: fmt.Sprintf("c%d", rng.IntN(3)), mode: modeTake, cost: 1}
					if rng.IntN(5) == 0 {
						reqs[i].mode = modePeek
					}
					if rng.IntN(3) == 0 {
						reqs[i].cost = int64(2 + rng.IntN(2))
					}
				}
				// As the store batches them: the calls of one signature
				// in one command, the signatures in turn.
				sig := func(r req) int { return stackSignature(stackShapes[r.shape].limits) }
				slices.SortStableFunc(reqs, func(a, b req) int { return sig(a) - sig(b) })
				for i := 1; i < n; i++ {
					if reqs[i].shape != reqs[i-1].shape && sig(reqs[i]) == sig(reqs[i-1]) {
						mixed++
					}
				}
				// Side A: one call per request, in order.
				want := make([][]store.Decision, n)
				for i, r := range reqs {
					st := stackStepOf(s, "A", r.client, stackShapes[r.shape].limits, r.cost)
					if _, err := s.runStepWith(ctx, r.mode, st, kind); err != nil {
						t.Fatalf("round %d, request %d alone: %v", round, i, err)
					}
					want[i] = st.out
				}
				// Side B: one stacked batch per signature.
				steps := make([]*stackStep, n)
				for from := 0; from < n; {
					to := from + 1
					for to < n && sig(reqs[to]) == sig(reqs[from]) {
						to++
					}
					calls := make([]*call, 0, to-from)
					for i := from; i < to; i++ {
						r := reqs[i]
						steps[i] = stackStepOf(s, "B", r.client, stackShapes[r.shape].limits, r.cost)
						cl := &call{sc: lone, args: steps[i].leanArgs(s, r.mode, lone, kind == stackLeanWindows)}
						if kind == stackLeanWindows {
							cl.own = steps[i].nonces()
						}
						calls = append(calls, cl)
					}
					args := stackedBatchArgs(batch, calls)
					m := args[3+len(calls)*len(steps[from].parts)+4].(int)
					layouts[min(m, 2)]++
					v, err := rdb.Do(ctx, args...).Result()
					if err != nil {
						t.Fatalf("round %d: stacked batch of %d (%d lists): %v", round, len(calls), m, err)
					}
					flat, ok := v.([]any)
					if !ok || !wellFormedPerCall(flat, len(calls)) {
						t.Fatalf("round %d: a stacked batch of %d answered %T %v", round, len(calls), v, v)
					}
					for i := from; i < to; i++ {
						if _, err := steps[i].decodeLean(flat[i-from]); err != nil {
							t.Fatalf("round %d, request %d in the batch: %v (%v)", round, i, err, flat[i-from])
						}
					}
					from = to
				}
				for i := range reqs {
					for j := range want[i] {
						a, b := steps[i].out[j], want[i][j]
						if !sameDecision(a, b) {
							t.Fatalf("round %d, request %d (%s %s %s cost %d), part %d: batch %+v, alone %+v",
								round, i, reqs[i].mode, stackShapes[reqs[i].shape].name, reqs[i].client, reqs[i].cost, j, a, b)
						}
						decided++
						if !a.Allowed {
							refused++
						}
						if a.Repaired {
							repaired++
						}
					}
				}
				clock.advance(rng.Int64N(400_000))
			}
			if refused == 0 || refused == decided {
				t.Errorf("%d of %d part decisions refused: want some of each", refused, decided)
			}
			if repaired != 1 {
				t.Errorf("%d part decisions in batches repaired unreadable state, want 1", repaired)
			}
			if mixed == 0 {
				t.Error("no batch mixed stacks of different algorithms")
			}
			if layouts[0] == 0 || layouts[1] == 0 || layouts[2] == 0 {
				t.Errorf("batches with 0, 1 and more shared argument lists: %v, want each layout", layouts)
			}
			// Every key either side wrote has a TTL.
			keys, err := rdb.Keys(ctx, s.prefix+"*").Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if strings.HasSuffix(k, ":clock") {
					continue
				}
				if ttl := rdb.PTTL(ctx, k).Val(); ttl == -1 {
					t.Errorf("key %s has no TTL", k)
				}
			}
		})
	}
}

// TestStackedBatchFailureStopsNothing: a request of a stacked batch that
// fails (a malformed part) is answered its error as a string, and the
// requests before and after it are decided and recorded.
func TestStackedBatchFailureStopsNothing(t *testing.T) {
	ctx := context.Background()
	s, rdb := newStore(t, Options{DenyCacheSize: -1})
	lone := &s.scripts.stackedLean
	loadScripts(t, rdb, lone, lone.batch)
	limits := stackShapes[0].limits
	steps := []*stackStep{
		stackStepOf(s, "x", "a", limits, 2),
		stackStepOf(s, "x", "b", limits, 1),
		stackStepOf(s, "x", "a", limits, 1),
	}
	calls := make([]*call, len(steps))
	for i, st := range steps {
		calls[i] = &call{sc: lone, args: st.leanArgs(s, modeTake, lone, false)}
	}
	calls[1].args[len(calls[1].args)-1] = "x" // the route part's capacity
	v, err := rdb.Do(ctx, stackedBatchArgs(lone.batch, calls)...).Result()
	if err != nil {
		t.Fatal(err)
	}
	flat, ok := v.([]any)
	if !ok || !wellFormedPerCall(flat, 3) {
		t.Fatalf("got %T %v", v, v)
	}
	if msg, ok := flat[1].(string); !ok || !strings.Contains(msg, "malformed part 2") || !strings.HasPrefix(msg, "ERR ") {
		t.Fatalf("request 2: got %v, want the malformed part's error as a string", flat[1])
	}
	for i, remaining := range map[int][2]int64{0: {3, 18}, 2: {2, 17}} {
		if _, err := steps[i].decodeLean(flat[i]); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if d := steps[i].out; !d[0].Allowed || d[0].Remaining != remaining[0] || d[1].Remaining != remaining[1] {
			t.Errorf("request %d: got %+v, want admitted with %v remaining", i, d, remaining)
		}
	}
	// Counts that do not match the command fail it whole.
	args := stackedBatchArgs(lone.batch, calls[:1])
	args[3+len(steps[0].parts)] = 2 // two calls, one call's counts
	if err := rdb.Do(ctx, args...).Err(); err == nil || !strings.Contains(err.Error(), "malformed arguments") {
		t.Errorf("a batch whose counts do not match: got %v, want malformed arguments", err)
	}
}

// TestStackedBatchArgs: the command of a stacked batch holds every call's
// keys, then the number of calls, each call's counts of keys and
// arguments, and every call's arguments.
func TestStackedBatchArgs(t *testing.T) {
	sc := &script{sha: "b", shaArg: "b", perCall: true}
	mk := func(key string, cost int, nonce string) *call {
		return &call{own: 1, args: []any{argEvalSHA, "s", 2, key, "route", "take", "", 2, 2, cost, 5, 6, 7, 0, 1, 8, 9, 10, nonce}}
	}
	for _, tc := range []struct {
		name  string
		calls []*call
		want  []any
	}{
		{"one list", []*call{mk("a", 1, "n1"), mk("b", 1, "n2")},
			[]any{argEvalSHA, "b", 4, "a", "route", "b", "route", 2, 2, 13, 1, 1,
				"take", "", 2, 2, 1, 5, 6, 7, 0, 1, 8, 9, 10, "n1", "n2"}},
		{"two lists", []*call{mk("a", 1, "n1"), mk("b", 2, "n2"), mk("c", 1, "n3"), mk("d", 2, "n4"), mk("e", 1, "n5")},
			[]any{argEvalSHA, "b", 10, "a", "route", "b", "route", "c", "route", "d", "route", "e", "route", 5, 2, 13, 1, 2,
				"take", "", 2, 2, 1, 5, 6, 7, 0, 1, 8, 9, 10,
				"take", "", 2, 2, 2, 5, 6, 7, 0, 1, 8, 9, 10,
				1, 2, 1, 2, 1, "n1", "n2", "n3", "n4", "n5"}},
		{"no list", []*call{mk("a", 1, "n1"), mk("b", 2, "n2")},
			[]any{argEvalSHA, "b", 4, "a", "route", "b", "route", 2, 2, 13, 1, 0,
				"take", "", 2, 2, 1, 5, 6, 7, 0, 1, 8, 9, 10, "n1",
				"take", "", 2, 2, 2, 5, 6, 7, 0, 1, 8, 9, 10, "n2"}},
	} {
		if got, want := fmt.Sprint(stackedBatchArgs(sc, tc.calls)), fmt.Sprint(tc.want); got != want {
			t.Errorf("%s:\ngot  %s\nwant %s", tc.name, got, want)
		}
	}
}

// TestWellFormedPerCall: a stacked batch's reply is accepted only with one
// array or string per call.
func TestWellFormedPerCall(t *testing.T) {
	for _, tc := range []struct {
		flat  []any
		calls int
		want  bool
	}{
		{[]any{[]any{int64(1)}, "ERR x"}, 2, true},
		{[]any{[]any{int64(1)}}, 2, false},
		{[]any{[]any{int64(1)}, "ERR x", "ERR y"}, 2, false},
		{[]any{int64(1), "ERR x"}, 2, false},
		{[]any{nil}, 1, false},
	} {
		if got := wellFormedPerCall(tc.flat, tc.calls); got != tc.want {
			t.Errorf("wellFormedPerCall(%v, %d) = %v, want %v", tc.flat, tc.calls, got, tc.want)
		}
	}
}

// TestCrowdThroughStackedBatches: 64 callers taking stacks of a
// per-client limit and a route-wide one through a client whose commands
// are slowed by 2 ms, so that calls queue and travel in stacked batches:
// each client is admitted exactly as often as its limit allows, the
// route-wide part counts exactly the admitted stacks, and stacked batches
// decided them.
func TestCrowdThroughStackedBatches(t *testing.T) {
	srv := requireServer(t)
	for _, tc := range []struct {
		name  string
		alg   store.Algorithm
		batch func(*scriptTable) *script
	}{
		{"lean", store.GCRA, func(t *scriptTable) *script { return &t.stackedLeanBatch }},
		{"windows", store.FixedWindow, func(t *scriptTable) *script { return &t.stackedLeanWindowsBatch }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, srv, &redis.Options{PoolSize: 8})
			h := &shaHook{delay: 2 * time.Millisecond}
			c.AddHook(h)
			s, err := newRedis(c, Options{Prefix: randomPrefix(t), Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			route := store.Request{Key: "route", Limits: []store.Limit{{Name: "route", Rate: 1000, Period: 24 * time.Hour}}}
			admitted := crowdAdmitted(t, func(k int) (bool, error) {
				// A day: a window that ends during the run is rare.
				own := store.Request{Key: fmt.Sprintf("client-%d", k), Limits: []store.Limit{{Name: "ip", Algorithm: tc.alg, Rate: crowdLimit, Period: 24 * time.Hour}}}
				d, err := s.TakeMulti(context.Background(), []store.Request{own, route})
				return d.Allowed, err
			})
			total := int64(0)
			for k, n := range admitted {
				total += n
				if n != crowdLimit {
					t.Errorf("client %d: %d admitted, want %d", k, n, crowdLimit)
				}
			}
			d, err := s.Peek(context.Background(), route)
			if err != nil {
				t.Fatal(err)
			}
			// A peek answers as the take of one unit would.
			if d.Remaining != 1000-total-1 {
				t.Errorf("route: a peek leaves %d remaining after %d admitted stacks, want %d", d.Remaining, total, 1000-total-1)
			}
			if sent := h.counts(); sent[tc.batch(s.scripts).sha] == 0 {
				t.Errorf("no stacked batch was sent: %v", sent)
			}
		})
	}
}

// TestRunMergesStackedCalls: a pipeline of lean stacked calls of three
// shapes (two of them with as many keys and arguments) and a plain lean
// call, sent after Redis forgot every script, goes out as one stacked
// batch per signature (the NOSCRIPT reply answered by sending the
// batch's source), and every call gets the decisions the same calls sent
// one by one, in the order the pipeline decided them, get on a fake clock.
func TestRunMergesStackedCalls(t *testing.T) {
	ctx := context.Background()
	s, clock := newClockedStore(t, aligned+777, true)
	rdb := clock.c
	h := &shaHook{}
	rdb.AddHook(h)
	type stack struct {
		shape  int
		client string
		cost   int64
	}
	stacks := []stack{{0, "a", 1}, {1, "b", 1}, {2, "c", 1}, {0, "a", 2}, {2, "d", 3}}
	steps := make([]*stackStep, len(stacks))
	var batch []*call
	for i, st := range stacks {
		steps[i] = stackStepOf(s, "B", st.client, stackShapes[st.shape].limits, st.cost)
		batch = append(batch, newTestCall(&s.scripts.stackedLean, steps[i].leanArgs(s, modeTake, &s.scripts.stackedLean, false)))
	}
	gcra := &s.scripts.byAlgorithm[store.GCRA][lean]
	plain := newTestCall(gcra, []any{argEvalSHA, gcra.shaArg, argOne, s.prefix + ":plain", argTake, int64(1), int64(10), int64(time.Hour / time.Microsecond), int64(10)})
	batch = append(batch, plain)
	calls := append([]*call(nil), batch...)
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	h.reset()
	s.pipes.one.run(batch) // reorders batch as the commands answer it
	order := make(map[*call]int, len(calls))
	for i, c := range batch {
		order[c] = i
	}
	for i, c := range calls[:len(stacks)] {
		<-c.done
		if c.err != nil {
			t.Fatalf("stack %d: %v", i, c.err)
		}
		if _, err := steps[i].decodeLean(c.v); err != nil {
			t.Fatalf("stack %d: %v", i, err)
		}
	}
	<-plain.done
	if d, err := decodeLean(plain.v, newLimitInfo(store.Limit{Rate: 10, Period: time.Hour})); plain.err != nil || err != nil || !d.Allowed || d.Remaining != 9 {
		t.Errorf("plain call: %+v (%v, %v), want admitted with 9 remaining", d, plain.err, err)
	}
	// What the pipeline sent, before the stacks below are sent alone.
	sent := h.counts()
	// The same stacks one by one on side A, in the order decided.
	byOrder := make([]int, len(stacks))
	for i := range byOrder {
		byOrder[i] = i
	}
	slices.SortFunc(byOrder, func(a, b int) int { return order[calls[a]] - order[calls[b]] })
	for _, i := range byOrder {
		st := stacks[i]
		alone := stackStepOf(s, "A", st.client, stackShapes[st.shape].limits, st.cost)
		if _, err := s.runStepWith(ctx, modeTake, alone, stackLean); err != nil {
			t.Fatal(err)
		}
		for j := range alone.out {
			if !sameDecision(steps[i].out[j], alone.out[j]) {
				t.Errorf("stack %d, part %d: in the pipeline %+v, alone %+v", i, j, steps[i].out[j], alone.out[j])
			}
		}
	}
	for _, c := range calls {
		c.release()
	}
	if n := sent[s.scripts.stackedLeanBatch.sha]; n != 1 {
		t.Errorf("stacked batches sent by SHA: %d, want 1 (the two-part stacks; the three-part one alone): %v", n, sent)
	}
	if n := sent[s.scripts.stackedLean.sha]; n != 1 {
		t.Errorf("lone stacked calls: %d, want 1 (the three-part stack): %v", n, sent)
	}
}

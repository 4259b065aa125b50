package storetest

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// stackTests are the subtests of stacked decisions ([store.MultiStore]),
// run once per algorithm of the first part (the second part uses the first
// algorithm of store.Algorithms that differs, so that every stack mixes
// two algorithms): all-or-nothing across keys and algorithms, the
// deciding part, counted refusals and blocks in a stack, exact admissions
// under concurrency and a TTL on every key. With stack-invalid (invalid
// stacks are refused before any write) they run only when the store
// under test implements store.MultiStore.
var stackTests = []algorithmTest{
	{"stack-all-or-nothing", nil, testStackAllOrNothing},
	{"stack-deciding-part", nil, testStackDecidingPart},
	{"stack-count-denied", windowAlg, testStackCountDenied},
	{"stack-block", nil, testStackBlock},
	{"stack-concurrent", nil, testStackConcurrent},
	{"stack-ttl", nil, testStackTTL},
}

// needMulti skips subtests of stacked decisions when the store does not
// implement them, or decides them on another clock than Advance moves.
func (e *env) needMulti() {
	e.Helper()
	if _, ok := e.h.Store.(store.MultiStore); !ok {
		e.Skipf("tests stacked decisions: %T does not implement store.MultiStore", e.h.Store)
	}
	if e.h.RealTimeStacks {
		e.Skip("tests stacked decisions: the harness's clock does not reach them (RealTimeStacks)")
	}
}

// multi returns the harness's store as a MultiStore.
func (e *env) multi() store.MultiStore {
	e.Helper()
	ms, ok := e.h.Store.(store.MultiStore)
	if !ok {
		e.Fatalf("storetest: %T does not implement store.MultiStore", e.h.Store)
	}
	return ms
}

// takeMulti takes a stack and checks what holds for every stacked
// decision: one decision per part, each valid for its part, Allowed only
// when every part admits, and Decision equal to the deciding part's.
func (e *env) takeMulti(reqs ...store.Request) store.MultiDecision {
	e.Helper()
	for _, r := range reqs {
		e.note(r)
	}
	md, err := e.multi().TakeMulti(e.ctx, reqs)
	if err != nil {
		e.Fatalf("TakeMulti: got error %v, want nil", err)
	}
	if len(md.Parts) != len(reqs) || md.Part < 0 || md.Part >= len(reqs) {
		e.Fatalf("TakeMulti: %d parts, deciding part %d; want %d parts", len(md.Parts), md.Part, len(reqs))
	}
	all := true
	for i, d := range md.Parts {
		e.checkDecision("Take", reqs[i], d) // each part is decided as a Take
		all = all && d.Allowed
	}
	if md.Allowed != all {
		e.Fatalf("TakeMulti: Allowed %v, parts %v", md.Allowed, md.Parts)
	}
	if want := contract.MostRestrictive(md.Parts); md.Part != want {
		e.Errorf("TakeMulti: deciding part %d, want %d (parts %v)", md.Part, want, md.Parts)
	}
	if md.Decision.LimitID != md.Parts[md.Part].LimitID || md.Decision.Remaining != md.Parts[md.Part].Remaining ||
		md.Decision.RetryAfter != md.Parts[md.Part].RetryAfter {
		e.Errorf("TakeMulti: Decision %s is not part %d's %s", show(md.Decision), md.Part, show(md.Parts[md.Part]))
	}
	return md
}

// other returns an algorithm other than alg, for the second part.
func other(alg store.Algorithm) store.Algorithm {
	if alg == store.GCRA {
		return store.FixedWindow
	}
	return store.GCRA
}

// stackRoom makes room, as windowRoom does, in the hour-long windows of
// alg and of the other algorithm a stack test uses.
func (e *env) stackRoom(alg store.Algorithm, need time.Duration) {
	e.Helper()
	e.windowRoom(alg, need, time.Hour)
	e.windowRoom(other(alg), need, time.Hour)
}

// left returns the units r would still admit: a peek's Remaining plus the
// cost it assumed, or 0 when it refuses.
func (e *env) left(r store.Request) int64 {
	e.Helper()
	d := e.peek(r)
	if !d.Allowed {
		return 0
	}
	return d.Remaining + contract.Cost(&r)
}

// testStackAllOrNothing: a refusal by either part records nothing in the
// other, whichever comes first.
func testStackAllOrNothing(e *env, alg store.Algorithm) {
	e.stackRoom(alg, 5*time.Second)
	for tight := 0; tight < 2; tight++ {
		a := req(e.key(), 1, named("a", alg, 10, time.Hour))
		b := req(e.key(), 1, named("b", other(alg), 10, time.Hour))
		parts := []store.Request{a, b}
		parts[tight].Limits[0].Rate = 3
		admitted := 0
		for n := 0; n < 8; n++ {
			if md := e.takeMulti(parts...); md.Allowed {
				admitted++
			} else if md.Part != tight || md.Parts[1-tight].Remaining != 7 || !md.Parts[1-tight].Allowed {
				e.Fatalf("tight part %d: refusal %s, loose part %s; want refused by part %d, the other admitting with 7 left",
					tight, show(md.Decision), show(md.Parts[1-tight]), tight)
			}
		}
		if admitted != 3 {
			e.Errorf("tight part %d: admitted %d, want 3", tight, admitted)
		}
		if got := e.left(parts[1-tight]); got != 7 {
			e.Errorf("tight part %d: the other part has %d left, want 7: refused stacks were recorded", tight, got)
		}
	}
}

// testStackDecidingPart: an admission names the part with the fewest
// units left, a refusal the refusing part with the longest retry.
func testStackDecidingPart(e *env, alg store.Algorithm) {
	e.stackRoom(alg, 5*time.Second)
	a := req(e.key(), 1, named("a", alg, 5, time.Hour))
	b := req(e.key(), 1, named("b", other(alg), 2, time.Hour))
	md := e.takeMulti(a, b)
	if !md.Allowed || md.Part != 1 || md.Remaining != 1 || md.LimitID != "b" {
		e.Fatalf("first take: %s (part %d), want admitted by b with 1 left", show(md.Decision), md.Part)
	}
	// Both refuse; a (its window has more than 5 s left) waits longer than
	// b, whose period is a second.
	a = req(e.key(), 1, named("a", alg, 1, time.Hour))
	b = req(e.key(), 1, named("b", other(alg), 1, time.Second))
	e.windowRoom(other(alg), 2*time.Second, time.Second)
	e.takeMulti(a, b)
	md = e.takeMulti(a, b)
	if md.Allowed || md.Parts[0].Allowed || md.Parts[1].Allowed {
		e.Fatalf("second take: %v, want both parts refusing", md.Parts)
	}
	if md.Part != 0 || md.RetryAfter < md.Parts[1].RetryAfter {
		e.Errorf("second take: deciding part %d with retry %s (parts %v), want part 0, the longest", md.Part, md.RetryAfter, md.Parts)
	}
}

// testStackCountDenied: a part with CountDenied counts every attempt the
// stack refuses, whichever part refused it.
func testStackCountDenied(e *env, alg store.Algorithm) {
	e.stackRoom(alg, 5*time.Second)
	counting := req(e.key(), 1, named("attempts", alg, 10, time.Hour))
	counting.CountDenied = true
	tight := req(e.key(), 1, named("tight", store.GCRA, 1, time.Hour))
	for n := 0; n < 4; n++ {
		if md := e.takeMulti(counting, tight); md.Allowed != (n == 0) {
			e.Fatalf("take %d: allowed %v", n, md.Allowed)
		}
	}
	if got := e.left(counting); got != 6 {
		e.Errorf("the counting part has %d left after 4 attempts, want 6", got)
	}
}

// testStackBlock: a refusing part with a block starts it once and refuses
// while it lasts; the other part is charged for none of it.
func testStackBlock(e *env, alg store.Algorithm) {
	e.stackRoom(alg, 5*time.Second)
	loose := req(e.key(), 1, named("loose", alg, 10, time.Hour))
	blocking := req(e.key(), 1, store.Limit{Name: "strict", Algorithm: other(alg), Rate: 1, Period: time.Hour, Block: time.Hour})
	e.takeMulti(loose, blocking)
	md := e.takeMulti(loose, blocking)
	if md.Allowed || !md.BlockStarted || !md.Blocked || md.Part != 1 {
		e.Fatalf("second take: %s (part %d), want a block started by part 1", show(md.Decision), md.Part)
	}
	md = e.takeMulti(loose, blocking)
	if md.Allowed || !md.Blocked || md.BlockStarted {
		e.Fatalf("third take: %s, want blocked", show(md.Decision))
	}
	if got := e.left(loose); got != 9 {
		e.Errorf("the loose part has %d left, want 9", got)
	}
}

// testStackConcurrent: stacks of two clients sharing one route part admit
// exactly the route's capacity, and each client part is charged exactly
// its own admissions.
func testStackConcurrent(e *env, alg store.Algorithm) {
	e.stackRoom(alg, 10*time.Second)
	route := req(e.key(), 1, named("route", other(alg), 25, time.Hour))
	clients := []store.Request{req(e.key(), 1, named("client", alg, 40, time.Hour)), req(e.key(), 1, named("client", alg, 40, time.Hour))}
	var admitted [2]atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := g % 2
			for n := 0; n < 10; n++ {
				md, err := e.multi().TakeMulti(e.ctx, []store.Request{clients[c], route})
				if err != nil {
					e.Errorf("TakeMulti: %v", err)
					return
				}
				if md.Allowed {
					admitted[c].Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if got := admitted[0].Load() + admitted[1].Load(); got != 25 {
		e.Fatalf("admitted %d, want 25", got)
	}
	for c := range clients {
		if got, want := 40-e.left(clients[c]), admitted[c].Load(); got != want {
			e.Errorf("client %d charged %d, admitted %d", c, got, want)
		}
	}
}

// testStackTTL: every key a stack writes has a TTL.
func testStackTTL(e *env, alg store.Algorithm) {
	e.needKeyTTLs()
	a := req(e.key(), 1, named("a", alg, 2, time.Minute))
	b := req(e.key(), 1, store.Limit{Name: "b", Algorithm: other(alg), Rate: 3, Period: time.Minute, Block: time.Minute})
	for n := 0; n < 5; n++ {
		e.takeMulti(a, b)
	}
	for k, ttl := range e.storedKeys().State {
		if ttl <= 0 {
			e.Errorf("key %s: TTL %s, want one", k, ttl)
		}
	}
	for k, ttl := range e.storedKeys().Block {
		if ttl <= 0 {
			e.Errorf("key %s: TTL %s, want one", k, ttl)
		}
	}
}

// testStackInvalid: invalid stacks fail with ErrInvalidRequest (or the
// part's own error) and record nothing.
func testStackInvalid(e *env) {
	a := req(e.key(), 1, named("a", store.GCRA, 5, time.Hour))
	dedup := req(e.key(), 1, named("d", store.GCRA, 5, time.Hour))
	dedup.DedupID = "x"
	tooCostly := req(e.key(), 9, named("c", store.GCRA, 5, time.Hour))
	many := make([]store.Request, store.MaxParts+1)
	for i := range many {
		many[i] = req(e.key(), 1, named("m", store.GCRA, 5, time.Hour))
	}
	for name, tc := range map[string]struct {
		reqs []store.Request
		want error
	}{
		"empty":          {nil, store.ErrInvalidRequest},
		"too many parts": {many, store.ErrInvalidRequest},
		"same key":       {[]store.Request{a, a}, store.ErrInvalidRequest},
		"dedup":          {[]store.Request{a, dedup}, store.ErrInvalidRequest},
		"invalid part":   {[]store.Request{a, tooCostly}, store.ErrCostExceedsCapacity},
	} {
		if _, err := e.multi().TakeMulti(e.ctx, tc.reqs); !errors.Is(err, tc.want) {
			e.Errorf("%s: got error %v, want %v", name, err, tc.want)
		}
	}
	if got := e.left(a); got != 5 {
		e.Errorf("after invalid stacks: %d left, want 5", got)
	}
}

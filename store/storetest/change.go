package storetest

import (
	"fmt"
	"slices"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// testLimitChange: state is kept per limit ID and records the units used,
// so a limit changed under the same Name applies at once to what was used.
// Raising 2/min to 10/min after 2 units admits 8 more at once (Remaining 7
// down to 0, then a denial); cutting 10/min to 2/min after 3 units refuses
// at once with no unit remaining (exact: GCRA and the token bucket wait
// for the 3 units used to drain to 1 at the new rate, the window
// algorithms for the units to leave the window or lose their weight). GCRA and the token
// bucket keep their state across a change of Burst too. Changing the
// algorithm under the same Name starts from fresh state.
func testLimitChange(e *env, alg store.Algorithm) {
	const p = time.Minute
	next := store.Algorithms[(slices.Index(store.Algorithms, alg)+1)%len(store.Algorithms)]
	e.windowRoom(next, 2*time.Second, time.Hour)
	e.windowRoom(alg, 2*time.Second, time.Hour, p)
	small, big := named("q", alg, 2, p), named("q", alg, 10, p)

	k := e.key()
	e.allow(req(k, 1, small))
	e.allow(req(k, 1, small))
	e.deny(req(k, 1, small))
	e.check("raised from 2/min to 10/min after 2 used: peek", e.peek(req(k, 1, big)), expect{allowed: true, remaining: 7, resetAfter: -1})
	for i := int64(1); i <= 8; i++ {
		e.check(fmt.Sprintf("raised from 2/min to 10/min after 2 used: request %d", i), e.take(req(k, 1, big)), expect{allowed: true, remaining: 8 - i, resetAfter: -1})
	}
	e.check("raised from 2/min to 10/min after 2 used: request 9", e.take(req(k, 1, big)), expect{remaining: 0, resetAfter: -1, retryAfter: -1})

	k = e.key()
	for i := 0; i < 3; i++ {
		e.allow(req(k, 1, big))
	}
	e.check("cut from 10/min to 2/min after 3 used", e.take(req(k, 1, small)), expect{
		remaining: 0,
		// 3 units used: a bucket admits once they have drained to 1,
		// at 1 per 30s; the sliding counter once their weight in the
		// next window has fallen to 1, 40s into it.
		resetAfter: byAlg(alg, 90*time.Second, p, 2*p, p),
		retryAfter: byAlg(alg, time.Minute, p, p+40*time.Second, p),
	})
	e.check("cut from 10/min to 2/min after 3 used: peek", e.peek(req(k, 1, small)), expect{remaining: 0, resetAfter: -1, retryAfter: -1})

	if bucketLike(alg) {
		k = e.key()
		narrow := store.Limit{Name: "b", Algorithm: alg, Rate: 1, Period: time.Hour, Burst: 2}
		wide := narrow
		wide.Burst = 6
		e.exhaust(req(k, 1, narrow), 2)
		e.check("burst raised from 2 to 6 after 2 used", e.take(req(k, 1, wide)), expect{allowed: true, remaining: 3, resetAfter: -1})
	}

	k = e.key()
	if n, _ := e.exhaust(req(k, 1, named("r", alg, 2, time.Hour)), 2); n != 2 {
		e.Fatalf("fresh key, %s 2/h: got %d admitted, want 2", alg, n)
	}
	e.check(fmt.Sprintf("same name, %s after %s", next, alg), e.take(req(k, 1, named("r", next, 2, time.Hour))), expect{allowed: true, remaining: 1, resetAfter: -1})
}

// testPeriodChange: a limit whose period a reload changes under the same
// Name keeps its state, and that state lives as long as the new period
// calls for, not the old one. 2 units taken under 10 per 2 s, then one
// under 3 per hour is admitted with none left; 4.2 s later, past every
// expiry the 2 s period could have set, the hour's units are still used
// and 3 more takes are refused. With KeyTTLs, the key's TTL after the
// first hourly take reaches past the old period too. (A window store that
// kept the TTL of a key holding the current window once let the key
// expire at the old window's end, count and all.)
func testPeriodChange(e *env, alg store.Algorithm) {
	// The hourly window must not end during the test, nor the 2 s
	// window between the first three takes.
	e.windowRoom(alg, 15*time.Second, 2*time.Second, time.Hour)
	// 10 per 2 s: a bucket's unit drains in 200 ms, so a slow machine's
	// pause before the third take does not drain one of the two.
	short, long := named("api", alg, 10, 2*time.Second), named("api", alg, 3, time.Hour)
	k := e.key()
	e.allow(req(k, 1, short))
	e.allow(req(k, 1, short))
	e.check("first take after the period changed from 2 s to 1 h", e.take(req(k, 1, long)),
		expect{allowed: true, remaining: 0, resetAfter: -1})
	if e.h.KeyTTLs != nil {
		for name, ttl := range e.storedKeys().State {
			if ttl >= 0 && ttl < 10*time.Second {
				e.Errorf("state key %s: TTL %v after the first take under the hourly period, want past the old 2 s period's", name, ttl)
			}
		}
	}
	e.advance(4200 * time.Millisecond)
	for i := range 3 {
		if d := e.take(req(k, 1, long)); d.Allowed {
			e.Errorf("take %d, 4.2 s after the period changed: admitted with %d left; the hour's 3 units were used", i+1, d.Remaining)
		}
	}
}

package headers_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// manualClock is a clock the test moves by hand.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// quotaItem is one parsed RateLimit-Policy item.
type quotaItem struct {
	name string
	q    int64
	w    time.Duration
}

// advertised parses the RateLimit-Policy field a policy of limits sends.
func advertised(t *testing.T, limits []store.Limit) []quotaItem {
	t.Helper()
	p, err := headers.NewPolicy(headers.Options{IETF: true, NoLegacy: true}, "api", "", limits)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	p.Write(h, &store.Decision{Allowed: true, Capacity: limits[0].Capacity()}, time.Time{}, new(headers.Buffer), false)
	list, err := httpsfv.UnmarshalList(h.Values("RateLimit-Policy"))
	if err != nil {
		t.Fatalf("RateLimit-Policy %q: %v", h.Values("RateLimit-Policy"), err)
	}
	var items []quotaItem
	for _, m := range list {
		it, ok := m.(httpsfv.Item)
		if !ok {
			t.Fatalf("RateLimit-Policy member %v is not an item", m)
		}
		name, _ := it.Value.(string)
		q, okq := it.Params.Get("q")
		w, okw := it.Params.Get("w")
		qi, _ := q.(int64)
		wi, _ := w.(int64)
		if !okq || !okw || qi <= 0 || wi <= 0 {
			t.Fatalf("RateLimit-Policy item %q: got q=%v w=%v, want positive integers", name, q, w)
		}
		items = append(items, quotaItem{name, qi, time.Duration(wi) * time.Second})
	}
	if len(items) != len(limits) {
		t.Fatalf("RateLimit-Policy: got %d items, want %d", len(items), len(limits))
	}
	return items
}

// politeClient sends as many unit requests as every advertised item
// allows: never more than q within any w seconds, counting a send at time
// s as inside the window (now−w, now].
type politeClient struct {
	items []quotaItem
	sent  []time.Time
}

// mayAdmit reports whether one more unit at now keeps every item's quota.
func (c *politeClient) mayAdmit(now time.Time) bool {
	for _, it := range c.items {
		var n int64
		for i := len(c.sent) - 1; i >= 0 && c.sent[i].After(now.Add(-it.w)); i-- {
			n++
		}
		if n+1 > it.q {
			return false
		}
	}
	return true
}

// TestPolicyFollowedIsNeverRefused runs a client that reads
// RateLimit-Policy and keeps to every item against the memory store on a
// fake clock, for every algorithm: the advertised policy must describe what
// is enforced, so the client is never refused. Regression: 10/min with burst
// 20 was advertised as q=20;w=60 (a client sending 20 every minute got 20,
// then 10), 5 per 500ms as q=5;w=1 regardless of the algorithm, and a
// sliding window counter's R per P although its estimate still weighs the
// previous window.
func TestPolicyFollowedIsNeverRefused(t *testing.T) {
	ms := time.Millisecond
	sets := []struct {
		name   string
		limits []store.Limit // Algorithm set per run
		bucket bool          // only for GCRA and TokenBucket (uses Burst)
	}{
		{"per minute", []store.Limit{{Rate: 10, Period: time.Minute}}, false},
		{"sub-second", []store.Limit{{Rate: 5, Period: 500 * ms}}, false},
		{"period not dividing a second", []store.Limit{{Rate: 3, Period: 700 * ms}}, false},
		{"period above a second, not whole", []store.Limit{{Rate: 4, Period: 1500 * ms}}, false},
		{"two limits", []store.Limit{{Name: "short", Rate: 4, Period: 700 * ms}, {Name: "long", Rate: 30, Period: 13 * time.Second}}, false},
		{"burst above rate", []store.Limit{{Rate: 10, Period: time.Minute, Burst: 20}}, true},
		{"burst below rate", []store.Limit{{Rate: 100, Period: time.Minute, Burst: 10}}, true},
		{"sub-second burst above rate", []store.Limit{{Rate: 5, Period: 300 * ms, Burst: 8}}, true},
		{"sub-second burst below rate", []store.Limit{{Rate: 7, Period: 700 * ms, Burst: 3}}, true},
		{"burst drain not whole seconds", []store.Limit{{Rate: 7, Period: time.Minute, Burst: 10}}, true},
		{"two limits with bursts", []store.Limit{{Name: "second", Rate: 5, Period: 300 * ms, Burst: 8}, {Name: "minute", Rate: 100, Period: time.Minute, Burst: 150}}, true},
	}
	for _, alg := range store.Algorithms {
		for _, set := range sets {
			if set.bucket && alg != store.GCRA && alg != store.TokenBucket {
				continue
			}
			t.Run(alg.String()+"/"+set.name, func(t *testing.T) {
				limits := make([]store.Limit, len(set.limits))
				for i, l := range set.limits {
					l.Algorithm = alg
					limits[i] = l
				}
				items := advertised(t, limits)
				runPoliteClient(t, limits, items)
			})
		}
	}
}

// runPoliteClient drives a polite client through steps of several
// lengths (exact window boundaries and odd milliseconds) and fails on the
// first refusal.
func runPoliteClient(t *testing.T, limits []store.Limit, items []quotaItem) {
	t.Helper()
	clock := &manualClock{now: time.Unix(1_767_225_600, 123_456_789)}
	st, err := memstore.New(memstore.Options{Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	var longest time.Duration
	for _, it := range items {
		longest = max(longest, it.w)
	}
	steps := []time.Duration{0, time.Millisecond, 37 * time.Millisecond, 100 * time.Millisecond, 333 * time.Millisecond, time.Second}
	for _, it := range items {
		steps = append(steps, it.w, it.w/2, it.w-time.Millisecond)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	c := &politeClient{items: items}
	ctx := context.Background()
	req := store.Request{Key: "client", Limits: limits}
	var admitted int64
	for elapsed := time.Duration(0); elapsed < 6*longest; {
		for c.mayAdmit(clock.Now()) {
			d, err := st.Take(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if !d.Allowed {
				t.Fatalf("policy %s: refused after %s (%d admitted) by %s, RetryAfter %s", describe(items), elapsed, admitted, d.LimitID, d.RetryAfter)
			}
			admitted++
			c.sent = append(c.sent, clock.Now())
		}
		step := steps[rng.IntN(len(steps))]
		clock.Advance(step)
		elapsed += step
	}
	if admitted == 0 {
		t.Fatal("the client sent nothing")
	}
}

func describe(items []quotaItem) string {
	s := ""
	for _, it := range items {
		s += fmt.Sprintf("%q;q=%d;w=%d ", it.name, it.q, it.w/time.Second)
	}
	return s
}

// TestPolicyValues pins the advertised quota of each kind of limit: the
// capacity, in the whole seconds in which a full limit surely empties.
func TestPolicyValues(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		limit store.Limit
		want  string
	}{
		{store.Limit{Rate: 10, Period: time.Minute}, `"api";q=10;w=60`},
		{store.Limit{Rate: 10, Period: time.Minute, Burst: 20}, `"api";q=20;w=120`},
		{store.Limit{Rate: 100, Period: time.Minute, Burst: 10}, `"api";q=10;w=6`},
		{store.Limit{Rate: 7, Period: time.Minute, Burst: 10}, `"api";q=10;w=86`},
		{store.Limit{Rate: 5, Period: 500 * ms}, `"api";q=5;w=1`},
		{store.Limit{Rate: 5, Period: 500 * ms, Burst: 10}, `"api";q=10;w=1`},
		{store.Limit{Algorithm: store.FixedWindow, Rate: 3, Period: 700 * ms}, `"api";q=3;w=1`},
		{store.Limit{Algorithm: store.SlidingWindowLog, Rate: 4, Period: 1500 * ms}, `"api";q=4;w=2`},
		{store.Limit{Algorithm: store.SlidingWindowCounter, Rate: 10, Period: time.Minute}, `"api";q=10;w=120`},
		{store.Limit{Algorithm: store.SlidingWindowCounter, Rate: 5, Period: 500 * ms}, `"api";q=5;w=1`},
	}
	for _, tt := range tests {
		p, err := headers.NewPolicy(headers.Options{IETF: true}, "api", "", []store.Limit{tt.limit})
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		p.Write(h, &store.Decision{Allowed: true, Capacity: tt.limit.Capacity()}, time.Time{}, new(headers.Buffer), false)
		if got := h.Get("RateLimit-Policy"); got != tt.want {
			t.Errorf("%+v: got %s, want %s", tt.limit, got, tt.want)
		}
	}
}

// TestRetryAfterNotEarlierThanAnyReset pins the draft's rule "the
// Retry-After field value SHOULD NOT reference a point in time earlier
// than the reset parameter" on the real memory store, for every algorithm
// and several limits. Regression: refused by a short limit, a response
// said Retry-After: 1 next to t=3000 for a long limit.
func TestRetryAfterNotEarlierThanAnyReset(t *testing.T) {
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			limits := []store.Limit{
				{Name: "second", Algorithm: alg, Rate: 2, Period: time.Second},
				{Name: "hour", Algorithm: alg, Rate: 50, Period: time.Hour},
			}
			p, err := headers.NewPolicy(headers.Options{IETF: true}, "api", "", limits)
			if err != nil {
				t.Fatal(err)
			}
			clock := &manualClock{now: time.Unix(1_767_225_600, 250_000_000)}
			st, err := memstore.New(memstore.Options{Clock: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			req := store.Request{Key: "client", Limits: limits}
			refusals := 0
			for i := 0; i < 400; i++ {
				d, err := st.Take(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				h := http.Header{}
				p.Write(h, &d, clock.Now().Add(d.RetryAfter), new(headers.Buffer), !d.Allowed)
				if !d.Allowed {
					refusals++
					ra, err := strconv.ParseInt(h.Get("Retry-After"), 10, 64)
					if err != nil {
						t.Fatalf("Retry-After %q: %v", h.Get("Retry-After"), err)
					}
					list, err := httpsfv.UnmarshalList(h.Values("RateLimit"))
					if err != nil {
						t.Fatal(err)
					}
					for _, m := range list {
						it := m.(httpsfv.Item)
						if v, ok := it.Params.Get("t"); ok && v.(int64) > ra {
							t.Fatalf("refusal %d: RateLimit %q has t=%d for %v, later than Retry-After: %d", refusals, h.Values("RateLimit"), v, it.Value, ra)
						}
					}
				}
				clock.Advance(150 * time.Millisecond)
			}
			if refusals == 0 {
				t.Fatal("no refusal: the test checks nothing")
			}
		})
	}
}

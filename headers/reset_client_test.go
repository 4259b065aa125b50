package headers_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// serviceLimit is one parsed RateLimit item: its remaining units and, when
// sent, its t.
type serviceLimit struct {
	name string
	r    int64
	t    int64
	hasT bool
}

// rateLimitItems parses the RateLimit field of h.
func rateLimitItems(t *testing.T, h http.Header) []serviceLimit {
	t.Helper()
	list, err := httpsfv.UnmarshalList(h.Values("RateLimit"))
	if err != nil {
		t.Fatalf("RateLimit %q: %v", h.Values("RateLimit"), err)
	}
	var out []serviceLimit
	for _, m := range list {
		it, ok := m.(httpsfv.Item)
		if !ok {
			t.Fatalf("RateLimit member %v is not an item", m)
		}
		name, _ := it.Value.(string)
		r, okr := it.Params.Get("r")
		sl := serviceLimit{name: name}
		sl.r, _ = r.(int64)
		if !okr {
			t.Fatalf("RateLimit item %q without r", name)
		}
		if v, ok := it.Params.Get("t"); ok {
			sl.t, sl.hasT = v.(int64), true
		}
		out = append(out, sl)
	}
	return out
}

// headerClient is a client of the memory store that reads only the
// response header fields: the test writes them for every decision as the
// middleware does.
type headerClient struct {
	t      *testing.T
	clock  *manualClock
	st     store.Store
	policy *headers.Policy
	req    store.Request
}

// send takes a request of cost and returns its decision and its header.
func (c *headerClient) send(cost int64) (store.Decision, http.Header) {
	c.t.Helper()
	r := c.req
	r.Cost = cost
	d, err := c.st.Take(context.Background(), r)
	if err != nil {
		c.t.Fatal(err)
	}
	h := http.Header{}
	c.policy.Write(h, &d, c.clock.Now().Add(d.ResetAfter), new(headers.Buffer), !d.Allowed)
	return d, h
}

// peekable reports whether a request of cost would be admitted now.
func (c *headerClient) peekable(cost int64) bool {
	c.t.Helper()
	r := c.req
	r.Cost = cost
	d, err := c.st.Peek(context.Background(), r)
	if err != nil {
		c.t.Fatal(err)
	}
	return d.Allowed
}

// TestResetFollowedIsNeverRefused runs a client that reads the RateLimit
// field only: it sends while every item has a unit remaining and, when an
// item has none, waits that item's t (the longest such t). It must never be
// refused, and t must be the time until quota is made available again
// (draft-ietf-httpapi-ratelimit-headers-10, "Reset Parameter"), to the
// second: a second earlier the request is still refused. An item whose
// limit is full carries no t. Regression: t was the time until the limit
// was full again (a GCRA limit of 10 per minute with nothing left said
// t=60 where a unit came back after 6 seconds, and a full limit said t=0).
func TestResetFollowedIsNeverRefused(t *testing.T) {
	ms := time.Millisecond
	sets := []struct {
		name   string
		limits []store.Limit
		bucket bool
	}{
		{"per minute", []store.Limit{{Rate: 10, Period: time.Minute}}, false},
		{"sub-second", []store.Limit{{Rate: 5, Period: 500 * ms}}, false},
		{"period not whole seconds", []store.Limit{{Rate: 3, Period: 2700 * ms}}, false},
		{"two limits", []store.Limit{{Name: "short", Rate: 4, Period: 7 * time.Second}, {Name: "long", Rate: 30, Period: 130 * time.Second}}, false},
		{"burst above rate", []store.Limit{{Rate: 10, Period: time.Minute, Burst: 20}}, true},
		{"two limits with bursts", []store.Limit{{Name: "second", Rate: 5, Period: 3 * time.Second, Burst: 8}, {Name: "minute", Rate: 40, Period: time.Minute, Burst: 50}}, true},
	}
	for _, alg := range store.Algorithms {
		for _, set := range sets {
			if set.bucket && alg != store.GCRA && alg != store.TokenBucket {
				continue
			}
			t.Run(alg.String()+"/"+set.name, func(t *testing.T) {
				c := newHeaderClient(t, alg, set.limits)
				followResets(t, c, 300)
			})
		}
	}
}

// newHeaderClient returns a client of a fresh memory store on a manual
// clock, for limits under alg.
func newHeaderClient(t *testing.T, alg store.Algorithm, set []store.Limit) *headerClient {
	t.Helper()
	limits := make([]store.Limit, len(set))
	for i, l := range set {
		l.Algorithm = alg
		limits[i] = l
	}
	clock := &manualClock{now: time.Unix(1_767_225_600, 123_456_789)}
	st, err := memstore.New(memstore.Options{Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	p, err := headers.NewPolicy(headers.Options{IETF: true}, "api", "", limits)
	if err != nil {
		t.Fatal(err)
	}
	return &headerClient{t: t, clock: clock, st: st, policy: p, req: store.Request{Key: "client", Limits: limits}}
}

// followResets sends n unit requests as the RateLimit field allows.
func followResets(t *testing.T, c *headerClient, n int) {
	t.Helper()
	waited := 0
	for i := 0; i < n; i++ {
		d, h := c.send(1)
		if !d.Allowed {
			t.Fatalf("request %d: refused by %s (RetryAfter %s) although the client kept to RateLimit", i, d.LimitID, d.RetryAfter)
		}
		var wait int64
		for j, it := range rateLimitItems(t, h) {
			full := it.r >= c.req.Limits[j].Capacity()
			if it.hasT == full {
				t.Fatalf("request %d: item %q has r=%d of %d and t present %t: want t exactly when the limit is not full", i, it.name, it.r, c.req.Limits[j].Capacity(), it.hasT)
			}
			if it.r == 0 {
				wait = max(wait, it.t)
			}
		}
		if wait == 0 {
			c.clock.Advance(37 * time.Millisecond) // a little time between sends
			continue
		}
		waited++
		// t is the earliest whole second: a second before, no unit has
		// come back yet.
		c.clock.Advance(time.Duration(wait-1) * time.Second)
		if c.peekable(1) {
			t.Fatalf("request %d: RateLimit %q: a unit is back after %ds, before the t=%d it names", i, h.Values("RateLimit"), wait-1, wait)
		}
		c.clock.Advance(time.Second)
	}
	if waited == 0 {
		t.Fatal("the client never met r=0: the test checks nothing")
	}
}

// TestRetryAfterNeverEarlierThanT sends, with two limits, requests of one
// and of three units as fast as they are admitted, and checks every
// refusal: Retry-After is never earlier than any t sent with it, the
// deciding limit's t is the time until its next unit (no later than
// Retry-After, and a second earlier that unit has not come back), and
// after Retry-After the request is admitted. Regression: a refusal's t
// was its Retry-After, not the time until quota is made available.
func TestRetryAfterNeverEarlierThanT(t *testing.T) {
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			c := newHeaderClient(t, alg, []store.Limit{
				{Name: "short", Rate: 6, Period: 9 * time.Second},
				{Name: "long", Rate: 40, Period: 10 * time.Minute},
			})
			refusals, earlier := 0, 0
			for i := 0; i < 200; i++ {
				cost := int64(1 + 2*(i%3/2)) // 1, 1, 3, ...
				d, h := c.send(cost)
				if d.Allowed {
					c.clock.Advance(300 * time.Millisecond)
					continue
				}
				refusals++
				ra, err := strconv.ParseInt(h.Get("Retry-After"), 10, 64)
				if err != nil {
					t.Fatalf("Retry-After %q: %v", h.Get("Retry-After"), err)
				}
				items := rateLimitItems(t, h)
				for _, it := range items {
					if it.hasT && it.t > ra {
						t.Fatalf("refusal %d: RateLimit %q has t=%d for %q, later than Retry-After: %d", refusals, h.Values("RateLimit"), it.t, it.name, ra)
					}
				}
				dec := items[d.Index]
				if !dec.hasT {
					t.Fatalf("refusal %d: RateLimit %q: the refusing limit %q has no t", refusals, h.Values("RateLimit"), dec.name)
				}
				if dec.t < ra {
					earlier++
				}
				c.clock.Advance(time.Duration(dec.t-1) * time.Second)
				if c.peekable(dec.r + 1) {
					t.Fatalf("refusal %d: RateLimit %q: %d units fit after %ds, before the t=%d of %q", refusals, h.Values("RateLimit"), dec.r+1, dec.t-1, dec.t, dec.name)
				}
				c.clock.Advance(time.Duration(ra-dec.t+1) * time.Second)
				if d2, _ := c.send(cost); !d2.Allowed {
					t.Fatalf("refusal %d: refused again after Retry-After %d (%s)", refusals, ra, d2.LimitID)
				}
			}
			// A fixed window gives every unit back at its end, the
			// moment Retry-After names too.
			if refusals == 0 || earlier == 0 && alg != store.FixedWindow {
				t.Fatalf("%d refusals, %d with a t before Retry-After: the test checks too little", refusals, earlier)
			}
		})
	}
}

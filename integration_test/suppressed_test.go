package integration

import (
	"context"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/redisstore"
	"github.com/ratekeeper/ratekeeper/store/suppressed"
)

// TestSuppressedConvergesRedis offers a suppressed limit of 100 per second
// (hard limit 200) two and five times its rate on a real Redis, in real
// time, for five seconds each, and requires the admitted rate after the
// first two seconds (the surge's first period, while the offered load is
// still being measured, and the one whose window still weighs it) to be
// within 15% of the configured rate, with most refusals drawn rather
// than by the hard limit. The memory store's TestSuppressedConverges
// measures the same over two simulated minutes.
func TestSuppressedConvergesRedis(t *testing.T) {
	const (
		rate   = 100
		run    = 5 * time.Second
		warmUp = 2 * time.Second
	)
	srv := sharedRedis(t)
	c := newClient(t, srv)
	for _, load := range []int64{2, 5} {
		t.Run(strconv.FormatInt(load, 10)+"x", func(t *testing.T) {
			src := rand.New(rand.NewPCG(11, uint64(load)))
			rs := newStoreWith(t, c, redisstore.Options{Prefix: randomPrefix(t), Timeout: 10 * time.Second, Rand: src.Float64})
			st, err := suppressed.New(rs, suppressed.Options{})
			if err != nil {
				t.Fatal(err)
			}
			l := store.Limit{Algorithm: store.SlidingWindowCounter, Rate: 2 * rate, Period: time.Second}
			r := store.Request{Key: "client", Limits: []store.Limit{l}}
			step := time.Second / time.Duration(rate*load)
			ctx := context.Background()
			var offered, steadyOffered, steady, suppressed, hard int64
			start := time.Now()
			for i := int64(0); ; i++ {
				at := time.Duration(i) * step
				if at >= run {
					break
				}
				if d := time.Until(start.Add(at)); d > 0 {
					time.Sleep(d)
				}
				d, err := st.Take(ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				offered++
				inSteady := time.Since(start) >= warmUp
				if inSteady {
					steadyOffered++
				}
				switch {
				case d.Allowed && inSteady:
					steady++
				case d.Allowed:
				case d.Suppressed:
					suppressed++
				default:
					hard++
				}
			}
			elapsed := time.Since(start)
			secs := (elapsed - warmUp).Seconds()
			perSec := float64(steady) / secs
			t.Logf("offered %d/s (%d×; sent %d in %s): admitted %.1f/s after the first %s (target %d/s, %.3f of it; %.3f of the offered load); refusals: %d suppressed, %d by the hard limit",
				rate*load, load, offered, elapsed.Round(time.Millisecond), perSec, warmUp, rate, perSec/rate, float64(steady)/float64(steadyOffered), suppressed, hard)
			if elapsed > run+run/4 {
				t.Skipf("sent %d requests in %s, want them within %s: the machine is too loaded to offer %d/s", offered, elapsed, run, rate*load)
			}
			if perSec < 0.85*rate || perSec > 1.15*rate {
				t.Errorf("admitted %.1f/s after the first %s, want %d/s ± 15%%", perSec, warmUp, rate)
			}
			if suppressed <= hard {
				t.Errorf("%d suppressed and %d hard refusals, want mostly suppressed ones", suppressed, hard)
			}
		})
	}
}

// TestSuppressedExactUnderConcurrency sends 200 simultaneous requests for
// one client through 4 middleware instances, each with its own Redis
// client and store (so each draws its own random values), against a
// suppressed limit of soft 20 and hard 50 per hour: at least the soft
// limit and never more than the hard limit pass, every admitted request
// sees a different remaining count (no unit lost or counted twice), and
// every 429 carries Retry-After and the suppression factor.
func TestSuppressedExactUnderConcurrency(t *testing.T) {
	const (
		requests   = 200
		soft, hard = 20, 50
	)
	srv := sharedRedis(t)
	lim := store.Limit{Algorithm: store.SlidingWindowCounter, Rate: hard, Period: time.Hour}
	opts := suppressed.Options{Soft: func(store.Limit) int64 { return soft }}
	for round := range 3 {
		prefix := randomPrefix(t)
		handlers := make([]http.Handler, 4)
		for i := range handlers {
			s, err := suppressed.New(newStore(t, newClient(t, srv), prefix), opts)
			if err != nil {
				t.Fatal(err)
			}
			handlers[i] = newHandler(t, s, "client-1", lim, middleware.Options{Name: "search", FailureMode: limiter.FailClosed, Headers: headers.Options{Suppression: true}})
		}
		awayFromWindowEdge(t, newClient(t, srv), lim.Period, 10*time.Second)
		var left []int64
		refused := 0
		for i, rec := range burst(handlers, requests) {
			n, ok := remaining(t, rec)
			if !ok {
				t.Fatalf("round %d: response %d (status %d) has no X-RateLimit-Remaining", round, i, rec.Code)
			}
			switch rec.Code {
			case http.StatusOK:
				left = append(left, n)
			case http.StatusTooManyRequests:
				refused++
				if rec.Header().Get("Retry-After") == "" || rec.Header().Get("X-RateLimit-Suppression") == "" {
					t.Errorf("round %d: 429 with headers %v, want Retry-After and X-RateLimit-Suppression", round, rec.Header())
				}
			default:
				t.Fatalf("round %d: got status %d, want 200 or 429", round, rec.Code)
			}
		}
		if len(left) < soft || len(left) > hard || len(left)+refused != requests {
			t.Fatalf("round %d: got %d admitted and %d refused, want %d to %d admitted of %d", round, len(left), refused, soft, hard, requests)
		}
		sort.Slice(left, func(i, j int) bool { return left[i] < left[j] })
		for i, n := range left {
			if n != int64(hard-len(left)+i) {
				t.Fatalf("round %d: remaining values of the %d admitted requests %v, want each of %d..%d once", round, len(left), left, hard-len(left), hard-1)
			}
		}
		t.Logf("round %d: %d of %d admitted (soft %d, hard %d)", round, len(left), requests, soft, hard)
	}
}

package integration

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/store"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// inFlightKeys returns the in-flight cap keys under prefix with their TTLs.
func inFlightKeys(ttls map[string]time.Duration) map[string]time.Duration {
	out := map[string]time.Duration{}
	for k, ttl := range ttls {
		if strings.HasSuffix(k, "}:if") {
			out[k] = ttl
		}
	}
	return out
}

// TestInFlightInstancesShareCap: 4 middleware instances, each with its own
// client and store on one Redis, share a cap of 5 on one route: of 40
// requests that all hold their handler, exactly 5 run and 35 are refused
// 429, every run; once they return, the cap's key is gone.
func TestInFlightInstancesShareCap(t *testing.T) {
	srv := sharedRedis(t)
	prefix := randomPrefix(t)
	const instances, requests, capN = 4, 40, 5
	var (
		running, peak atomic.Int64
		entered       = make(chan struct{}, requests)
		release       = make(chan struct{})
	)
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		entered <- struct{}{}
		<-release
		running.Add(-1)
	})
	handlers := make([]http.Handler, instances)
	for i := range handlers {
		st := newStore(t, newClient(t, srv), prefix)
		lim, err := middleware.New(st, keyfunc.Constant("/reports"), store.Limit{Rate: 1000, Period: time.Minute},
			middleware.Options{Name: "reports", InFlight: limiter.InFlight{Max: capN}, Logger: quietLog})
		if err != nil {
			t.Fatal(err)
		}
		handlers[i] = lim.Handler(slow)
	}
	codes := make(chan int, requests)
	var wg sync.WaitGroup
	for i := range requests {
		wg.Go(func() {
			w := httptest.NewRecorder()
			handlers[i%instances].ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/reports", nil))
			codes <- w.Code
		})
	}
	for range capN {
		<-entered
	}
	refused := 0
	for refused < requests-capN {
		select {
		case c := <-codes:
			if c != http.StatusTooManyRequests {
				t.Fatalf("a refused request: got %d, want 429", c)
			}
			refused++
		case <-entered:
			t.Fatalf("a request beyond the cap of %d ran", capN)
		case <-time.After(30 * time.Second):
			t.Fatalf("got %d refusals, want %d", refused, requests-capN)
		}
	}
	close(release)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Errorf("a request that ran: got %d, want 200", c)
		}
	}
	if p := peak.Load(); p != capN {
		t.Errorf("peak concurrency: got %d, want %d", p, capN)
	}
	c := newClient(t, srv)
	if keys := inFlightKeys(keyTTLs(context.Background(), t, c, prefix)); len(keys) != 0 {
		t.Errorf("after every request returned: got cap keys %v, want none", keys)
	}
}

// TestInFlightCrashedHolder: an instance takes a slot of a cap of 1 and
// dies (its Redis client closes: no release, no renewal). Another
// instance is refused until the slot's lease (1s) ends, then admitted.
// While the slot is held, its key carries a TTL no longer than the lease.
func TestInFlightCrashedHolder(t *testing.T) {
	srv := sharedRedis(t)
	prefix := randomPrefix(t)
	opts := limiter.Options{Name: "p", InFlight: limiter.InFlight{Max: 1, Lease: time.Second}, Logger: quietLog}
	deadClient := newClient(t, srv)
	dead, err := limiter.New(newStore(t, deadClient, prefix), opts)
	if err != nil {
		t.Fatal(err)
	}
	live, err := limiter.New(newStore(t, newClient(t, srv), prefix), opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := limiter.Request{Identity: "alice"}
	if _, d, err := dead.Acquire(ctx, req); err != nil || !d.Allowed {
		t.Fatalf("the holder's Acquire: got %+v, %v", d, err)
	}
	took := time.Now()
	c := newClient(t, srv)
	keys := inFlightKeys(keyTTLs(ctx, t, c, prefix))
	if len(keys) != 1 {
		t.Fatalf("got cap keys %v, want one", keys)
	}
	for k, ttl := range keys {
		if ttl <= 0 || ttl > time.Second {
			t.Errorf("key %s: got TTL %s, want within the 1s lease", k, ttl)
		}
	}
	_ = deadClient.Close() // the instance dies holding its slot
	release, d, err := live.Acquire(ctx, req)
	if err != nil || d.Outcome != limiter.OutcomeInFlight || d.RetryAfter != time.Second {
		t.Fatalf("during the dead holder's lease: got %+v, %v; want in_flight, retry after 1s", d, err)
	}
	release()
	for {
		release, d, err = live.Acquire(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			release()
			break
		}
		if time.Since(took) > 3*time.Second {
			t.Fatalf("the dead holder's slot never came back: %+v", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if waited := time.Since(took); waited < 900*time.Millisecond {
		t.Errorf("the slot came back after %s, before its 1s lease ended", waited)
	}
}

// TestInFlightRenewal: a request that runs for 2.5 leases keeps its slot,
// because its instance renews it; another instance is refused while it
// runs and admitted as soon as it returns.
func TestInFlightRenewal(t *testing.T) {
	srv := sharedRedis(t)
	prefix := randomPrefix(t)
	opts := limiter.Options{Name: "p", InFlight: limiter.InFlight{Max: 1, Lease: time.Second}, Logger: quietLog}
	a, err := limiter.New(newStore(t, newClient(t, srv), prefix), opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := limiter.New(newStore(t, newClient(t, srv), prefix), opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := limiter.Request{Identity: "bob"}
	release, d, err := a.Acquire(ctx, req)
	if err != nil || !d.Allowed {
		t.Fatalf("a: got %+v, %v", d, err)
	}
	start := time.Now()
	for _, at := range []time.Duration{500 * time.Millisecond, 1500 * time.Millisecond, 2500 * time.Millisecond} {
		time.Sleep(time.Until(start.Add(at)))
		if _, d, _ := b.Acquire(ctx, req); d.Allowed {
			t.Fatalf("b while a runs (%s): got admitted, want refused", at)
		}
	}
	release()
	rb, d, err := b.Acquire(ctx, req)
	if err != nil || !d.Allowed {
		t.Fatalf("b after a returned: got %+v, %v; want admitted", d, err)
	}
	rb()
}

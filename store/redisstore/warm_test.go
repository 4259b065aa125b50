package redisstore

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/internal/redistest"
	"github.com/ratekeeper/ratekeeper/internal/testlog"
	"github.com/ratekeeper/ratekeeper/store"
)

// degradedCount sends n takes, one every gap, for keys spread over 64
// clients (redistest.OpenLoop), and returns how many failed, how late the
// takes started (p99) and the first error. A failed take is a decision
// the middleware would have made under its failure mode (failed open or
// closed) instead of by the limit.
func degradedCount(s store.Store, n int, gap time.Duration, round string) (int, time.Duration, error) {
	return redistest.OpenLoop(n, gap, func(i int) error {
		req := store.Request{Key: fmt.Sprintf("%s-%d", round, i%64), Limits: []store.Limit{store.PerSecond(1000)}}
		_, err := s.Take(context.Background(), req)
		return err
	})
}

// TestSlowRedisAtStart pins issue 19's slow Redis at connect time: every
// reply is delayed 30 ms against the 50 ms budget, so a decision that
// needs a second round trip (a connection's HELLO and CLIENT SETINFO, an
// EVALSHA answered NOSCRIPT and sent again as EVAL) cannot make it. The
// store opens its connections and loads its scripts before it serves, and
// keeps enough pipelines in flight that no call waits a round trip for
// one, so that of 500 takes in the first second (one every 2 ms) few
// degrade, and once warm none does (but for a loaded machine's delays).
func TestSlowRedisAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 800 takes through a proxy that delays every reply by 30 ms (about 2 s)")
	}
	for _, honoured := range []bool{false, true} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%t", honoured), func(t *testing.T) {
			testSlowRedisAtStart(t, honoured)
		})
	}
}

func testSlowRedisAtStart(t *testing.T, ctxDeadlines bool) {
	srv := privateServer(t) // its script cache is empty
	proxy := redistest.NewDelayProxy(t, srv.addr, 30*time.Millisecond)
	c := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: ctxDeadlines})
	t.Cleanup(func() { c.Close() })
	s, err := New(c, Options{Prefix: randomPrefix(t), Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	conns := proxy.Conns()
	t.Logf("after New: %d connections", conns)
	// The first second: 500 takes, 2 ms apart. Before the warm-up and
	// with 4 pipelines per node, 300 to 360 of them degraded here (the
	// issue measured 143), and 130 to 150 of the 300 once warm: calls
	// waited for one of the 4 pipelines in flight to come back. On a quiet
	// machine (the takes start within 2 ms of their schedule, p99) none
	// degraded once warm and at most 10 at the start; the bounds, 6 (2%)
	// and 25 (5%), leave room for the round trip itself to be late (the
	// race detector, other tests), still a twentieth of the old code's
	// counts (those figures with replies delayed 40 ms). Replies are
	// delayed 30 ms: two round trips still exceed the budget, and one
	// leaves 20 ms for Redis itself, which a slow machine running other
	// packages' tests beside this one needed (12 of 300 warm takes
	// degraded with 10 ms). On a loaded one the
	// budget's room beyond the reply is not always there: with 18
	// runnable threads on 2 cores we saw up to 85 and 35, so the bounds
	// are then 75 and 30, still a fourth and a sixth of the old code's;
	// when the takes start more than 10 ms late (p99), the counts are
	// only logged. What does not depend on timing is
	// asserted exactly: no script is sent with its source (the scripts
	// were loaded), and a connection is opened only to replace one whose
	// read a timed-out call cut, or the one held for lone calls.
	for _, round := range []struct {
		name          string
		n, quiet, max int
	}{{"first second", 500, 25, 75}, {"warm", 300, 6, 30}} {
		n, late, err := degradedCount(s, round.n, 2*time.Millisecond, round.name)
		opened := proxy.Conns() - conns
		conns += opened
		bound := redistest.Bound(late, round.quiet, round.max, round.n)
		t.Logf("%s: %d of %d degraded (first error: %v); %d connections opened; takes started up to %s late (p99), so at most %d may degrade",
			round.name, n, round.n, err, opened, late, bound)
		if n > bound {
			t.Errorf("%s: got %d of %d takes degraded, want at most %d (first error: %v)", round.name, n, round.n, bound, err)
		}
		// One more may replace the connection the store holds for lone
		// calls, which it takes from the pool (see lone) while the
		// first takes run.
		if opened > n+1 {
			t.Errorf("%s: got %d connections opened, want at most one beyond the %d degraded takes", round.name, opened, n)
		}
	}
	if n := proxy.Evals(); n > 0 {
		t.Errorf("got %d scripts sent as EVAL, want 0: the warm-up loads them", n)
	}
}

// scriptsLoaded reports how many of w's scripts c's server holds.
func scriptsLoaded(ctx context.Context, c *redis.Client, w *warmer) (int, error) {
	shas := make([]string, len(w.sources))
	for i, src := range w.sources {
		shas[i] = newScript(src).sha
	}
	exists, err := c.ScriptExists(ctx, shas...).Result()
	n := 0
	for _, e := range exists {
		if e {
			n++
		}
	}
	return n, err
}

// TestWarmUpLoadsScripts: New loads every built-in script on the server
// before it returns, and after SCRIPT FLUSH the first NOSCRIPT reply
// loads them all again in the background, not only the script of the
// call that met it (which is sent again as EVAL, as before). Without
// that, on a server slower than the budget allows for two round trips,
// every other script would pay EVALSHA, NOSCRIPT and EVAL on its first
// call, and a client that cuts I/O at the deadline would never see one
// answered.
func TestWarmUpLoadsScripts(t *testing.T) {
	srv := privateServer(t)
	ctx := context.Background()
	admin := newClient(t, srv, nil)
	s, err := newRedis(newClient(t, srv, nil), Options{Prefix: randomPrefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	want := len(s.pipes.warm.sources)
	if n, err := scriptsLoaded(ctx, admin, s.pipes.warm); err != nil || n != want {
		t.Fatalf("after New: got %d of %d scripts loaded (%v), want all", n, want, err)
	}
	if err := admin.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	req := store.Request{Key: "flushed", Limits: []store.Limit{store.PerSecond(10)}}
	if _, err := s.Take(ctx, req); err != nil {
		t.Fatalf("take after SCRIPT FLUSH: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := scriptsLoaded(ctx, admin, s.pipes.warm)
		if err == nil && n == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after SCRIPT FLUSH and a take: got %d of %d scripts loaded (%v), want all", n, want, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Negative WarmUp: New contacts nothing.
	if err := admin.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := newRedis(newClient(t, srv, nil), Options{WarmUp: -1}); err != nil {
		t.Fatal(err)
	}
	if n, err := scriptsLoaded(ctx, admin, s.pipes.warm); err != nil || n != 0 {
		t.Fatalf("after New with a negative WarmUp: got %d scripts loaded (%v), want 0", n, err)
	}
}

// TestWarmUpBounded: against a server that accepts connections and never
// answers, New returns once WarmUp has passed, with a store and no error,
// and says so in a warning, although the client (ContextTimeoutEnabled
// false, its default) waits its 3 s ReadTimeout whatever the context.
func TestWarmUpBounded(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // read nothing, answer nothing
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	c := redis.NewClient(&redis.Options{Addr: l.Addr().String()})
	t.Cleanup(func() { c.Close() })
	var logged testlog.Buffer
	const warmUp = 200 * time.Millisecond
	start := time.Now()
	s, err := New(c, Options{WarmUp: warmUp, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	elapsed := time.Since(start)
	if err != nil || s == nil {
		t.Fatalf("New against a silent server: got %v, %v, want a store", s, err)
	}
	if elapsed < warmUp || elapsed > warmUp+500*time.Millisecond {
		t.Fatalf("New against a silent server returned after %s, want about the %s WarmUp", elapsed, warmUp)
	}
	if !strings.Contains(logged.String(), "warming up") {
		t.Fatalf("log: got %q, want a warning about the warm-up", logged.String())
	}
}

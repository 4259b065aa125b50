package redisstore

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store"
)

// delayProxy forwards TCP to a Redis server and holds every chunk of
// reply for delay after it left the server: a server whose every answer
// takes delay longer, as one far away or overloaded. Replies keep their
// order, and a pipeline's replies are held once, not once each.
type delayProxy struct {
	l      net.Listener
	target string
	delay  time.Duration
	wg     sync.WaitGroup
	conns  atomic.Int32 // connections accepted
	evals  atomic.Int32 // EVAL commands (a script sent with its source)
}

func newDelayProxy(t *testing.T, target string, delay time.Duration) *delayProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &delayProxy{l: l, target: target, delay: delay}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		l.Close()
		p.wg.Wait()
	})
	return p
}

func (p *delayProxy) addr() string { return p.l.Addr().String() }

func (p *delayProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.conns.Add(1)
		go p.handle(c)
	}
}

// chunk is a piece of reply and when it left the server.
type chunk struct {
	b  []byte
	at time.Time
}

func (p *delayProxy) handle(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	closeBoth := func() { c.Close(); s.Close() }
	go func() { // requests pass at once
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				p.evals.Add(int32(bytes.Count(bytes.ToLower(buf[:n]), []byte("$4\r\neval\r\n"))))
				if _, werr := s.Write(buf[:n]); werr != nil {
					err = werr
				}
			}
			if err != nil {
				closeBoth()
				return
			}
		}
	}()
	replies := make(chan chunk, 1024)
	go func() { // replies wait out the delay, in order
		for r := range replies {
			time.Sleep(time.Until(r.at.Add(p.delay)))
			if _, err := c.Write(r.b); err != nil {
				closeBoth()
			}
		}
	}()
	defer close(replies)
	for {
		buf := make([]byte, 64<<10)
		n, err := s.Read(buf)
		if n > 0 {
			replies <- chunk{b: buf[:n], at: time.Now()}
		}
		if err != nil {
			closeBoth()
			return
		}
	}
}

// degradedCount sends n takes, one every gap (an open loop: each in its own
// goroutine, whatever the earlier ones wait for), for keys spread over 64
// clients, and returns how many failed and the first error. A failed take
// is a decision the middleware would have made under its failure mode
// (failed open or closed) instead of by the limit. late is the 99th
// percentile of how late the takes started against their schedule: how
// loaded the machine is.
func degradedCount(s store.Store, n int, gap time.Duration, round string) (failed int, late time.Duration, first error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	lateness := make([]time.Duration, n)
	start := time.Now()
	for i := range n {
		time.Sleep(time.Until(start.Add(time.Duration(i) * gap)))
		lateness[i] = time.Since(start.Add(time.Duration(i) * gap))
		wg.Go(func() {
			req := store.Request{Key: fmt.Sprintf("%s-%d", round, i%64), Limits: []store.Limit{store.PerSecond(1000)}}
			if _, err := s.Take(context.Background(), req); err != nil {
				mu.Lock()
				failed++
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(lateness)
	return failed, lateness[n*99/100], first
}

// TestSlowRedisAtStart pins issue 19's slow Redis at connect time: every
// reply is delayed 40 ms against the 50 ms budget, so a decision that
// needs a second round trip (a connection's HELLO and CLIENT SETINFO, an
// EVALSHA answered NOSCRIPT and sent again as EVAL) cannot make it. The
// store opens its connections and loads its scripts before it serves, and
// keeps enough pipelines in flight that no call waits a round trip for
// one, so that of 500 takes in the first second (one every 2 ms) few
// degrade, and once warm none does (but for a loaded machine's delays).
func TestSlowRedisAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 800 takes through a proxy that delays every reply by 40 ms (about 2 s)")
	}
	for _, honoured := range []bool{false, true} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%t", honoured), func(t *testing.T) {
			testSlowRedisAtStart(t, honoured)
		})
	}
}

func testSlowRedisAtStart(t *testing.T, ctxDeadlines bool) {
	srv := privateServer(t) // its script cache is empty
	proxy := newDelayProxy(t, srv.addr, 40*time.Millisecond)
	c := redis.NewClient(&redis.Options{Addr: proxy.addr(), ContextTimeoutEnabled: ctxDeadlines})
	t.Cleanup(func() { c.Close() })
	s, err := New(c, Options{Prefix: randomPrefix(t), Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	conns := proxy.conns.Load()
	t.Logf("after New: %d connections", conns)
	// The first second: 500 takes, 2 ms apart. Before the warm-up and
	// with 4 pipelines per node, 300 to 360 of them degraded here (the
	// issue measured 143), and 130 to 150 of the 300 once warm: calls
	// waited for one of the 4 pipelines in flight to come back. On a quiet
	// machine (the takes start within 2 ms of their schedule, p99) none
	// degrades once warm and at most 10 at the start. On a loaded one the
	// budget's 10 ms beyond the reply's 40 is not always there: with 18
	// runnable threads on 2 cores we saw up to 85 and 35, so the bounds
	// are then 75 and 30, still a fourth and a sixth of the old code's;
	// when the takes start more than 10 ms late (p99), the counts are
	// only logged. What does not depend on timing is
	// asserted exactly: no script is sent with its source (the scripts
	// were loaded), and a connection is opened only to replace one whose
	// read a timed-out call cut.
	for _, round := range []struct {
		name          string
		n, quiet, max int
	}{{"first second", 500, 10, 75}, {"warm", 300, 0, 30}} {
		n, late, err := degradedCount(s, round.n, 2*time.Millisecond, round.name)
		opened := proxy.conns.Load() - conns
		conns += opened
		bound := round.max
		switch {
		case late < 2*time.Millisecond:
			bound = round.quiet
		case late > 10*time.Millisecond:
			// The takes themselves ran a fifth of the budget late:
			// whether they degrade says more of the machine than of the
			// store.
			bound = round.n
		}
		t.Logf("%s: %d of %d degraded (first error: %v); %d connections opened; takes started up to %s late (p99), so at most %d may degrade",
			round.name, n, round.n, err, opened, late, bound)
		if n > bound {
			t.Errorf("%s: got %d of %d takes degraded, want at most %d (first error: %v)", round.name, n, round.n, bound, err)
		}
		if int(opened) > n {
			t.Errorf("%s: got %d connections opened, want none beyond the %d degraded takes", round.name, opened, n)
		}
	}
	if n := proxy.evals.Load(); n > 0 {
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

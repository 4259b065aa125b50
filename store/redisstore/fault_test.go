package redisstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/internal/redistest"
	"github.com/ratekeeper/ratekeeper/store"
)

// privateServer starts a redis-server for one test, stopped at its end.
func privateServer(t *testing.T) *server {
	t.Helper()
	s := redistest.Require(t)
	return &server{Server: s, addr: s.Addr}
}

// dropProxy forwards TCP to a Redis server and, while drops > 0, closes
// the connection instead of delivering the reply to a script call: the
// command ran, the client sees a broken connection and re-sends it. It
// delivers every reply delay (nanoseconds) late: a distant server.
type dropProxy struct {
	l      net.Listener
	target string
	drops  atomic.Int32
	delay  atomic.Int64
	wg     sync.WaitGroup
}

func newDropProxy(t *testing.T, target string) *dropProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{l: l, target: target}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		l.Close()
		p.wg.Wait()
	})
	return p
}

func (p *dropProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

func (p *dropProxy) handle(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	var armed atomic.Bool
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				if bytes.Contains(bytes.ToLower(buf[:n]), []byte("evalsha")) && p.drops.Add(-1) >= 0 {
					armed.Store(true)
				}
				if _, werr := s.Write(buf[:n]); werr != nil {
					err = werr
				}
			}
			if err != nil {
				s.Close()
				c.Close()
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			if armed.Load() {
				// The script ran; its reply is lost with the connection.
				c.Close()
				s.Close()
				return
			}
			time.Sleep(time.Duration(p.delay.Load()))
			if _, werr := c.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			c.Close()
			s.Close()
			return
		}
	}
}

// TestClientResendCountsOnce reproduces the go-redis trap: the reply of an
// admitted take is lost with its connection, and go-redis (MaxRetries 3,
// its default) would re-send the same EVALSHA, which Redis would run a
// second time. The store sends script calls with re-sends off, so the take
// fails once (its outcome is unknown) and is counted once. A plain EVALSHA
// through the same default client shows that the client does re-send.
func TestClientResendCountsOnce(t *testing.T) {
	srv := requireServer(t)
	ctx := context.Background()
	proxy := newDropProxy(t, srv.addr)
	direct := newClient(t, srv, nil)
	viaProxy := redis.NewClient(&redis.Options{Addr: proxy.l.Addr().String()})
	t.Cleanup(func() { viaProxy.Close() })
	prefix := randomPrefix(t)
	s, err := newRedis(viaProxy, Options{Prefix: prefix, Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, alg := range store.Algorithms {
		for v := range s.scripts.byAlgorithm[alg] {
			if err := direct.ScriptLoad(ctx, s.scripts.byAlgorithm[alg][v].src).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	req := store.Request{Key: "resend", Limits: []store.Limit{{Rate: 9, Period: time.Hour}}}
	proxy.drops.Store(1)
	_, err = s.Take(ctx, req)
	if proxy.drops.Load() > 0 {
		t.Fatalf("the proxy dropped no reply (take: %v)", err)
	}
	if err == nil || store.KindOf(err) != "connection" {
		t.Fatalf("take through a dropped reply: got %v, want a connection error", err)
	}
	check, err := newRedis(direct, Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	p, err := check.Peek(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	// 8 units left; the peek's own unit leaves 7.
	if p.Remaining != 7 {
		t.Fatalf("peek after the dropped take: got remaining %d, want 7 (counted once)", p.Remaining)
	}

	// The same client re-sends a plain script call: the counter runs twice.
	const incr = "return redis.call('INCR', KEYS[1])"
	sha, err := direct.ScriptLoad(ctx, incr).Result()
	if err != nil {
		t.Fatal(err)
	}
	key := prefix + ":resend-plain"
	proxy.drops.Store(1)
	if err := viaProxy.EvalSha(ctx, sha, []string{key}).Err(); err != nil {
		t.Fatalf("plain EVALSHA through a dropped reply: %v (the client did not re-send?)", err)
	}
	if n, err := direct.Get(ctx, key).Int64(); err != nil || n != 2 {
		t.Fatalf("plain EVALSHA: counter %d (%v), want 2: a default client re-sends", n, err)
	}
	direct.Del(ctx, key)
}

// TestTimeoutBound pauses Redis under a client that ignores context
// deadlines and reads for up to 3s: every call must still return a timeout
// error within the store's Timeout, the first sent through the connection
// the store holds for lone calls. So must it under a client that cuts
// socket I/O at context deadlines, which sends a lone call from the
// caller's goroutine.
func TestTimeoutBound(t *testing.T) {
	for _, honoured := range []bool{false, true} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%t", honoured), func(t *testing.T) {
			testTimeoutBound(t, honoured)
		})
	}
}

func testTimeoutBound(t *testing.T, ctxDeadlines bool) {
	const timeout = 100 * time.Millisecond
	const slack = 150 * time.Millisecond
	ctx := context.Background()
	req := store.Request{Key: "paused", Limits: []store.Limit{{Rate: 10, Period: time.Hour}}}
	newPaused := func(t *testing.T, srv *server) *redisStore {
		t.Helper()
		c := newClient(t, srv, &redis.Options{ContextTimeoutEnabled: ctxDeadlines, ReadTimeout: 3 * time.Second})
		s, err := newRedis(c, Options{Timeout: timeout, Prefix: randomPrefix(t)})
		if err != nil {
			t.Fatal(err)
		}
		if !ctxDeadlines {
			// The first call is then sent through the held connection,
			// whose socket deadlines the store caps (see lone).
			waitLone(t, s)
		}
		// Connect and load the scripts while the server answers.
		if _, err := s.Peek(ctx, req); err != nil {
			t.Fatal(err)
		}
		return s
	}
	expectTimeout := func(t *testing.T, s *redisStore) {
		t.Helper()
		calls := map[string]func(context.Context) error{
			"take":  func(ctx context.Context) error { _, err := s.Take(ctx, req); return err },
			"peek":  func(ctx context.Context) error { _, err := s.Peek(ctx, req); return err },
			"reset": func(ctx context.Context) error { return s.Reset(ctx, req) },
			// A listing's SCAN cannot travel in a pipeline; it has
			// the same budget.
			"blocks": func(ctx context.Context) error { _, _, err := s.Blocks(ctx, "", "", 100); return err },
		}
		for op, call := range calls {
			start := time.Now()
			err := call(ctx)
			elapsed := time.Since(start)
			var be *store.BackendError
			if !errors.As(err, &be) || be.Kind != "timeout" || be.Op != op {
				t.Fatalf("%s: got %v, want a %s BackendError of kind timeout", op, err, op)
			}
			if elapsed > timeout+slack {
				t.Fatalf("%s: returned after %s, want within %s", op, elapsed, timeout+slack)
			}
			// A shorter caller deadline wins.
			short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			start = time.Now()
			err = call(short)
			cancel()
			if elapsed := time.Since(start); elapsed > 20*time.Millisecond+slack || store.KindOf(err) != "timeout" {
				t.Fatalf("%s with a 20ms deadline: got %v after %s", op, err, elapsed)
			}
		}
		// The first call went through the held connection, and its
		// timeout let go of it; no other can be found while Redis
		// does not answer.
		if !ctxDeadlines && s.pipes.lone.cur.Load() != nil {
			t.Fatal("the connection held for lone calls is still held after a call through it timed out")
		}
	}
	t.Run("client pause", func(t *testing.T) {
		srv := privateServer(t)
		s := newPaused(t, srv)
		admin := newClient(t, srv, nil)
		if err := admin.Do(ctx, "CLIENT", "PAUSE", 2000, "ALL").Err(); err != nil {
			t.Fatal(err)
		}
		expectTimeout(t, s)
		// The paused take runs once Redis resumes: recorded once, never twice.
		var d store.Decision
		var err error
		deadline := time.Now().Add(5 * time.Second)
		for {
			d, err = s.Peek(ctx, req)
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		// Two takes were sent during the pause (one with a short deadline),
		// and a reset after the first: at most two units are counted.
		if d.Remaining < 7 {
			t.Fatalf("after the pause: got remaining %d, want >= 7", d.Remaining)
		}
	})
	t.Run("process stopped", func(t *testing.T) {
		srv := privateServer(t)
		s := newPaused(t, srv)
		if err := srv.Pause(); err != nil {
			t.Fatal(err)
		}
		defer srv.Resume()
		expectTimeout(t, s)
	})
}

// TestRefusedConnectionIsAConnectionError: against a port where nothing
// listens, go-redis (default options) keeps retrying the dial for longer
// than the budget; the call still reports a connection error, not a
// timeout, so that logs and metrics say what happened, and returns within
// the budget. Likewise for a client that honours context deadlines, whose
// lone calls are sent from the caller's goroutine.
func TestRefusedConnectionIsAConnectionError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	for _, honoured := range []bool{false, true} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%t", honoured), func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: honoured})
			t.Cleanup(func() { c.Close() })
			s, err := newRedis(c, Options{})
			if err != nil {
				t.Fatal(err)
			}
			req := store.Request{Key: "k", Limits: []store.Limit{store.PerSecond(1)}}
			for i := range 5 {
				start := time.Now()
				_, err := s.Take(context.Background(), req)
				if kind := store.KindOf(err); kind != "connection" {
					t.Fatalf("take %d: got %v (kind %s), want a connection error", i, err, kind)
				}
				if elapsed := time.Since(start); elapsed > defaultTimeout+150*time.Millisecond {
					t.Fatalf("take %d: returned after %s, want within the %s budget", i, elapsed, defaultTimeout)
				}
			}
		})
	}
}

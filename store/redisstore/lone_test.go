package redisstore

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
	"weak"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store"
)

// waitLone waits until s holds a connection for lone calls (see lone),
// and returns it.
func waitLone(t testing.TB, s *redisStore) *loneConn {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if lc := s.pipes.lone.take(); lc != nil {
			s.pipes.lone.release()
			return lc
		}
		if time.Now().After(deadline) {
			t.Fatal("the store holds no connection for lone calls after 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLoneSenderOfPlainClients: a plain client gets a lone sender, whether
// or not it cuts socket I/O at context deadlines; a Cluster or a Ring
// client does not (the first sends lone calls itself when it cuts socket
// I/O, and queues them otherwise, as the second).
func TestLoneSenderOfPlainClients(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client redis.UniversalClient
		want   bool
	}{
		{"default client", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), true},
		{"ContextTimeoutEnabled", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true}), true},
		{"ring", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}}), false},
	} {
		t.Cleanup(func() { tc.client.Close() })
		p := newPipes(tc.client, 128, time.Second)
		if got := p.lone != nil; got != tc.want {
			t.Errorf("%s: lone sender %t, want %t", tc.name, got, tc.want)
		}
	}
}

// TestLoneCallCappedWithoutClientDeadlines: through a client that sets no
// socket deadline at all (ReadTimeout and WriteTimeout -2) and against a
// paused server, a lone call sent through the held connection still ends
// at its budget, as a timeout; the connection is let go of, and once the
// server answers again another is held and lone calls go on through it.
// Both ways go-redis can be told to set no deadline are tried: -1 (it
// sets none) and -2 (it never calls SetReadDeadline).
func TestLoneCallCappedWithoutClientDeadlines(t *testing.T) {
	srv := privateServer(t)
	ctx := context.Background()
	for _, rt := range []time.Duration{-1, -2} {
		c := newClient(t, srv, &redis.Options{ReadTimeout: rt, WriteTimeout: rt})
		s, err := newRedis(c, Options{Prefix: randomPrefix(t), Timeout: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		req := store.Request{Key: "capped", Limits: []store.Limit{{Rate: 10, Period: time.Hour}}}
		first := waitLone(t, s)
		if _, err := s.Take(ctx, req); err != nil {
			t.Fatal(err)
		}
		admin := newClient(t, srv, nil)
		if err := admin.Do(ctx, "CLIENT", "PAUSE", 1500, "ALL").Err(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = s.Take(ctx, req)
		elapsed := time.Since(start)
		if store.KindOf(err) != "timeout" || elapsed > 100*time.Millisecond+150*time.Millisecond {
			t.Fatalf("timeouts %s: lone take against a paused server: got %v after %s, want a timeout within the 100ms budget", rt, err, elapsed)
		}
		if s.pipes.lone.cur.Load() == first {
			t.Fatalf("timeouts %s: the held connection is still held after a call through it timed out", rt)
		}
		// After the pause a new connection is held, and lone calls go on
		// exactly: the timed-out take counts at most once (Redis drops
		// the command of a client that left while it was paused).
		next := waitLone(t, s)
		if next == first {
			t.Fatalf("timeouts %s: the same connection is held again", rt)
		}
		d, err := s.Take(ctx, req)
		if err != nil || !d.Allowed || d.Remaining < 7 || d.Remaining > 8 {
			t.Fatalf("timeouts %s: take after the pause: got %+v, %v; want admitted with 7 or 8 remaining (the paused take counted at most once)", rt, d, err)
		}
		if s.pipes.lone.cur.Load() != next {
			t.Fatalf("timeouts %s: a take through the new held connection let go of it", rt)
		}
	}
}

// TestLoneConnClosedByServer: when the server closes the held connection
// (a restart, its idle timeout, CLIENT KILL), the next lone call finds it
// closed before sending, is sent through the client's pool instead and
// succeeds, and another connection is held for the calls after it.
func TestLoneConnClosedByServer(t *testing.T) {
	srv := requireServer(t)
	ctx := context.Background()
	c := newClient(t, srv, nil)
	s, err := newRedis(c, Options{Prefix: randomPrefix(t), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	first := waitLone(t, s)
	id, err := first.conn.ClientID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	admin := newClient(t, srv, nil)
	if err := admin.ClientKillByFilter(ctx, "ID", strconv.FormatInt(id, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the FIN reaches the client's socket
	req := store.Request{Key: "killed", Limits: []store.Limit{{Rate: 10, Period: time.Hour}}}
	for i := range 3 {
		if d, err := s.Take(ctx, req); err != nil || !d.Allowed {
			t.Fatalf("take %d after the held connection was killed: got %+v, %v; want admitted", i, d, err)
		}
	}
	if next := waitLone(t, s); next == first {
		t.Fatal("the killed connection is still held")
	}
}

// held reports whether s holds a connection for lone calls, ready.
func held(s *redisStore) bool {
	if s.pipes.lone.take() == nil {
		return false
	}
	s.pipes.lone.release()
	return true
}

// TestLoneConnPastOlderConnections: connections the client opened before
// the store was made are not wrapped (the store's dial hook came later);
// the store closes those it tries, so that the pool opens wrapped ones,
// and holds one of them, however many older ones were idle. The client
// goes on working.
func TestLoneConnPastOlderConnections(t *testing.T) {
	srv := requireServer(t)
	ctx := context.Background()
	const older = 24
	c := newClient(t, srv, &redis.Options{PoolSize: older + 8})
	var conns []*redis.Conn
	for range older {
		conn := c.Conn()
		if err := conn.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
	}
	for _, conn := range conns {
		conn.Close()
	}
	if idle := c.PoolStats().IdleConns; idle != older {
		t.Fatalf("pool: %d idle connections before the store, want %d", idle, older)
	}
	s, err := newRedis(c, Options{Prefix: randomPrefix(t), Timeout: time.Second, WarmUp: -1})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !held(s) {
		if time.Now().After(deadline) {
			t.Fatalf("no connection held after 10s; pool %+v", *c.PoolStats())
		}
		time.Sleep(20 * time.Millisecond)
		s.pipes.lone.nextAt.Store(0) // search again at once
	}
	for i := range 20 {
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatalf("the client's own ping %d: %v", i, err)
		}
	}
}

// TestLoneConnSharedByStoresOfAClient: the stores on one client share
// one held connection, so that a client lends one whatever the number of
// its stores (a policy reload makes new ones): 40 stores on a client of 8
// connections all decide, lone and at once, exactly; the client's
// connections are wrapped once, whatever the number of stores.
func TestLoneConnSharedByStoresOfAClient(t *testing.T) {
	srv := requireServer(t)
	ctx := context.Background()
	c := newClient(t, srv, &redis.Options{PoolSize: 8})
	var stores []*redisStore
	prefix := randomPrefix(t)
	for range 40 {
		s, err := newRedis(c, Options{Prefix: prefix, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	first := waitLone(t, stores[0])
	if _, ok := first.sock.Conn.(*capConn); ok {
		t.Fatal("the held connection's socket is wrapped twice")
	}
	if _, ok := first.sock.Conn.(sysCapConn); ok {
		t.Fatal("the held connection's socket is wrapped twice")
	}
	req := store.Request{Key: "shared", Limits: []store.Limit{{Rate: 100, Period: time.Hour}}}
	for i, s := range stores { // lone, one after the other
		if got := waitLone(t, s); got != first {
			t.Fatalf("store %d holds a connection of its own", i)
		}
		if _, err := s.Take(ctx, req); err != nil {
			t.Fatalf("store %d: lone take: %v", i, err)
		}
	}
	var wg sync.WaitGroup
	for _, s := range stores { // at once
		wg.Go(func() {
			if _, err := s.Take(ctx, req); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	d, err := stores[0].Peek(ctx, req)
	if err != nil || d.Remaining != 19 {
		t.Fatalf("after 80 takes through 40 stores of one prefix: got %+v, %v; want 19 remaining", d, err)
	}
	if st := c.PoolStats(); st.Timeouts != 0 {
		t.Fatalf("pool: %d waits for a connection timed out", st.Timeouts)
	}
}

// TestCapConn: a wrapped connection caps every deadline at its limit while
// one is set, leaves them alone otherwise, and passes syscall.Conn through
// when its socket has it.
func TestCapConn(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			defer c.Close()
			time.Sleep(2 * time.Second)
		}
	}()
	raw, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	conn, c := wrapConn(raw)
	defer conn.Close()
	if _, ok := conn.(syscall.Conn); !ok {
		t.Fatal("a wrapped TCP connection does not implement syscall.Conn")
	}
	if again, c2 := wrapConn(conn); again != conn || c2 != c {
		t.Fatal("a wrapped connection was wrapped again")
	}
	if _, ok := net.Conn(&capConn{Conn: raw}).(syscall.Conn); ok {
		t.Fatal("capConn itself implements syscall.Conn: a socket without it would claim it")
	}
	limit := time.Now().Add(50 * time.Millisecond)
	c.limit.Store(limit.UnixNano())
	if err := conn.SetReadDeadline(time.Time{}); err != nil { // "none" becomes the limit
		t.Fatal(err)
	}
	start := time.Now()
	_, err = conn.Read(make([]byte, 1))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || time.Since(start) > time.Second {
		t.Fatalf("read past the limit: got %v after %s, want a timeout at about 50ms", err, time.Since(start))
	}
	c.limit.Store(0)
	if got := c.capped(time.Time{}); !got.IsZero() {
		t.Fatalf("without a limit: capped(none) = %s, want none", got)
	}
	if open, _ := alive(c); !open {
		t.Fatal("an open idle socket is not alive")
	}
	c.Close()
	if !c.closed.Load() {
		t.Fatal("Close did not mark the connection closed")
	}
}

// TestLoneConnOutlivesItsCalls: the held connection serves lone call after
// lone call, each past the one before's deadline (a deadline left on its
// socket does not make it look closed).
func TestLoneConnOutlivesItsCalls(t *testing.T) {
	srv := requireServer(t)
	ctx := context.Background()
	c := newClient(t, srv, nil)
	h := &callerHook{}
	c.AddHook(h)
	s, err := newRedis(c, Options{Prefix: randomPrefix(t), Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	held := waitLone(t, s)
	req := store.Request{Key: "idle", Limits: []store.Limit{{Rate: 10, Period: time.Hour}}}
	for i := range 4 {
		if _, err := s.Take(ctx, req); err != nil {
			t.Fatalf("take %d: %v", i, err)
		}
		if s.pipes.lone.cur.Load() != held {
			t.Fatalf("take %d: the held connection was let go of", i)
		}
		time.Sleep(70 * time.Millisecond) // past the take's deadline
	}
	if d, q := h.direct.Load(), h.queued.Load(); d != 4 || q != 0 {
		t.Fatalf("4 lone takes: %d sent by the caller, %d by a flusher; want all 4 by the caller", d, q)
	}
}

// TestSpinGate: a held connection's lone calls poll while their polls
// catch their replies; after a run of misses (a server farther than the
// window) only one call in spinProbe polls, and polling comes back once
// those probes catch their replies again. No window means no polling.
func TestSpinGate(t *testing.T) {
	const w = 100 * time.Microsecond
	ls := &loneSender{}
	ls.hits.Store(spinScale)
	if got := ls.spinFor(0); got != 0 {
		t.Fatalf("without a window: spinFor = %s, want 0", got)
	}
	for i := range 3 {
		if got := ls.spinFor(w); got != w {
			t.Fatalf("call %d, polls catching: spinFor = %s, want %s", i, got, w)
		}
		ls.spun(true)
	}
	misses := 0
	for ls.spinFor(w) == w {
		ls.spun(false)
		if misses++; misses > 20 {
			t.Fatal("still polling after 20 misses in a row")
		}
	}
	if misses < 3 {
		t.Fatalf("polling stopped after %d misses; a miss or two in a run of catches must not stop it", misses)
	}
	polled := 0
	for range 10 * spinProbe {
		if ls.spinFor(w) == w {
			polled++
			ls.spun(false)
		}
	}
	if polled < 9 || polled > 11 {
		t.Fatalf("with replies beyond the window: %d of %d calls polled, want one in %d", polled, 10*spinProbe, spinProbe)
	}
	probes := 0
	for ls.hits.Load() < spinKeep {
		if ls.spinFor(w) == w {
			ls.spun(true)
			if probes++; probes > 8 {
				t.Fatal("polling did not come back after 8 probes that caught their replies")
			}
		}
	}
	for i := range 3 {
		if got := ls.spinFor(w); got != w {
			t.Fatalf("call %d after %d probes caught their replies: spinFor = %s, want %s", i, probes, got, w)
		}
		ls.spun(true)
	}
}

// TestLonePollWithinBudget: a lone take polling with a window far longer
// than its budget, against a paused server, still times out within the
// budget.
func TestLonePollWithinBudget(t *testing.T) {
	srv := privateServer(t)
	ctx := context.Background()
	c := newClient(t, srv, nil)
	s, err := newRedis(c, Options{Prefix: randomPrefix(t), Timeout: 100 * time.Millisecond, LoneSpin: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	req := store.Request{Key: "paused", Limits: []store.Limit{{Rate: 10, Period: time.Hour}}}
	waitLone(t, s)
	if _, err := s.Take(ctx, req); err != nil {
		t.Fatal(err)
	}
	admin := newClient(t, srv, nil)
	if err := admin.Do(ctx, "CLIENT", "PAUSE", 1000, "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = s.Take(ctx, req)
	if elapsed := time.Since(start); store.KindOf(err) != "timeout" || elapsed > 250*time.Millisecond {
		t.Fatalf("lone take polling against a paused server: got %v after %s, want a timeout within the 100ms budget", err, elapsed)
	}
}

// TestBatcherBusy: a lone call's caller polls on while it is the node's
// only sender and nothing is queued; another sender, or a queued call,
// makes the node busy.
func TestBatcherBusy(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { c.Close() })
	b := newPipes(c, 128, time.Second).one
	if !b.enter() {
		t.Fatal("an idle batcher refused the lone caller's slot")
	}
	if b.busyFn() {
		t.Fatal("busy with only the lone caller sending")
	}
	b.flushers.Add(1)
	if !b.busyFn() {
		t.Fatal("not busy with another sender")
	}
	b.flushers.Add(-1)
	b.head.Store(&call{})
	if !b.busyFn() {
		t.Fatal("not busy with a call queued")
	}
	b.head.Store(nil)
}

// TestLoneSenderGoesWithItsClient: a client that held a connection for
// lone calls, closed and dropped, is collected, and its lone sender with
// it; the held connection, which carries a copy of the client's hooks, no
// longer keeps the store and its client.
func TestLoneSenderGoesWithItsClient(t *testing.T) {
	srv := requireServer(t)
	const n = 8
	clients := make([]*redis.Client, n)
	keys := make([]weak.Pointer[redis.Client], n)
	for i := range clients {
		clients[i] = redis.NewClient(&redis.Options{Addr: srv.addr})
		keys[i] = weak.Make(clients[i])
		s, err := newRedis(clients[i], Options{Prefix: randomPrefix(t)})
		if err != nil {
			t.Fatal(err)
		}
		waitLone(t, s)
		if _, err := s.Take(context.Background(), store.Request{Key: "k", Limits: []store.Limit{store.PerMinute(10)}}); err != nil {
			t.Fatal(err)
		}
	}
	left := func() int {
		m := 0
		for _, k := range keys {
			if _, ok := loneSenders.Load(k); ok {
				m++
			}
		}
		return m
	}
	if got := left(); got != n {
		t.Fatalf("%d of %d clients have a lone sender, want all", got, n)
	}
	for i, c := range clients {
		_ = c.Close()
		clients[i] = nil
	}
	deadline := time.Now().Add(5 * time.Second)
	for left() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d lone senders of closed and dropped clients remain after 5s", left())
		}
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
}

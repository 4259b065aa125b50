//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd || solaris || illumos

package redisstore

import (
	"context"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store"
)

// TestPoll: poll returns data already waiting and data that comes within
// its time; it gives up when that time passes first, when it is told the
// process is busy, or at once when the socket's deadline has passed, so
// that the caller sleeps in an ordinary read instead; and it reports a
// closed peer as io.EOF.
func TestPoll(t *testing.T) {
	conn, peer := tcpPair(t)
	raw, err := conn.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	pl := newPoller(raw)
	buf := make([]byte, 16)

	start := time.Now()
	n, ok, err := pl.poll(buf, start.Add(20*time.Millisecond), nil)
	if ok || err != nil || time.Since(start) < 20*time.Millisecond {
		t.Fatalf("nothing sent: poll = %d, %t, %v after %s; want to give up after 20ms", n, ok, err, time.Since(start))
	}
	if _, err := peer.Write([]byte("+PONG\r\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if n, ok, err := pl.poll(buf, time.Now(), nil); !ok || err != nil || string(buf[:n]) != "+PONG\r\n" {
		t.Fatalf("data waiting: poll = %q, %t, %v; want it read, even with no time left", buf[:n], ok, err)
	}
	go func() {
		time.Sleep(5 * time.Millisecond)
		peer.Write([]byte(":1\r\n"))
	}()
	if n, ok, err := pl.poll(buf, time.Now().Add(5*time.Second), nil); !ok || err != nil || string(buf[:n]) != ":1\r\n" {
		t.Fatalf("data sent within the time: poll = %q, %t, %v; want it read", buf[:n], ok, err)
	}
	start = time.Now()
	busy := func() bool { return time.Since(start) > 10*time.Millisecond }
	if n, ok, err := pl.poll(buf, start.Add(5*time.Second), busy); ok || err != nil || time.Since(start) > time.Second {
		t.Fatalf("busy after 10ms: poll = %d, %t, %v after %s; want to give up then", n, ok, err, time.Since(start))
	}
	if err := conn.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if n, ok, err := pl.poll(buf, start.Add(5*time.Second), nil); ok || err != nil || time.Since(start) > time.Second {
		t.Fatalf("deadline passed: poll = %d, %t, %v after %s; want to give up at once", n, ok, err, time.Since(start))
	}
	if err := conn.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	peer.Close()
	if n, ok, err := pl.poll(buf, time.Now().Add(5*time.Second), nil); !ok || err != io.EOF || n != 0 {
		t.Fatalf("peer closed: poll = %d, %t, %v; want io.EOF", n, ok, err)
	}
}

// TestLonePolls: lone takes through the held connection poll for their
// replies and decide exactly, through a default client and through one
// with ContextTimeoutEnabled; through a server farther than the window
// (a proxy that delivers each reply 2ms late) the store soon polls only
// one call in spinProbe, and one with a negative LoneSpin never polls.
func TestLonePolls(t *testing.T) {
	srv := requireServer(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		ctxTO bool
		spin  time.Duration
	}{
		{"default client", false, 50 * time.Millisecond},
		{"ContextTimeoutEnabled", true, 50 * time.Millisecond},
		{"distant server", false, 200 * time.Microsecond},
		{"never", false, -1},
	} {
		c := newClient(t, srv, &redis.Options{ContextTimeoutEnabled: tc.ctxTO})
		if tc.name == "distant server" {
			p := newDropProxy(t, srv.addr)
			p.delay.Store(int64(2 * time.Millisecond))
			c = redis.NewClient(&redis.Options{Addr: p.l.Addr().String()})
			t.Cleanup(func() { c.Close() })
		}
		s, err := newRedis(c, Options{Prefix: randomPrefix(t), Timeout: time.Second, LoneSpin: tc.spin})
		if err != nil {
			t.Fatal(err)
		}
		lc := waitLone(t, s)
		ls := s.pipes.lone
		var reads atomic.Int64
		lc.sock.onPoll = func() { reads.Add(1) }
		const n = 64
		req := store.Request{Key: "polled", Limits: []store.Limit{{Rate: n, Period: time.Hour}}}
		for i := range n {
			d, err := s.Take(ctx, req)
			if err != nil || !d.Allowed || d.Remaining != int64(n-1-i) {
				t.Fatalf("%s: take %d: got %+v, %v; want admitted with %d remaining", tc.name, i, d, err, n-1-i)
			}
		}
		if d, err := s.Take(ctx, req); err != nil || d.Allowed {
			t.Fatalf("%s: take past the limit: got %+v, %v; want refused", tc.name, d, err)
		}
		if s.pipes.lone.cur.Load() != lc {
			t.Fatalf("%s: the held connection was let go of", tc.name)
		}
		got := reads.Load()
		switch tc.spin {
		case 50 * time.Millisecond:
			if got < n || ls.hits.Load() < spinKeep {
				t.Fatalf("%s: %d polled reads for %d takes (hits %d); want every take polled, catching its reply", tc.name, got, n+1, ls.hits.Load())
			}
		case 200 * time.Microsecond:
			if got < 3 || got > 3+n/spinProbe+6 || ls.hits.Load() >= spinKeep {
				t.Fatalf("%s: %d polled reads for %d takes (hits %d); want a few, then one take in %d", tc.name, got, n+1, ls.hits.Load(), spinProbe)
			}
		default:
			if got != 0 {
				t.Fatalf("%s: %d polled reads; want none", tc.name, got)
			}
		}
	}
}

// tcpPair returns the two ends of a loopback TCP connection, closed when
// the test ends.
func tcpPair(t *testing.T) (conn, peer net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	peers := make(chan net.Conn, 1)
	go func() {
		if c, err := l.Accept(); err == nil {
			peers <- c
		}
		close(peers)
	}()
	conn, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	peer, ok := <-peers
	if !ok {
		t.Fatal("the listener accepted no connection")
	}
	t.Cleanup(func() { peer.Close() })
	return conn, peer
}

// TestAliveQuiet: alive finds an open socket with nothing to read empty,
// one with data waiting open but not empty, and a closed one not open;
// while its connection is quiet, a wrapped socket's SyscallConn gives a
// raw connection whose Read looks at nothing, and the socket's own
// otherwise.
func TestAliveQuiet(t *testing.T) {
	tcp, peer := tcpPair(t)
	conn, c := wrapConn(tcp)

	looked := func() bool {
		raw, err := conn.(syscall.Conn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		called := false
		if err := raw.Read(func(uintptr) bool { called = true; return true }); err != nil {
			t.Fatal(err)
		}
		return called
	}
	if open, empty := alive(c); !open || !empty {
		t.Fatalf("an open idle socket: alive = %t, %t; want open and empty", open, empty)
	}
	if !looked() {
		t.Fatal("a socket not quiet: its raw connection's Read did not call its function")
	}
	c.quiet.Store(true)
	if looked() {
		t.Fatal("a quiet socket: its raw connection's Read called its function")
	}
	c.quiet.Store(false)
	if !looked() {
		t.Fatal("a socket quiet no more: its raw connection's Read did not call its function")
	}

	if _, err := peer.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		open, empty := alive(c)
		if !open {
			t.Fatal("a socket with data waiting: alive reports it closed")
		}
		if !empty {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a socket with data waiting: alive still finds it empty after 5s")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := io.ReadFull(conn, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	peer.Close()
	for {
		if open, _ := alive(c); !open {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a socket its peer closed: alive still finds it open after 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLoneQuietPeeks: go-redis peeks at a connection held out of its pool
// for push notifications before each command and as the command lets the
// connection go, once the connection was last put in the pool over five
// seconds ago. Through the held connection, with nothing to read, those
// peeks look at nothing (alive has just looked), and the connection is
// quiet only during its calls. A push notification that waits on it
// (an invalidation of client tracking) makes the next call's peeks real:
// go-redis reads the notification and the call is decided as any other.
func TestLoneQuietPeeks(t *testing.T) {
	srv := requireServer(t)
	ctx := context.Background()
	c := newClient(t, srv, nil) // RESP3, go-redis's default
	s, err := newRedis(c, Options{Prefix: randomPrefix(t), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	lc := waitLone(t, s)
	var hushed atomic.Int64
	lc.sock.hush.onRead = func() { hushed.Add(1) }
	// go-redis skips its peek for five seconds after the connection was
	// last put in its pool, which was before the store took it.
	time.Sleep(5200 * time.Millisecond)

	const n = 20
	req := store.Request{Key: "quiet", Limits: []store.Limit{{Rate: 2 * n, Period: time.Hour}}}
	taken := 0
	take := func(what string) {
		t.Helper()
		taken++
		d, err := s.Take(ctx, req)
		if err != nil || !d.Allowed || d.Remaining != int64(2*n-taken) {
			t.Fatalf("%s: take %d: got %+v, %v; want admitted with %d remaining", what, taken, d, err, 2*n-taken)
		}
		if lc.sock.quiet.Load() {
			t.Fatalf("%s: take %d: the held connection is still quiet after its call", what, taken)
		}
		if s.pipes.lone.cur.Load() != lc {
			t.Fatalf("%s: take %d: the held connection was let go of", what, taken)
		}
	}
	for range n {
		take("quiet")
	}
	if got := hushed.Load(); got < n {
		t.Fatalf("%d peeks of go-redis looked at nothing in %d lone calls; want at least one per call", got, n)
	}

	// Client tracking in broadcast mode sends the held connection an
	// invalidation for every key of the prefix that another client sets.
	if err := lc.conn.Do(ctx, "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "quietpush:").Err(); err != nil {
		t.Fatal(err)
	}
	admin := newClient(t, srv, nil)
	for i := range 3 {
		if err := admin.Set(ctx, "quietpush:"+strconv.Itoa(i), i, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			if open, empty := alive(lc.sock); !open {
				t.Fatal("the held connection was closed")
			} else if !empty {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no invalidation reached the held connection within 5s")
			}
			time.Sleep(time.Millisecond)
		}
		before := hushed.Load()
		take("a notification waiting")
		if got := hushed.Load() - before; got != 0 {
			t.Fatalf("a call with a notification waiting: %d of go-redis's peeks looked at nothing; want none", got)
		}
		if open, empty := alive(lc.sock); !open || !empty {
			t.Fatalf("after the call: alive = %t, %t; want the notification read, nothing left", open, empty)
		}
		before = hushed.Load()
		take("quiet again")
		if hushed.Load() == before {
			t.Fatal("the call after the notification was read: every peek of go-redis looked")
		}
	}

	// A connection let go of goes back to the pool, whose own peeks must
	// look: it is never quiet then, even if let go of by a take whose
	// call never came (as a test's).
	lc.sock.quiet.Store(true)
	s.pipes.lone.drop(lc)
	if lc.sock.quiet.Load() {
		t.Fatal("a connection let go of is still quiet")
	}
}

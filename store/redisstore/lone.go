package redisstore

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"weak"

	"github.com/redis/go-redis/v9"
)

// A lone call is one made while nothing is queued or in flight for its
// node. Sent from its caller's goroutine it costs the round trip alone;
// handed to a sending goroutine it also costs waking that goroutine and
// then the caller, a quarter of a lone decision's time on a machine of
// few cores. A client with ContextTimeoutEnabled cuts socket I/O at the
// call's deadline, so the caller may send through it (see batcher.direct).
// go-redis's default client does not: it bounds a read by its ReadTimeout
// (3 s) whatever the context says, and a caller that sent through it would
// wait that long on a stalled server.
//
// Through a plain client (not a Cluster or a Ring), with or without
// ContextTimeoutEnabled, the store sends lone calls through a
// connection of its own, which also lets a call poll its socket for the
// reply instead of sleeping (see poll, spinFor), taken from
// the client's pool with Conn (so the client's hooks see its commands),
// whose socket deadlines it caps at each call's deadline. It finds that
// connection's socket by a nonce: every connection the client opens after
// the store was made is wrapped (capConn, by the store's dial hook), and
// the wrapper whose Write carries the nonce of an ECHO sent through the
// held connection is its socket. Until one is found (a connection opened
// before the store, the server down), and after the held connection fails,
// lone calls are sent or queued as through a Cluster client, and another
// is sought in the background. A connection tried that is not a wrapped
// one was opened before the first store on the client: it is closed, so
// that the pool opens a wrapped one in its place.

// loneRetry is how soon after a search for a held connection that failed
// or found none the next may start; loneTries is how many connections one
// search tries at most. A connection opened before the store (before any
// store on the client) is not wrapped: it is closed, not given back, so
// that the pool opens a wrapped one in its place.
const (
	loneRetry = time.Second
	loneTries = 16
	// loneProbeTimeout bounds the wait for a pooled connection in a
	// search (its I/O runs in the background, bounded by the client's own
	// timeouts).
	loneProbeTimeout = 5 * time.Second
)

// The search in progress, of any store: a wrapper reports the nonce it
// writes here, so that connections are wrapped once whatever the number
// of stores on their client; searches take turns.
var (
	searchTurn sync.Mutex
	searching  atomic.Pointer[nonceProbe]
)

// capConn is a connection of a client that does not cut socket I/O at
// context deadlines, as the store's dial hook opened it (see lone).
type capConn struct {
	net.Conn
	// limit is the unix nanos no deadline of this socket may pass (the
	// deadline of the lone call being sent through it), or 0.
	limit  atomic.Int64
	closed atomic.Bool
	// spin is how long, in nanoseconds, a read of the lone call in flight
	// may poll the socket before it sleeps (see poll); 0 when none may.
	spin atomic.Int64
	// missed is set when a poll's window passed before its data came.
	missed atomic.Bool
	// busy reports, for the call in flight, that other calls wait behind
	// it (see startSpin).
	busy func() bool
	// quiet is set while a lone call is sent through the connection after
	// alive found its socket open with nothing to read; hush is the raw
	// connection its SyscallConn then returns (see quietRaw), nil when the
	// socket has none.
	quiet atomic.Bool
	hush  *quietRaw
	// poller polls the socket; nil when it has no raw connection.
	poller *poller
	// onPoll, when set (by tests), is called for every read that polls.
	onPoll func()
}

// startSpin lets the reads of the call about to be sent poll for at most
// window each (0: not at all), and while busy (nil: never) reports
// nothing else for the CPU to do: once calls queue behind a lone one, the
// process is busy, and a caller that polls on would take a core from
// them (and, on a shared host, from Redis).
func (c *capConn) startSpin(window time.Duration, busy func() bool) {
	c.missed.Store(false)
	c.busy = busy
	c.spin.Store(int64(window))
}

// stopSpin ends the polling startSpin allowed and reports whether every
// poll caught its data within the window.
func (c *capConn) stopSpin() bool {
	c.spin.Store(0)
	c.busy = nil
	return !c.missed.Load()
}

// sysCapConn is a capConn of a socket that implements syscall.Conn, which
// it passes on (go-redis checks a pooled connection's health through it).
type sysCapConn struct {
	*capConn
	sys syscall.Conn
}

// SyscallConn implements syscall.Conn: the socket's raw connection, or
// while the connection is quiet one that finds nothing to read (see
// quietRaw).
func (c sysCapConn) SyscallConn() (syscall.RawConn, error) {
	if c.quiet.Load() && c.hush != nil {
		return c.hush, nil
	}
	return c.sys.SyscallConn()
}

// quietRaw is the raw connection of a held socket during a lone call that
// alive has just found open with nothing to read. go-redis peeks through
// it for push notifications twice per command on a connection held out
// of its pool (before the command, and as the command lets the
// connection go), a system call each that a pooled connection skips; on
// a host where system calls are dear the two cost a lone call a few
// percent. Its Read calls nothing and reports no error: a peek then finds
// nothing to read, as alive did a moment before. A push notification that
// comes in between is read before the reply that follows it, as go-redis
// reads any (see processPendingPushNotificationWithReader), and alive
// finds one left after a call, so the next call's peeks are real.
type quietRaw struct {
	syscall.RawConn
	// onRead, when set (by tests), is called for every Read.
	onRead func()
}

// Read implements syscall.RawConn without calling f (see quietRaw).
func (q *quietRaw) Read(func(fd uintptr) bool) error {
	if q.onRead != nil {
		q.onRead()
	}
	return nil
}

// wrapConn returns conn wrapped for lone senders, unless it is already.
func wrapConn(conn net.Conn) (net.Conn, *capConn) {
	switch w := conn.(type) {
	case *capConn:
		return w, w
	case sysCapConn:
		return w, w.capConn
	}
	c := &capConn{Conn: conn}
	if sys, ok := conn.(syscall.Conn); ok {
		if raw, err := sys.SyscallConn(); err == nil {
			c.poller = newPoller(raw)
			c.hush = &quietRaw{RawConn: raw}
		}
		return sysCapConn{c, sys}, c
	}
	return c, c
}

// Write implements net.Conn, noting the connection that sends the nonce
// of a search in progress.
func (c *capConn) Write(b []byte) (int, error) {
	if pr := searching.Load(); pr != nil && bytes.Contains(b, pr.nonce) {
		pr.found.CompareAndSwap(nil, c)
	}
	return c.Conn.Write(b)
}

// Read implements net.Conn. A read of a lone call's reply first polls the
// socket (see poll), for at most the call's spin and never past its
// deadline.
func (c *capConn) Read(b []byte) (int, error) {
	if w := c.spin.Load(); w > 0 && c.poller != nil {
		until := time.Now().Add(time.Duration(w))
		if l := c.limit.Load(); l != 0 && l < until.UnixNano() {
			until = time.Unix(0, l)
		}
		if c.onPoll != nil {
			c.onPoll()
		}
		if n, ok, err := c.poller.poll(b, until, c.busy); ok {
			return n, err
		}
		c.missed.Store(true)
	}
	return c.Conn.Read(b)
}

// capped returns t, or the limit when one is set and t is later or none.
func (c *capConn) capped(t time.Time) time.Time {
	if l := c.limit.Load(); l != 0 && (t.IsZero() || t.UnixNano() > l) {
		return time.Unix(0, l)
	}
	return t
}

// SetDeadline implements net.Conn, within the limit.
func (c *capConn) SetDeadline(t time.Time) error { return c.Conn.SetDeadline(c.capped(t)) }

// SetReadDeadline implements net.Conn, within the limit.
func (c *capConn) SetReadDeadline(t time.Time) error { return c.Conn.SetReadDeadline(c.capped(t)) }

// SetWriteDeadline implements net.Conn, within the limit.
func (c *capConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.capped(t))
}

// Close implements net.Conn.
func (c *capConn) Close() error {
	c.closed.Store(true)
	return c.Conn.Close()
}

// nonceProbe is a search for the socket of a held connection: the nonce
// its ECHO carries, and the wrapper that wrote it.
type nonceProbe struct {
	nonce []byte
	found atomic.Pointer[capConn]
}

// loneConn is a held connection and its socket.
type loneConn struct {
	conn *redis.Conn
	sock *capConn
}

// loneSender holds the connection lone calls are sent through (see lone).
// The stores on one client share one (see loneSenderOf), so that a client
// lends one connection for them whatever the number of its stores (a
// policy reload makes new ones): a lone call of one store while another's
// is in flight through it is queued.
type loneSender struct {
	client weak.Pointer[redis.Client]
	cur    atomic.Pointer[loneConn]
	// inUse is set while a call is sent through cur.
	inUse atomic.Bool
	// busy is set while a search of this sender runs; nextAt is the unix
	// nanos before which no other starts.
	busy   atomic.Bool
	nextAt atomic.Int64
	// hits is the recent share of polled calls whose reply came within
	// their window, in 1/spinScale; skipped counts the calls not polled
	// (see spinFor).
	hits    atomic.Int32
	skipped atomic.Int32
}

// A held connection's lone calls poll for their replies (see poll) while
// most recent polls caught theirs: hits, an average that weighs the
// latest poll 1/8, stays at or above spinKeep. A server farther than the
// window (its replies come after it) soon stops the polling, which would
// only burn the window's CPU before sleeping; from then on one lone call
// in spinProbe polls, to find out when replies come sooner again.
const (
	spinScale = 1024
	spinKeep  = spinScale / 2
	spinProbe = 16
)

// spinFor returns how long the next call through ls's connection may
// poll for its reply: window (0: never) while polls catch their replies,
// else window for one call in spinProbe and 0 for the others.
func (ls *loneSender) spinFor(window time.Duration) time.Duration {
	if window <= 0 || ls.hits.Load() >= spinKeep || ls.skipped.Add(1)%spinProbe == 0 {
		return window
	}
	return 0
}

// spun records whether a polled call's reply came within its window.
// Calls through the held connection take turns, so no two update hits at
// once.
func (ls *loneSender) spun(caught bool) {
	h := ls.hits.Load()
	h -= h / 8
	if caught {
		h += spinScale / 8
	}
	ls.hits.Store(h)
}

// loneSenders maps a client to the lone sender of its stores; an entry
// goes with its client.
var loneSenders sync.Map // weak.Pointer[redis.Client] -> *loneSender

// loneSenderOf returns the lone sender of the stores on c.
func loneSenderOf(c *redis.Client) *loneSender {
	key := weak.Make(c)
	if v, ok := loneSenders.Load(key); ok {
		return v.(*loneSender)
	}
	ls := &loneSender{client: key}
	ls.hits.Store(spinScale)
	v, loaded := loneSenders.LoadOrStore(key, ls)
	if !loaded {
		runtime.AddCleanup(c, func(k weak.Pointer[redis.Client]) { loneSenders.Delete(k) }, key)
	}
	return v.(*loneSender)
}

// take returns the held connection for one call, which release gives
// back, or nil when none is ready or another call uses it; with none held
// it starts a search unless one runs or failed a short while ago.
func (ls *loneSender) take() *loneConn {
	if !ls.inUse.CompareAndSwap(false, true) {
		return nil
	}
	if lc := ls.cur.Load(); lc != nil {
		if !lc.sock.closed.Load() {
			if open, empty := alive(lc.sock); open {
				lc.sock.quiet.Store(empty)
				return lc
			}
		}
		ls.drop(lc)
	}
	ls.inUse.Store(false)
	if time.Now().UnixNano() >= ls.nextAt.Load() && ls.busy.CompareAndSwap(false, true) {
		go ls.search()
	}
	return nil
}

// release gives back the connection take returned.
func (ls *loneSender) release() { ls.inUse.Store(false) }

// drop lets go of lc after a call through it failed other than by a
// reply of the server's (its socket timed out or broke, or the server is
// a replica now): its connection is closed, and the next lone call starts
// a search for another.
func (ls *loneSender) drop(lc *loneConn) {
	lc.sock.quiet.Store(false) // the pool checks what it is given back
	if ls.cur.CompareAndSwap(lc, nil) {
		_ = lc.conn.Close()
	}
}

// search takes connections of the client's pool until one is a wrapped
// one (see lone), at most loneTries, and holds it for lone calls.
func (ls *loneSender) search() {
	defer ls.busy.Store(false)
	defer func() { ls.nextAt.Store(time.Now().Add(loneRetry).UnixNano()) }()
	client := ls.client.Value()
	if client == nil {
		return
	}
	for range loneTries {
		conn := client.EphemeralConn() // Close discards its connection
		sock, err := find(conn)
		if err != nil || sock == nil {
			_ = conn.Close()
			if err != nil {
				return
			}
			continue
		}
		ls.cur.Store(&loneConn{conn: conn, sock: sock})
		return
	}
}

// find sends an ECHO of a fresh nonce through conn and returns the wrapper
// that wrote it, nil when none did (a connection opened before the store).
func find(conn *redis.Conn) (sock *capConn, err error) {
	defer func() {
		if r := recover(); r != nil { // a client hook panicked
			sock, err = nil, fmt.Errorf("%w: %v", errPanic, r)
		}
	}()
	var b [16]byte
	if _, err := crand.Read(b[:]); err != nil {
		return nil, err
	}
	pr := &nonceProbe{nonce: []byte(hex.EncodeToString(b[:]))}
	searchTurn.Lock()
	defer searchTurn.Unlock()
	searching.Store(pr)
	defer searching.Store(nil)
	ctx, cancel := context.WithTimeout(context.Background(), loneProbeTimeout)
	defer cancel()
	got, err := conn.Echo(ctx, string(pr.nonce)).Result()
	if err != nil {
		return nil, err
	}
	if got != string(pr.nonce) {
		return nil, fmt.Errorf("%w: ECHO answered %q", errBadReply, got)
	}
	return pr.found.Load(), nil
}

// serverReply reports whether err is a reply of the server's (an error
// it answered), not a failure of the connection or of the wait for it.
func serverReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

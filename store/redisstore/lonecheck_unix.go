//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd || solaris || illumos

package redisstore

import (
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
	"time"
)

// alive reports whether the socket of a held connection, idle between
// calls, is still open: the server may have closed it (a restart, its
// idle timeout), which go-redis finds out for the connections of its pool
// when it hands one out, but not for a held one. Data waiting to be read
// (a push notification, which go-redis reads before the next reply) is
// not a closed socket; empty reports that none waits.
func alive(c *capConn) (open, empty bool) {
	p := c.poller // made once with the connection: this runs before every lone call
	if p == nil {
		sc, ok := c.Conn.(syscall.Conn)
		if !ok {
			return true, false
		}
		raw, err := sc.SyscallConn()
		if err != nil {
			return false, false
		}
		p = newPoller(raw)
	}
	// The last call's deadline has passed, and a read would report it
	// instead of looking; the next call sets its own.
	if c.Conn.SetDeadline(time.Time{}) != nil {
		return false, false
	}
	if p.raw.Read(p.peekFn) != nil {
		return false, false
	}
	return p.open, p.empty
}

// peekOpen reports whether the socket fd is open: a peek of one byte finds
// data or nothing to read yet (empty), not the end of the stream or an
// error.
func peekOpen(fd uintptr) (open, empty bool) {
	var b [1]byte
	n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	empty = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
	return n > 0 || empty, empty
}

// poller polls one socket (see poll) and checks it (see alive). Its
// fields past open are those of the read in progress: a socket's reads
// take turns, and the functions given to the raw connection are made
// once, not per read.
type poller struct {
	raw    syscall.RawConn
	fn     func(fd uintptr) bool // p.try
	peekFn func(fd uintptr) bool // p.peek
	open   bool                  // what the last peek found: the socket open,
	empty  bool                  // and nothing in it to read
	b      []byte
	until  time.Time
	busy   func() bool // nil: never
	n      int
	errno  error
	ok     bool
}

func newPoller(raw syscall.RawConn) *poller {
	p := &poller{raw: raw}
	p.fn = p.try
	p.peekFn = p.peek
	return p
}

// peek is alive's function of the socket's descriptor.
func (p *poller) peek(fd uintptr) bool {
	p.open, p.empty = peekOpen(fd)
	return true
}

// poll reads into b from the socket without sleeping, until at most
// until: it calls read(2) on the non-blocking socket again and again,
// letting other goroutines run in between, until data or an error comes.
// ok is false when until passed first, or busy (nil: never) reported
// that other work wants the CPU (calls queued behind this one), or the
// socket could not be polled (its deadline passed, it was closed): the
// caller then reads as usual, which sleeps until data comes or the
// deadline passes.
//
// On a host whose cores go idle between a lone call and its reply, a
// caller that sleeps pays for waking up twice, its thread and then its
// goroutine, often more than the round trip itself; polling stays awake.
func (p *poller) poll(b []byte, until time.Time, busy func() bool) (n int, ok bool, err error) {
	if len(b) == 0 {
		return 0, false, nil
	}
	p.b, p.until, p.busy, p.n, p.errno, p.ok = b, until, busy, 0, nil, false
	err = p.raw.Read(p.fn)
	n, ok, errno := p.n, p.ok, p.errno
	p.b, p.busy = nil, nil
	switch {
	case err != nil || !ok:
		return 0, false, nil
	case errno != nil:
		return 0, true, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", errno)}
	case n == 0:
		return 0, true, io.EOF
	}
	return n, true, nil
}

// try is poll's function of the socket's descriptor.
func (p *poller) try(fd uintptr) bool {
	for {
		n, errno := syscall.Read(int(fd), p.b)
		switch {
		case errno == syscall.EINTR:
			continue
		case errno != syscall.EAGAIN && errno != syscall.EWOULDBLOCK:
			p.n, p.errno, p.ok = max(n, 0), errno, true
			return true
		case !time.Now().Before(p.until), p.busy != nil && p.busy():
			return true
		}
		runtime.Gosched()
	}
}

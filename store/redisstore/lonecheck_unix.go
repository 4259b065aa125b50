//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd || solaris || illumos

package redisstore

import (
	"syscall"
	"time"
)

// alive reports whether the socket of a held connection, idle between
// calls, is still open: the server may have closed it (a restart, its
// idle timeout), which go-redis finds out for the connections of its pool
// when it hands one out, but not for a held one. Data waiting to be read
// (a push notification, which go-redis reads before the next reply) is
// not a closed socket.
func alive(c *capConn) bool {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	// The last call's deadline has passed, and a read would report it
	// instead of looking; the next call sets its own.
	if c.Conn.SetDeadline(time.Time{}) != nil {
		return false
	}
	open := true
	err = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = n > 0 || err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && open
}

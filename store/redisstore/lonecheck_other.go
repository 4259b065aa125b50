//go:build !linux && !darwin && !dragonfly && !freebsd && !netbsd && !openbsd && !solaris && !illumos

package redisstore

import (
	"syscall"
	"time"
)

// alive reports whether the socket of a held connection is still open;
// without a way to look at it here, a closed one is found by the call
// sent through it, which fails.
func alive(*capConn) bool { return true }

// poll reads nothing here: a read of a lone call's reply sleeps until the
// reply comes, as any other read.
func poll(syscall.RawConn, []byte, time.Time) (int, bool, error) { return 0, false, nil }

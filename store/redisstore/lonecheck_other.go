//go:build !linux && !darwin && !dragonfly && !freebsd && !netbsd && !openbsd && !solaris && !illumos

package redisstore

import (
	"syscall"
	"time"
)

// alive reports whether the socket of a held connection is still open,
// and whether nothing waits to be read on it; without a way to look at it
// here, a closed one is found by the call sent through it, which fails,
// and it is never known to be empty.
func alive(*capConn) (open, empty bool) { return true, false }

// poller polls nothing here: a read of a lone call's reply sleeps until
// the reply comes, as any other read.
type poller struct{}

func newPoller(syscall.RawConn) *poller { return nil }

// poll reads nothing (see poller).
func (*poller) poll([]byte, time.Time, func() bool) (int, bool, error) { return 0, false, nil }

package redisstore

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store"
)

// backendError wraps err as the store's failure of op, classified. A
// script error about the key's own data is wrapped in a keyError.
func backendError(op string, err error) *store.BackendError {
	kind := classify(err)
	if kind == "script" && aboutKey(err) {
		err = &keyError{err}
	}
	return &store.BackendError{Op: op, Kind: kind, Err: err}
}

// aboutKey reports whether err is Redis's answer about the data of the
// request's own keys: WRONGTYPE, or a script's complaint about state it
// cannot read ("malformed ... state"). The built-in scripts repair such
// state instead of failing; a user script, or one of an older version,
// may still fail so.
func aboutKey(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	if strings.HasPrefix(msg, "WRONGTYPE") {
		return true
	}
	i := strings.Index(msg, "malformed ")
	return i >= 0 && strings.Contains(msg[i:], " state")
}

// keyError marks a failure that belongs to one key. Its KeyScoped method
// tells the middleware's circuit breaker, which stands for every key, not
// to count it.
type keyError struct{ err error }

func (e *keyError) Error() string   { return e.err.Error() }
func (e *keyError) Unwrap() error   { return e.err }
func (e *keyError) KeyScoped() bool { return true }

// classify maps a go-redis or context error to a BackendError Kind:
// deadlines and network timeouts are timeouts; BUSY (the server is running
// a script past its busy-reply-threshold) is busy; CLUSTERDOWN (the
// cluster does not serve every slot, the node itself answers), and a
// budget that ran out while the node answered it, is clusterdown; OOM (a
// write refused at maxmemory under noeviction) is oom; READONLY (a
// replica, or a master being failed over, refused a write) is readonly;
// other error replies and undecodable replies are script errors; dial failures,
// resets, EOF and a closed client are connection errors; the rest (a
// cancelled context among them) is other.
func classify(err error) string {
	var rerr redis.Error
	var nerr net.Error
	var operr *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, redis.ErrPoolTimeout):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "other"
	case errors.Is(err, errBusyBudget), errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "BUSY "):
		return "busy"
	case errors.Is(err, errDownBudget), errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "CLUSTERDOWN"):
		return "clusterdown"
	case errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "OOM "):
		return "oom"
	case errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "READONLY"):
		return "readonly"
	case errors.Is(err, errBadReply), errors.As(err, &rerr):
		return "script"
	case errors.As(err, &nerr) && nerr.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, redis.ErrClosed), errors.Is(err, redis.ErrPoolExhausted),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed),
		errors.As(err, &operr):
		return "connection"
	}
	return "other"
}

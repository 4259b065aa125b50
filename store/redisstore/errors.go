package redisstore

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store"
)

// backendError wraps err as the store's failure of op, classified.
func backendError(op string, err error) *store.BackendError {
	return &store.BackendError{Op: op, Kind: classify(err), Err: err}
}

// classify maps a go-redis or context error to an ErrorKind: deadlines and
// network timeouts are timeouts; error replies and undecodable replies are
// script errors; dial failures, resets, EOF and a closed client are
// connection errors; the rest (a cancelled context among them) is other.
func classify(err error) store.ErrorKind {
	var rerr redis.Error
	var nerr net.Error
	var operr *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, redis.ErrPoolTimeout):
		return store.KindTimeout
	case errors.Is(err, context.Canceled):
		return store.KindOther
	case errors.Is(err, errBadReply), errors.As(err, &rerr):
		return store.KindScript
	case errors.As(err, &nerr) && nerr.Timeout():
		return store.KindTimeout
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, redis.ErrClosed), errors.Is(err, redis.ErrPoolExhausted),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed),
		errors.As(err, &operr):
		return store.KindConnection
	}
	return store.KindOther
}

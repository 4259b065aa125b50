package grpclimit

import (
	"context"
	"errors"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
)

// Names of the rate-limit metadata entries (see the package
// documentation, "Refusals and metadata").
const (
	mdLimit      = "ratelimit-limit"
	mdRemaining  = "ratelimit-remaining"
	mdReset      = "ratelimit-reset"
	mdRetryAfter = "retry-after"
)

var errEmptyIdentity = errors.New("ratekeeper: grpc: key function returned an empty identity")

// errKeyPanic marks a key function (or classifier) that panicked.
var errKeyPanic = errors.New("ratekeeper: grpc: the key function panicked")

// Statuses that carry nothing of the call: the error text of a key
// function or a store never reaches the client.
var (
	errUnauthenticated = status.Error(codes.Unauthenticated, "ratekeeper: no identity")
	errMalformed       = status.Error(codes.InvalidArgument, "ratekeeper: malformed call: no identity can be derived")
	errSuspended       = status.Error(codes.PermissionDenied, "ratekeeper: suspended")
	errInternalStatus  = status.Error(codes.Internal, "ratekeeper: rate limiter misconfigured")
)

// identityStatus answers a call whose identity could not be derived:
// Unauthenticated when it carries none of the kind the key function looks
// for (keyfunc.ErrNoIdentity), Internal when the key function panicked,
// InvalidArgument otherwise.
func identityStatus(err error) error {
	switch {
	case errors.Is(err, keyfunc.ErrNoIdentity):
		return errUnauthenticated
	case errors.Is(err, errKeyPanic):
		return errInternalStatus
	}
	return errMalformed
}

// decideStatus answers a call the core could not decide: the context's
// status (Canceled, DeadlineExceeded) when the caller went away or ran out
// of time, Internal otherwise.
func decideStatus(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	return errInternalStatus
}

// status returns the status error of v, nil when the call goes on.
func (v verdict) status() error {
	switch v.kind {
	case refuse:
		return refusal(v.retry)
	case suspend:
		return errSuspended
	case unavailable:
		return unavailableStatus(v.retry)
	}
	return nil
}

// unavailableStatus returns the Unavailable status of a call refused
// because the store failed and the limiter fails closed, with a
// google.rpc.RetryInfo detail holding the breaker's cooldown when there is
// one.
func unavailableStatus(retry time.Duration) error {
	st := status.New(codes.Unavailable, "ratekeeper: rate limiter unavailable")
	if retry > 0 {
		if detailed, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retry)}); err == nil {
			st = detailed
		}
	}
	return st.Err()
}

// refusal returns the ResourceExhausted status of a refused call: its
// message names the wait in whole seconds (rounded up) and a
// google.rpc.RetryInfo detail holds the exact wait. retry 0 means that no
// wait can admit the call (its cost exceeds a limit's capacity): no
// RetryInfo then.
func refusal(retry time.Duration) error {
	if retry <= 0 {
		return status.Error(codes.ResourceExhausted, "ratekeeper: too many requests: the call costs more than the limit holds")
	}
	st := status.New(codes.ResourceExhausted, "ratekeeper: too many requests: try again in "+strconv.FormatInt(ceilSeconds(retry), 10)+" seconds")
	if detailed, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retry)}); err == nil {
		st = detailed
	}
	return st.Err()
}

// metadata returns the rate-limit metadata of v: retry-after alone for a
// refusal no limit describes (the in-flight cap's), nil for another call
// no limit describes.
func (v verdict) metadata() metadata.MD {
	if v.limit == 0 {
		if v.kind == refuse && v.retry > 0 {
			return metadata.MD{mdRetryAfter: {strconv.FormatInt(max(1, ceilSeconds(v.retry)), 10)}}
		}
		return nil
	}
	md := metadata.MD{
		mdLimit:     {strconv.FormatInt(v.limit, 10)},
		mdRemaining: {strconv.FormatInt(v.remaining, 10)},
		mdReset:     {strconv.FormatInt(ceilSeconds(v.reset), 10)},
	}
	if v.kind == refuse && v.retry > 0 {
		md[mdRetryAfter] = []string{strconv.FormatInt(max(1, ceilSeconds(v.retry)), 10)}
	}
	return md
}

// ceilSeconds is d in whole seconds, rounded up.
func ceilSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// meteredStream charges one unit for every message the client sends.
type meteredStream struct {
	grpc.ServerStream
	lim  *limiter.Limiter
	call opened
}

// RecvMsg receives a message, then charges it. A refused message ends
// with the refusal's status, and the rate-limit metadata go in the
// stream's trailer.
func (s *meteredStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	v, err := decide(s.call.ctx, s.lim, limiter.Request{Tier: s.call.tier, Identity: s.call.identity})
	if err != nil {
		return decideStatus(err)
	}
	if v.kind == proceed {
		return nil
	}
	if md := v.metadata(); md != nil {
		s.SetTrailer(md)
	}
	return v.status()
}

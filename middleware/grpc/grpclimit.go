package grpclimit

import (
	"context"
	"errors"
	"net/http"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware"
)

// Options configures an [Interceptor]. The zero value charges each call
// once and exempts no method.
type Options struct {
	// PerMessage makes the stream interceptor also charge one unit for
	// every message the client sends on a stream, after the unit charged
	// when the stream opens. A refused message ends its RecvMsg with the
	// refusal, which the handler returns as the stream's status. The
	// identity is derived once, when the stream opens. Unary calls are
	// charged once either way.
	PerMessage bool

	// Exempt, when set, lets calls to the full method names for which it
	// returns true ("/grpc.health.v1.Health/Check") through without a
	// decision and without rate-limit metadata. It must be fast and safe
	// for concurrent use.
	Exempt func(fullMethod string) bool
}

// Interceptor rate-limits gRPC calls with a [middleware.Limiter]: the same
// policy, store and counters as the limiter's HTTP handlers. Build it once
// with [New] and install both of its interceptors on the server:
//
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(ic.Unary()),
//		grpc.ChainStreamInterceptor(ic.Stream()),
//	)
//
// An Interceptor is safe for concurrent use.
type Interceptor struct {
	core       core
	key        keyfunc.KeyFunc
	perMessage bool
	exempt     func(string) bool
}

// New returns an Interceptor that derives each call's identity with key
// and decides with lim. key is any key function of package keyfunc,
// applied to the call as the HTTP/2 request it travels in (see the package
// documentation, "Identities"): keyfunc.RemoteIP or a ClientIP's Key for
// the peer address (forwarding metadata read only from trusted proxies),
// keyfunc.JWTSubject for the subject of a verified token in the
// authorization metadata, keyfunc.Header for a hashed API key,
// keyfunc.Route for the full method name, and keyfunc.Join to combine
// them. The same key function on the HTTP side gives a client the same
// identity, so a limiter of the same name on the same store counts its
// HTTP requests and gRPC calls against one quota.
//
// lim must be a limiter without tiers (built with middleware.New): a
// tiered limiter decides from outside its HTTP handler only for requests
// that handler classified, and such a call is answered Internal. New returns an error when lim or key is nil.
func New(lim *middleware.Limiter, key keyfunc.KeyFunc, opts Options) (*Interceptor, error) {
	switch {
	case lim == nil:
		return nil, errors.New("ratekeeper: grpc: nil limiter")
	case key == nil:
		return nil, errors.New("ratekeeper: grpc: nil key function")
	}
	return &Interceptor{core: core{lim: lim}, key: key, perMessage: opts.PerMessage, exempt: opts.Exempt}, nil
}

// Unary returns the unary server interceptor: each call is charged the
// limiter's cost before the handler runs. A refused call never reaches
// the handler; see the package documentation for the status codes and
// metadata.
func (ic *Interceptor) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if ic.exempt != nil && ic.exempt(info.FullMethod) {
			return handler(ctx, req)
		}
		if _, err := ic.open(ctx, info.FullMethod, func(md metadata.MD) { _ = grpc.SetHeader(ctx, md) }); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// Stream returns the stream server interceptor: each stream is charged
// the limiter's cost when it opens and, with [Options.PerMessage], one
// unit for every message received.
func (ic *Interceptor) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if ic.exempt != nil && ic.exempt(info.FullMethod) {
			return handler(srv, ss)
		}
		ctx := ss.Context()
		c, err := ic.open(ctx, info.FullMethod, func(md metadata.MD) { _ = ss.SetHeader(md) })
		if err != nil {
			return err
		}
		if ic.perMessage {
			ss = &meteredStream{ServerStream: ss, core: ic.core, call: c}
		}
		return handler(srv, ss)
	}
}

// opened is what the interceptor knows about a call it admitted.
type opened struct {
	r        *http.Request // the call as an HTTP/2 request
	identity string
}

// open derives the identity of a call to fullMethod and charges it;
// setHeader sends the rate-limit metadata. It returns what the per-message
// decisions need, or the status error that ends the call.
func (ic *Interceptor) open(ctx context.Context, fullMethod string, setHeader func(metadata.MD)) (opened, error) {
	r := callRequest(ctx, fullMethod)
	id, err := ic.key(r)
	if err == nil && id == "" {
		err = errEmptyIdentity
	}
	if err != nil {
		return opened{}, identityStatus(err)
	}
	v, err := ic.core.decide(ctx, r, id, 0)
	if err != nil {
		return opened{}, decideStatus(err)
	}
	if md := v.metadata(); md != nil {
		setHeader(md)
	}
	return opened{r: r, identity: id}, v.status()
}

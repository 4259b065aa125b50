package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
)

// Options configures an [Interceptor]. The zero value charges each call
// one unit, exempts no method and classifies no call into a tier.
type Options struct {
	// Classify, when set, derives each call's tier (one of the limiter's
	// [limiter.Tier] names) and identity, from the call presented as the
	// HTTP/2 request it travels in (see the package documentation,
	// "Identities"); give it instead of a key function to [New]. The
	// Classify method of middleware.AuthOptions fits: verified subjects in
	// the tier "authenticated", other callers in "anonymous" by address.
	// Errors are answered as a key function's are. It must be fast and
	// safe for concurrent use.
	Classify func(r *http.Request) (tier, identity string, err error)

	// PerMessage makes the stream interceptor also charge one unit for
	// every message the client sends on a stream, after the unit charged
	// when the stream opens. A refused message ends its RecvMsg with the
	// refusal, which the handler returns as the stream's status. The tier
	// and identity are derived once, when the stream opens. Unary calls
	// are charged once either way.
	PerMessage bool

	// Exempt, when set, lets calls to the full method names for which it
	// returns true ("/grpc.health.v1.Health/Check") through without a
	// decision and without rate-limit metadata (the observer sees
	// [limiter.OutcomeExempt]). It must be fast and safe for concurrent
	// use.
	Exempt func(fullMethod string) bool
}

// Interceptor rate-limits gRPC calls with a [limiter.Limiter]: the same
// policy, store and counters as an HTTP middleware built on the same
// limiter, or on a limiter of the same name and store. Build it once with
// [New] and install both of its interceptors on the server:
//
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(ic.Unary()),
//		grpc.ChainStreamInterceptor(ic.Stream()),
//	)
//
// An Interceptor is safe for concurrent use.
type Interceptor struct {
	lim        *limiter.Limiter
	classify   func(*http.Request) (tier, identity string, err error)
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
// identity, so the limiter of an HTTP middleware (middleware.Limiter
// embeds it), or a limiter of the same name on the same store, counts its
// HTTP requests and gRPC calls against one quota.
//
// For a limiter with tiers, pass a nil key and [Options.Classify]
// instead, which names each call's tier too; a key function alone puts
// every call in the tier "", which a limiter with tiers does not know
// (such calls are answered Internal). New returns an error when lim is
// nil, or when neither or both of key and Options.Classify are given.
func New(lim *limiter.Limiter, key keyfunc.KeyFunc, opts Options) (*Interceptor, error) {
	switch {
	case lim == nil:
		return nil, errors.New("ratekeeper: grpc: nil limiter")
	case key == nil && opts.Classify == nil:
		return nil, errors.New("ratekeeper: grpc: nil key function and no Options.Classify")
	case key != nil && opts.Classify != nil:
		return nil, errors.New("ratekeeper: grpc: both a key function and Options.Classify; give one")
	}
	classify := opts.Classify
	if classify == nil {
		classify = func(r *http.Request) (string, string, error) {
			id, err := key(r)
			return "", id, err
		}
	}
	return &Interceptor{lim: lim, classify: classify, perMessage: opts.PerMessage, exempt: opts.Exempt}, nil
}

// Unary returns the unary server interceptor: each call is charged one
// unit before the handler runs. A refused call never reaches the handler;
// see the package documentation for the status codes and metadata.
func (ic *Interceptor) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		c, err := ic.open(ctx, info.FullMethod, func(md metadata.MD) { _ = grpc.SetHeader(ctx, md) })
		if err != nil {
			return nil, err
		}
		defer c.done()
		return handler(ctx, req)
	}
}

// Stream returns the stream server interceptor: each stream is charged
// one unit when it opens and, with [Options.PerMessage], one unit for
// every message received.
func (ic *Interceptor) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx := ss.Context()
		c, err := ic.open(ctx, info.FullMethod, func(md metadata.MD) { _ = ss.SetHeader(md) })
		if err != nil {
			return err
		}
		defer c.done()
		if ic.perMessage && !c.exempt {
			ss = &meteredStream{ServerStream: ss, lim: ic.lim, call: c}
		}
		return handler(srv, ss)
	}
}

// identify runs the key function (or classifier) on r. A panic in it is
// an error wrapping errKeyPanic: grpc-go recovers no panic, so one would
// end the server.
func (ic *Interceptor) identify(r *http.Request) (tier, id string, err error) {
	defer func() {
		if p := recover(); p != nil {
			tier, id, err = "", "", fmt.Errorf("%w: %v", errKeyPanic, p)
		}
	}()
	return ic.classify(r)
}

// opened is what the interceptor knows about a call it admitted.
type opened struct {
	exempt   bool // an exempt method: nothing was decided
	tier     string
	identity string
	// ctx is the call's context with the attributes of its log lines.
	ctx context.Context
	// release gives back the call's slot of the in-flight cap, once the
	// call is done (a no-op without one).
	release func()
}

// done gives back what the call holds.
func (c opened) done() {
	if c.release != nil {
		c.release()
	}
}

// open derives the tier and identity of a call to fullMethod and charges
// it; setHeader sends the rate-limit metadata. It returns what the
// per-message decisions need, or the status error that ends the call.
// The limiter's lines about the call name its method (grpc_method).
func (ic *Interceptor) open(ctx context.Context, fullMethod string, setHeader func(metadata.MD)) (opened, error) {
	ctx = limiter.WithLogAttrs(ctx, slog.String("grpc_method", fullMethod))
	if ic.exempt != nil && ic.exempt(fullMethod) {
		_, _ = ic.lim.Decide(ctx, limiter.Request{Exempt: true}) // reports it; always admits
		return opened{exempt: true}, nil
	}
	tier, id, err := ic.identify(callRequest(ctx, fullMethod))
	if err == nil && id == "" {
		err = errEmptyIdentity
	}
	if err != nil {
		_, _ = ic.lim.Decide(ctx, limiter.Request{Tier: tier, IdentityErr: err}) // reports the rejection
		return opened{}, identityStatus(err)
	}
	release, v, rated, err := acquire(ctx, ic.lim, limiter.Request{Tier: tier, Identity: id})
	if err == nil && v.kind == proceed && rated {
		v, err = decide(ctx, ic.lim, limiter.Request{Tier: tier, Identity: id})
	}
	if err == nil && v.kind != proceed {
		err = v.status()
	} else if err != nil {
		err = decideStatus(err)
	}
	if err != nil {
		release()
		if md := v.metadata(); md != nil {
			setHeader(md)
		}
		return opened{}, err
	}
	if md := v.metadata(); md != nil {
		setHeader(md)
	}
	return opened{tier: tier, identity: id, ctx: ctx, release: release}, nil
}

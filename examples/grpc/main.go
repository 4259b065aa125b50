package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/ratekeeper/ratekeeper/examples/internal/demo"
	"github.com/ratekeeper/ratekeeper/middleware"
	grpclimit "github.com/ratekeeper/ratekeeper/middleware/grpc"
	"github.com/ratekeeper/ratekeeper/middleware/policy"
)

// newGRPCServer returns the gRPC server: the health service, whose calls
// the api policy limits as it limits GET /api/ping (one quota per client
// across both), and server reflection, never limited.
func newGRPCServer(p *demo.Policies) *grpc.Server {
	// snippet:grpc-policy
	calls := &policyCalls{set: p.Set, name: "api", opts: grpclimit.Options{
		Classify: p.Auth.Classify, // the classifier the file names "auth"
		Exempt:   func(m string) bool { return strings.HasPrefix(m, "/grpc.reflection.") },
	}}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(calls.unary), grpc.ChainStreamInterceptor(calls.stream))
	// end snippet
	healthpb.RegisterHealthServer(srv, health.NewServer())
	reflection.Register(srv)
	return srv
}

// serveGRPC serves gRPC on GRPC_ADDR until ctx is done; without GRPC_ADDR
// it serves nothing.
func serveGRPC(ctx context.Context, p *demo.Policies, logger *slog.Logger) error {
	addr := os.Getenv("GRPC_ADDR")
	if addr == "" {
		<-ctx.Done()
		return nil
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	logger.Info("listening", slog.String("protocol", "grpc"), slog.String("addr", lis.Addr().String()))
	return serveUntil(ctx, newGRPCServer(p), lis)
}

// grpcDrain bounds a graceful stop: the calls still running then are
// closed. A health Watch stream never ends by itself, and would otherwise
// hold the stop until the service's own bound gave up with an error.
const grpcDrain = 2 * time.Second

// serveUntil serves srv on lis until ctx is done, then stops it
// gracefully within grpcDrain.
func serveUntil(ctx context.Context, srv *grpc.Server, lis net.Listener) error {
	go func() {
		<-ctx.Done()
		stopped := make(chan struct{})
		go func() {
			srv.GracefulStop()
			close(stopped)
		}()
		select {
		case <-stopped:
		case <-time.After(grpcDrain):
			srv.Stop()
		}
	}()
	if err := srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// policyCalls decides gRPC calls under one policy of a policy.Set as it
// runs when each call arrives: after a reload or a mode switch, the next
// call uses the new limiter, and in mode "off" calls pass undecided, as
// HTTP requests do.
type policyCalls struct {
	set  *policy.Set
	name string
	opts grpclimit.Options
	cur  atomic.Pointer[current]
}

// current is the interceptor of one limiter of the policy.
type current struct {
	lim *middleware.Limiter
	ic  *grpclimit.Interceptor
}

// interceptor returns the interceptor of the policy's running limiter,
// nil when the policy is off.
func (c *policyCalls) interceptor() (*grpclimit.Interceptor, error) {
	// In mode "off" the Set still hands out the enforcing limiter (for
	// peeks and resets), so the mode is read for every call: a Status
	// snapshot of a few policies, cheap next to a call.
	if mode(c.set, c.name) == "off" {
		return nil, nil
	}
	lim, err := c.set.Limiter(c.name)
	if err != nil {
		return nil, err
	}
	if cur := c.cur.Load(); cur != nil && cur.lim == lim {
		return cur.ic, nil
	}
	// A reload or a switch to or from dry run built another limiter.
	ic, err := grpclimit.New(lim.Limiter, nil, c.opts)
	if err != nil {
		return nil, err
	}
	c.cur.Store(&current{lim: lim, ic: ic})
	return ic, nil
}

// mode returns the mode the policy name runs in, "" for an unknown name.
func mode(set *policy.Set, name string) policy.Mode {
	for _, p := range set.Status().Policies {
		if p.Name == name {
			return p.Mode
		}
	}
	return ""
}

// errNoPolicy answers calls when the policy cannot be found.
var errNoPolicy = status.Error(codes.Internal, "ratekeeper: rate limiter misconfigured")

func (c *policyCalls) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	ic, err := c.interceptor()
	switch {
	case err != nil:
		return nil, errNoPolicy
	case ic == nil: // off
		return h(ctx, req)
	}
	return ic.Unary()(ctx, req, info, h)
}

func (c *policyCalls) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ic, err := c.interceptor()
	switch {
	case err != nil:
		return errNoPolicy
	case ic == nil: // off
		return h(srv, ss)
	}
	return ic.Stream()(srv, ss, info, h)
}

func main() { demo.Main("grpc", demo.Routes, serveGRPC) }

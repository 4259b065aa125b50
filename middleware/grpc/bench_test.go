package grpclimit_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	grpclimit "github.com/ratekeeper/ratekeeper/middleware/grpc"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/store"
)

// passThrough stands in for the rate-limit interceptors: the baseline.
type passThrough struct{}

func (passThrough) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return h(ctx, req)
	}
}

func (passThrough) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return h(srv, ss)
	}
}

// BenchmarkUnary measures one unary call over bufconn, from the client's
// Invoke to its answer, without a rate limit ("none") and behind the
// interceptor keyed by the peer address on the memory store ("limited",
// a limit never reached): the difference is the interceptor's cost per
// call, which BenchmarkMiddleware of package middleware gives for HTTP.
func BenchmarkUnary(b *testing.B) {
	lim, err := limiter.New(newMemStore(b), limiter.Options{Name: "bench", Limits: []store.Limit{store.PerSecond(1 << 30)}})
	if err != nil {
		b.Fatal(err)
	}
	ic, err := grpclimit.New(lim, keyfunc.RemoteIP, grpclimit.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		ic   interface {
			Unary() grpc.UnaryServerInterceptor
			Stream() grpc.StreamServerInterceptor
		}
	}{{"none", passThrough{}}, {"limited", ic}} {
		b.Run(bc.name, func(b *testing.B) {
			s := startServer(b, bc.ic, "203.0.113.7:4242")
			ctx := context.Background()
			in, out := wrapperspb.String("hi"), new(wrapperspb.StringValue)
			b.ReportAllocs()
			for b.Loop() {
				if err := s.conn.Invoke(ctx, methodSay, in, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

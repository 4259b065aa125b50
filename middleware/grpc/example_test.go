package grpclimit_test

import (
	"context"
	"fmt"
	"log"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware"
	grpclimit "github.com/ratekeeper/ratekeeper/middleware/grpc"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// Example limits a gRPC server to 2 calls per minute per client address,
// with the same limiter an HTTP route could use.
func Example() {
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	// snippet:grpc-quickstart
	lim, err := middleware.New(st, keyfunc.RemoteIP, store.PerMinute(2), middleware.Options{Name: "api"})
	if err != nil {
		log.Fatal(err)
	}
	// The HTTP middleware's decision core serves gRPC calls too: one quota.
	ic, err := grpclimit.New(lim.Limiter, keyfunc.RemoteIP, grpclimit.Options{})
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(ic.Unary()),
		grpc.ChainStreamInterceptor(ic.Stream()),
	)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	// end snippet

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	for range 3 {
		resp, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
		if err != nil {
			fmt.Println(status.Code(err))
			continue
		}
		fmt.Println(resp.GetStatus())
	}
	// Output:
	// SERVING
	// SERVING
	// ResourceExhausted
}

package grpclimit_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

// The echo service of the tests: a unary method that answers its request
// and a bidirectional stream that answers every message.
const (
	methodSay  = "/ratekeeper.test.Echo/Say"
	methodChat = "/ratekeeper.test.Echo/Chat"
)

// echo counts what reached its handlers.
type echo struct {
	calls    atomic.Int64 // unary calls handled
	messages atomic.Int64 // stream messages received
}

func (e *echo) desc() *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: "ratekeeper.test.Echo",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Say",
			Handler: func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
				in := new(wrapperspb.StringValue)
				if err := dec(in); err != nil {
					return nil, err
				}
				h := func(ctx context.Context, req any) (any, error) {
					e.calls.Add(1)
					return req, nil
				}
				if ic == nil {
					return h(ctx, in)
				}
				return ic(ctx, in, &grpc.UnaryServerInfo{FullMethod: methodSay}, h)
			},
		}},
		Streams: []grpc.StreamDesc{{
			StreamName:    "Chat",
			ServerStreams: true,
			ClientStreams: true,
			Handler: func(_ any, ss grpc.ServerStream) error {
				for {
					in := new(wrapperspb.StringValue)
					if err := ss.RecvMsg(in); err != nil {
						if errors.Is(err, io.EOF) {
							return nil
						}
						return err
					}
					e.messages.Add(1)
					if err := ss.SendMsg(in); err != nil {
						return err
					}
				}
			},
		}},
	}
}

// withPeer returns a unary and a stream interceptor that give every call
// the peer address addr, as a TCP listener would: bufconn's own address
// is not an IP:port pair.
func withPeer(addr string) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	a := net.TCPAddrFromAddrPort(netip.MustParseAddrPort(addr))
	set := func(ctx context.Context) context.Context { return peer.NewContext(ctx, &peer.Peer{Addr: a}) }
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			return h(set(ctx), req)
		}, func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return h(srv, &ctxStream{ServerStream: ss, ctx: set(ss.Context())})
		}
}

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }

// server is an echo server on bufconn with its client connection.
type server struct {
	echo *echo
	conn *grpc.ClientConn
	// unaryErr is what the rate-limit interceptor returned for the last
	// unary call, seen on the server.
	unaryErr atomic.Pointer[error]
}

// startServer serves the echo service behind the interceptors of ic on
// bufconn, the calls coming from peer (an IP:port; "" keeps bufconn's);
// the unary interceptors pre run first.
func startServer(t testing.TB, ic interface {
	Unary() grpc.UnaryServerInterceptor
	Stream() grpc.StreamServerInterceptor
}, peerAddr string, pre ...grpc.UnaryServerInterceptor) *server {
	t.Helper()
	s := &server{echo: &echo{}}
	unary := pre
	var streams []grpc.StreamServerInterceptor
	if peerAddr != "" {
		u, st := withPeer(peerAddr)
		unary, streams = append(unary, u), append(streams, st)
	}
	record := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := ic.Unary()(ctx, req, info, h)
		s.unaryErr.Store(&err)
		return resp, err
	}
	unary = append(unary, record)
	streams = append(streams, ic.Stream())
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(streams...))
	srv.RegisterService(s.echo.desc(), nil)
	lis := bufconn.Listen(1 << 20)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	s.conn = conn
	return s
}

// say makes one unary call with the outgoing metadata kv and returns the
// response header metadata and the error.
func say(t *testing.T, conn *grpc.ClientConn, kv ...string) (metadata.MD, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if len(kv) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, kv...)
	}
	var md metadata.MD
	err := conn.Invoke(ctx, methodSay, wrapperspb.String("hi"), new(wrapperspb.StringValue), grpc.Header(&md))
	return md, err
}

// lastServerErr returns what the interceptor returned for the last unary
// call.
func (s *server) lastServerErr() error {
	p := s.unaryErr.Load()
	if p == nil {
		return nil
	}
	return *p
}

// retryDelay returns the RetryInfo delay of a status error, and whether
// it has one.
func retryDelay(err error) (time.Duration, bool) {
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration(), true
		}
	}
	return 0, false
}

func wantCode(t *testing.T, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("got status %v (%v), want %v", got, err, want)
	}
}

func newMemStore(t testing.TB) store.Store {
	t.Helper()
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// refusedIDs records the identities the limiter refused, through its
// refusal hook.
type refusedIDs struct{ ids chan string }

func newRefusedIDs() *refusedIDs { return &refusedIDs{ids: make(chan string, 64)} }

// hook is the limiter's refusal hook.
func (r *refusedIDs) hook(_ context.Context, _ limiter.Decision, id string) { r.ids <- id }

func (r *refusedIDs) next(t *testing.T) string {
	t.Helper()
	select {
	case id := <-r.ids:
		return id
	default:
		t.Fatal("no refusal recorded")
		return ""
	}
}

// failingStore fails every call as a dead backend does; with block, it
// waits for the call's context to end first.
type failingStore struct{ block bool }

func (s failingStore) fail(ctx context.Context, op string) error {
	if s.block {
		<-ctx.Done()
		return &store.BackendError{Op: op, Kind: "timeout", Err: ctx.Err()}
	}
	return &store.BackendError{Op: op, Kind: "connection", Err: errors.New("connection refused")}
}

func (s failingStore) Take(ctx context.Context, _ store.Request) (store.Decision, error) {
	return store.Decision{}, s.fail(ctx, "take")
}

func (s failingStore) Peek(ctx context.Context, _ store.Request) (store.Decision, error) {
	return store.Decision{}, s.fail(ctx, "peek")
}

func (s failingStore) Reset(ctx context.Context, _ store.Request) error { return s.fail(ctx, "reset") }

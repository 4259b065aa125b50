package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/internal/redistest"
)

// randomPrefix returns a fresh key prefix so that tests sharing one Redis
// never see each other's keys. It contains no glob characters.
func randomPrefix(t testing.TB) string {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("random prefix: %v", err)
	}
	return "rkit-" + hex.EncodeToString(b[:])
}

// newClient returns a go-redis client with default options (MaxRetries 3,
// ContextTimeoutEnabled false, 5 s read timeout: the settings a user most
// likely passes) connected to srv. It is closed when the test ends.
func newClient(t testing.TB, srv *redisServer) *redis.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addr := loopbackAddr(t, srv)
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("ping %s: %v", addr, err)
	}
	return c
}

// resolvingClient is a default-options go-redis client whose dialer asks
// the container for its current mapped port on every new connection, so it
// keeps working after the container is stopped and started on a new port.
type resolvingClient struct {
	*redis.Client
	addr atomic.Pointer[string]
}

// newResolvingClient returns a resolvingClient for srv. Call refresh after
// restarting the container.
func newResolvingClient(t testing.TB, srv *redisServer) *resolvingClient {
	t.Helper()
	rc := &resolvingClient{}
	rc.refresh(t, srv)
	var d net.Dialer
	rc.Client = redis.NewClient(&redis.Options{
		Addr: "redis-container:6379", // informational; the dialer decides
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, *rc.addr.Load())
		},
	})
	t.Cleanup(func() { _ = rc.Close() })
	return rc
}

// refresh re-reads the container's mapped port.
func (rc *resolvingClient) refresh(t testing.TB, srv *redisServer) {
	t.Helper()
	addr := loopbackAddr(t, srv)
	rc.addr.Store(&addr)
}

// loopbackAddr returns the container's current host address, failing the
// test unless it is a loopback address (traffic must never leave it).
func loopbackAddr(t testing.TB, srv *redisServer) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addr, err := srv.addr(ctx)
	if err != nil {
		t.Fatalf("redis address: %v", err)
	}
	if !isLoopbackAddr(addr) {
		t.Fatalf("redis address %s is not a loopback address", addr)
	}
	return addr
}

// scanTTLs returns the PTTL of every key under prefix (package
// redistest): a key without a TTL is reported as -1ms, and keys that
// expire during the scan are left out.
func scanTTLs(ctx context.Context, c redis.UniversalClient, prefix string) (map[string]time.Duration, error) {
	return redistest.KeyTTLs(ctx, c, prefix)
}

// keyTTLs is scanTTLs that fails the test on errors.
func keyTTLs(ctx context.Context, t testing.TB, c redis.UniversalClient, prefix string) map[string]time.Duration {
	t.Helper()
	ttls, err := scanTTLs(ctx, c, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return ttls
}

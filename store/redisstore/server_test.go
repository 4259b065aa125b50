package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/internal/redistest"
)

// server is a redis-server process started by the tests.
type server struct {
	*redistest.Server
	addr string
}

// The server most tests use, started on first use (fuzz workers and
// tests that need no Redis never start one) and stopped by TestMain.
var (
	sharedOnce sync.Once
	shared     *server
	sharedErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	os.Exit(code)
}

// startServer starts a private redis-server (package redistest).
func startServer() (*server, error) {
	s, err := redistest.Start()
	if err != nil {
		return nil, err
	}
	return &server{Server: s, addr: s.Addr}, nil
}

// requireServer returns the shared server, starting it on first use, or
// skips the test when none can run (fails it when Redis is required).
func requireServer(t testing.TB) *server {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = startServer() })
	if shared == nil {
		redistest.Unavailable(t, sharedErr)
	}
	return shared
}

// newClient returns a client for srv, closed when the test ends.
func newClient(t testing.TB, srv *server, opts *redis.Options) *redis.Client {
	t.Helper()
	if opts == nil {
		opts = &redis.Options{}
	}
	opts.Addr = srv.addr
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// randomPrefix returns a key prefix private to one test.
func randomPrefix(t testing.TB) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "rktest-" + hex.EncodeToString(b[:])
}

// newStore returns a store with a private prefix on the shared server.
func newStore(t testing.TB, opts Options) (*redisStore, *redis.Client) {
	t.Helper()
	srv := requireServer(t)
	c := newClient(t, srv, nil)
	if opts.Prefix == "" {
		opts.Prefix = randomPrefix(t)
	}
	if opts.Timeout == 0 {
		// Generous: the race detector and a busy 2-core machine are slow.
		opts.Timeout = 2 * time.Second
	}
	s, err := newRedis(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

// prefixKeys lists the keys under prefix.
func prefixKeys(t testing.TB, c *redis.Client, prefix string) []string {
	t.Helper()
	var out []string
	iter := c.Scan(context.Background(), 0, prefix+":*", 100).Iterator()
	for iter.Next(context.Background()) {
		out = append(out, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

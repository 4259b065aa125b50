package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisBinary is the server the package tests start on 127.0.0.1.
const redisBinary = "/usr/bin/redis-server"

// server is a redis-server process started by the tests.
type server struct {
	addr string
	cmd  *exec.Cmd
}

// The server most tests use, started on first use (fuzz workers and
// tests that need no Redis never start one) and stopped by TestMain.
var (
	sharedOnce sync.Once
	shared     *server
	skipReason string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.stop()
	}
	os.Exit(code)
}

// startServer starts redis-server on a free port between 20000 and 40000
// without persistence and waits until it answers PING.
func startServer() (*server, error) {
	if _, err := os.Stat(redisBinary); err != nil {
		return nil, fmt.Errorf("no redis-server to test against: %w", err)
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		n, err := rand.Int(rand.Reader, big.NewInt(20000))
		if err != nil {
			return nil, err
		}
		port := 20000 + int(n.Int64())
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			lastErr = err
			continue
		}
		l.Close()
		cmd := exec.Command(redisBinary, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning")
		// Should the test binary die without cleaning up, the kernel kills
		// the server with it.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start %s: %w", redisBinary, err)
		}
		srv := &server{addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd}
		if err := srv.waitReady(3 * time.Second); err != nil {
			srv.stop()
			lastErr = err
			continue
		}
		return srv, nil
	}
	return nil, fmt.Errorf("could not start redis-server: %w", lastErr)
}

// waitReady polls PING until it succeeds or d passes.
func (s *server) waitReady(d time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server at %s not ready: %w", s.addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop kills the process this test binary started (by its pid) and reaps it.
func (s *server) stop() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

// requireServer returns the shared server, starting it on first use, or
// skips the test when none can run.
func requireServer(t testing.TB) *server {
	t.Helper()
	sharedOnce.Do(func() {
		srv, err := startServer()
		if err != nil {
			skipReason = err.Error()
			return
		}
		shared = srv
	})
	if shared == nil {
		if os.Getenv("RATEKEEPER_REQUIRE_REDIS") == "1" {
			t.Fatal("RATEKEEPER_REQUIRE_REDIS=1 but no redis-server could run: " + skipReason)
		}
		t.Skip("skipping: " + skipReason)
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
func newStore(t testing.TB, opts Options) (*Store, *redis.Client) {
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
	s, err := New(c, opts)
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

package main

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

// redisBinary is the server the tests start on 127.0.0.1.
const redisBinary = "/usr/bin/redis-server"

// server is a redis-server process started by the tests.
type server struct {
	addr string
	cmd  *exec.Cmd
}

// The server the tests share, started on first use and stopped by
// TestMain, by its pid.
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

// startServer starts redis-server without persistence on a free loopback
// port between 20000 and 40000 and waits until it answers PING.
func startServer() (*server, error) {
	if _, err := os.Stat(redisBinary); err != nil {
		return nil, fmt.Errorf("no redis-server to test against: %w", err)
	}
	var lastErr error
	for range 5 {
		n, err := rand.Int(rand.Reader, big.NewInt(20000))
		if err != nil {
			return nil, err
		}
		port := strconv.Itoa(20000 + int(n.Int64()))
		l, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			lastErr = err
			continue
		}
		l.Close()
		cmd := exec.Command(redisBinary, "--port", port, "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning")
		// Should the test binary die without cleaning up, the kernel
		// kills the server with it.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start %s: %w", redisBinary, err)
		}
		srv := &server{addr: "127.0.0.1:" + port, cmd: cmd}
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

// stop kills the process the tests started, by its pid, and reaps it.
func (s *server) stop() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

// requireServer returns the shared server, starting it on first use. It
// skips the test, saying why, when none can run, and fails it instead when
// RATEKEEPER_REQUIRE_REDIS=1.
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

// randomPrefix returns a key prefix private to one test.
func randomPrefix(t testing.TB) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "rkcli-" + hex.EncodeToString(b[:])
}

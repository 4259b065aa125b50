// Package redistest is the project's one harness for tests that need a
// real Redis without Docker: it starts a private redis-server on a free
// loopback port, without persistence, waits until it answers, and stops it
// by its pid. It also lists the keys under a prefix with their TTLs, which
// the TTL assertions of several test packages share, sorts the Redis
// store's keys by kind for the conformance suite's harnesses, and offers a
// proxy that delays every reply ([DelayProxy]) with an open-loop driver
// ([OpenLoop]) for the tests of a slow server.
//
// A test that cannot start a server is skipped with the reason, unless
// RATEKEEPER_REQUIRE_REDIS=1 (set by CI), which turns the skip into a
// failure.
package redistest

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store/storetest"
)

// binary returns the redis-server the tests run: the first on PATH, else
// /usr/bin/redis-server (Debian's, where CI installs it).
func binary() (string, error) {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	const debian = "/usr/bin/redis-server"
	if _, err := os.Stat(debian); err != nil {
		return "", fmt.Errorf("no redis-server to test against (none on PATH): %w", err)
	}
	return debian, nil
}

// Server is a redis-server process started by a test.
type Server struct {
	// Addr is "127.0.0.1:<port>".
	Addr string
	cmd  *exec.Cmd
	// exited is closed when the process has ended and been reaped.
	exited chan struct{}
}

// The ports Start picks from: [firstPort, firstPort+ports). They and the
// cluster bus ports of cluster-mode servers (the port plus 10000) lie
// below Linux's default range of ephemeral ports (32768-60999), from which
// the tests' own client connections take their local ports: a port picked
// there could be taken by a connection between the check and the server's
// bind.
const (
	firstPort = 10000
	ports     = 12000
)

// startAttempts bounds the ports Start tries.
const startAttempts = 10

// Start starts redis-server on a free port between 10000 and 21999 with
// args appended to the defaults (no persistence, loopback only, warnings
// only) and waits until it answers PING. A port taken meanwhile (the
// server exits at once) is replaced by another. Should the test binary
// die, the kernel kills the server with it.
func Start(args ...string) (*Server, error) {
	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		n, err := rand.Int(rand.Reader, big.NewInt(ports))
		if err != nil {
			return nil, err
		}
		port := strconv.Itoa(firstPort + int(n.Int64()))
		l, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			lastErr = err
			continue
		}
		l.Close()
		s, err := StartAt(port, args...)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, fmt.Errorf("could not start redis-server: %w", lastErr)
}

// StartAt starts redis-server on 127.0.0.1:port, as [Start] does, for a
// test that must know the address before the server runs (a client
// started while Redis is down).
func StartAt(port string, args ...string) (*Server, error) {
	bin, err := binary()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, append([]string{"--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"}, args...)...)
	setParentDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &Server{Addr: "127.0.0.1:" + port, cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(3 * time.Second); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// waitReady sends PING until the server answers +PONG, the process ends
// (a port taken, for one) or d passes.
func (s *Server) waitReady(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		err := s.ping()
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("redis-server at %s exited before it answered: %w", s.Addr, err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server at %s not ready: %w", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Server) ping() error {
	c, err := net.DialTimeout("tcp", s.Addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
		return err
	}
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// Stop kills the process (by its pid) and reaps it. It resumes a paused
// server first.
func (s *Server) Stop() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.Resume()
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// Pause stops the server process (SIGSTOP): connections stay open and
// nothing is answered, as with a Redis that hangs. Where there is no
// SIGSTOP (Windows) it returns an error.
func (s *Server) Pause() error { return signalStop(s.cmd.Process) }

// Resume continues a paused server (SIGCONT). Where there is no SIGCONT
// (Windows) it returns an error.
func (s *Server) Resume() error { return signalCont(s.cmd.Process) }

// Required reports whether tests must fail rather than skip when no
// server can run (RATEKEEPER_REQUIRE_REDIS=1).
func Required() bool { return os.Getenv("RATEKEEPER_REQUIRE_REDIS") == "1" }

// Require starts a server for t, stopped when t ends, or skips t with the
// reason (fails it under RATEKEEPER_REQUIRE_REDIS=1).
func Require(t testing.TB, args ...string) *Server {
	t.Helper()
	s, err := Start(args...)
	if err != nil {
		Unavailable(t, err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Unavailable skips t because no server could run, or fails it under
// RATEKEEPER_REQUIRE_REDIS=1.
func Unavailable(t testing.TB, err error) {
	t.Helper()
	if Required() {
		t.Fatalf("RATEKEEPER_REQUIRE_REDIS=1 but redis-server could not run: %v", err)
	}
	t.Skipf("skipping: redis-server could not run: %v", err)
}

// KeyTTLs returns the PTTL of every key whose name starts with prefix: a
// key without a TTL is reported as -1ms, and keys that expire during the
// scan are left out. The prefix may not contain glob characters.
func KeyTTLs(ctx context.Context, c redis.UniversalClient, prefix string) (map[string]time.Duration, error) {
	if strings.ContainsAny(prefix, `*?[]\`) {
		return nil, fmt.Errorf("prefix %q contains glob characters", prefix)
	}
	ttls := make(map[string]time.Duration)
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		d, err := c.PTTL(ctx, k).Result()
		if err != nil {
			return nil, fmt.Errorf("pttl %q: %w", k, err)
		}
		switch d {
		case -2: // expired between SCAN and PTTL
			continue
		case -1:
			d = -time.Millisecond
		}
		ttls[k] = d
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("scan %s*: %w", prefix, err)
	}
	return ttls, nil
}

// KeysByKind sorts keys of the Redis store (store/redisstore, whose
// package documentation lists them under "Keys") into the kinds of the
// conformance suite, by the part after the key's hash tag
// ("<prefix>:{<encoded key>}:<part>"): "block" is a block, "strikes" a
// strike counter, "dedup" the remembered de-duplication ids, "o" an
// override, and any other part limit state (or a stack's receipt).
func KeysByKind(ttls map[string]time.Duration) storetest.StoredKeys {
	keys := storetest.StoredKeys{
		State:    map[string]time.Duration{},
		Block:    map[string]time.Duration{},
		Strikes:  map[string]time.Duration{},
		Dedup:    map[string]time.Duration{},
		Override: map[string]time.Duration{},
	}
	for k, ttl := range ttls {
		part := k
		if i := strings.Index(k, "}:"); i >= 0 {
			part = k[i+len("}:"):]
		}
		switch part {
		case "block":
			keys.Block[k] = ttl
		case "strikes":
			keys.Strikes[k] = ttl
		case "dedup":
			keys.Dedup[k] = ttl
		case "o":
			keys.Override[k] = ttl
		default:
			keys.State[k] = ttl
		}
	}
	return keys
}

// StoredKeys is KeyTTLs sorted by KeysByKind: the KeyTTLs of a
// conformance harness on one Redis node.
func StoredKeys(ctx context.Context, c redis.UniversalClient, prefix string) (storetest.StoredKeys, error) {
	ttls, err := KeyTTLs(ctx, c, prefix)
	if err != nil {
		return storetest.StoredKeys{}, err
	}
	return KeysByKind(ttls), nil
}

package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
)

const (
	envImage        = "RATEKEEPER_REDIS_IMAGE"
	envRequire      = "RATEKEEPER_REQUIRE_REDIS"
	envHostOverride = "TESTCONTAINERS_HOST_OVERRIDE"
	envRyukDisabled = "TESTCONTAINERS_RYUK_DISABLED"
	defaultImage    = "ratekeeper/redis:local"
)

// shared is the Redis container every non-destructive test uses. It is set
// by TestMain; when it is nil, unavailable says why.
var (
	shared      *redisServer
	unavailable string
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if err := checkEnvironment(); err != nil {
		fmt.Fprintf(os.Stderr, "integration: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	srv, err := startRedis(ctx)
	cancel()
	// Terminate whatever was created, even when starting failed half way.
	defer func() {
		if srv != nil {
			if err := srv.terminate(); err != nil {
				fmt.Fprintf(os.Stderr, "integration: terminate shared redis: %v\n", err)
			}
		}
	}()
	switch {
	case err == nil:
		shared = srv
	case requireRedis():
		fmt.Fprintf(os.Stderr, "integration: Redis is required (%s=1) but unavailable: %v\n", envRequire, err)
		return 1
	default:
		unavailable = err.Error()
		fmt.Fprintf(os.Stderr, "integration: skipping tests that need Redis: %v\n", err)
	}
	return m.Run()
}

// checkEnvironment refuses to run without the settings that keep
// testcontainers on the loopback interface and away from registries.
func checkEnvironment() error {
	host := os.Getenv(envHostOverride)
	if host == "" {
		return fmt.Errorf("%s is not set; set it to 127.0.0.1 (without it testcontainers dials the Docker gateway address)", envHostOverride)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("%s=%q is not a loopback address; set it to 127.0.0.1", envHostOverride, host)
	}
	if v := os.Getenv(envRyukDisabled); v != "true" && v != "1" {
		return fmt.Errorf("%s=%q; set it to true (the reaper image cannot be pulled; tests clean up their own containers)", envRyukDisabled, v)
	}
	return nil
}

func requireRedis() bool { return os.Getenv(envRequire) == "1" }

func redisImage() string {
	if img := os.Getenv(envImage); img != "" {
		return img
	}
	return defaultImage
}

// redisServer is one Redis container.
type redisServer struct {
	ctr *tcredis.RedisContainer
}

// errDocker marks failures to reach the Docker daemon or find the image.
var errDocker = errors.New("docker unavailable")

// startRedis checks the Docker daemon and the image, then starts a Redis
// container. A non-nil server is returned whenever a container may have
// been created, also together with an error, so the caller can terminate it.
func startRedis(ctx context.Context) (*redisServer, error) {
	dc, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errDocker, err)
	}
	defer dc.Close()
	if _, err := dc.Info(ctx, client.InfoOptions{}); err != nil {
		return nil, fmt.Errorf("%w: %v", errDocker, err)
	}
	img := redisImage()
	if _, err := dc.ImageInspect(ctx, img); err != nil && img == defaultImage {
		return nil, fmt.Errorf("%w: image %s not found (build it with `make redis-image`): %v", errDocker, img, err)
	}
	ctr, err := tcredis.Run(ctx, img,
		// Replaces the image's CMD, so protected mode is turned off again:
		// connections arrive through the Docker bridge, not loopback.
		testcontainers.WithCmdArgs("--protected-mode", "no", "--save", "", "--appendonly", "no"),
	)
	var srv *redisServer
	if ctr != nil {
		srv = &redisServer{ctr: ctr}
	}
	if err != nil {
		return srv, fmt.Errorf("start %s: %w", img, err)
	}
	return srv, nil
}

// terminate removes the container.
func (s *redisServer) terminate() error {
	return testcontainers.TerminateContainer(s.ctr)
}

// addr returns the host:port at which the server is reachable now. The
// mapped port changes when the container is stopped and started again.
func (s *redisServer) addr(ctx context.Context) (string, error) {
	host, err := s.ctr.Host(ctx)
	if err != nil {
		return "", fmt.Errorf("container host: %w", err)
	}
	port, err := s.ctr.MappedPort(ctx, "6379/tcp")
	if err != nil {
		return "", fmt.Errorf("mapped port: %w", err)
	}
	return net.JoinHostPort(host, port.Port()), nil
}

// sharedRedis returns the package's shared server, skipping the test
// (with the reason) when Redis is unavailable and not required.
func sharedRedis(t testing.TB) *redisServer {
	t.Helper()
	if shared == nil {
		t.Skipf("Redis unavailable: %s (set %s=1 to make this a failure)", unavailable, envRequire)
	}
	return shared
}

// dedicatedRedis starts a container for this test alone, for tests that
// pause, stop or restart Redis. It is terminated when the test ends.
func dedicatedRedis(t testing.TB) *redisServer {
	t.Helper()
	sharedRedis(t) // skip early when Docker is unavailable
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := startRedis(ctx)
	t.Cleanup(func() {
		if srv != nil {
			if err := srv.terminate(); err != nil {
				t.Errorf("terminate redis container: %v", err)
			}
		}
	})
	if err != nil {
		t.Fatalf("start dedicated redis: %v", err)
	}
	return srv
}

// pause freezes every process of the container (docker pause): TCP
// connections are still accepted by the port proxy but nothing answers.
func (s *redisServer) pause(t testing.TB) {
	t.Helper()
	s.dockerDo(t, "pause", func(ctx context.Context, dc *testcontainers.DockerClient, id string) error {
		_, err := dc.ContainerPause(ctx, id, client.ContainerPauseOptions{})
		return err
	})
}

// unpause resumes a paused container.
func (s *redisServer) unpause(t testing.TB) {
	t.Helper()
	s.dockerDo(t, "unpause", func(ctx context.Context, dc *testcontainers.DockerClient, id string) error {
		_, err := dc.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{})
		return err
	})
}

func (s *redisServer) dockerDo(t testing.TB, what string, f func(context.Context, *testcontainers.DockerClient, string) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dc, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		t.Fatalf("docker client for %s: %v", what, err)
	}
	defer dc.Close()
	if err := f(ctx, dc, s.ctr.GetContainerID()); err != nil {
		t.Fatalf("docker %s: %v", what, err)
	}
}

// stop stops the container (SIGTERM, then SIGKILL after one second).
func (s *redisServer) stop(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	timeout := time.Second
	if err := s.ctr.Stop(ctx, &timeout); err != nil {
		t.Fatalf("stop redis container: %v", err)
	}
}

// start starts a stopped container again and waits until Redis accepts
// connections. Docker may map a different host port.
func (s *redisServer) start(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.ctr.Start(ctx); err != nil {
		t.Fatalf("start redis container: %v", err)
	}
}

func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

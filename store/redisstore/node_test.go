package redisstore

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store"
)

// NodeFor names a node only for a Redis Cluster client; a single server
// is one node, which the caller's limiter-wide breaker stands for. It
// sends nothing (the address below has no server).
func TestNodeForSingleServer(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	s, err := newRedis(c, Options{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	for _, key := range []string{"user-42", ""} {
		if got := s.NodeFor(context.Background(), store.Request{Key: key}); got != "" {
			t.Errorf("NodeFor(%q) on a single server: got %q, want \"\"", key, got)
		}
	}
}

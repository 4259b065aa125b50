package integration

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestRedisServerAnswers(t *testing.T) {
	srv := sharedRedis(t)
	c := newClient(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		t.Fatalf("INFO server: %v", err)
	}
	if !strings.Contains(info, "redis_version:") {
		t.Fatalf("got INFO without redis_version: %q", info)
	}
}

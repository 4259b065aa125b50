package redisstore

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store"
)

// reloadingClient is a client to a dead address that counts topology
// reloads, standing in for a *redis.ClusterClient whose master is gone.
type reloadingClient struct {
	*redis.Client
	reloads atomic.Int32
}

func (c *reloadingClient) ReloadState(context.Context) { c.reloads.Add(1) }

func TestClusterReloadAfterConnectionErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reload time.Duration
		want   int32
	}{
		{"one reload per interval for a burst of failures", time.Minute, 1},
		{"disabled", -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &reloadingClient{Client: redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond, DialerRetries: 1})}
			t.Cleanup(func() { _ = c.Close() })
			s, err := newRedis(c, Options{Timeout: time.Second, ClusterReload: tc.reload})
			if err != nil {
				t.Fatal(err)
			}
			req := store.Request{Key: "k", Limits: []store.Limit{store.PerMinute(1)}}
			for range 5 {
				if _, err := s.Take(context.Background(), req); store.KindOf(err) != "connection" {
					t.Fatalf("got %v (kind %s), want a connection error", err, store.KindOf(err))
				}
			}
			deadline := time.Now().Add(2 * time.Second)
			for c.reloads.Load() < tc.want && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond) // let any extra reload show
			if got := c.reloads.Load(); got != tc.want {
				t.Fatalf("reloads: got %d, want %d", got, tc.want)
			}
		})
	}
}

package integration

import (
	"context"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/redisstore"
)

// shardBreakerThreshold is the breaker threshold of TestRedisClusterShardBreaker.
const shardBreakerThreshold = 3

// TestRedisClusterShardBreaker kills one master of a three-master cluster
// (no replicas; cluster-node-timeout stays at 15 s, so the cluster does
// not declare itself down during the test) and sends requests for 30
// client identities, spread over the three masters, through a fail-closed
// middleware with a breaker of threshold 3 and a one-minute cooldown: one
// request for each of the dead master's identities, then ten rounds over
// all identities.
//
//   - per-node: the Redis store tells the middleware which master serves
//     each key ([store.NodeLocator]), so the dead master's breaker
//     opens after three failures and its keys are refused without calling
//     the store, while every request for the other masters' keys is
//     decided (200).
//   - limiter-wide: the same store behind a wrapper that hides NodeFor
//     keeps the single breaker, which the dead master's failures open for
//     every key: the healthy masters' keys fail closed (503). This is the
//     behaviour the per-node breakers replace, and shows the first case
//     can fail.
func TestRedisClusterShardBreaker(t *testing.T) {
	cluster := startCluster(t, clusterSpec{masters: 3})
	cc := cluster.clientWith(t, redis.ClusterOptions{
		DialTimeout:  200 * time.Millisecond,
		ReadTimeout:  200 * time.Millisecond,
		WriteTimeout: 200 * time.Millisecond,
	})
	s := newStoreWith(t, cc, redisstore.Options{Prefix: randomPrefix(t), Timeout: 500 * time.Millisecond})
	ctx := context.Background()

	const policy = "shard"
	ids := make([]string, 30)
	nodeOf := map[string]string{}
	perNode := map[string]int{}
	for i := range ids {
		ids[i] = "client-" + strconv.Itoa(i)
		// The middleware stores identity id of policy p under "p:id".
		n := s.NodeFor(ctx, store.Request{Key: policy + ":" + ids[i]})
		if n == "" {
			t.Fatalf("NodeFor %q: got \"\", want a master's address", ids[i])
		}
		nodeOf[ids[i]] = n
		perNode[n]++
	}
	if len(perNode) != len(cluster.addrs) {
		t.Fatalf("identities per master: got %v, want all %d masters used", perNode, len(cluster.addrs))
	}
	victim := nodeOf[ids[0]]
	for _, p := range cluster.nodes {
		if p.addr != victim {
			continue
		}
		if err := p.cmd.Process.Kill(); err != nil {
			t.Fatalf("kill master %s: %v", p.addr, err)
		}
		<-p.exited
	}
	t.Logf("killed master %s, which serves %d of %d identities", victim, perNode[victim], len(ids))

	for _, tc := range []struct {
		name  string
		store store.Store
		// wantHealthyFailed: whether requests for the healthy masters'
		// keys fail once the dead master's failures opened a breaker.
		wantHealthyFailed bool
	}{
		{"per-node", s, false},
		{"limiter-wide", struct{ store.Store }{s}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var last limiter.Event
			lim, err := middleware.New(tc.store, func(r *http.Request) (string, error) { return r.Header.Get("X-Client"), nil },
				store.PerMinute(1000), middleware.Options{
					Name:             policy,
					FailureMode:      limiter.FailClosed,
					BreakerThreshold: shardBreakerThreshold,
					BreakerCooldown:  time.Minute,
					Observer:         func(e limiter.Event) { mu.Lock(); last = e; mu.Unlock() },
				})
			if err != nil {
				t.Fatalf("middleware.New: %v", err)
			}
			h := lim.Handler(okHandler)
			var healthy, healthyFailed, dead, deadCalled int
			// A burst for the dead master's keys first (consecutive
			// failures open a breaker), then every identity in turn.
			var order []string
			for _, id := range ids {
				if nodeOf[id] == victim {
					order = append(order, id)
				}
			}
			for range 10 {
				order = append(order, ids...)
			}
			for _, id := range order {
				r := httptest.NewRequest("GET", "/", nil)
				r.Header.Set("X-Client", id)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, r)
				mu.Lock()
				e := last
				mu.Unlock()
				if nodeOf[id] == victim {
					dead++
					if rec.Code != http.StatusServiceUnavailable {
						t.Errorf("request for %s on the dead master: got %d, want 503 (fail closed)", id, rec.Code)
					}
					if !e.Skipped {
						deadCalled++
					}
					continue
				}
				healthy++
				if rec.Code != http.StatusOK {
					healthyFailed++
				}
			}
			t.Logf("dead master: %d requests, %d reached the store; healthy masters: %d requests, %d failed", dead, deadCalled, healthy, healthyFailed)
			if tc.wantHealthyFailed {
				if healthyFailed == 0 {
					t.Errorf("limiter-wide breaker: got no failed request for the healthy masters, want the open breaker to fail them")
				}
				return
			}
			if healthyFailed != 0 {
				t.Errorf("healthy masters: got %d of %d requests failed, want none", healthyFailed, healthy)
			}
			if deadCalled != shardBreakerThreshold {
				t.Errorf("dead master: got %d requests that reached the store, want %d (then its breaker is open)", deadCalled, shardBreakerThreshold)
			}
		})
	}
}

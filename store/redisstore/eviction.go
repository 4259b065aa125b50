package redisstore

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// evictionCheck looks once, in the background, at the server's
// maxmemory-policy: a policy that may evict any key (allkeys-*) lets Redis
// drop limiter state under memory pressure, and every dropped key is a
// client admitted afresh.
type evictionCheck struct {
	once   sync.Once
	policy atomic.Pointer[string] // "" until known; "unknown" when CONFIG is refused
	logger *slog.Logger
}

// start runs the check once, off the request's path.
func (e *evictionCheck) start(client redis.UniversalClient) {
	e.once.Do(func() {
		go func() {
			unknown := "unknown"
			defer func() {
				// A panicking client hook must not take the process down
				// from a goroutine no request waits on.
				if recover() != nil {
					e.policy.Store(&unknown)
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			p := maxmemoryPolicy(ctx, client)
			// Warn first: whoever reads the policy then finds the
			// warning written.
			if unsafeEviction(p) {
				e.logger.Warn("ratekeeper: Redis may evict rate-limit state under memory pressure; clients whose keys are evicted are admitted afresh. Use maxmemory-policy noeviction or a volatile-* policy",
					slog.String("maxmemory_policy", p))
			}
			e.policy.Store(&p)
		}()
	})
}

// maxmemoryPolicy returns the policy of the server, or of the first master
// of a cluster that answers with an unsafe one; "unknown" when CONFIG GET
// is refused (managed services often disable it).
func maxmemoryPolicy(ctx context.Context, client redis.UniversalClient) string {
	get := func(c redis.Cmdable) string {
		v, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
		if err != nil || v["maxmemory-policy"] == "" {
			return "unknown"
		}
		return v["maxmemory-policy"]
	}
	cc, ok := client.(*redis.ClusterClient)
	if !ok {
		return get(client)
	}
	var mu sync.Mutex
	policy := ""
	_ = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		p := get(node)
		mu.Lock()
		if policy == "" || unsafeEviction(p) || policy == "unknown" {
			policy = p
		}
		mu.Unlock()
		return nil
	})
	if policy == "" {
		return "unknown"
	}
	return policy
}

// unsafeEviction reports policies that may evict keys the limiter needs:
// allkeys-* evicts any key. volatile-* evicts only keys with a TTL, which
// every limiter key has, but then only expiring state goes first; it is
// accepted, as is noeviction.
func unsafeEviction(policy string) bool {
	return strings.HasPrefix(policy, "allkeys-")
}

// EvictionPolicy returns the maxmemory-policy the store found on its
// server when it was first used: "" until the background check has
// answered, "unknown" when the server refused CONFIG GET. Under an
// allkeys-* policy Redis may drop limiter state under memory pressure,
// and every dropped key admits its client afresh; the store then logs a
// warning once. Use noeviction, or a volatile-* policy (every limiter key
// has a TTL).
func (s *redisStore) EvictionPolicy() string {
	if p := s.eviction.policy.Load(); p != nil {
		return *p
	}
	return ""
}

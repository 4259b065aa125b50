package redisstore

import (
	"context"

	"github.com/ratekeeper/ratekeeper/store"
)

// NodeFor returns the address of the Redis Cluster master that serves
// req's key (the slot of its hash tag, where every key of the decision
// lies) in the client's current view of the cluster, or "" for a client
// that is not a *redis.ClusterClient, or when the client has no view of the
// cluster. It sends nothing to Redis once the client has loaded the
// topology; before that it loads it within ctx, as the first Take would.
// Safe for concurrent use.
//
// The middleware uses it to keep a circuit breaker per master, so that a
// failing shard does not switch limiting off for the keys of the others.
func (s *redisStore) NodeFor(ctx context.Context, req store.Request) string {
	cc := s.pipes.cluster
	if cc == nil || req.Key == "" {
		return ""
	}
	node, err := cc.MasterForKey(ctx, "{"+encodeKey(req.Key)+"}")
	if err != nil {
		return ""
	}
	return node.Options().Addr
}

package integration

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/internal/redistest"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/redisstore"
	"github.com/ratekeeper/ratekeeper/store/storetest"
)

// TestRedisCluster runs the Redis store on a real Redis Cluster of three
// masters (redis-server processes on loopback ports, no replicas) through
// go-redis ClusterClients with default options:
//
//   - one-slot-per-decision: every key one decision writes (limit state,
//     block, strike counter, de-duplication ids) lies in
//     the slot of the request key's hash tag, on one master;
//   - keys-spread-over-masters: 200 client keys use all three masters, so
//     the hash tag is the client key and not something shared;
//   - exact-under-concurrency: 200 simultaneous requests for one key
//     through 4 middleware instances, each with its own ClusterClient and
//     store, against a limit of 50 admit exactly 50, for every algorithm;
//   - conformance: the store conformance suite, with key inspection that
//     scans every master, so every script (multi-limit, blocks, dedup,
//     reset) runs on the cluster without CROSSSLOT errors.
//
// Failover is tested by TestRedisClusterFailover, on a cluster with
// replicas.
func TestRedisCluster(t *testing.T) {
	cluster := startCluster(t, clusterSpec{masters: 3})
	cc := cluster.client(t)

	t.Run("one-slot-per-decision", func(t *testing.T) {
		for _, alg := range store.Algorithms {
			t.Run(alg.String(), func(t *testing.T) {
				testClusterOneSlot(t, cc, alg)
			})
		}
	})

	t.Run("keys-spread-over-masters", func(t *testing.T) {
		testClusterSpread(t, cc, len(cluster.addrs))
	})

	t.Run("exact-under-concurrency", func(t *testing.T) {
		clients := make([]redis.UniversalClient, 4)
		for i := range clients {
			clients[i] = cluster.client(t)
		}
		for _, alg := range store.Algorithms {
			t.Run(alg.String(), func(t *testing.T) {
				exactRounds(t, clients, alg, 2, "cluster-exact")
			})
		}
	})

	t.Run("warm-up-fetches-the-command-table", func(t *testing.T) {
		testClusterCommandTable(t, cluster)
	})

	t.Run("conformance", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) storetest.Harness {
			prefix := randomPrefix(t)
			return storetest.Harness{
				Store:   newStore(t, cc, prefix),
				Advance: time.Sleep,
				Exact:   false,
				KeyTTLs: func(ctx context.Context) (storetest.StoredKeys, error) {
					ttls, err := clusterTTLs(ctx, cc, prefix)
					return redistest.KeysByKind(ttls), err
				},
			}
		})
	})
}

// testClusterOneSlot makes one client key write every kind of key a
// decision can write, with a two-limit policy that de-duplicates, blocks
// and escalates, then finds those keys on the masters: all must be on one
// master and in the slot of the encoded client key (the hash tag).
func testClusterOneSlot(t *testing.T, cc *redis.ClusterClient, alg store.Algorithm) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prefix := randomPrefix(t)
	s := newStore(t, cc, prefix)
	// Braces and separators in the client key must not move the hash tag.
	key := "user:{42}}{:" + alg.String()
	limits := []store.Limit{
		{Name: "burst", Algorithm: alg, Rate: 2, Period: time.Hour, Block: time.Minute, BlockMax: 4 * time.Minute},
		{Name: "steady", Algorithm: alg, Rate: 10, Period: 2 * time.Hour},
	}
	awayFromWindowEdge(t, cc, time.Hour, 10*time.Second)

	steps := []struct {
		dedup string
		check func(store.Decision) bool
		want  string
	}{
		{"order-1", func(d store.Decision) bool { return d.Allowed && !d.Duplicate }, "admitted, not a duplicate"},
		{"order-1", func(d store.Decision) bool { return d.Allowed && d.Duplicate }, "admitted as a duplicate"},
		{"", func(d store.Decision) bool { return d.Allowed && !d.Duplicate }, "admitted"},
		{"", func(d store.Decision) bool { return !d.Allowed && d.Blocked && d.BlockStarted && d.LimitID == "burst" }, "refused, starting a block by burst"},
		{"order-2", func(d store.Decision) bool { return !d.Allowed && d.Blocked && !d.BlockStarted }, "refused by the block"},
	}
	for i, st := range steps {
		d, err := s.Take(ctx, store.Request{Key: key, Limits: limits, DedupID: st.dedup})
		if err != nil {
			t.Fatalf("take %d: got error %v, want nil", i, err)
		}
		if !st.check(d) {
			t.Fatalf("take %d: got %+v, want %s", i, d, st.want)
		}
	}

	byMaster, err := clusterKeys(ctx, cc, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(byMaster) != 1 {
		t.Fatalf("keys of one client key: got keys on %d masters (%v), want 1", len(byMaster), byMaster)
	}
	tagSlot, err := cc.ClusterKeySlot(ctx, hashTag(t, s, key)).Result()
	if err != nil {
		t.Fatalf("CLUSTER KEYSLOT: %v", err)
	}
	stateKeys, err := s.StateKeys(store.Request{Key: key, Limits: limits})
	if err != nil {
		t.Fatalf("StateKeys: %v", err)
	}
	kinds := map[string]int{}
	for master, keys := range byMaster {
		for _, k := range stateKeys {
			if _, ok := keys[k]; !ok {
				t.Errorf("state key %q: not found on master %s, which holds %v", k, master, keys)
			}
		}
		for k := range keys {
			slot, err := cc.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				t.Fatalf("CLUSTER KEYSLOT %q: %v", k, err)
			}
			if slot != tagSlot {
				t.Errorf("key %q: got slot %d, want %d (the slot of the encoded client key %q)", k, slot, tagSlot, hashTag(t, s, key))
			}
			switch {
			case strings.HasSuffix(k, ":block"):
				kinds["block"]++
			case strings.HasSuffix(k, ":strikes"):
				kinds["strikes"]++
			case strings.HasSuffix(k, ":dedup"):
				kinds["dedup"]++
			default:
				kinds["state"]++
			}
		}
	}
	for _, kind := range []string{"block", "strikes", "dedup", "state"} {
		if kinds[kind] == 0 {
			t.Errorf("got no %s key among %v, want at least one: the test did not cover every kind of key", kind, byMaster)
		}
	}
	if kinds["state"] != len(stateKeys) {
		t.Errorf("got %d limit state keys, want %d (%v)", kinds["state"], len(stateKeys), stateKeys)
	}
}

// testClusterSpread takes once for each of 200 client keys and checks that
// their state lies on every one of the cluster's masters.
func testClusterSpread(t *testing.T, cc *redis.ClusterClient, masters int) {
	const clients = 200
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prefix := randomPrefix(t)
	s := newStore(t, cc, prefix)
	lim := store.Limit{Rate: 10, Period: time.Minute}
	owner := map[string]bool{} // state key -> not yet found
	for i := range clients {
		req := store.Request{Key: "client-" + strconv.Itoa(i), Limits: []store.Limit{lim}}
		d, err := s.Take(ctx, req)
		if err != nil || !d.Allowed {
			t.Fatalf("take for %s: got %+v, %v, want allowed", req.Key, d, err)
		}
		keys, err := s.StateKeys(req)
		if err != nil {
			t.Fatalf("StateKeys: %v", err)
		}
		owner[keys[0]] = true
	}
	byMaster, err := clusterKeys(ctx, cc, prefix)
	if err != nil {
		t.Fatal(err)
	}
	perMaster := map[string]int{}
	for master, keys := range byMaster {
		for k := range keys {
			if owner[k] {
				perMaster[master]++
				delete(owner, k)
			}
		}
	}
	if len(owner) != 0 {
		t.Errorf("got %d of %d state keys missing from every master", len(owner), clients)
	}
	if len(perMaster) != masters {
		t.Errorf("state of %d client keys: got keys on %d masters %v, want all %d", clients, len(perMaster), perMaster, masters)
	}
	t.Logf("state keys per master: %v", perMaster)
}

// hashTag returns the Redis Cluster hash tag of every key s writes for
// client key (the encoded client key), read from a state key s names.
func hashTag(t testing.TB, s redisStore, key string) string {
	t.Helper()
	keys, err := s.StateKeys(store.Request{Key: key, Limits: []store.Limit{store.PerMinute(1)}})
	if err != nil {
		t.Fatalf("StateKeys: %v", err)
	}
	open, end := strings.IndexByte(keys[0], '{'), strings.IndexByte(keys[0], '}')
	if open < 0 || end < open {
		t.Fatalf("state key %q has no hash tag", keys[0])
	}
	return keys[0][open+1 : end]
}

// commandCounter counts the COMMAND calls of the clients it hooks.
type commandCounter struct{ n atomic.Int64 }

func (h *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "command" {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// testClusterCommandTable: a ClusterClient fetches Redis's command table
// (COMMAND) on the first command it routes itself, from nodes it picks at
// random and without the command's deadline; the store routes through it
// when a node refused a call, which is when a master may be dead. The
// store's warm-up has it fetch the table while every node is up: once New
// returns, COMMAND was sent. With the warm-up off, it was not (the check
// would see it).
func testClusterCommandTable(t *testing.T, cluster *testCluster) {
	for _, tc := range []struct {
		name   string
		warmUp time.Duration
		want   bool
	}{
		{"warm-up", 0, true},
		{"no-warm-up", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.addrs})
			t.Cleanup(func() { _ = cc.Close() })
			var h commandCounter
			cc.OnNewNode(func(n *redis.Client) { n.AddHook(&h) })
			newStoreWith(t, cc, redisstore.Options{Prefix: randomPrefix(t), WarmUp: tc.warmUp})
			if got := h.n.Load() > 0; got != tc.want {
				t.Fatalf("COMMAND sent before New returned: %v (%d times), want %v", got, h.n.Load(), tc.want)
			}
		})
	}
}

package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/internal/redistest"
	"github.com/ratekeeper/ratekeeper/store"
)

// redisError is a reply error as go-redis hands it back.
type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}

var _ redis.Error = redisError("")

func TestCallKeys(t *testing.T) {
	tests := []struct {
		name string
		args []any
		want []string
	}{
		{"lean", []any{"evalsha", "sha", 1, "k", "take"}, []string{"k"}},
		{"fillers repeat a key", []any{"evalsha", "sha", 5, "s", "s", "s", "s", "s", "take"}, []string{"s"}},
		{"distinct", []any{"evalsha", "sha", 6, "b", "s1", "b", "d", "s1", "s2", "take"}, []string{"b", "s1", "d", "s2"}},
		{"no key count", []any{"del", "k"}, nil},
		{"count beyond the arguments", []any{"evalsha", "sha", 3, "k"}, nil},
		{"key not a string", []any{"evalsha", "sha", 1, 7}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := callKeys(tt.args); !slices.Equal(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAskTarget(t *testing.T) {
	tests := []struct {
		err  error
		addr string
		ok   bool
	}{
		{redisError("ASK 1234 127.0.0.1:30002"), "127.0.0.1:30002", true},
		{fmt.Errorf("wrapped: %w", redisError("ASK 1 [::1]:7000")), "[::1]:7000", true},
		{redisError("MOVED 1234 127.0.0.1:30002"), "", false},
		{redisError("TRYAGAIN Multiple keys request during rehashing of slot"), "", false},
		{errors.New("ASK 1234 127.0.0.1:30002"), "", false}, // not a reply
	}
	for _, tt := range tests {
		addr, ok := askTarget(tt.err)
		if addr != tt.addr || ok != tt.ok {
			t.Errorf("askTarget(%v): got %q, %v, want %q, %v", tt.err, addr, ok, tt.addr, tt.ok)
		}
	}
}

func TestIsTryAgain(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{redisError("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{fmt.Errorf("x: %w", redisError("TRYAGAIN")), true},
		{redisError("ASK 1 127.0.0.1:1"), false},
		{errors.New("TRYAGAIN"), false},
		{nil, false},
	}
	for _, tt := range tests {
		if got := isTryAgain(tt.err); got != tt.want {
			t.Errorf("isTryAgain(%v): got %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestOutcomeUnknown(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{redisError("IOERR error or timeout reading to target instance"), true},
		{context.DeadlineExceeded, true},
		{&net.OpError{Op: "read", Err: errors.New("i/o timeout")}, true},
		{redisError("BUSYKEY Target key name already exists."), false},
		{redisError("NOPERM this user has no permissions to run the 'migrate' command"), false},
		{redisError("ERR Target instance replied with error: NOAUTH Authentication required."), false},
	} {
		if got := outcomeUnknown(tt.err); got != tt.want {
			t.Errorf("outcomeUnknown(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// clusterPair starts two cluster-mode servers, source holding every slot
// and target none, and waits until they form a cluster. It returns their
// clients and node IDs.
func clusterPair(ctx context.Context, t *testing.T) (source, target *redis.Client, sourceID, targetID string) {
	t.Helper()
	dir := t.TempDir()
	var nodes [2]*redis.Client
	var ids [2]string
	for i := range nodes {
		srv := redistest.Require(t, "--cluster-enabled", "yes", "--cluster-config-file", fmt.Sprintf("%s/nodes-%d.conf", dir, i))
		nodes[i] = redis.NewClient(&redis.Options{Addr: srv.Addr})
		t.Cleanup(func() { _ = nodes[i].Close() })
		ids[i] = nodes[i].Do(ctx, "cluster", "myid").Val().(string)
	}
	source, target = nodes[0], nodes[1]
	if err := source.Do(ctx, "cluster", "addslotsrange", 0, 16383).Err(); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(target.Options().Addr)
	if err := source.Do(ctx, "cluster", "meet", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	// The target knows the source (and its slots) once the handshake is
	// done, and both nodes must see the cluster up: either answers
	// CLUSTERDOWN until it does.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(target.Do(ctx, "cluster", "nodes").String(), ids[0]) ||
		!strings.Contains(target.ClusterInfo(ctx).Val(), "cluster_state:ok") ||
		!strings.Contains(source.ClusterInfo(ctx).Val(), "cluster_state:ok") {
		if time.Now().After(deadline) {
			t.Fatalf("the two nodes did not form a cluster: %s", target.ClusterInfo(ctx).Val())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return source, target, ids[0], ids[1]
}

// startMigration opens the migration of slot from source to target.
func startMigration(ctx context.Context, t *testing.T, source, target *redis.Client, sourceID, targetID string, slot int64) {
	t.Helper()
	if err := target.Do(ctx, "cluster", "setslot", slot, "importing", sourceID).Err(); err != nil {
		t.Fatal(err)
	}
	if err := source.Do(ctx, "cluster", "setslot", slot, "migrating", targetID).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestResetDuringMigration: Reset of a client whose keys are split
// between the two nodes of a slot migration deletes them all.
func TestResetDuringMigration(t *testing.T) {
	ctx := context.Background()
	source, target, sourceID, targetID := clusterPair(ctx, t)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{source.Options().Addr, target.Options().Addr}})
	t.Cleanup(func() { _ = cc.Close() })
	s, err := newRedis(cc, Options{Prefix: "reset", DenyCacheSize: -1, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	req := store.Request{Key: "client", Limits: []store.Limit{{Name: "a", Rate: 5, Period: time.Minute}, {Name: "b", Rate: 50, Period: time.Hour}}}
	if d, err := s.Take(ctx, req); err != nil || !d.Allowed {
		t.Fatalf("take: %+v, %v", d, err)
	}
	keys, err := s.StateKeys(req)
	if err != nil {
		t.Fatal(err)
	}
	slot := source.ClusterKeySlot(ctx, keys[0]).Val()
	startMigration(ctx, t, source, target, sourceID, targetID, slot)
	host, port, _ := net.SplitHostPort(target.Options().Addr)
	if err := source.Do(ctx, "migrate", host, port, "", 0, 1000, "keys", keys[1]).Err(); err != nil {
		t.Fatal(err)
	}

	if err := s.Reset(ctx, req); err != nil {
		t.Fatalf("reset: got %v, want the keys deleted", err)
	}
	for _, node := range []*redis.Client{source, target} {
		if n := node.ClusterCountKeysInSlot(ctx, int(slot)).Val(); n != 0 {
			t.Errorf("%s still holds %d keys of the slot", node.Options().Addr, n)
		}
	}
	if err := s.Reset(ctx, req); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second reset: got %v, want ErrNotFound", err)
	}
}

// TestUndoCopies runs undoCopies on a real slot migration between two
// cluster-mode servers: after a MIGRATE whose outcome is unknown, the
// target's copy of a key the source still holds is deleted, and a key
// the source no longer holds keeps its only copy, on the target.
func TestUndoCopies(t *testing.T) {
	ctx := context.Background()
	source, target, sourceID, targetID := clusterPair(ctx, t)
	kept, moved, missing := "{undo}kept", "{undo}moved", "{undo}missing"
	slot := source.ClusterKeySlot(ctx, kept).Val()
	// kept: on the source (written before the migration starts, as a
	// migrating source creates no key), with a half-done copy on the
	// target; moved: handed over, so on the target only.
	if err := source.Set(ctx, kept, "source", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	startMigration(ctx, t, source, target, sourceID, targetID, slot)
	pipe := target.Pipeline()
	for _, k := range []string{kept, moved} {
		pipe.Do(ctx, "asking")
		pipe.Set(ctx, k, "target", time.Minute)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}

	undoCopies(ctx, source, target, []string{kept, moved, missing})

	if v := source.Get(ctx, kept).Val(); v != "source" {
		t.Errorf("source: %s holds %q, want the source's value", kept, v)
	}
	pipe = target.Pipeline()
	var exists []*redis.IntCmd
	for _, k := range []string{kept, moved} {
		pipe.Do(ctx, "asking")
		exists = append(exists, pipe.Exists(ctx, k))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if n := exists[0].Val(); n != 0 {
		t.Errorf("target: the copy of %s the source still holds was not deleted", kept)
	}
	if n := exists[1].Val(); n != 1 {
		t.Errorf("target: %s, which the source no longer holds, was deleted", moved)
	}
}

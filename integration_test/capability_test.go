package integration

import (
	"context"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/hybrid"
)

// TestHybridForwardsRedisCapabilities: a hybrid store over a Redis store
// lists the blocks its requests started on Redis and reports the Redis
// store's eviction policy and refunds, as metrics and the admin API read
// them.
func TestHybridForwardsRedisCapabilities(t *testing.T) {
	srv := sharedRedis(t)
	rs := newStore(t, newClient(t, srv), randomPrefix(t))
	h, err := hybrid.New(rs, hybrid.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	lim := store.Limit{Name: "minute", Rate: 1, Period: time.Minute, Block: time.Minute}
	for range 2 {
		if _, err := h.Take(ctx, store.Request{Key: "login:192.0.2.1", Limits: []store.Limit{lim}}); err != nil {
			t.Fatal(err)
		}
	}
	lister := h.(store.BlockLister)
	var blocks []store.Block
	for cursor, pages := "", 0; ; pages++ {
		if pages > 10000 {
			t.Fatal("the listing does not end")
		}
		page, next, err := lister.Blocks(ctx, "login:", cursor, 100)
		if err != nil {
			t.Fatalf("Blocks: %v", err)
		}
		blocks = append(blocks, page...)
		if cursor = next; cursor == "" {
			break
		}
	}
	if len(blocks) != 1 {
		t.Fatalf("Blocks: got %+v, want one block", blocks)
	}
	if b := blocks[0]; b.Key != "login:192.0.2.1" || b.Scope != "minute" || b.Remaining <= 0 || b.Remaining > time.Minute {
		t.Errorf("got %+v, want login:192.0.2.1 blocked by minute for at most a minute", b)
	}

	reporter := h.(store.EvictionPolicyReporter)
	for reporter.EvictionPolicy() == "" {
		if ctx.Err() != nil {
			t.Fatal("the eviction policy stays unknown")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got, want := reporter.EvictionPolicy(), rs.EvictionPolicy(); got != want {
		t.Errorf("EvictionPolicy: got %q, want the Redis store's %q", got, want)
	}
	refunder := h.(store.Refunder)
	if refunder.Refunds() != rs.Refunds() || refunder.Unrefunded() != rs.Unrefunded() {
		t.Errorf("refunds: got %d and %d, want the Redis store's %d and %d", refunder.Refunds(), refunder.Unrefunded(), rs.Refunds(), rs.Unrefunded())
	}
}

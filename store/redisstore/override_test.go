package redisstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// TestUnreadableOverrideIsRepaired: an override key the store did not
// write (another type, a value outside contract.EncodeOverride's grammar, or no
// TTL) applies nothing: the take is decided under the configured limit,
// reports the repair, and deletes the key; GetOverride reports none.
func TestUnreadableOverrideIsRepaired(t *testing.T) {
	// A plain limit runs the lean script with overrides; with a block it
	// runs the full script: both read overrides alike.
	for _, limit := range []store.Limit{
		{Rate: 2, Period: time.Minute},
		{Algorithm: store.SlidingWindowLog, Rate: 2, Period: time.Minute},
		{Algorithm: store.FixedWindow, Rate: 2, Period: time.Minute},
		{Rate: 2, Period: time.Minute, Block: time.Second},
	} {
		t.Run(fmt.Sprintf("%v/block=%v", limit.Algorithm, limit.Block), func(t *testing.T) { testUnreadableOverride(t, limit) })
	}
}

func testUnreadableOverride(t *testing.T, limit store.Limit) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		put  func(c *redis.Client, key string) error
	}{
		{"wrong type", func(c *redis.Client, key string) error {
			if err := c.LPush(ctx, key, "x").Err(); err != nil {
				return err
			}
			return c.PExpire(ctx, key, time.Hour).Err()
		}},
		{"space before the factor", func(c *redis.Client, key string) error { return c.Set(ctx, key, "scale: 2", time.Hour).Err() }},
		{"hexadecimal factor", func(c *redis.Client, key string) error { return c.Set(ctx, key, "scale:0x2", time.Hour).Err() }},
		{"trailing space", func(c *redis.Client, key string) error { return c.Set(ctx, key, "scale:2 ", time.Hour).Err() }},
		{"negative factor", func(c *redis.Client, key string) error { return c.Set(ctx, key, "scale:-2", time.Hour).Err() }},
		{"factor out of bounds", func(c *redis.Client, key string) error { return c.Set(ctx, key, "scale:1e+07", time.Hour).Err() }},
		{"unknown kind", func(c *redis.Client, key string) error { return c.Set(ctx, key, "pause", time.Hour).Err() }},
		{"no TTL", func(c *redis.Client, key string) error { return c.Set(ctx, key, "exempt", 0).Err() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, c := newStore(t, Options{DenyCacheSize: -1})
			req := store.Request{Key: "client", Limits: []store.Limit{limit}, ApplyOverride: true}
			key := s.overrideKey(req.Key)
			if err := tc.put(c, key); err != nil {
				t.Fatal(err)
			}
			d, err := s.Take(ctx, req)
			if err != nil {
				t.Fatalf("take: got error %v, want a decision", err)
			}
			if !d.Allowed || d.Override != store.OverrideNone || d.Capacity != 2 || !d.Repaired {
				t.Fatalf("take: got %+v, want admitted under the configured limit, repaired, no override", d)
			}
			if n := c.Exists(ctx, key).Val(); n != 0 {
				t.Errorf("the unreadable override key is still there")
			}
			if _, err := s.GetOverride(ctx, req.Key); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("GetOverride: got %v, want ErrNotFound", err)
			}
		})
	}
	// The forms Encode writes are applied.
	for _, f := range []float64{2, 0.5, 1.0 / 3, 1.0 / (1 << 20), 1 << 20, 1e-06} {
		s, _ := newStore(t, Options{DenyCacheSize: -1})
		req := store.Request{Key: "client", Limits: []store.Limit{limit}, ApplyOverride: true}
		o := store.Override{Kind: store.OverrideScale, Scale: f, TTL: time.Hour}
		if err := s.SetOverride(ctx, req.Key, o); err != nil {
			t.Fatal(err)
		}
		d, err := s.Take(ctx, req)
		if want := contract.ScaleLimit(limit, f, 1).Capacity(); err != nil || d.Override != store.OverrideScale || d.Capacity != want {
			t.Errorf("scale %q: got %+v, %v, want scale applied with Limit %d", contract.EncodeOverride(o), d, err, want)
		}
	}
}

// TestLeanOverrideScript checks which script a request that applies
// overrides runs: GCRA and the token bucket with one plain limit run the
// lean script with overrides, naming the state and override keys; a
// blocking limit, several limits or another algorithm run the full
// script.
func TestLeanOverrideScript(t *testing.T) {
	s, err := newRedis(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	plain := store.Limit{Rate: 2, Period: time.Minute}
	for _, tc := range []struct {
		name   string
		limits []store.Limit
		lean   bool
	}{
		{"gcra", []store.Limit{plain}, true},
		{"token bucket", []store.Limit{{Algorithm: store.TokenBucket, Rate: 2, Period: time.Minute}}, true},
		{"blocking", []store.Limit{{Rate: 2, Period: time.Minute, Block: time.Second}}, false},
		{"two limits", []store.Limit{plain, {Rate: 100, Period: time.Hour}}, false},
		{"fixed window", []store.Limit{{Algorithm: store.FixedWindow, Rate: 2, Period: time.Minute}}, true},
		{"sliding window log", []store.Limit{{Algorithm: store.SlidingWindowLog, Rate: 2, Period: time.Minute}}, true},
		{"suppressed", []store.Limit{{Algorithm: contract.Suppressed, Rate: 2, Burst: 4, Period: time.Minute}}, false},
	} {
		req := store.Request{Key: "client", Limits: tc.limits, Cost: 1, ApplyOverride: true}
		cmd := s.command(modeTake, &req, 1)
		if got := cmd.variant == leanOverride; got != tc.lean {
			t.Errorf("%s: lean script with overrides %v, want %v", tc.name, got, tc.lean)
			continue
		}
		if !tc.lean {
			continue
		}
		keys := cmd.keys()
		if len(keys) != 2 || keys[1] != s.overrideKey(req.Key) || keys[0] != cmd.key {
			t.Errorf("%s: keys %q, want the state key and %q", tc.name, keys, s.overrideKey(req.Key))
		}
		if cmd.sc != &s.scripts.byAlgorithm[tc.limits[0].Algorithm][leanOverride] {
			t.Errorf("%s: not the lean script with overrides", tc.name)
		}
	}
}

package redisstore

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/ratekeeper/ratekeeper/internal/keybuf"
	"github.com/ratekeeper/ratekeeper/store"
)

// lendingCtx lends its key buffer, as the middleware's light state does.
type lendingCtx struct {
	context.Context
	b keybuf.Buffer
}

func (c *lendingCtx) KeyBuffer() *keybuf.Buffer { return &c.b }

// TestLentKeyNotKept: the store claims to copy keys in memory a request
// lends (keybuf.Copier), so the middleware builds its keys there. After
// each kind of call with such a key, the lent memory is written over as
// the middleware's next request would: the state must be under the key
// as it was during the call, no Redis key may name the bytes written
// over it, and the refusal cache must hold no key in the lent memory.
func TestLentKeyNotKept(t *testing.T) {
	const key, other = "api:203.0.113.7", "api:203.0.113.8" // same length
	hourly := []store.Limit{{Name: "api", Rate: 1, Period: time.Hour}}
	two := []store.Limit{hourly[0], {Name: "day", Rate: 100, Period: 24 * time.Hour}}
	tests := []struct {
		name string
		// before runs with the key in memory of its own; nil for none.
		before func(s *redisStore, key string) error
		do     func(s *redisStore, ctx context.Context, key string) error
		limits []store.Limit // the state the call leaves
	}{
		{"lean take", nil, func(s *redisStore, ctx context.Context, key string) error {
			_, err := s.Take(ctx, store.Request{Key: key, Limits: hourly})
			return err
		}, hourly},
		{"refused lean take, cached", func(s *redisStore, key string) error {
			_, err := s.Take(context.Background(), store.Request{Key: key, Limits: hourly})
			return err
		}, func(s *redisStore, ctx context.Context, key string) error {
			d, err := s.Take(ctx, store.Request{Key: key, Limits: hourly})
			if err == nil && d.Allowed {
				t.Error("second take of 1 per hour: admitted, want refused")
			}
			return err
		}, hourly},
		{"take with a de-duplication id", nil, func(s *redisStore, ctx context.Context, key string) error {
			_, err := s.Take(ctx, store.Request{Key: key, Limits: hourly, DedupID: "r1", DedupReplays: 1, DedupWindow: time.Minute})
			return err
		}, hourly},
		{"take of two limits", nil, func(s *redisStore, ctx context.Context, key string) error {
			_, err := s.Take(ctx, store.Request{Key: key, Limits: two})
			return err
		}, two},
		{"take that may wait", nil, func(s *redisStore, ctx context.Context, key string) error {
			_, err := s.Take(ctx, store.Request{Key: key, Limits: hourly, MaxWait: time.Second})
			return err
		}, hourly},
		{"stack", nil, func(s *redisStore, ctx context.Context, key string) error {
			_, err := s.TakeMulti(ctx, []store.Request{{Key: key, Limits: hourly}, {Key: "route:/search", Limits: two[1:]}})
			return err
		}, hourly},
		{"settle", func(s *redisStore, key string) error {
			_, err := s.Take(context.Background(), store.Request{Key: key, Limits: two[1:], Cost: 5})
			return err
		}, func(s *redisStore, ctx context.Context, key string) error {
			return s.Settle(ctx, store.Request{Key: key, Limits: two[1:], Cost: 5}, store.Decision{Allowed: true}, 2)
		}, two[1:]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, c := newStore(t, Options{})
			if tc.before != nil {
				if err := tc.before(s, strings.Clone(key)); err != nil {
					t.Fatal(err)
				}
			}
			ctx := &lendingCtx{Context: context.Background()}
			b := append(ctx.b.Lend(), key...)
			if err := tc.do(s, ctx, unsafe.String(unsafe.SliceData(b), len(b))); err != nil {
				t.Fatal(err)
			}
			if s.deny != nil {
				for i := range s.deny.shards {
					sh := &s.deny.shards[i]
					sh.mu.Lock()
					for k := range sh.m {
						if keybuf.Holds(ctx, k) {
							t.Errorf("refusal cache key %q: in the lent memory, want a copy", k)
						}
					}
					sh.mu.Unlock()
				}
			}
			copy(b, other) // the memory's next borrower

			stored := prefixKeys(t, c, s.prefix)
			want, err := s.StateKeys(store.Request{Key: strings.Clone(key), Limits: tc.limits})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, k := range want {
				found = found || slices.Contains(stored, k)
			}
			if !found {
				t.Errorf("Redis keys %v: none of the state keys %v of %q", stored, want, key)
			}
			name := keyBase(s.prefix, encodeKey(other))
			for _, k := range stored {
				if strings.HasPrefix(k, name) {
					t.Errorf("Redis key %q names the bytes written over the lent key", k)
				}
			}
			// The key written over the lent memory has no state and no
			// cached refusal: its first take is admitted.
			d, err := s.Take(context.Background(), store.Request{Key: strings.Clone(other), Limits: hourly})
			if err != nil {
				t.Fatal(err)
			}
			if !d.Allowed {
				t.Errorf("first take of %q after the lent memory was written over: refused, want admitted", other)
			}
		})
	}
}

// TestStoreCopiesLentKeys: the store tells the middleware it may lend
// request memory for keys.
func TestStoreCopiesLentKeys(t *testing.T) {
	s, _ := newStore(t, Options{})
	var st store.Store = s
	if _, ok := st.(keybuf.Copier); !ok {
		t.Fatal("the Redis store does not implement keybuf.Copier")
	}
}

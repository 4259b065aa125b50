package redisstore

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/internal/keybuf"
	"github.com/ratekeeper/ratekeeper/internal/keybuf/keybuftest"
	"github.com/ratekeeper/ratekeeper/store"
)

// requestValue is a value of the request's own context, which the
// context a call keeps must still carry (for client hooks).
type requestValue struct{}

// lenderHook counts the script calls whose context reaches a lender, and
// of those sent on their own, the ones that lost the request's values.
type lenderHook struct{ calls, lender, lost atomic.Int64 }

func (h *lenderHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// see checks the context of cmd; own reports a command sent on its own,
// which carries one caller's context (a pipeline, or one script call
// deciding a merged batch, carries none).
func (h *lenderHook) see(ctx context.Context, cmd redis.Cmder, own bool) {
	if cmd.Name() != "evalsha" {
		return
	}
	if ctx.Value(keybuftest.Probe{}) != nil {
		h.lender.Add(1)
	}
	if own {
		h.calls.Add(1)
		if ctx.Value(requestValue{}) == nil {
			h.lost.Add(1)
		}
	}
}

func (h *lenderHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.see(ctx, cmd, true)
		return next(ctx, cmd)
	}
}

func (h *lenderHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.see(ctx, cmd, false)
		}
		return next(ctx, cmds)
	}
}

// TestCallKeepsUnlentContext: a script call made with a context that lends
// memory runs on the context the lender wraps. The lender goes back to a
// pool once its decision is answered, which can happen while the call is
// still in flight (a refusal cached meanwhile answers it at its
// deadline); client hooks that then read the call's context must not
// reach a lender another request may be using. Lone calls, through the
// held connection or a client that cuts I/O at context deadlines, and
// calls sent alone by a flusher (no batching) all keep the request's own
// context, values included.
func TestCallKeepsUnlentContext(t *testing.T) {
	srv := requireServer(t)
	limits := []store.Limit{{Rate: 1000, Period: time.Hour}}
	for _, tc := range []struct {
		name     string
		copts    redis.Options
		maxBatch int
	}{
		{"held connection", redis.Options{}, 0},
		{"ContextTimeoutEnabled", redis.Options{ContextTimeoutEnabled: true}, 0},
		{"no batching", redis.Options{}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, srv, &tc.copts)
			h := &lenderHook{}
			c.AddHook(h)
			s, err := newRedis(c, Options{Prefix: randomPrefix(t), Timeout: 2 * time.Second, MaxBatch: tc.maxBatch})
			if err != nil {
				t.Fatal(err)
			}
			if tc.name == "held connection" {
				waitLone(t, s)
			}
			take := func(key string) {
				parent := context.WithValue(context.Background(), requestValue{}, true)
				ctx, lent, _ := keybuftest.Lent(parent, key)
				if _, err := s.Take(ctx, store.Request{Key: lent, Limits: limits}); err != nil {
					t.Error(err)
				}
			}
			for i := range 5 {
				take("lone-" + string(rune('a'+i)))
			}
			var wg sync.WaitGroup
			for i := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := range 4 {
						take("crowd-" + string(rune('a'+i)) + string(rune('a'+j)))
					}
				}()
			}
			wg.Wait()
			if h.calls.Load() == 0 {
				t.Fatal("the hook saw no script call made on a caller's context")
			}
			if n := h.lender.Load(); n != 0 {
				t.Errorf("%d of %d script calls ran on a context that reaches the lender", n, h.calls.Load())
			}
			if n := h.lost.Load(); n != 0 {
				t.Errorf("%d of %d script calls lost the request context's values", n, h.calls.Load())
			}
		})
	}
}

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
			ctx, lent, b := keybuftest.Lent(context.Background(), key)
			if err := tc.do(s, ctx, lent); err != nil {
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

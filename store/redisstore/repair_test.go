package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// stateType is the Redis type of an algorithm's state key.
func stateType(alg store.Algorithm) string {
	switch alg {
	case store.SlidingWindowLog:
		return "zset"
	case store.SlidingWindowCounter, store.FixedWindow, contract.Suppressed:
		return "hash"
	}
	return "string"
}

// poison is a way to leave a state key the scripts cannot read.
type poison struct {
	name string
	put  func(ctx context.Context, c *redis.Client, key string) error
}

// poisons returns, for alg, a value of the wrong type and malformed state
// of the right type.
func poisons(alg store.Algorithm) []poison {
	list := poison{"wrong type list", func(ctx context.Context, c *redis.Client, key string) error {
		return c.LPush(ctx, key, "x").Err()
	}}
	out := []poison{list}
	switch stateType(alg) {
	case "string":
		out = append(out,
			poison{"wrong type hash", func(ctx context.Context, c *redis.Client, key string) error {
				return c.HSet(ctx, key, "w", "1").Err()
			}},
			poison{"malformed length", func(ctx context.Context, c *redis.Client, key string) error {
				return c.Set(ctx, key, "garbage", 0).Err()
			}},
			poison{"malformed NaN", func(ctx context.Context, c *redis.Client, key string) error {
				nan := "\x00\x00\x00\x00\x00\x00\xf8\x7f\x00\x00\x00\x00\x00\x00\xf8\x7f"
				return c.Set(ctx, key, nan, 0).Err()
			}})
	case "hash":
		out = append(out,
			poison{"wrong type string", func(ctx context.Context, c *redis.Client, key string) error {
				return c.Set(ctx, key, "not a hash", 0).Err()
			}},
			poison{"malformed fields", func(ctx context.Context, c *redis.Client, key string) error {
				return c.HSet(ctx, key, "w", "0", "cur", "many", "prev", "x").Err()
			}})
	}
	if alg == contract.Suppressed {
		out = append(out,
			poison{"missing offered units", func(ctx context.Context, c *redis.Client, key string) error {
				return c.HSet(ctx, key, "w", "0", "cur", "1", "prev", "0").Err()
			}},
			poison{"factor out of range", func(ctx context.Context, c *redis.Client, key string) error {
				return c.HSet(ctx, key, "w", "0", "cur", "0", "prev", "0", "ocur", "0", "oprev", "0", "f", "2000000", "ft", "0").Err()
			}})
	}
	switch stateType(alg) {
	case "zset":
		out = append(out,
			poison{"wrong type string", func(ctx context.Context, c *redis.Client, key string) error {
				return c.Set(ctx, key, "not a set", 0).Err()
			}},
			poison{"malformed score", func(ctx context.Context, c *redis.Client, key string) error {
				return c.ZAdd(ctx, key, redis.Z{Score: 1e300, Member: "forever"}).Err()
			}})
	}
	return out
}

// wantValidState fails unless key holds state of alg's type with a TTL.
func wantValidState(t *testing.T, c *redis.Client, key string, alg store.Algorithm) {
	t.Helper()
	ctx := context.Background()
	if typ := c.Type(ctx, key).Val(); typ != stateType(alg) {
		t.Fatalf("key %s: got type %q, want %q", key, typ, stateType(alg))
	}
	if ttl := c.PTTL(ctx, key).Val(); ttl <= 0 {
		t.Fatalf("key %s: got PTTL %s, want a TTL", key, ttl)
	}
}

// TestPoisonedStateIsRepaired pins the bug where state of the wrong type,
// or state a script could not read, failed every decision of its key as a
// store error (which then opened the middleware's breaker for everyone).
func TestPoisonedStateIsRepaired(t *testing.T) {
	ctx := context.Background()
	for _, alg := range append(store.Algorithms[:len(store.Algorithms):len(store.Algorithms)], contract.Suppressed) {
		for _, p := range poisons(alg) {
			for _, full := range []bool{false, true} {
				name := alg.String() + "/" + p.name + "/lean"
				if full {
					name = alg.String() + "/" + p.name + "/full"
				}
				t.Run(name, func(t *testing.T) {
					s, c := newStore(t, Options{})
					limits := []store.Limit{{Algorithm: alg, Rate: 3, Period: 30 * time.Minute}}
					if full {
						limits = append(limits, store.Limit{Name: "hour", Algorithm: alg, Rate: 100, Period: time.Hour})
					}
					req := store.Request{Key: "poisoned", Limits: suppressedForm(limits)}
					keys, err := s.stateKeysAny(req)
					if err != nil {
						t.Fatal(err)
					}
					if err := p.put(ctx, c, keys[0]); err != nil {
						t.Fatal(err)
					}
					// A peek decides as for a fresh key and writes nothing.
					d, err := s.peekAny(ctx, req)
					if err != nil || !d.Allowed || d.Repaired {
						t.Fatalf("peek: got %+v, %v; want admitted, not repaired, no error", d, err)
					}
					if n := c.Exists(ctx, keys[0]).Val(); n != 1 {
						t.Fatal("peek deleted the poisoned key")
					}
					d, err = s.takeAny(ctx, req)
					if err != nil {
						t.Fatalf("take: got error %v, want a decision", err)
					}
					capacity := limits[0].Capacity()
					if !d.Repaired || !d.Allowed || d.Remaining != capacity-1 {
						t.Fatalf("take: got %+v, want admitted as a fresh key (remaining %d) and repaired", d, capacity-1)
					}
					for _, k := range keys {
						wantValidState(t, c, k, alg)
					}
					d, err = s.takeAny(ctx, req)
					if err != nil || d.Repaired || !d.Allowed || d.Remaining != capacity-2 {
						t.Fatalf("next take: got %+v, %v; want admitted with remaining %d, not repaired", d, err, capacity-2)
					}
				})
			}
		}
	}
}

// TestPoisonedKeyKeysAreRepaired covers the keys every limit of a request
// key shares: the block, the strike counter and the de-duplication hash.
// A block key that cannot be read must not block (or fail) the key
// forever.
func TestPoisonedKeyKeysAreRepaired(t *testing.T) {
	ctx := context.Background()
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			limit := store.Limit{Name: "login", Algorithm: alg, Rate: 2, Period: time.Minute, Block: time.Minute, BlockMax: time.Hour}
			req := store.Request{Key: "poisoned", Limits: []store.Limit{limit}}
			tests := []struct {
				name string
				tag  string
				put  func(c *redis.Client, key string) error
			}{
				{"block of the wrong type", tagBlock, func(c *redis.Client, key string) error {
					if err := c.LPush(ctx, key, "x").Err(); err != nil {
						return err
					}
					return c.PExpire(ctx, key, time.Hour).Err()
				}},
				{"block without scope", tagBlock, func(c *redis.Client, key string) error {
					return c.Set(ctx, key, "", time.Hour).Err()
				}},
				{"block without TTL", tagBlock, func(c *redis.Client, key string) error {
					return c.Set(ctx, key, "login", 0).Err()
				}},
				{"strikes of the wrong type", tagStrikes, func(c *redis.Client, key string) error {
					return c.HSet(ctx, key, "n", "1").Err()
				}},
				{"strikes not a number", tagStrikes, func(c *redis.Client, key string) error {
					return c.Set(ctx, key, "1.5", time.Hour).Err()
				}},
				{"dedup of the wrong type", tagDedup, func(c *redis.Client, key string) error {
					return c.Set(ctx, key, "x", time.Hour).Err()
				}},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					s, c := newStore(t, Options{DenyCacheSize: -1})
					key := keyBase(s.prefix, encodeKey(req.Key)) + tt.tag
					if err := tt.put(c, key); err != nil {
						t.Fatal(err)
					}
					r := req
					if tt.tag == tagDedup {
						r.DedupID = "order-1"
					}
					d, err := s.Take(ctx, r)
					if err != nil {
						t.Fatalf("take: got error %v, want a decision", err)
					}
					// The strike counter is read only when a block starts.
					strikes := tt.tag == tagStrikes
					if !d.Allowed || d.Blocked || d.Repaired == strikes {
						t.Fatalf("take: got %s repaired %v, want admitted, repaired %v", fmtFull(d), d.Repaired, !strikes)
					}
					if tt.tag != tagStrikes && c.Exists(ctx, key).Val() == 1 {
						wantTTL(t, c, key)
					}
					// The key blocks as a fresh one: after the limit's two
					// units, the first block lasts Block (RetryAfter is
					// later when the window still refuses then).
					r.DedupID = ""
					d = exhaust(t, s, r)
					if !d.Blocked || !d.BlockStarted || d.RetryAfter < time.Minute || d.Repaired != strikes {
						t.Fatalf("got %s repaired %v; want a block started, repaired %v", fmtFull(d), d.Repaired, strikes)
					}
					if left := blockLeft(t, s, r.Key); left > time.Minute || left < time.Minute-time.Second {
						t.Fatalf("got a block of %s left; want a first block of 1m", left)
					}
					if typ := c.Type(ctx, key).Val(); tt.tag != tagDedup && typ != "string" {
						t.Fatalf("got %s of type %q, want a string", tt.tag, typ)
					}
					wantTTL(t, c, key)
					d, err = s.Take(ctx, r)
					if err != nil || !d.Blocked || d.Repaired {
						t.Fatalf("got %s, %v; want blocked, not repaired", fmtFull(d), err)
					}
				})
			}
		})
	}
}

// wantTTL fails unless key exists with a TTL.
func wantTTL(t *testing.T, c *redis.Client, key string) {
	t.Helper()
	if ttl := c.PTTL(context.Background(), key).Val(); ttl <= 0 {
		t.Fatalf("key %s: got PTTL %s, want a TTL", key, ttl)
	}
}

// TestRefusalGivesStateATTL pins the bug where an exhausted key left
// without TTL (by hand, or by an older version) refused its client
// forever: a refusal writes nothing, so nothing gave it a TTL again.
func TestRefusalGivesStateATTL(t *testing.T) {
	ctx := context.Background()
	leanAndFull(t, store.Algorithms, "persisted", 2, func(t *testing.T, s *redisStore, c *redis.Client, req store.Request, keys []string) {
		exhaust(t, s, req)
		for _, k := range keys {
			if !c.Persist(ctx, k).Val() {
				t.Fatalf("PERSIST %s did nothing", k)
			}
		}
		d := mustTake(t, s, req)
		if d.Allowed {
			t.Fatalf("got %s, want refused", fmtFull(d))
		}
		for _, k := range keys {
			ttl := c.PTTL(ctx, k).Val()
			// The state matters for at most the longest period
			// (two for the sliding window counter).
			if ttl <= 0 || ttl > 2*time.Hour {
				t.Fatalf("key %s: got PTTL %s after a refusal, want one within the state's lifetime", k, ttl)
			}
		}
	})
}

// leanAndFull runs fn, for each algorithm of algs, on a fresh store
// without the deny cache and a request for key under rate per 30 minutes
// (long, so that a fixed window seldom ends inside fn): alone (a lean
// script, but for the suppressed strategy) and with a second, hourly
// limit (the full script). keys are the request's state keys.
func leanAndFull(t *testing.T, algs []store.Algorithm, key string, rate int64, fn func(t *testing.T, s *redisStore, c *redis.Client, req store.Request, keys []string)) {
	for _, alg := range algs {
		for _, full := range []bool{false, true} {
			name := alg.String() + "/lean"
			if full {
				name = alg.String() + "/full"
			}
			t.Run(name, func(t *testing.T) {
				s, c := newStore(t, Options{DenyCacheSize: -1})
				limits := []store.Limit{{Algorithm: alg, Rate: rate, Period: 30 * time.Minute}}
				if full {
					limits = append(limits, store.Limit{Name: "hour", Algorithm: alg, Rate: 100, Period: time.Hour})
				}
				req := store.Request{Key: key, Limits: suppressedForm(limits)}
				keys, err := s.stateKeysAny(req)
				if err != nil {
					t.Fatal(err)
				}
				fn(t, s, c, req, keys)
			})
		}
	}
}

// TestKeyScopedErrors: a script error about the key's own data (here from
// a user script, which the store cannot repair) carries a KeyScoped
// method that tells the middleware's breaker not to count it; other
// script errors do not.
func TestKeyScopedErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		src    string
		scoped bool
	}{
		{"wrong type", "return redis.call('GET', KEYS[1])", true},
		{"malformed state", "error('ratekeeper: malformed concurrency state')", true},
		{"other error", "error('boom')", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, c := newStore(t, Options{})
			u, err := scriptOf(s, "probe", tt.src)
			if err != nil {
				t.Fatal(err)
			}
			req := store.Request{Key: "k", Limits: []store.Limit{store.PerMinute(5)}}
			if err := c.LPush(ctx, u.key(&req), "x").Err(); err != nil {
				t.Fatal(err)
			}
			_, err = u.Take(ctx, req)
			if store.KindOf(err) != "script" {
				t.Fatalf("got %v (kind %s), want a script error", err, store.KindOf(err))
			}
			var ks interface{ KeyScoped() bool }
			if got := errors.As(err, &ks) && ks.KeyScoped(); got != tt.scoped {
				t.Fatalf("got key scoped %v for %v, want %v", got, err, tt.scoped)
			}
		})
	}
}

// suppressedForm returns limits as package store/suppressed hands them to
// the store when they are of the suppressed strategy: the soft limit in
// Rate, the hard one (here twice the soft one) in Burst.
func suppressedForm(limits []store.Limit) []store.Limit {
	for i := range limits {
		if limits[i].Algorithm == contract.Suppressed {
			limits[i].Burst = 2 * limits[i].Rate
		}
	}
	return limits
}

// suppressedReq reports a request of the suppressed strategy.
func suppressedReq(req store.Request) bool { return req.Limits[0].Algorithm == contract.Suppressed }

// takeAny, peekAny and stateKeysAny are Take, Peek and StateKeys, for a
// request of the suppressed strategy as package store/suppressed has it
// decided.
func (s *redisStore) takeAny(ctx context.Context, req store.Request) (store.Decision, error) {
	if suppressedReq(req) {
		return s.Suppress(ctx, req, contract.Take)
	}
	return s.Take(ctx, req)
}

func (s *redisStore) peekAny(ctx context.Context, req store.Request) (store.Decision, error) {
	if suppressedReq(req) {
		return s.Suppress(ctx, req, contract.Peek)
	}
	return s.Peek(ctx, req)
}

func (s *redisStore) stateKeysAny(req store.Request) ([]string, error) {
	if suppressedReq(req) {
		return s.stateKeys(req), nil
	}
	return s.StateKeys(req)
}

// mustTakeAny is mustTake for any request (see takeAny).
func mustTakeAny(t *testing.T, s *redisStore, req store.Request) store.Decision {
	t.Helper()
	d, err := s.takeAny(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

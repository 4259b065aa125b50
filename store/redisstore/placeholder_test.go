package redisstore

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/lua"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// putPlaceholder writes key as the store's migration code does: the
// placeholder with a short TTL.
func putPlaceholder(t *testing.T, c *redis.Client, key string) {
	t.Helper()
	if err := c.Set(context.Background(), key, placeholder, placeholderTTL).Err(); err != nil {
		t.Fatal(err)
	}
}

// wantSnapshot fails unless the keys under prefix are exactly want.
func wantSnapshot(t *testing.T, c *redis.Client, prefix string, want map[string]string, when string) {
	t.Helper()
	if got := snapshot(t, c, prefix); !maps.Equal(got, want) {
		t.Fatalf("%s changed the keys: got %d keys %q, want %d keys %q", when, len(got), got, len(want), want)
	}
}

// TestPlaceholderStateIsAbsent: a state key holding the placeholder that
// the store creates during a slot migration is read as absent by every
// script, lean and full: a peek decides as for a fresh key and writes
// nothing, a take admits as for a fresh key, writes real state with a
// TTL over the placeholder, and reports no repair.
func TestPlaceholderStateIsAbsent(t *testing.T) {
	ctx := context.Background()
	algs := append(store.Algorithms[:len(store.Algorithms):len(store.Algorithms)], contract.Suppressed)
	leanAndFull(t, algs, "migrating", 3, func(t *testing.T, s *redisStore, c *redis.Client, req store.Request, keys []string) {
		alg, capacity := req.Limits[0].Algorithm, req.Limits[0].Capacity()
		for _, k := range keys {
			putPlaceholder(t, c, k)
		}
		before := snapshot(t, c, s.prefix)
		d, err := s.peekAny(ctx, req)
		if err != nil || !d.Allowed || d.Repaired || d.Remaining != capacity-1 {
			t.Fatalf("peek: got %s repaired %v, %v; want admitted as fresh, not repaired", fmtFull(d), d.Repaired, err)
		}
		wantSnapshot(t, c, s.prefix, before, "a peek")
		d, err = s.takeAny(ctx, req)
		if err != nil || !d.Allowed || d.Repaired || d.Remaining != capacity-1 {
			t.Fatalf("take: got %s repaired %v, %v; want admitted as fresh, not repaired", fmtFull(d), d.Repaired, err)
		}
		for _, k := range keys {
			wantValidState(t, c, k, alg)
		}
		d = mustTakeAny(t, s, req)
		if !d.Allowed || d.Repaired || d.Remaining != capacity-2 {
			t.Fatalf("next take: got %s repaired %v; want admitted with remaining %d", fmtFull(d), d.Repaired, capacity-2)
		}
	})
}

// TestPlaceholderStateBlockedTake: a blocked take writes no state, so it
// deletes the placeholders of the state keys it read, silently.
func TestPlaceholderStateBlockedTake(t *testing.T) {
	ctx := context.Background()
	for _, alg := range store.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			s, c := newStore(t, Options{DenyCacheSize: -1})
			login := store.Limit{Name: "login", Algorithm: alg, Rate: 3, Period: time.Minute, Block: time.Hour}
			req := store.Request{Key: "migrating", Limits: []store.Limit{login, {Name: "hour", Algorithm: alg, Rate: 100, Period: time.Hour}}}
			base := keyBase(s.prefix, encodeKey(req.Key))
			if err := c.Set(ctx, base+tagBlock, s.limits.get(login).id, time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			keys, err := s.StateKeys(req)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				putPlaceholder(t, c, k)
			}
			d := mustTake(t, s, req)
			if d.Allowed || !d.Blocked || d.Repaired {
				t.Fatalf("got %s repaired %v, want blocked, not repaired", fmtFull(d), d.Repaired)
			}
			for _, k := range keys {
				if n := c.Exists(ctx, k).Val(); n != 0 {
					t.Fatalf("key %s: still exists (%q) after a take that read it", k, c.Get(ctx, k).Val())
				}
			}
		})
	}
}

// TestPlaceholderKeyKeysAreAbsent covers the keys every limit of a request
// key shares: a block key, strike counter, de-duplication hash or
// override holding the placeholder blocks nothing, counts no strike,
// remembers no id and applies no override; a take reports no repair and
// deletes (or writes over) the placeholders it reads, and a peek writes
// nothing.
func TestPlaceholderKeyKeysAreAbsent(t *testing.T) {
	ctx := context.Background()
	for _, alg := range store.Algorithms {
		for _, tag := range []string{tagBlock, tagStrikes, tagDedup, tagOverride} {
			t.Run(alg.String()+"/"+tag, func(t *testing.T) {
				s, c := newStore(t, Options{DenyCacheSize: -1})
				limit := store.Limit{Name: "login", Algorithm: alg, Rate: 2, Period: time.Minute, Block: time.Minute, BlockMax: time.Hour}
				req := store.Request{Key: "migrating", Limits: []store.Limit{limit}, DedupID: "order-1", ApplyOverride: true}
				key := keyBase(s.prefix, encodeKey(req.Key)) + tag
				putPlaceholder(t, c, key)

				before := snapshot(t, c, s.prefix)
				d, err := s.Peek(ctx, req)
				if err != nil || !d.Allowed || d.Blocked || d.Duplicate || d.Repaired || d.Override != store.OverrideNone {
					t.Fatalf("peek: got %s repaired %v override %v, %v; want admitted as fresh", fmtFull(d), d.Repaired, d.Override, err)
				}
				wantSnapshot(t, c, s.prefix, before, "a peek")

				d, err = s.Take(ctx, req)
				if err != nil || !d.Allowed || d.Blocked || d.Duplicate || d.Repaired || d.Override != store.OverrideNone || d.Remaining != 1 {
					t.Fatalf("take: got %s repaired %v override %v, %v; want admitted as fresh, not repaired", fmtFull(d), d.Repaired, d.Override, err)
				}
				switch tag {
				case tagDedup:
					// Written over: the id is remembered.
					if typ := c.Type(ctx, key).Val(); typ != "hash" {
						t.Fatalf("dedup: got type %q, want a hash", typ)
					}
					wantTTL(t, c, key)
					if d := mustTake(t, s, req); !d.Duplicate || d.Repaired {
						t.Fatalf("replay: got %s repaired %v, want a duplicate", fmtFull(d), d.Repaired)
					}
				case tagStrikes:
					// Read only when a block starts; it expires meanwhile.
				default:
					if n := c.Exists(ctx, key).Val(); n != 0 {
						t.Fatalf("%s: still exists after a take that read it", tag)
					}
				}

				// The key blocks as a fresh one: the first block lasts
				// Block, and the strike counter then holds one strike.
				r := req
				r.DedupID = ""
				d = exhaust(t, s, r)
				if !d.Blocked || !d.BlockStarted || d.Repaired {
					t.Fatalf("got %s repaired %v; want a block started, not repaired", fmtFull(d), d.Repaired)
				}
				if left := blockLeft(t, s, r.Key); left > time.Minute || left < time.Minute-time.Second {
					t.Fatalf("got a block of %s left; want a first block of 1m", left)
				}
				strikes := keyBase(s.prefix, encodeKey(req.Key)) + tagStrikes
				if got := c.Get(ctx, strikes).Val(); got != "1" {
					t.Fatalf("strikes: got %q, want 1", got)
				}
				wantTTL(t, c, strikes)
				wantTTL(t, c, keyBase(s.prefix, encodeKey(req.Key))+tagBlock)
				if d := mustTake(t, s, r); !d.Blocked || d.Repaired {
					t.Fatalf("got %s repaired %v; want blocked, not repaired", fmtFull(d), d.Repaired)
				}
			})
		}
	}
}

// TestPlaceholderInStack: the stacked script's parts read a placeholder
// as an absent key too, with no repair reported.
func TestPlaceholderInStack(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t, Options{DenyCacheSize: -1})
	reqs := []store.Request{
		{Key: "migrating-a", Limits: []store.Limit{{Algorithm: store.FixedWindow, Rate: 3, Period: time.Minute}, {Name: "hour", Algorithm: store.FixedWindow, Rate: 100, Period: time.Hour}}},
		{Key: "migrating-b", Limits: []store.Limit{{Algorithm: store.SlidingWindowLog, Rate: 5, Period: time.Minute}}},
	}
	all := takeStackOverPlaceholders(ctx, t, s, c, reqs)
	for i, k := range all {
		alg := store.FixedWindow
		if i == len(all)-1 {
			alg = store.SlidingWindowLog
		}
		wantValidState(t, c, k, alg)
	}
}

// TestPlaceholderNeverWritten pins the placeholder's premise: no state the
// store writes equals it, so a script never mistakes real state for it.
func TestPlaceholderNeverWritten(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t, Options{DenyCacheSize: -1})
	for _, alg := range store.Algorithms {
		limit := store.Limit{Name: "login", Algorithm: alg, Rate: 2, Period: time.Minute, Block: time.Minute, BlockMax: time.Hour}
		req := store.Request{Key: "writer-" + alg.String(), Limits: []store.Limit{limit}}
		exhaust(t, s, req)
		if err := s.SetOverride(ctx, req.Key, store.Override{Kind: store.OverrideExempt, TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range prefixKeys(t, c, s.prefix) {
		if v, err := c.Get(ctx, k).Result(); err == nil && v == placeholder {
			t.Fatalf("key %s holds the placeholder", k)
		}
	}
}

// TestPlaceholderRefund: a refund whose receipt holds the placeholder finds
// nothing to refund and writes nothing, whatever its state keys hold.
func TestPlaceholderRefund(t *testing.T) {
	ctx := context.Background()
	refundSrc, err := lua.Source("refund")
	if err != nil {
		t.Fatal(err)
	}
	for alg := range 5 { // the refundable algorithms, in store order
		t.Run(store.Algorithm(alg).String(), func(t *testing.T) {
			s, c := newStore(t, Options{DenyCacheSize: -1})
			base := keyBase(s.prefix, "client")
			keys := []string{base + "receipt:x", base + "state"}
			for _, k := range keys {
				putPlaceholder(t, c, k)
			}
			before := snapshot(t, c, s.prefix)
			got, err := c.Eval(ctx, refundSrc, keys, "refund", alg, 1, "nonce", 1, 10, 60_000_000, 10).Int64()
			if err != nil || got != 0 {
				t.Fatalf("refund: got %d, %v; want 0 (nothing to refund)", got, err)
			}
			wantSnapshot(t, c, s.prefix, before, "a refund")
		})
	}
}

// TestPlaceholderLeanPaths: the lean scripts with overrides (a request with
// one plain limit that applies overrides) and the lean stacked
// script read placeholders in their state, override and receipt keys as
// absent keys, with no repair reported, and leave no placeholder behind a
// take.
func TestPlaceholderLeanPaths(t *testing.T) {
	ctx := context.Background()
	for _, alg := range store.Algorithms {
		t.Run(alg.String()+"/overrides", func(t *testing.T) {
			s, c := newStore(t, Options{DenyCacheSize: -1})
			req := store.Request{Key: "migrating", Limits: []store.Limit{{Algorithm: alg, Rate: 2, Period: time.Minute}}, ApplyOverride: true}
			if cmd := s.command(modeTake, &req, 1); cmd.variant != leanOverride {
				t.Fatal("the request does not run the lean script with overrides")
			}
			state, err := s.StateKeys(req)
			if err != nil {
				t.Fatal(err)
			}
			keys := append(state, s.overrideKey(req.Key))
			for _, k := range keys {
				putPlaceholder(t, c, k)
			}
			before := snapshot(t, c, s.prefix)
			if d, err := s.Peek(ctx, req); err != nil || !d.Allowed || d.Repaired || d.Override != store.OverrideNone || d.Remaining != 1 {
				t.Fatalf("peek: got %s repaired %v override %v, %v; want admitted as fresh", fmtFull(d), d.Repaired, d.Override, err)
			}
			wantSnapshot(t, c, s.prefix, before, "a peek")
			d, err := s.Take(ctx, req)
			if err != nil || !d.Allowed || d.Repaired || d.Override != store.OverrideNone || d.Remaining != 1 {
				t.Fatalf("take: got %s repaired %v override %v, %v; want admitted as fresh, not repaired", fmtFull(d), d.Repaired, d.Override, err)
			}
			wantValidState(t, c, state[0], alg)
			if n := c.Exists(ctx, s.overrideKey(req.Key)).Val(); n != 0 {
				t.Fatal("the override placeholder is still there after a take")
			}
		})
	}
	for name, algs := range map[string][3]store.Algorithm{
		"stack":         {store.GCRA, store.TokenBucket, store.GCRA},
		"stack/windows": {store.FixedWindow, store.SlidingWindowCounter, store.TokenBucket},
	} {
		t.Run(name, func(t *testing.T) {
			s, c := newStore(t, Options{DenyCacheSize: -1})
			reqs := []store.Request{
				{Key: "migrating-a", Limits: []store.Limit{{Algorithm: algs[0], Rate: 3, Period: time.Minute}}},
				{Key: "migrating-b", Limits: []store.Limit{{Algorithm: algs[1], Rate: 5, Period: time.Minute}}},
				{Key: "migrating-c", Limits: []store.Limit{{Algorithm: algs[2], Rate: 7, Period: time.Minute}}},
			}
			for i := range reqs {
				if !leanPart(&reqs[i]) {
					t.Fatalf("part %d is not decided by a lean stacked script", i)
				}
			}
			all := takeStackOverPlaceholders(ctx, t, s, c, reqs)
			for i, k := range all {
				wantValidState(t, c, k, reqs[i].Limits[0].Algorithm)
			}
		})
	}
}

// TestClearOverridePlaceholder: clearing an override key that holds only
// a migration placeholder deletes it and reports that there was no
// override; a real override is reported as cleared.
func TestClearOverridePlaceholder(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t, Options{})
	key := s.overrideKey("client")
	putPlaceholder(t, c, key)
	if err := s.ClearOverride(ctx, "client"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("placeholder: got %v, want ErrNotFound", err)
	}
	if n := c.Exists(ctx, key).Val(); n != 0 {
		t.Fatal("the placeholder is still there")
	}
	if err := s.SetOverride(ctx, "client", store.Override{Kind: store.OverrideExempt, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := s.ClearOverride(ctx, "client"); err != nil {
		t.Fatalf("override: got %v, want it cleared", err)
	}
	if err := s.ClearOverride(ctx, "client"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("cleared twice: got %v, want ErrNotFound", err)
	}
}

// takeStackOverPlaceholders puts a placeholder in every state key of the
// stack reqs, takes it, checks that every part admitted it as a fresh key
// without reporting a repair, and returns the state keys in part order.
func takeStackOverPlaceholders(ctx context.Context, t *testing.T, s *redisStore, c *redis.Client, reqs []store.Request) []string {
	t.Helper()
	var all []string
	for _, req := range reqs {
		keys, err := s.StateKeys(req)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, keys...)
	}
	for _, k := range all {
		putPlaceholder(t, c, k)
	}
	md, err := s.TakeMulti(ctx, reqs)
	if err != nil || !md.Allowed {
		t.Fatalf("got %+v, %v; want admitted", md, err)
	}
	for i, d := range md.Parts {
		if d.Repaired || d.Remaining != reqs[i].Limits[0].Capacity()-1 {
			t.Fatalf("part %d: got %s repaired %v, want admitted as fresh, not repaired", i, fmtFull(d), d.Repaired)
		}
	}
	return all
}

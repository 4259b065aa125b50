package memstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store/internal/fakeclock"
	"github.com/ratekeeper/ratekeeper/store/storetest"
)

// storedKeys lists every live state of s by kind with its time to live,
// as storetest.Harness.KeyTTLs asks: a key state shows as up to three
// keys, a block "<key>:block", a strike counter "<key>:strikes" and the
// remembered ids "<key>:dedup", each with the lifetime of its part; a
// limit state as "<key>/<algorithm>/<id>", an override as "<key>:o" and
// the slots of an in-flight cap as "<key>:if", living as long as its
// latest lease.
// Request keys are shown in hex, so that names stay readable in messages.
func storedKeys(s *memStore) func(context.Context) (storetest.StoredKeys, error) {
	return func(context.Context) (storetest.StoredKeys, error) {
		now := s.now()
		var keys storetest.StoredKeys
		add := func(kind *map[string]time.Duration, name string, exp int64) {
			if exp <= now {
				return
			}
			if *kind == nil {
				*kind = map[string]time.Duration{}
			}
			(*kind)[name] = time.Duration(exp-now) * time.Microsecond
		}
		forEachRecord(s, func(_ *shard, r *record) {
			base := fmt.Sprintf("%x", r.key)
			if ks := r.ks; ks != nil && ks.exp > now {
				add(&keys.Block, base+":block", ks.blockEnd*1000)
				if ks.strikes > 0 {
					add(&keys.Strikes, base+":strikes", (ks.strikesEnd+1)*1000)
				}
				if len(ks.ids) > 0 {
					add(&keys.Dedup, base+":dedup", ks.idsEnd)
				}
			}
			for _, st := range r.states {
				add(&keys.State, fmt.Sprintf("%s/%s/%q", base, st.alg, st.id), st.exp)
			}
		})
		for i := range s.shards {
			sh := &s.shards[i]
			sh.mu.Lock()
			for k, e := range sh.ov.m {
				add(&keys.Override, fmt.Sprintf("%x:o", k), e.exp)
			}
			sh.mu.Unlock()
		}
		for i := range s.slots.shards {
			sh := &s.slots.shards[i]
			sh.mu.Lock()
			for k, ids := range sh.keys {
				var last int64
				for _, end := range ids {
					last = max(last, end)
				}
				add(&keys.State, fmt.Sprintf("%x:if", k), last)
			}
			sh.mu.Unlock()
		}
		return keys, nil
	}
}

// keyTTLs lists every live state of s with its time to live, whatever its
// kind (see storedKeys).
func keyTTLs(s *memStore) func(context.Context) (map[string]time.Duration, error) {
	return func(ctx context.Context) (map[string]time.Duration, error) {
		keys, err := storedKeys(s)(ctx)
		out := map[string]time.Duration{}
		for _, kind := range []map[string]time.Duration{keys.State, keys.Block, keys.Strikes, keys.Dedup, keys.Override} {
			for k, ttl := range kind {
				out[k] = ttl
			}
		}
		return out, err
	}
}

// forEachRecord calls f for every record of s, each under its shard's
// lock.
func forEachRecord(s *memStore, f func(*shard, *record)) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.lock()
		for r := sh.lru.next; r != &sh.lru; r = r.next {
			f(sh, r)
		}
		sh.mu.Unlock()
	}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		clk := &fakeclock.Clock{}
		rnd := &storetest.FakeRand{}
		s, err := newMem(Options{Clock: clk.Now, Rand: rnd.Float64})
		if err != nil {
			t.Fatalf("New: got error %v, want nil", err)
		}
		return storetest.Harness{Store: s, Advance: clk.Advance, Exact: true, KeyTTLs: storedKeys(s), Rand: rnd}
	})
}

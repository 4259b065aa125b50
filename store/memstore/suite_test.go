package memstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store/storetest"
)

// keyTTLs lists every live state of s with its time to live, like the
// Redis store's keys and their PTTL, named as storetest.Harness.KeyTTLs
// expects: a key state shows as up to three keys, "<key>:block",
// "<key>:strikes" and "<key>:dedup", each with the lifetime of its part,
// a limit state as "<key>/<algorithm>/<id>" and an override as "<key>:o". Request keys are shown in
// hex, so that no key can pass for another kind.
func keyTTLs(s *Store) func(context.Context) (map[string]time.Duration, error) {
	return func(context.Context) (map[string]time.Duration, error) {
		now := s.now()
		out := map[string]time.Duration{}
		add := func(name string, exp int64) {
			if exp > now {
				out[name] = time.Duration(exp-now) * time.Microsecond
			}
		}
		forEachRecord(s, func(_ *shard, r *record) {
			base := fmt.Sprintf("%x", r.key)
			if ks := r.ks; ks != nil && ks.exp > now {
				add(base+":block", ks.blockEnd*1000)
				if ks.strikes > 0 {
					add(base+":strikes", (ks.strikesEnd+1)*1000)
				}
				if len(ks.ids) > 0 {
					add(base+":dedup", ks.idsEnd)
				}
			}
			for _, st := range r.states {
				add(fmt.Sprintf("%s/%s/%q", base, st.alg, st.id), st.exp)
			}
		})
		for i := range s.shards {
			sh := &s.shards[i]
			sh.mu.Lock()
			for k, e := range sh.ov.m {
				add(fmt.Sprintf("%x:o", k), e.exp)
			}
			sh.mu.Unlock()
		}
		return out, nil
	}
}

// forEachRecord calls f for every record of s, each under its shard's
// lock.
func forEachRecord(s *Store, f func(*shard, *record)) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for r := sh.lru.next; r != &sh.lru; r = r.next {
			f(sh, r)
		}
		sh.mu.Unlock()
	}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		clk := &storetest.FakeClock{}
		rnd := &storetest.FakeRand{}
		s, err := New(Options{Clock: clk.Now, Rand: rnd.Float64})
		if err != nil {
			t.Fatalf("New: got error %v, want nil", err)
		}
		return storetest.Harness{Store: s, Advance: clk.Advance, Exact: true, KeyTTLs: keyTTLs(s), Rand: rnd}
	})
}

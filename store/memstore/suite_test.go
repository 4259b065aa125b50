package memstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store/storetest"
)

// keyTTLs lists every live state of s with its time to live, like the
// Redis store's keys and their PTTL.
func keyTTLs(s *Store) func(context.Context) (map[string]time.Duration, error) {
	return func(context.Context) (map[string]time.Duration, error) {
		now := s.now()
		out := map[string]time.Duration{}
		for i := range s.shards {
			sh := &s.shards[i]
			sh.mu.Lock()
			for k, e := range sh.m {
				if e.exp > now {
					out[fmt.Sprintf("%q/%q", k.key, k.id)] = time.Duration(e.exp-now) * time.Microsecond
				}
			}
			sh.mu.Unlock()
		}
		return out, nil
	}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		clk := &storetest.FakeClock{}
		s, err := New(Options{Clock: clk.Now})
		if err != nil {
			t.Fatalf("New: got error %v, want nil", err)
		}
		return storetest.Harness{Store: s, Advance: clk.Advance, Exact: true, KeyTTLs: keyTTLs(s)}
	})
}

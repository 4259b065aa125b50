package middleware

import (
	"context"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// shardedStore is a store spread over nodes "a" and "b": keys containing
// "down" live on node a, which fails; the others on b, which admits.
type shardedStore struct {
	funcStore
	callsA, callsB atomic.Int64
}

func newShardedStore() *shardedStore {
	s := &shardedStore{}
	s.take = func(_ context.Context, req store.Request) (store.Decision, error) {
		if strings.Contains(req.Key, "down") {
			s.callsA.Add(1)
			return store.Decision{}, errDown
		}
		s.callsB.Add(1)
		return store.Decision{Allowed: true, Capacity: 100, Remaining: 99}, nil
	}
	return s
}

func (s *shardedStore) NodeFor(_ context.Context, req store.Request) string {
	if strings.Contains(req.Key, "down") {
		return "a"
	}
	return "b"
}

// unshardedStore is a shardedStore that cannot tell the node of a key.
type unshardedStore struct{ s *shardedStore }

func (u unshardedStore) Take(ctx context.Context, req store.Request) (store.Decision, error) {
	return u.s.Take(ctx, req)
}

func (u unshardedStore) Peek(ctx context.Context, req store.Request) (store.Decision, error) {
	return u.s.Peek(ctx, req)
}

func (u unshardedStore) Reset(ctx context.Context, req store.Request) error {
	return u.s.Reset(ctx, req)
}

func pathKey(r *http.Request) (string, error) { return r.URL.Path, nil }

// Regression: one shard's failover opened the breaker for all shards, and
// the keys of the healthy shards failed open. With a store that tells the
// node of a key, failures open only that node's breaker.
func TestOneShardFailingOpensOnlyItsBreaker(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sharded   bool
		wantCodeB int   // for keys on the healthy node once a's breaker is open
		wantB     int64 // store calls for them
	}{
		{"per-node", true, http.StatusOK, 5},
		{"limiter-wide", false, http.StatusServiceUnavailable, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newShardedStore()
			var st store.Store = s
			if !tc.sharded {
				st = unshardedStore{s}
			}
			obs := &recObserver{}
			lim := mustNew(t, st, pathKey, store.PerMinute(100), Options{
				BreakerThreshold: 2,
				BreakerCooldown:  time.Hour,
				FailureMode:      limiter.FailClosed,
				Observer:         obs.Observe,
			})
			h := lim.Handler(okHandler)
			for i := range 4 {
				if got := serveReq(h, httptest.NewRequest("GET", "/down-"+strconv.Itoa(i), nil)).Code; got != http.StatusServiceUnavailable {
					t.Fatalf("request %d for the failing node: got %d, want 503", i, got)
				}
			}
			if got := s.callsA.Load(); got != 2 {
				t.Errorf("store calls for the failing node: got %d, want 2 (the breaker opens at the second failure)", got)
			}
			for i := range 5 {
				if got := serveReq(h, httptest.NewRequest("GET", "/up-"+strconv.Itoa(i), nil)).Code; got != tc.wantCodeB {
					t.Errorf("request %d for the healthy node: got %d, want %d", i, got, tc.wantCodeB)
				}
			}
			if got := s.callsB.Load(); got != tc.wantB {
				t.Errorf("store calls for the healthy node: got %d, want %d", got, tc.wantB)
			}
			if last := obs.events[len(obs.events)-1]; !last.StoreDown {
				t.Errorf("last event: StoreDown false, want true while a node's breaker is open")
			}
		})
	}
}

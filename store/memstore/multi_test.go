package memstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

func stackOf(a, b store.Algorithm, ipRate, routeRate int64) []store.Request {
	return []store.Request{
		{Key: "ip:203.0.113.7", Limits: []store.Limit{{Name: "ip", Algorithm: a, Rate: ipRate, Period: time.Minute}}},
		{Key: "route:/search", Limits: []store.Limit{{Name: "route", Algorithm: b, Rate: routeRate, Period: time.Minute}}},
	}
}

// left peeks how many units part i of reqs has left.
func left(t *testing.T, s *memStore, reqs []store.Request, i int) int64 {
	t.Helper()
	d, err := s.Peek(context.Background(), reqs[i])
	if err != nil {
		t.Fatal(err)
	}
	if !d.Allowed {
		return 0
	}
	return d.Remaining + 1
}

func TestTakeMultiAllOrNothing(t *testing.T) {
	for _, a := range store.Algorithms {
		for _, b := range []store.Algorithm{store.GCRA, store.SlidingWindowLog} {
			for _, shards := range []int{1, 64} {
				t.Run(fmt.Sprintf("%s+%s/shards=%d", a, b, shards), func(t *testing.T) {
					s, _ := newTestStore(t, Options{Shards: shards})
					reqs := stackOf(a, b, 3, 10)
					admitted := 0
					for n := 0; n < 12; n++ {
						md, err := s.TakeMulti(context.Background(), reqs)
						if err != nil {
							t.Fatal(err)
						}
						if md.Part != 0 || md.LimitID != "ip" {
							t.Fatalf("take %d: decided by part %d (%s), want the IP part", n, md.Part, md.LimitID)
						}
						if md.Allowed {
							admitted++
						} else if md.Parts[1].Remaining != 7 || !md.Parts[1].Allowed {
							t.Fatalf("take %d: route part %+v, want admitting with 7 left", n, md.Parts[1])
						}
					}
					if admitted != 3 {
						t.Fatalf("admitted %d, want 3", admitted)
					}
					if got := left(t, s, reqs, 1); got != 7 {
						t.Fatalf("route has %d left, want 7: refused requests were charged", got)
					}
				})
			}
		}
	}
}

func TestTakeMultiCountDeniedAndBlock(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	ctx := context.Background()
	reqs := []store.Request{
		// Counts attempts: charged whenever the stack refuses.
		{Key: "user:alice", CountDenied: true, Limits: []store.Limit{{Name: "user", Algorithm: store.FixedWindow, Rate: 100, Period: time.Minute}}},
		// Blocks for an hour once it refuses.
		{Key: "ip:198.51.100.1", Limits: []store.Limit{{Name: "ip", Algorithm: store.FixedWindow, Rate: 2, Period: time.Minute, Block: time.Hour}}},
	}
	for n := 0; n < 5; n++ {
		md, err := s.TakeMulti(ctx, reqs)
		if err != nil {
			t.Fatal(err)
		}
		if want := n < 2; md.Allowed != want {
			t.Fatalf("take %d: allowed %v, want %v", n, md.Allowed, want)
		}
		if n == 2 && !md.BlockStarted {
			t.Fatalf("take 2: %+v, want the block started", md.Decision)
		}
		if n > 2 && (!md.Blocked || md.RetryAfter < 59*time.Minute) {
			t.Fatalf("take %d: %+v, want blocked for an hour", n, md.Decision)
		}
	}
	if got := left(t, s, reqs, 0); got != 95 {
		t.Fatalf("the counting part has %d left, want 95 (every attempt counts)", got)
	}
}

func TestTakeMultiConcurrentExact(t *testing.T) {
	s, _ := newTestStore(t, Options{Shards: 4})
	reqs := stackOf(store.GCRA, store.FixedWindow, 1000, 150)
	ip2 := []store.Request{{Key: "ip:192.0.2.9", Limits: reqs[0].Limits}, reqs[1]}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs := reqs
			if g%2 == 1 {
				rs = ip2
			}
			for n := 0; n < 25; n++ {
				md, err := s.TakeMulti(context.Background(), rs)
				if err != nil {
					t.Error(err)
					return
				}
				if md.Allowed {
					admitted.Add(1)
				}
				// A plain Take of one part runs alongside.
				if _, err := s.Take(context.Background(), store.Request{Key: "other", Limits: rs[0].Limits}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if got := admitted.Load(); got != 150 {
		t.Fatalf("admitted %d, want 150", got)
	}
	a, b := left(t, s, reqs, 0), left(t, s, ip2, 0)
	if used := 2000 - a - b; used != 150 {
		t.Fatalf("the IP parts were charged %d units, want 150", used)
	}
}

func TestTakeMultiFullStore(t *testing.T) {
	s, _ := newTestStore(t, Options{MaxKeys: 2, Shards: 2})
	ctx := context.Background()
	reqs := stackOf(store.GCRA, store.GCRA, 5, 5)
	for n := 0; n < 3; n++ {
		if md, err := s.TakeMulti(ctx, reqs); err != nil || !md.Allowed {
			t.Fatalf("take %d: %+v, %v", n, md, err)
		}
	}
	if s.Evictions() != 0 {
		t.Fatalf("a full store evicted %d keys for stacks that create no state", s.Evictions())
	}
	// A stack needing more than MaxKeys fails cleanly.
	three := append(stackOf(store.GCRA, store.GCRA, 5, 5), store.Request{Key: "c", Limits: reqs[0].Limits})
	if _, err := s.TakeMulti(ctx, three); store.KindOf(err) != "capacity" {
		t.Fatalf("stack of 3 states in a store of 2: got %v, want a capacity error", err)
	}
	if s.Len() > 2 {
		t.Fatalf("Len() = %d, want <= 2", s.Len())
	}
}

package redisstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store"
)

// callerHook records, for every script call the client processes (a
// first EVALSHA met with NOSCRIPT and its EVAL count once), whether it
// runs on the goroutine of the store call that asked for it.
type callerHook struct {
	direct, queued atomic.Int64
}

func (h *callerHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *callerHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "evalsha" {
			return next(ctx, cmd)
		}
		buf := make([]byte, 16<<10)
		buf = buf[:runtime.Stack(buf, false)]
		if bytes.Contains(buf, []byte("redisstore.(*pipes).do(")) {
			h.direct.Add(1)
		} else {
			h.queued.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *callerHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if cmd.Name() == "evalsha" {
				h.queued.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

// TestLoneCallFromCaller: a call made while nothing else is in flight is
// sent from the caller's goroutine, through a client that cuts socket I/O
// at context deadlines and, once the store holds a connection for lone
// calls (see lone), through a default client; either way the client's
// hooks see it. Concurrent callers still get their decisions, exactly
// counted, whichever way each call went.
func TestLoneCallFromCaller(t *testing.T) {
	srv := requireServer(t)
	ctx := context.Background()
	for _, honoured := range []bool{false, true} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%t", honoured), func(t *testing.T) {
			c := newClient(t, srv, &redis.Options{ContextTimeoutEnabled: honoured})
			h := &callerHook{}
			c.AddHook(h)
			s, err := newRedis(c, Options{Prefix: randomPrefix(t), Timeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if !honoured {
				waitLone(t, s)
			}
			req := store.Request{Key: "lone", Limits: []store.Limit{{Rate: 50, Period: time.Hour}}}
			for range 5 {
				if d, err := s.Take(ctx, req); err != nil || !d.Allowed {
					t.Fatalf("lone take: got %+v, %v; want admitted", d, err)
				}
			}
			if d, q := h.direct.Load(), h.queued.Load(); d != 5 || q != 0 {
				t.Fatalf("5 lone takes: %d sent by the caller, %d by a flusher; want all 5 by the caller", d, q)
			}
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for range 40 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 3 {
						d, err := s.Take(ctx, req)
						if err != nil {
							t.Error(err)
							return
						}
						if d.Allowed {
							admitted.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			if got := admitted.Load(); got != 45 {
				t.Fatalf("120 concurrent takes after 5: got %d admitted, want exactly 45", got)
			}
			t.Logf("%d commands sent by their caller, %d by flushers", h.direct.Load(), h.queued.Load())
		})
	}
}

// TestBatcherPerAddress: a new go-redis client for a node address (after
// go-redis closed the old one) gets a new batcher, and the old one is
// dropped, so batchers do not pile up as the topology changes.
func TestBatcherPerAddress(t *testing.T) {
	p := &pipes{nodes: make(map[*redis.Client]*batcher), maxBatch: 8}
	a1 := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	b1 := redis.NewClient(&redis.Options{Addr: "127.0.0.1:2"})
	a2 := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	for _, c := range []*redis.Client{a1, b1, a2} {
		t.Cleanup(func() { _ = c.Close() })
	}
	first := p.batcherOf(a1)
	if p.batcherOf(a1) != first || p.batcherOf(b1) == first {
		t.Fatal("got a shared or a new batcher, want one per client")
	}
	second := p.batcherOf(a2)
	if second == first || second.client != a2 {
		t.Fatal("the new client of an address got the old batcher, want its own")
	}
	if _, ok := p.nodes[a1]; ok || len(p.nodes) != 2 {
		t.Fatalf("got %d batchers (the replaced client's kept: %t), want 2, one per address", len(p.nodes), ok)
	}
}

// TestBudgetContextReuse: the context of a lone direct call carries the
// caller's values and the call's deadline, ends at that deadline (Done
// closed, Err DeadlineExceeded), is reused without an allocation while
// its timer has not fired, and is replaced once it has.
func TestBudgetContextReuse(t *testing.T) {
	type key struct{}
	b := &batcher{}
	first := time.Now().Add(time.Hour)
	bc := b.startBudget(context.Background(), first)
	if d, ok := bc.Deadline(); !ok || !d.Equal(first) || bc.Err() != nil {
		t.Fatalf("fresh budget: deadline %v %t, err %v", d, ok, bc.Err())
	}
	b.stopBudget(bc)
	if n := testing.AllocsPerRun(100, func() {
		b.stopBudget(b.startBudget(context.Background(), first))
	}); n != 0 {
		t.Fatalf("a reused budget: %v allocations, want 0", n)
	}
	parent := context.WithValue(context.Background(), key{}, "v")
	again := b.startBudget(parent, time.Now().Add(20*time.Millisecond))
	if again != bc || again.Value(key{}) != "v" {
		t.Fatalf("second call: reused %t, value %v", again == bc, again.Value(key{}))
	}
	select {
	case <-again.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed 5s after a 20ms deadline")
	}
	if !errors.Is(again.Err(), context.DeadlineExceeded) {
		t.Fatalf("after the deadline: Err %v", again.Err())
	}
	b.stopBudget(again)
	next := b.startBudget(context.Background(), first)
	defer b.stopBudget(next)
	if next == again || next.Err() != nil {
		t.Fatalf("after an expired budget: reused %t, err %v; want a fresh one", next == again, next.Err())
	}
	select {
	case <-next.Done():
		t.Fatal("a fresh budget is done")
	default:
	}
}

// TestFlusherLimit: a slow round trip raises the limit to maxFlushers;
// quick ones keep it there for slowFor after the slow one, and the first
// quick one after that lowers it to baseFlushers.
func TestFlusherLimit(t *testing.T) {
	p := &pipes{slowTrip: 10 * time.Millisecond}
	if got := p.flusherLimit(); got != baseFlushers {
		t.Fatalf("new pipes: limit %d, want %d", got, baseFlushers)
	}
	p.timed(time.Now())
	if got := p.flusherLimit(); got != baseFlushers {
		t.Fatalf("after a quick round trip: limit %d, want %d", got, baseFlushers)
	}
	p.timed(time.Now().Add(-20 * time.Millisecond))
	if got := p.flusherLimit(); got != maxFlushers {
		t.Fatalf("after a slow round trip: limit %d, want %d", got, maxFlushers)
	}
	p.timed(time.Now())
	if got := p.flusherLimit(); got != maxFlushers {
		t.Fatalf("after a quick round trip within slowFor of the slow one: limit %d, want %d", got, maxFlushers)
	}
	p.slowAt.Store(time.Now().Add(-slowFor - time.Second).UnixNano())
	p.timed(time.Now())
	if got := p.flusherLimit(); got != baseFlushers {
		t.Fatalf("after a quick round trip slowFor after the slow one: limit %d, want %d", got, baseFlushers)
	}
}

// TestGiveBackAboveTheLimitKeepsTheSlot: a sender that gives back its
// slot and finds a call queued takes the slot again even while the
// senders outnumber the limit (16 after a slow round trip, 4 once round
// trips are quick again): a sender that let go there, because "the
// others will take it", could leave the call queued with every sender
// gone, as each of them saw the others above the limit.
func TestGiveBackAboveTheLimitKeepsTheSlot(t *testing.T) {
	p := &pipes{maxBatch: 64}
	b := p.newBatcher(nil)
	b.head.Store(&call{})
	b.flushers.Store(maxFlushers)
	if limit := p.flusherLimit(); limit >= maxFlushers {
		t.Fatalf("flusherLimit %d with no slow round trip, want below %d", limit, maxFlushers)
	}
	if !b.giveBack() {
		t.Fatal("giveBack with a call queued and the senders above the limit: let go, want the slot kept")
	}
	if n := b.flushers.Load(); n != maxFlushers {
		t.Fatalf("senders after giveBack: %d, want %d (never more than before)", n, maxFlushers)
	}
	b.head.Store(nil)
	if b.giveBack() {
		t.Fatal("giveBack with nothing queued: kept the slot, want it given back")
	}
}

// TestFlusherLimitCappedByPool: the flushers of a node never outnumber
// the connections its pool has for them (PoolSize, less the one held for
// lone calls), which go-redis makes 10 per GOMAXPROCS: with 16 flushers
// and a pool of 10 (one CPU), a slow server's calls waited for a
// connection after their flusher took them, and a fifth to a quarter of
// them missed their budget (TestSlowRedisAtStart at -cpu 1).
func TestFlusherLimitCappedByPool(t *testing.T) {
	for _, tc := range []struct {
		pool int
		lone bool
		want int32
	}{{10, true, 9}, {10, false, 10}, {2, true, 1}, {1, true, 1}, {100, true, maxFlushers}} {
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", PoolSize: tc.pool})
		got := poolCap(c, tc.lone)
		c.Close()
		if got != tc.want {
			t.Errorf("PoolSize %d, lone %t: cap %d, want %d", tc.pool, tc.lone, got, tc.want)
		}
	}
	p := &pipes{slowTrip: 10 * time.Millisecond, poolCap: 9}
	p.timed(time.Now().Add(-20 * time.Millisecond))
	if got := p.flusherLimit(); got != 9 {
		t.Fatalf("after a slow round trip with a cap of 9: limit %d, want 9", got)
	}
	p.poolCap = 2
	if got := p.flusherLimit(); got != 2 {
		t.Fatalf("after a slow round trip with a cap of 2: limit %d, want 2", got)
	}
	// A store on a plain client holds one connection for lone calls.
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", PoolSize: 7})
	defer c.Close()
	if got := newPipes(c, 64, 50*time.Millisecond).poolCap; got != 6 {
		t.Fatalf("newPipes on a client of PoolSize 7: cap %d, want 6", got)
	}
}

package redisstore

import (
	"bytes"
	"context"
	"math"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store"
)

// senderHook records the goroutine that sends each script call.
type senderHook struct {
	mu   sync.Mutex
	goid []uint64
}

func (h *senderHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *senderHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			h.mu.Lock()
			h.goid = append(h.goid, goroutineID())
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (h *senderHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *senderHook) senders() []uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]uint64(nil), h.goid...)
}

// goroutineID reads the running goroutine's number from its stack trace
// header ("goroutine 42 [running]:"); numbers are never reused.
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	b = b[:bytes.IndexByte(b, ' ')]
	n, _ := strconv.ParseUint(string(b), 10, 64)
	return n
}

// TestLoneCallerWakesWaitingFlusher: through a default client (which the
// caller may not send through itself), a lone caller's calls, a few
// milliseconds apart, are sent by the flushers that wait for the next
// call (one, or two when one was still busy as a call arrived), not by a
// new goroutine per call, whose small stack would grow again through the
// client; once idle for flusherIdle, they exit and the next call starts
// a new one.
func TestLoneCallerWakesWaitingFlusher(t *testing.T) {
	srv := requireServer(t)
	ctx := context.Background()
	c := newClient(t, srv, nil)
	h := &senderHook{}
	c.AddHook(h)
	s, err := newRedis(c, Options{Prefix: randomPrefix(t), Timeout: 2 * time.Second, WarmUp: -1})
	if err != nil {
		t.Fatal(err)
	}
	// The store never looks for a connection to hold for lone calls (see
	// lone), so that every one is queued.
	s.pipes.lone.nextAt.Store(math.MaxInt64)
	req := store.Request{Key: "lone", Limits: []store.Limit{{Rate: 100, Period: time.Hour}}}
	take := func() {
		t.Helper()
		if d, err := s.Take(ctx, req); err != nil || !d.Allowed {
			t.Fatalf("lone take: got %+v, %v; want admitted", d, err)
		}
	}
	const takes = 30
	for range takes {
		take()
		time.Sleep(2 * time.Millisecond) // time enough for a flusher to exit
	}
	ids := h.senders()
	if len(ids) != takes {
		t.Fatalf("%d lone takes: got %d script calls, want %d", takes, len(ids), takes)
	}
	senders := make(map[uint64]bool)
	for i, id := range ids {
		if id == goroutineID() {
			t.Fatalf("take %d: sent by the caller's goroutine, want a flusher (no connection is held for lone calls)", i+1)
		}
		senders[id] = true
	}
	if len(senders) > 2 {
		t.Fatalf("%d lone takes: got %d sending goroutines, want at most 2 that wait for the next call", takes, len(senders))
	}
	time.Sleep(flusherIdle + 500*time.Millisecond)
	take()
	if ids = h.senders(); senders[ids[len(ids)-1]] {
		t.Fatalf("take after %v idle: sent by goroutine %d again, want a new flusher (idle ones exit)", flusherIdle, ids[len(ids)-1])
	}
}

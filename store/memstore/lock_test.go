package memstore

import (
	"sync"
	"testing"
	"time"
)

// TestShardLockExcludes: goroutines that lock a shard at once, half by
// lock and half by Lock, never hold it together.
func TestShardLockExcludes(t *testing.T) {
	var sh shard
	sh.init(0)
	const goroutines, rounds = 8, 2000
	n := 0
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if g%2 == 0 {
					sh.lock()
				} else {
					sh.mu.Lock()
				}
				v := n
				n = v + 1
				sh.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if n != goroutines*rounds {
		t.Fatalf("counted %d under the shard's lock, want %d", n, goroutines*rounds)
	}
}

// TestShardLockWaits: a caller that finds the shard held for longer than
// its spins waits until the holder unlocks it.
func TestShardLockWaits(t *testing.T) {
	var sh shard
	sh.init(0)
	sh.mu.Lock()
	locked := make(chan struct{})
	go func() {
		sh.lock()
		close(locked)
		sh.mu.Unlock()
	}()
	select {
	case <-locked:
		t.Fatal("lock returned while the shard was held")
	case <-time.After(20 * time.Millisecond):
	}
	sh.mu.Unlock()
	select {
	case <-locked:
	case <-time.After(5 * time.Second):
		t.Fatal("lock did not return once the shard was released")
	}
}

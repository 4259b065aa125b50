package memstore

import (
	"context"
	"math/bits"
	"sync"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

var _ store.SlotStore = (*memStore)(nil)

// slotShards is the number of independently locked maps of slots.
const slotShards = 16

// slotTable holds the slots of in-flight caps ([store.SlotStore]), apart
// from the rate-limit state: key → holder id → end of its lease (µs on
// the store's clock). A key with no live slot is removed when it is
// touched, and a shard drops the ended leases of every key once it has
// twice as many keys as after its last sweep (plus 64), so the keys of
// holders that died never pile up.
type slotTable struct {
	shards [slotShards]slotShard
}

type slotShard struct {
	mu    sync.Mutex
	keys  map[string]map[string]int64
	sweep int // key count that triggers the next sweep
}

// slotShard returns the shard of key.
func (s *memStore) slotShard(key string) *slotShard {
	hi, _ := bits.Mul64(keyHash(s.seed, key), slotShards)
	sh := &s.slots.shards[hi]
	return sh
}

// live returns key's slots with the ended leases dropped, nil when none
// is left (and then forgets key). Called with sh.mu held.
func (sh *slotShard) live(key string, now int64) map[string]int64 {
	m := sh.keys[key]
	for id, end := range m {
		if end <= now {
			delete(m, id)
		}
	}
	if len(m) == 0 {
		delete(sh.keys, key)
		return nil
	}
	return m
}

// prune drops every ended lease once the shard has grown enough since the
// last sweep. Called with sh.mu held.
func (sh *slotShard) prune(now int64) {
	if len(sh.keys) < sh.sweep {
		return
	}
	for k := range sh.keys {
		sh.live(k, now)
	}
	sh.sweep = 2*len(sh.keys) + 64
}

// Acquire implements [store.SlotStore] under the key's shard lock. It
// never blocks on I/O, so ctx is not consulted.
func (s *memStore) Acquire(_ context.Context, slot store.Slot, max int64, lease time.Duration) (bool, int64, error) {
	if err := contract.CheckAcquire(slot, max, lease); err != nil {
		return false, 0, err
	}
	now := s.now()
	sh := s.slotShard(slot.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.prune(now)
	m := sh.live(slot.Key, now)
	if _, held := m[slot.ID]; !held && int64(len(m)) >= max {
		return false, int64(len(m)), nil
	}
	if m == nil {
		if sh.keys == nil {
			sh.keys = make(map[string]map[string]int64)
		}
		m = make(map[string]int64, 1)
		sh.keys[slot.Key] = m
	}
	m[slot.ID] = now + lease.Microseconds()
	return true, int64(len(m)), nil
}

// Release implements [store.SlotStore].
func (s *memStore) Release(_ context.Context, slot store.Slot) error {
	if err := contract.CheckSlot(slot, 0, 0); err != nil {
		return err
	}
	now := s.now()
	sh := s.slotShard(slot.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if m := sh.live(slot.Key, now); m != nil {
		delete(m, slot.ID)
		sh.live(slot.Key, now)
	}
	return nil
}

// Renew implements [store.SlotStore], one shard lock at a time.
func (s *memStore) Renew(_ context.Context, slots []store.Slot, lease time.Duration) (int, error) {
	if err := contract.CheckRenew(slots, lease); err != nil {
		return 0, err
	}
	renewed := 0
	for _, slot := range slots {
		now := s.now()
		sh := s.slotShard(slot.Key)
		sh.mu.Lock()
		m := sh.live(slot.Key, now)
		if _, ok := m[slot.ID]; ok {
			m[slot.ID] = now + lease.Microseconds()
			renewed++
		}
		sh.mu.Unlock()
	}
	return renewed, nil
}

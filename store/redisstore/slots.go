package redisstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

var _ store.SlotStore = (*redisStore)(nil)

// tagSlots names the sorted set of an in-flight cap's slots.
const tagSlots = "if"

// maxRenewCalls bounds the calls one Renew has in flight (the batcher
// pipelines them).
const maxRenewCalls = 16

// slotKey returns the sorted set of key's slots, in key's hash tag.
func (s *redisStore) slotKey(key string) string {
	return keyBase(s.prefix, encodeKey(key)) + tagSlots
}

// Acquire implements [store.SlotStore]: one call of the slots script
// (package lua, "In-flight caps"), never re-sent.
func (s *redisStore) Acquire(ctx context.Context, slot store.Slot, max int64, lease time.Duration) (bool, int64, error) {
	if err := contract.CheckAcquire(slot, max, lease); err != nil {
		return false, 0, err
	}
	v, err := s.slots(ctx, "acquire", slot.Key, slot.ID, max, lease.Microseconds())
	if err != nil {
		return false, 0, err
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != 2 {
		return false, 0, backendError("acquire", fmt.Errorf("%w: acquire answered %v, want 2 integers", errBadReply, v))
	}
	got, ok1 := arr[0].(int64)
	held, ok2 := arr[1].(int64)
	if !ok1 || !ok2 || got < 0 || got > 1 || held < 0 {
		return false, 0, backendError("acquire", fmt.Errorf("%w: acquire answered %v", errBadReply, v))
	}
	return got == 1, held, nil
}

// Release implements [store.SlotStore]: one call of the slots script.
func (s *redisStore) Release(ctx context.Context, slot store.Slot) error {
	if err := contract.CheckSlot(slot, 0, 0); err != nil {
		return err
	}
	v, err := s.slots(ctx, "release", slot.Key, slot.ID)
	if err != nil {
		return err
	}
	if _, ok := v.(int64); !ok {
		return backendError("release", fmt.Errorf("%w: release answered %v, want an integer", errBadReply, v))
	}
	return nil
}

// Renew implements [store.SlotStore]: one call of the slots script per
// key, at most a few at a time. On an error some keys may have been
// renewed; the count is of those known renewed.
func (s *redisStore) Renew(ctx context.Context, slots []store.Slot, lease time.Duration) (int, error) {
	if err := contract.CheckRenew(slots, lease); err != nil {
		return 0, err
	}
	byKey := make(map[string][]any)
	var order []string
	for _, sl := range slots {
		if _, ok := byKey[sl.Key]; !ok {
			order = append(order, sl.Key)
		}
		byKey[sl.Key] = append(byKey[sl.Key], sl.ID)
	}
	var (
		mu      sync.Mutex
		renewed int
		first   error
		wg      sync.WaitGroup
		sem     = make(chan struct{}, maxRenewCalls)
	)
	for _, k := range order {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			n, err := s.renewKey(ctx, k, lease, byKey[k])
			mu.Lock()
			defer mu.Unlock()
			renewed += n
			if first == nil {
				first = err
			}
		})
	}
	wg.Wait()
	return renewed, first
}

// renewKey renews the leases of ids under key.
func (s *redisStore) renewKey(ctx context.Context, key string, lease time.Duration, ids []any) (int, error) {
	v, err := s.slots(ctx, "renew", key, append([]any{lease.Microseconds()}, ids...)...)
	if err != nil {
		return 0, err
	}
	n, ok := v.(int64)
	if !ok || n < 0 {
		return 0, backendError("renew", fmt.Errorf("%w: renew answered %v, want an integer", errBadReply, v))
	}
	return int(n), nil
}

// slots runs the slots script in mode on key's slot set.
func (s *redisStore) slots(ctx context.Context, mode, key string, args ...any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, backendError(mode, err)
	}
	k := s.slotKey(key)
	cmd := append(make([]any, 0, 5+len(args)), "evalsha", s.scripts.slots.sha, 1, k, mode)
	return s.do(ctx, mode, &command{key: k, sc: &s.scripts.slots, args: append(cmd, args...)})
}

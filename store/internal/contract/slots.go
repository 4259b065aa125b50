package contract

import (
	"fmt"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// Bounds of a slot's lease (store.SlotStore).
const (
	MinLease = time.Millisecond
	MaxLease = 24 * time.Hour
)

// CheckSlot validates the arguments of store.SlotStore.Acquire; max 0
// skips the cap's check (Release), lease 0 the lease's (Release).
func CheckSlot(s store.Slot, max int64, lease time.Duration) error {
	switch {
	case s.Key == "":
		return fmt.Errorf("%w: slot: empty key", store.ErrInvalidRequest)
	case s.ID == "":
		return fmt.Errorf("%w: slot of %q: empty id", store.ErrInvalidRequest, s.Key)
	case max < 0 || max > store.MaxSlots:
		return fmt.Errorf("%w: slot of %q: max must be 1 to %d, got %d", store.ErrInvalidRequest, s.Key, int64(store.MaxSlots), max)
	}
	return CheckLease(lease)
}

// CheckLease validates a lease; 0 passes (no lease given).
func CheckLease(lease time.Duration) error {
	if lease != 0 && (lease < MinLease || lease > MaxLease) {
		return fmt.Errorf("%w: slot lease must be %s to %s, got %s", store.ErrInvalidRequest, MinLease, MaxLease, lease)
	}
	return nil
}

// CheckAcquire validates the arguments of store.SlotStore.Acquire.
func CheckAcquire(s store.Slot, max int64, lease time.Duration) error {
	if max == 0 {
		return fmt.Errorf("%w: slot of %q: max must be 1 to %d, got 0", store.ErrInvalidRequest, s.Key, int64(store.MaxSlots))
	}
	if lease == 0 {
		return fmt.Errorf("%w: slot lease must be %s to %s, got 0s", store.ErrInvalidRequest, MinLease, MaxLease)
	}
	return CheckSlot(s, max, lease)
}

// CheckRenew validates the arguments of store.SlotStore.Renew.
func CheckRenew(slots []store.Slot, lease time.Duration) error {
	if lease == 0 {
		return fmt.Errorf("%w: slot lease must be %s to %s, got 0s", store.ErrInvalidRequest, MinLease, MaxLease)
	}
	for _, s := range slots {
		if err := CheckSlot(s, 0, lease); err != nil {
			return err
		}
	}
	return nil
}

package contract

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/ratekeeper/ratekeeper/store"
)

// StateSize is the size of one GCRA or token bucket state in a
// reservation ([store.Decision.Reservation]): its time in microseconds
// and its units used, each a little-endian float64, as the Redis store
// keeps the state itself.
const StateSize = 16

// AppendState appends the state {ts, used} to a reservation. An absent
// state is {0, 0}, which counts no units.
func AppendState(dst []byte, ts, used float64) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(ts))
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(used))
}

// State returns the i-th state of a reservation checked by
// [CheckReservation]: limit j's state before the reservation is state
// 2j, after it 2j+1.
func State(res string, i int) (ts, used float64) {
	b := res[i*StateSize:]
	return math.Float64frombits(binary.LittleEndian.Uint64([]byte(b[:8]))),
		math.Float64frombits(binary.LittleEndian.Uint64([]byte(b[8:16])))
}

// CheckReservation validates a [store.Waiter.CancelWait] of d for req:
// req must be valid, with MaxWait, and d must hold a reservation of its
// limits (a state before and after per limit). Errors wrap
// [store.ErrInvalidRequest] or the error of [store.Request.Validate].
func CheckReservation(req *store.Request, d *store.Decision) error {
	if err := req.Validate(); err != nil {
		return err
	}
	switch {
	case req.MaxWait <= 0:
		return fmt.Errorf("%w: CancelWait of a request without MaxWait", store.ErrInvalidRequest)
	case !d.Allowed || d.Delay <= 0 || len(d.Reservation) != 2*StateSize*len(req.Limits):
		return fmt.Errorf("%w: CancelWait of a decision that holds no reservation of the request's %d limits", store.ErrInvalidRequest, len(req.Limits))
	}
	return nil
}

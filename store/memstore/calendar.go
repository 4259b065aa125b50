package memstore

import (
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// fixedWindowAt returns the start and end (µs) of the fixed window of l
// that holds t: a multiple of the period, or for a calendar limit the
// calendar window (package store, "Calendar quotas").
func fixedWindowAt(l *store.Limit, t int64) (start, end int64) {
	if l.Calendar != "" {
		return contract.Window(*l, t)
	}
	p := l.Period.Microseconds()
	ws := windowStart(t, p)
	return ws, ws + p
}

package redisstore

import (
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// calendarRequest reports whether one of req's limits counts in calendar
// windows (package store, "Calendar quotas").
func calendarRequest(req *store.Request) bool {
	for i := range req.Limits {
		if req.Limits[i].Calendar != "" {
			return true
		}
	}
	return false
}

// appendBounds appends the calendar script's window bounds to args (package
// lua, "Calendar quotas"): per limit, the starts of four consecutive
// calendar windows around the store's clock, or four zeros for a limit of
// aligned windows. The script picks the window that holds the server's
// time, which may differ from the store's by up to a window.
func (s *redisStore) appendBounds(args []any, limits []store.Limit) []any {
	now := time.Now
	if s.clock != nil {
		now = s.clock
	}
	t := now().UnixMicro()
	for _, l := range limits {
		if l.Calendar == "" {
			args = append(args, 0, 0, 0, 0)
			continue
		}
		b := contract.Bounds(l, t)
		args = append(args, b[0], b[1], b[2], b[3])
	}
	return args
}

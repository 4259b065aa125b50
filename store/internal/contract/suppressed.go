package contract

import (
	"context"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// Suppressed is the algorithm value the stores decide the suppressed
// strategy of package store/suppressed under: one past the public
// algorithms, so that [store.Limit.Validate] refuses it and only a
// [Suppressor] call reaches it. A limit under it carries the soft limit
// in Rate and the hard limit in Burst (always set), and the name of the
// counting limit it was built from.
const Suppressed = store.FixedWindow + 1

// SuppressionCache is how long a suppressed limit holds the suppression
// factor it computed, per key: this, or a tenth of the Period when that is
// shorter (see package store/suppressed).
const SuppressionCache = 100 * time.Millisecond

// Mode is what a [Suppressor] call does with a request.
type Mode uint8

// The modes of a [Suppressor] call.
const (
	Take Mode = iota
	Peek
	Reset
)

// Suppressor is implemented by the stores that decide the suppressed
// strategy in one atomic step: the memory store and the Redis store.
// Package store/suppressed checks req (every limit under [Suppressed],
// by [ValidSuppressed]'s rules) before the call; the store does not
// check it again. Reset returns the zero Decision.
type Suppressor interface {
	Suppress(ctx context.Context, req store.Request, mode Mode) (store.Decision, error)
}

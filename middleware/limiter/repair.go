package limiter

import (
	"context"
	"errors"
	"log/slog"

	"github.com/ratekeeper/ratekeeper/store"
)

// keyScoped reports whether err is a store failure that belongs to the
// request's key alone: a script error ("script") whose chain holds
// an error with a KeyScoped method that returns true, as the Redis store's
// errors do when Redis answered about the key's own data (state of the
// wrong type it could not repair, for instance, from a user script). Such
// a failure says nothing about the store's health for other keys.
func keyScoped(err error) bool {
	if store.KindOf(err) != "script" {
		return false
	}
	var ks interface{ KeyScoped() bool }
	return errors.As(err, &ks) && ks.KeyScoped()
}

// repaired logs, at warn level and at most once per second, that the
// store replaced state it could not read (see [store.Decision.Repaired]).
func (l *Limiter) repaired(ctx context.Context, d *store.Decision) {
	if !l.throttle(&l.lastRepair) {
		return
	}
	l.logger.LogAttrs(ctx, slog.LevelWarn, "ratekeeper: store replaced state it could not read; decided as a fresh key",
		slog.String("policy", l.name), slog.String("store", l.storeName), slog.String("limit", d.LimitID))
}

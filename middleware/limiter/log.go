package limiter

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// processSecret keys the hashes of identities in logs unless
// Options.LogSecret gives a secret: the hashes correlate one client's
// lines within a process, but cannot be reversed by hashing every IPv4
// address.
var processSecret = func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}()

// logAttrsKey is the context key of the attributes of [WithLogAttrs].
type logAttrsKey struct{}

// WithLogAttrs returns a copy of ctx under which the limiter's lines about
// one request (the decision at debug level, the start of a block at info)
// carry attrs, after the policy and outcome and before the identity's
// hash: what the request was, in the caller's terms. The gRPC interceptor
// adds the call's full method name this way; the HTTP middleware adds the
// method and route pattern of its own accord. Attributes of an enclosing
// WithLogAttrs come first.
func WithLogAttrs(ctx context.Context, attrs ...slog.Attr) context.Context {
	if prev, ok := ctx.Value(logAttrsKey{}).([]slog.Attr); ok {
		attrs = append(slices.Clip(prev), attrs...)
	}
	return context.WithValue(ctx, logAttrsKey{}, attrs)
}

// watching reports whether anyone wants events: an observer, a refusal
// hook, or a logger that logs at debug level. Events are not built
// otherwise.
func (l *Limiter) watching(ctx context.Context) bool {
	return l.observer != nil || l.refused != nil || l.logger.Enabled(ctx, slog.LevelDebug)
}

// report logs e at debug level and hands it to the observer and, for a
// refusal, to the refusal hook.
func (l *Limiter) report(ctx context.Context, e *Event, identity string) {
	if l.logger.Enabled(ctx, slog.LevelDebug) {
		l.debug(ctx, e, identity)
	}
	if l.observer != nil {
		e.Store = l.storeName
		e.StoreDown = l.breaker.down()
		l.observer(ctx, *e)
	}
	if l.refused != nil && (e.Outcome == OutcomeLimited || e.Outcome == OutcomeBlocked || e.Outcome == OutcomeDryRun || e.Outcome == OutcomeInFlight) {
		l.refused(ctx, e.Decision, identity)
	}
}

// debug logs one event, with the identity hashed so logs never hold client
// addresses, subjects or API keys in clear.
func (l *Limiter) debug(ctx context.Context, e *Event, identity string) {
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs, slog.String("policy", e.Policy), slog.String("outcome", string(e.Outcome)))
	attrs = l.requestAttrs(ctx, attrs, identity)
	if e.Capacity != 0 {
		attrs = append(attrs,
			slog.Int64("remaining", e.Remaining),
			slog.Duration("retry_after", e.RetryAfter),
			slog.String("limit", e.LimitID))
	}
	if e.Fallback {
		attrs = append(attrs, slog.Bool("fallback", true))
	}
	if e.Latency > 0 {
		attrs = append(attrs, slog.Duration("latency", e.Latency))
	}
	if e.Err != nil && e.Outcome != OutcomeFailedOpen && e.Outcome != OutcomeFailedClosed {
		attrs = append(attrs, slog.String("error", e.Err.Error()))
	}
	l.logger.LogAttrs(ctx, slog.LevelDebug, "ratekeeper: decision", attrs...)
}

// requestAttrs appends what a line says of its request: the attributes
// ctx carries ([WithLogAttrs]), then the identity's hash, when there is an
// identity.
func (l *Limiter) requestAttrs(ctx context.Context, attrs []slog.Attr, identity string) []slog.Attr {
	if call, ok := ctx.Value(logAttrsKey{}).([]slog.Attr); ok {
		attrs = append(attrs, call...)
	}
	if identity != "" {
		attrs = append(attrs, slog.String("key_hash", l.hashIdentity(identity)))
	}
	return attrs
}

// hashIdentity returns 16 hex digits of the HMAC-SHA256 of identity under
// the log secret.
func (l *Limiter) hashIdentity(identity string) string {
	mac := hmac.New(sha256.New, l.logSecret)
	mac.Write([]byte(identity))
	return hex.EncodeToString(mac.Sum(nil)[:8])
}

// blockStarted logs, at info level, that the request started a block.
func (l *Limiter) blockStarted(ctx context.Context, identity string, d *Decision) {
	if !l.logger.Enabled(ctx, slog.LevelInfo) {
		return
	}
	attrs := make([]slog.Attr, 0, 8)
	attrs = append(attrs, slog.String("policy", d.Policy), slog.String("scope", d.LimitID), slog.Duration("duration", d.RetryAfter))
	attrs = l.requestAttrs(ctx, attrs, identity)
	l.logger.LogAttrs(ctx, slog.LevelInfo, "ratekeeper: block started", attrs...)
}

// warn logs a store failure at most once per second; the error text goes
// to the log only, never to the client.
func (l *Limiter) warn(ctx context.Context, policy string, err error) {
	if !l.throttle(&l.lastWarn) {
		return
	}
	l.logger.LogAttrs(ctx, slog.LevelWarn, "ratekeeper: store failure",
		slog.String("policy", policy),
		slog.String("failure_mode", l.failure.name()),
		slog.Bool("fallback", l.local != nil),
		slog.String("kind", store.KindOf(err)),
		slog.String("error", err.Error()))
}

// throttle reports whether a log line may be written now: at most one per
// second per counter.
func (l *Limiter) throttle(last *atomic.Int64) bool {
	now := time.Now().UnixNano()
	prev := last.Load()
	return now-prev >= int64(time.Second) && last.CompareAndSwap(prev, now)
}

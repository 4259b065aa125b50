package middleware

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/store"
)

// processSecret keys the hashes of identities in logs unless WithLogSecret
// gives a secret: the hashes correlate one client's lines within a
// process, but cannot be reversed by hashing every IPv4 address.
var processSecret = func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}()

// watching reports whether anyone wants events: an observer, or a logger
// that logs at debug level. Events are not built otherwise.
func (q *quota) watching(ctx context.Context) bool {
	return q.observer != nil || q.refused != nil || q.logger.Enabled(ctx, slog.LevelDebug)
}

// report logs e at debug level and hands it to the observer. r, when not
// nil, adds the method and route pattern to the log line.
func (q *quota) report(r *http.Request, e *Event, identity string) {
	q.reportCtx(r.Context(), r, e, identity)
}

func (q *quota) reportIfWatched(r *http.Request, e *Event, identity string) {
	if q.watching(r.Context()) {
		q.reportCtx(r.Context(), r, e, identity)
	}
}

func (q *quota) reportCtx(ctx context.Context, r *http.Request, e *Event, identity string) {
	if q.logger.Enabled(ctx, slog.LevelDebug) {
		q.debug(ctx, r, e, identity)
	}
	if q.observer != nil {
		e.Store = q.storeName
		e.StoreDown = q.breaker.down()
		q.observer(*e)
	}
	if q.refused != nil && (e.Outcome == OutcomeLimited || e.Outcome == OutcomeBlocked || e.Outcome == OutcomeDryRun) {
		q.refused(ctx, e.Decision, identity)
	}
}

// debug logs one event, with the identity hashed so logs never hold client
// addresses, subjects or API keys in clear.
func (q *quota) debug(ctx context.Context, r *http.Request, e *Event, identity string) {
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs, slog.String("policy", e.Policy), slog.String("outcome", string(e.Outcome)))
	attrs = q.requestAttrs(attrs, r, identity)
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
	q.logger.LogAttrs(ctx, slog.LevelDebug, "ratekeeper: decision", attrs...)
}

// requestAttrs appends the method, the route pattern and the identity's
// hash.
func (q *quota) requestAttrs(attrs []slog.Attr, r *http.Request, identity string) []slog.Attr {
	if r != nil {
		route, _ := keyfunc.Route(r)
		attrs = append(attrs, slog.String("method", r.Method), slog.String("route", route))
	}
	if identity != "" {
		attrs = append(attrs, slog.String("key_hash", q.hashIdentity(identity)))
	}
	return attrs
}

// hashIdentity returns 16 hex digits of the HMAC-SHA256 of identity under
// the log secret.
func (q *quota) hashIdentity(identity string) string {
	mac := hmac.New(sha256.New, q.logSecret)
	mac.Write([]byte(identity))
	return hex.EncodeToString(mac.Sum(nil)[:8])
}

// blockStarted logs, at info level, that the request started a block.
func (q *quota) blockStarted(r *http.Request, res *resolved, d *Decision) {
	q.blockStartedCtx(r.Context(), r, res.identity, d)
}

func (q *quota) blockStartedCtx(ctx context.Context, r *http.Request, identity string, d *Decision) {
	if !q.logger.Enabled(ctx, slog.LevelInfo) {
		return
	}
	attrs := make([]slog.Attr, 0, 8)
	attrs = append(attrs, slog.String("policy", d.Policy), slog.String("scope", d.LimitID), slog.Duration("duration", d.RetryAfter))
	attrs = q.requestAttrs(attrs, r, identity)
	q.logger.LogAttrs(ctx, slog.LevelInfo, "ratekeeper: block started", attrs...)
}

// invalidCredential logs, at debug level, a credential that failed
// verification and left the request in the anonymous tier.
func (q *quota) invalidCredential(r *http.Request, err error) {
	ctx := r.Context()
	if !q.logger.Enabled(ctx, slog.LevelDebug) {
		return
	}
	attrs := make([]slog.Attr, 0, 6)
	attrs = append(attrs, slog.String("policy", q.name), slog.String("reason", err.Error()))
	attrs = q.requestAttrs(attrs, r, "")
	q.logger.LogAttrs(ctx, slog.LevelDebug, "ratekeeper: credential failed verification; classified as anonymous", attrs...)
}

// warn logs a store failure at most once per second; the error text goes
// to the log only, never to the client.
func (q *quota) warn(ctx context.Context, policy string, err error) {
	if !q.throttle(&q.lastWarn) {
		return
	}
	q.logger.LogAttrs(ctx, slog.LevelWarn, "ratekeeper: store failure",
		slog.String("policy", policy),
		slog.String("failure_mode", q.failure.String()),
		slog.Bool("fallback", q.local != nil),
		slog.String("kind", string(store.KindOf(err))),
		slog.String("error", err.Error()))
}

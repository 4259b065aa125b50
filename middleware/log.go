package middleware

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/ratekeeper/ratekeeper/keyfunc"
)

// requestLog adds the method and route pattern of the request a log line
// is about (found in the line's context) to the limiter's log lines.
type requestLog struct{ slog.Handler }

// Handle implements slog.Handler.
func (h requestLog) Handle(ctx context.Context, rec slog.Record) error {
	s := stateFrom(ctx)
	if s == nil {
		return h.Handler.Handle(ctx, rec)
	}
	route, _ := keyfunc.Route(&s.req)
	req := []slog.Attr{slog.String("method", s.req.Method), slog.String("route", route)}
	// The request's attributes go before the identity's hash, as the
	// line reads: what was decided, for which request, for whom.
	out := slog.NewRecord(rec.Time, rec.Level, rec.Message, rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "key_hash" && req != nil {
			out.AddAttrs(req...)
			req = nil
		}
		out.AddAttrs(a)
		return true
	})
	out.AddAttrs(req...)
	return h.Handler.Handle(ctx, out)
}

// WithAttrs implements slog.Handler.
func (h requestLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestLog{h.Handler.WithAttrs(attrs)}
}

// WithGroup implements slog.Handler.
func (h requestLog) WithGroup(name string) slog.Handler {
	return requestLog{h.Handler.WithGroup(name)}
}

// invalidCredential logs, at debug level, a credential that failed
// verification and left the request in the anonymous tier.
func (h *policy) invalidCredential(r *http.Request, err error) {
	ctx := r.Context()
	if !h.logger.Enabled(ctx, slog.LevelDebug) {
		return
	}
	h.logger.LogAttrs(ctx, slog.LevelDebug, "ratekeeper: credential failed verification; classified as anonymous",
		slog.String("policy", h.name), slog.String("reason", err.Error()))
}

package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ratekeeper/ratekeeper/internal/clientstate"
	"github.com/ratekeeper/ratekeeper/internal/ipform"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/middleware/policy"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/suppressed"
)

// ErrUnauthenticated is what an [Options.Authorize] function returns
// (wrapped or as is) for a request without valid credentials: the API
// answers 401. Any other error answers 403.
var ErrUnauthenticated = errors.New("ratekeeper: admin: unauthenticated")

// Options configures the admin API. The zero value is valid and refuses
// every request: an application grants access only by setting Authorize.
type Options struct {
	// Authorize authenticates and authorizes one request to the API and
	// returns who made it, as the audit log shall name them ("alice",
	// "deploy-bot"). It returns an error wrapping [ErrUnauthenticated]
	// for a request without valid credentials (401), any other error for
	// one that may not do what it asks (403); it may look at r.Method to
	// allow reads (GET) and not changes (POST). A nil error with an empty
	// who is refused with 403. Nil means every request is refused with 403:
	// the API fails closed. Authorize must be safe for concurrent use; its
	// error text is logged, never sent to the client.
	Authorize func(r *http.Request) (who string, err error)
	// Top is the summary of the most limited clients that the top
	// endpoint shows; nil: that endpoint answers 501. The application
	// feeds it (see [Top]).
	Top *Top
	// Logger receives the audit lines of mutating calls (at info level)
	// and refused or failed calls (at warn level). Nil means
	// slog.Default().
	Logger *slog.Logger
}

// maxBody bounds the body of a POST.
const maxBody = 4 << 10

// Most blocked clients one call lists, and the default.
const (
	maxBlocks     = 1000
	defaultBlocks = 100
)

// New returns the admin API for the policies of set, which answer the
// state and reset endpoints from st, the store set runs on. Mount it
// under a prefix of the application's choice, with http.StripPrefix:
//
//	h, err := admin.New(set, st, admin.Options{Authorize: auth})
//	mux.Handle("/admin/ratelimit/", http.StripPrefix("/admin/ratelimit", h))
//
// New returns an error for a nil set or st, or an Options.Top with fields
// out of range. The handler is safe for
// concurrent use; it holds no lock across store calls.
func New(set *policy.Set, st store.Store, opts Options) (http.Handler, error) {
	if set == nil {
		return nil, errors.New("ratekeeper: admin: nil policy set")
	}
	if st == nil {
		return nil, errors.New("ratekeeper: admin: nil store")
	}
	if opts.Top != nil {
		if err := opts.Top.check(); err != nil {
			return nil, err
		}
	}
	a := &api{set: set, store: st, authorize: opts.Authorize, top: opts.Top, logger: opts.Logger, now: time.Now}
	a.blocks, _ = st.(store.BlockLister)
	if a.logger == nil {
		a.logger = slog.Default()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /policies", a.listPolicies)
	mux.HandleFunc("GET /policies/{policy}", a.showPolicy)
	mux.HandleFunc("GET /policies/{policy}/client", a.showClient)
	mux.HandleFunc("POST /policies/{policy}/reset", a.resetClient)
	mux.HandleFunc("POST /policies/{policy}/override", a.setOverride)
	mux.HandleFunc("POST /policies/{policy}/override/clear", a.clearOverride)
	mux.HandleFunc("POST /policies/{policy}/mode", a.switchMode)
	mux.HandleFunc("GET /policies/{policy}/blocked", a.listBlocked)
	mux.HandleFunc("GET /policies/{policy}/top", a.listTop)
	a.mux = mux
	return a, nil
}

// api is the handler New returns.
type api struct {
	set       *policy.Set
	store     store.Store
	authorize func(*http.Request) (string, error)
	blocks    store.BlockLister // st's, when it lists its blocks
	top       *Top
	logger    *slog.Logger
	now       func() time.Time
	mux       *http.ServeMux
	refusals  logGate // the warnings of refused calls
}

// logGate lets one log line through per second and counts the ones it
// held back, so that a client sending unauthorized calls as fast as it
// can writes one line a second, not one per call.
type logGate struct {
	mu      sync.Mutex
	next    time.Time
	dropped int
}

// allow reports whether a line may be written at now and, when it may,
// how many were held back since the last one.
func (g *logGate) allow(now time.Time) (dropped int, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now.Before(g.next) {
		g.dropped++
		return 0, false
	}
	dropped, g.dropped, g.next = g.dropped, 0, now.Add(time.Second)
	return dropped, true
}

// maxLogged is the longest text of a request (its path, method or
// error) a refusal's log line holds; the rest is cut, so that a client
// cannot make every line as long as its request line.
const maxLogged = 256

// logged returns s cut to maxLogged bytes, marked when cut.
func logged(s string) string {
	if len(s) <= maxLogged {
		return s
	}
	return strings.ToValidUTF8(s[:maxLogged], "") + "…(cut)"
}

// whoKey carries the authorized caller in the request's context.
type whoKey struct{}

// ServeHTTP authorizes the request, then routes it.
func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if a.authorize == nil {
		if dropped, ok := a.refusals.allow(a.now()); ok {
			a.logger.LogAttrs(r.Context(), slog.LevelWarn, "ratekeeper: admin: refused: no authorization function configured",
				slog.String("method", logged(r.Method)), slog.String("path", logged(r.URL.Path)), slog.Int("not_logged", dropped))
		}
		writeError(w, http.StatusForbidden, "forbidden", "the admin API has no authorization function configured")
		return
	}
	who, err := a.authorize(r)
	if err == nil && who == "" {
		err = errors.New("authorization returned an empty caller")
	}
	if err != nil {
		status, code, msg := http.StatusForbidden, "forbidden", "not allowed"
		if errors.Is(err, ErrUnauthenticated) {
			status, code, msg = http.StatusUnauthorized, "unauthenticated", "credentials missing or invalid"
		}
		if dropped, ok := a.refusals.allow(a.now()); ok {
			a.logger.LogAttrs(r.Context(), slog.LevelWarn, "ratekeeper: admin: refused",
				slog.Int("status", status), slog.String("method", logged(r.Method)), slog.String("path", logged(r.URL.Path)),
				slog.String("error", logged(err.Error())), slog.Int("not_logged", dropped))
		}
		writeError(w, status, code, msg)
		return
	}
	a.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), whoKey{}, who)))
}

func (a *api) listPolicies(w http.ResponseWriter, r *http.Request) {
	st := a.set.Status()
	out := statusJSON{
		Source:   st.Source,
		Checksum: st.Checksum,
		LoadedAt: st.LoadedAt.UTC(),
		Reloads:  st.Reloads,
		Failures: st.Failures,
		Policies: make([]policyJSON, 0, len(st.Policies)),
	}
	if st.LastError != nil {
		out.LastError = st.LastError.Error() // the file's problems: file, line and field
	}
	for _, p := range st.Policies {
		out.Policies = append(out.Policies, newPolicyJSON(p))
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *api) showPolicy(w http.ResponseWriter, r *http.Request) {
	p, ok := a.policy(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, newPolicyJSON(p))
}

// policy finds the policy the path names, or answers 404.
func (a *api) policy(w http.ResponseWriter, r *http.Request) (policy.Policy, bool) {
	name := r.PathValue("policy")
	for _, p := range a.set.Status().Policies {
		if p.Name == name {
			return p, true
		}
	}
	writeError(w, http.StatusNotFound, "unknown_policy", "no policy named "+strconv.Quote(name))
	return policy.Policy{}, false
}

func (a *api) showClient(w http.ResponseWriter, r *http.Request) {
	p, ok := a.policy(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	c := client{Tier: q.Get("tier"), Identity: q.Get("identity")}
	if c.Identity == "" {
		writeError(w, http.StatusBadRequest, "bad_request", "the identity query parameter is required")
		return
	}
	if !identityForm(w, c.Identity) {
		return
	}
	target, err := a.resolve(p, c.Tier)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	out := clientJSON{Policy: p.Name, Tier: c.Tier, Identity: c.Identity, Mode: string(p.Mode),
		Unlimited: target.unlimited, Suspended: target.suspended}
	if !target.unlimited && !target.suspended {
		if op, err := a.readClient(r.Context(), &target, c.Identity, &out); err != nil {
			a.storeFailed(w, r, op, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// readClient fills out's state and override with what the store holds for
// identity, recording nothing; a policy without rate limits (in flight
// alone) has neither. On a store failure it returns the failed operation
// and the error.
func (a *api) readClient(ctx context.Context, target *target, identity string, out *clientJSON) (string, error) {
	now := a.now()
	key := target.key(identity)
	if len(target.limits) == 0 {
		// A policy that bounds requests in flight alone keeps no rate
		// state in the store: there is none to report.
		return "", nil
	}
	st := a.store
	if target.soft != nil {
		var err error
		if st, err = suppressed.New(st, suppressed.Options{Soft: target.soft}); err != nil {
			return "peek", err
		}
	}
	d, err := clientstate.Read(ctx, st, store.Request{Key: key, Limits: target.limits, ApplyOverride: target.overrides})
	if err != nil {
		return "peek", err
	}
	if ov, ok := a.store.(store.OverrideStore); ok && target.overrides {
		o, err := ov.GetOverride(ctx, key)
		switch {
		case err == nil:
			out.Override = newOverrideJSON(o, now)
		case !errors.Is(err, store.ErrNotFound):
			return "override", err
		}
	}
	out.State = &stateJSON{
		Limit:      d.LimitID,
		Capacity:   d.Capacity,
		Remaining:  d.Remaining,
		Reset:      now.Add(d.ResetAfter).UTC(),
		Blocked:    d.Blocked,
		RetryAfter: seconds(d.RetryAfter),
	}
	if d.Blocked {
		until := now.Add(d.RetryAfter).UTC()
		out.State.BlockedUntil = &until
	}
	return "", nil
}

// client names one client of a policy, as the reset endpoint's body does.
type client struct {
	Tier     string `json:"tier"`
	Identity string `json:"identity"`
}

// policyAndBody finds the request's policy and decodes its JSON body into
// v, or answers the error.
func (a *api) policyAndBody(w http.ResponseWriter, r *http.Request, v any) (policy.Policy, bool) {
	p, ok := a.policy(w, r)
	return p, ok && readBody(w, r, v)
}

// limiter returns the limiter of owner, the policy whose quota p uses, or
// answers 404: the policy went away in a reload since the lookup.
func (a *api) limiter(w http.ResponseWriter, p policy.Policy, owner string) (*middleware.Limiter, bool) {
	lim, err := a.set.Limiter(owner)
	if err != nil {
		writeError(w, http.StatusNotFound, "unknown_policy", "no policy named "+strconv.Quote(p.Name))
		return nil, false
	}
	return lim, true
}

func (a *api) resetClient(w http.ResponseWriter, r *http.Request) {
	var c client
	p, ok := a.policyAndBody(w, r, &c)
	if !ok {
		return
	}
	if c.Identity == "" {
		writeError(w, http.StatusBadRequest, "bad_request", "identity is required")
		return
	}
	if !identityForm(w, c.Identity) {
		return
	}
	target, err := a.resolve(p, c.Tier)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	lim, ok := a.limiter(w, p, target.owner)
	if !ok {
		return
	}
	err = lim.Reset(r.Context(), c.Tier, c.Identity)
	found := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		a.storeFailed(w, r, "reset", err)
		return
	}
	a.audit(r, "reset", slog.String("policy", p.Name), slog.String("tier", c.Tier),
		slog.String("identity", c.Identity), slog.Bool("found", found))
	writeJSON(w, http.StatusOK, resetJSON{Policy: p.Name, Tier: c.Tier, Identity: c.Identity, Found: found})
}

// modeRequest is the body of the mode endpoint: a mode, or "clear".
type modeRequest struct {
	Mode string `json:"mode"`
}

func (a *api) switchMode(w http.ResponseWriter, r *http.Request) {
	var req modeRequest
	p, ok := a.policyAndBody(w, r, &req)
	if !ok {
		return
	}
	m := policy.Mode(req.Mode)
	switch req.Mode {
	case "enforce", "dry_run", "off":
	case "clear":
		m = "" // back to the file's mode
	default:
		writeError(w, http.StatusBadRequest, "bad_request", `mode must be "enforce", "dry_run", "off" or "clear"`)
		return
	}
	if err := a.set.SetMode(p.Name, m); err != nil {
		// The policy went away in a reload between the lookup and the switch.
		writeError(w, http.StatusNotFound, "unknown_policy", "no policy named "+strconv.Quote(p.Name))
		return
	}
	after, ok := a.policy(w, r)
	if !ok {
		return
	}
	a.audit(r, "mode", slog.String("policy", p.Name), slog.String("request", req.Mode),
		slog.String("before", string(p.Mode)), slog.String("after", string(after.Mode)),
		slog.Bool("overridden", after.Overridden))
	writeJSON(w, http.StatusOK, newPolicyJSON(after))
}

func (a *api) listBlocked(w http.ResponseWriter, r *http.Request) {
	p, ok := a.policy(w, r)
	if !ok {
		return
	}
	if a.blocks == nil {
		writeError(w, http.StatusNotImplemented, "not_supported",
			"the store does not list its blocks (store.BlockLister)")
		return
	}
	q := r.URL.Query()
	count, ok := intParam(w, q.Get("count"), defaultBlocks, maxBlocks, "count")
	if !ok {
		return
	}
	target, err := a.resolve(p, "")
	if err != nil && !target.tiered {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	ns := target.owner + ":"
	if target.tiered {
		ns = target.owner + "/"
	}
	blocks, next, err := a.blocks.Blocks(r.Context(), ns, q.Get("cursor"), count)
	if errors.Is(err, errors.ErrUnsupported) { // a decorator over a store that does not list
		writeError(w, http.StatusNotImplemented, "not_supported", "the store does not list its blocks (store.BlockLister)")
		return
	}
	if errors.Is(err, store.ErrInvalidRequest) { // count is checked above
		writeError(w, http.StatusBadRequest, "bad_request", "invalid cursor")
		return
	}
	if err != nil {
		a.storeFailed(w, r, "blocks", err)
		return
	}
	now := a.now()
	out := blockedJSON{Policy: p.Name, Cursor: next, Clients: make([]blockedClientJSON, 0, len(blocks))}
	for _, b := range blocks {
		owner, tier, identity, ok := limiter.SplitStoreKey(b.Key)
		if !ok || owner != target.owner {
			continue // not a key of this policy's namespace
		}
		out.Clients = append(out.Clients, blockedClientJSON{
			Tier: tier, Identity: identity, Scope: b.Scope,
			Until: now.Add(b.Remaining).UTC(), RetryAfter: seconds(b.Remaining),
		})
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *api) listTop(w http.ResponseWriter, r *http.Request) {
	p, ok := a.policy(w, r)
	if !ok {
		return
	}
	if a.top == nil {
		writeError(w, http.StatusNotImplemented, "not_supported", "no summary of limited clients is configured (Options.Top)")
		return
	}
	q := r.URL.Query()
	k, span := a.top.limits()
	minutes, ok := intParam(w, q.Get("minutes"), span, span, "minutes")
	if !ok {
		return
	}
	n, ok := intParam(w, q.Get("n"), 10, k, "n")
	if !ok {
		return
	}
	// A policy that shares another's quota is refused under its name.
	target, _ := a.resolve(p, "")
	entries := a.top.top(target.owner, time.Duration(minutes)*time.Minute, n)
	out := topJSON{Policy: p.Name, Minutes: minutes, Scope: topScope, Clients: make([]topClientJSON, 0, len(entries))}
	for _, e := range entries {
		out.Clients = append(out.Clients, topClientJSON(e))
	}
	writeJSON(w, http.StatusOK, out)
}

// storeFailed answers 503 for a store failure and logs it; the error's
// text stays in the log.
func (a *api) storeFailed(w http.ResponseWriter, r *http.Request, op string, err error) {
	a.logger.LogAttrs(r.Context(), slog.LevelWarn, "ratekeeper: admin: store call failed",
		slog.String("op", op), slog.String("path", r.URL.Path), slog.String("error", err.Error()))
	writeError(w, http.StatusServiceUnavailable, "store_unavailable", "the store did not answer; see the server's log")
}

// audit logs a change at info level with who made it.
func (a *api) audit(r *http.Request, action string, attrs ...slog.Attr) {
	who, _ := r.Context().Value(whoKey{}).(string)
	attrs = append([]slog.Attr{slog.String("who", who), slog.String("action", action)}, attrs...)
	a.logger.LogAttrs(r.Context(), slog.LevelInfo, "ratekeeper: admin: change", attrs...)
}

// intParam parses an optional positive integer query parameter, capped
// at max, or answers 400.
func intParam(w http.ResponseWriter, s string, def, max int, name string) (int, bool) {
	if s == "" {
		return def, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("%s must be an integer from 1 to %d", name, max))
		return 0, false
	}
	return n, true
}

// identityForm answers 400 and returns false when identity names a client
// address in a form no IP key function gives (see package
// internal/ipform): the call would act on a key no request ever has.
func identityForm(w http.ResponseWriter, identity string) bool {
	if err := ipform.Check(identity); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return false
	}
	return true
}

// readBody decodes a JSON body of at most maxBody bytes, with unknown
// fields refused, or answers 400, 413 or 415. Requiring application/json keeps
// cross-site forms from reaching a mutating endpoint without a CORS
// preflight.
func readBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); !strings.EqualFold(strings.TrimSpace(ct), "application/json") {
		writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", "the body must be application/json")
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	msg := "the body is not a valid JSON object for this endpoint"
	if err == nil {
		// Nothing may follow the object: a second one would be ignored.
		if _, err = dec.Token(); err == io.EOF {
			return true
		}
		msg = "the body must hold one JSON object and nothing after it"
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the body must be at most %d bytes", maxBody))
		return false
	}
	writeError(w, http.StatusBadRequest, "bad_request", msg)
	return false
}

// seconds rounds d up to whole seconds, as Retry-After does.
func seconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

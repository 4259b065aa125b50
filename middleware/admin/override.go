package admin

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
)

// overrideRequest is the body of the override endpoint.
type overrideRequest struct {
	Tier     string `json:"tier"`
	Identity string `json:"identity"`
	// Kind is "raise" (scale > 1), "cut" (scale < 1), "scale",
	// "exempt" or "suspend".
	Kind  string  `json:"kind"`
	Scale float64 `json:"scale"`
	// TTL is a Go duration ("30m", "24h"): how long the override lasts.
	TTL string `json:"ttl"`
}

// overrideJSON is an active override in the API's answers.
type overrideJSON struct {
	Kind       string    `json:"kind"`
	Scale      float64   `json:"scale,omitempty"`
	Expires    time.Time `json:"expires"`
	TTLSeconds int64     `json:"ttl_seconds"`
}

func newOverrideJSON(o store.Override, now time.Time) *overrideJSON {
	return &overrideJSON{Kind: o.Kind.String(), Scale: o.Scale, Expires: now.Add(o.TTL).UTC(), TTLSeconds: seconds(o.TTL)}
}

type overrideResultJSON struct {
	Policy   string        `json:"policy"`
	Tier     string        `json:"tier,omitempty"`
	Identity string        `json:"identity"`
	Override *overrideJSON `json:"override,omitempty"`
	Found    *bool         `json:"found,omitempty"`
}

// parse turns the request into a store.Override, or names the problem.
func (o overrideRequest) parse() (store.Override, error) {
	ttl, err := time.ParseDuration(o.TTL)
	if err != nil || o.TTL == "" {
		return store.Override{}, errors.New(`ttl must be a duration such as "30m" or "24h"`)
	}
	ov := store.Override{TTL: ttl}
	switch o.Kind {
	case "raise", "cut", "scale":
		ov.Kind, ov.Scale = store.OverrideScale, o.Scale
		if o.Kind == "raise" && !(o.Scale > 1) || o.Kind == "cut" && !(o.Scale > 0 && o.Scale < 1) {
			return store.Override{}, fmt.Errorf("scale must be above 1 to raise and between 0 and 1 to cut, got %v", o.Scale)
		}
	case "exempt", "suspend":
		ov.Kind, _ = store.ParseOverrideKind(o.Kind)
		if o.Scale != 0 {
			return store.Override{}, fmt.Errorf("scale is only for raise, cut and scale, not %s", o.Kind)
		}
	default:
		return store.Override{}, errors.New(`kind must be "raise", "cut", "scale", "exempt" or "suspend"`)
	}
	if err := ov.Validate(); err != nil {
		return store.Override{}, err
	}
	return ov, nil
}

// overrideTarget resolves the policy and tier of an override call and
// checks that the store keeps overrides and the policy applies them, or
// answers the error. It returns the limiter of the client's quota, whose
// SetOverride and ClearOverride find the client's store key.
func (a *api) overrideTarget(w http.ResponseWriter, r *http.Request, tier, identity string) (*middleware.Limiter, bool) {
	p, _ := a.policy(w, r) // the caller checked it
	if _, ok := a.store.(store.OverrideStore); !ok {
		writeError(w, http.StatusNotImplemented, "not_supported", "the store keeps no overrides")
		return nil, false
	}
	if identity == "" {
		writeError(w, http.StatusBadRequest, "bad_request", "identity is required")
		return nil, false
	}
	if !identityForm(w, identity) {
		return nil, false
	}
	target, err := a.resolve(p, tier)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return nil, false
	}
	if target.unlimited || target.suspended {
		writeError(w, http.StatusBadRequest, "bad_request", "the tier is unlimited or suspended as a whole: its clients are not decided one by one")
		return nil, false
	}
	if !target.overrides {
		writeError(w, http.StatusConflict, "overrides_disabled", "the policy does not apply overrides: set overrides: true in its configuration")
		return nil, false
	}
	return a.limiter(w, p, target.owner)
}

func (a *api) setOverride(w http.ResponseWriter, r *http.Request) {
	var req overrideRequest
	p, ok := a.policyAndBody(w, r, &req)
	if !ok {
		return
	}
	o, err := req.parse()
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	lim, ok := a.overrideTarget(w, r, req.Tier, req.Identity)
	if !ok {
		return
	}
	if err := lim.SetOverride(r.Context(), req.Tier, req.Identity, o); err != nil {
		if errors.Is(err, store.ErrTooManyKeys) && !errors.Is(err, store.ErrStoreUnavailable) {
			writeError(w, http.StatusConflict, "too_many_overrides", err.Error())
			return
		}
		a.storeFailed(w, r, "override", err)
		return
	}
	a.audit(r, "override", slog.String("policy", p.Name), slog.String("tier", req.Tier),
		slog.String("identity", req.Identity), slog.String("kind", req.Kind),
		slog.Float64("scale", o.Scale), slog.Duration("ttl", o.TTL))
	writeJSON(w, http.StatusOK, overrideResultJSON{Policy: p.Name, Tier: req.Tier, Identity: req.Identity, Override: newOverrideJSON(o, a.now())})
}

func (a *api) clearOverride(w http.ResponseWriter, r *http.Request) {
	var c client
	p, ok := a.policyAndBody(w, r, &c)
	if !ok {
		return
	}
	lim, ok := a.overrideTarget(w, r, c.Tier, c.Identity)
	if !ok {
		return
	}
	err := lim.ClearOverride(r.Context(), c.Tier, c.Identity)
	found := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		a.storeFailed(w, r, "override", err)
		return
	}
	a.audit(r, "override_clear", slog.String("policy", p.Name), slog.String("tier", c.Tier),
		slog.String("identity", c.Identity), slog.Bool("found", found))
	writeJSON(w, http.StatusOK, overrideResultJSON{Policy: p.Name, Tier: c.Tier, Identity: c.Identity, Found: &found})
}

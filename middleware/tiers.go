package middleware

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/store"
)

// Tier is one class of client with its own limits, for [NewTiered].
type Tier struct {
	// Name identifies the tier: [A-Za-z0-9_.-], unique within a limiter. It
	// is appended to the policy name ("api/authenticated") in bodies,
	// metrics and storage keys, so tiers never share counters with each
	// other or with any other policy.
	Name string
	// Limits apply to the tier's requests, all-or-nothing. Required unless
	// Unlimited or Suspended.
	Limits []store.Limit
	// Unlimited tiers (trusted clients) pass without a decision and without
	// rate-limit headers.
	Unlimited bool
	// Suspended tiers are always refused with 403 and a JSON body whose
	// error is "suspended".
	Suspended bool
}

// Classifier assigns a request its tier name and key. An error wrapping
// [keyfunc.ErrNoIdentity] answers 401, any other error 400; an empty key
// is refused; a tier name that was not configured answers 500.
type Classifier func(r *http.Request) (tier, key string, err error)

// NewTiered builds a Limiter whose requests are classified into tiers, each
// with its own limits, in one store s. Options apply to every tier; the
// cost must fit every tier's limits. [WithLimits] and [WithFallbackKey] are
// refused: tiers carry their limits, and the classifier chooses keys.
func NewTiered(s store.Store, classify Classifier, tiers []Tier, opts ...Option) (*Limiter, error) {
	if classify == nil {
		return nil, errors.New("ratekeeper: middleware: nil classifier")
	}
	if len(tiers) == 0 {
		return nil, errors.New("ratekeeper: middleware: no tiers")
	}
	c, err := collect(opts)
	if err != nil {
		return nil, err
	}
	if len(c.extraLimits) > 0 {
		return nil, errors.New("ratekeeper: middleware: WithLimits is not valid with NewTiered; put the limits in the tiers")
	}
	if c.fallbackKey != nil {
		return nil, errors.New("ratekeeper: middleware: WithFallbackKey is not valid with NewTiered; the classifier chooses keys")
	}
	for i, t := range tiers {
		if err := validName(fmt.Sprintf("tier %d name", i), t.Name); err != nil {
			return nil, err
		}
		if t.Unlimited && t.Suspended {
			return nil, fmt.Errorf("ratekeeper: middleware: tier %q is both Unlimited and Suspended", t.Name)
		}
		if !t.Unlimited && !t.Suspended && len(t.Limits) == 0 {
			return nil, fmt.Errorf("ratekeeper: middleware: tier %q has no Limits", t.Name)
		}
	}
	return build(s, c, classify, tiers)
}

// Tier names used by [AuthClassifier]. Configure [NewTiered] with a tier
// for every name the classifier can return: an unknown name is only found
// at request time, where it answers 500.
const (
	// TierAnonymous holds callers without a credential (or with one that
	// failed verification, unless AuthOptions.RejectInvalid).
	TierAnonymous = "anonymous"
	// TierAuthenticated holds callers with a verified subject.
	TierAuthenticated = "authenticated"
	// TierTrusted holds verified subjects AuthOptions.Trusted accepts.
	TierTrusted = "trusted"
	// TierSuspended holds verified subjects AuthOptions.Suspended names.
	TierSuspended = "suspended"
)

// AuthOptions configures [AuthClassifier].
type AuthOptions struct {
	// Subject derives the authenticated identity, for example
	// [keyfunc.JWTSubject] or [keyfunc.FromContext]. Required.
	Subject keyfunc.KeyFunc
	// Anonymous keys callers without an identity, for example
	// [keyfunc.RemoteIP] or [keyfunc.IP] with trusted proxies. Required.
	Anonymous keyfunc.KeyFunc
	// RejectInvalid answers 401 to a request that presents a credential
	// that fails verification ([keyfunc.ErrInvalidToken]) instead of
	// treating it as anonymous. Missing credentials are always anonymous.
	RejectInvalid bool
	// Trusted, when set, puts authenticated subjects for which it returns
	// true in [TierTrusted].
	Trusted func(subject string, r *http.Request) bool
	// Suspended, when set, puts authenticated subjects for which it returns
	// true in [TierSuspended].
	Suspended func(subject string, r *http.Request) bool
}

// AuthClassifier returns the usual classifier: a verified subject is
// [TierAuthenticated] (or [TierTrusted] / [TierSuspended] as the hooks
// say) keyed by subject; a request without credentials is
// [TierAnonymous] keyed by opts.Anonymous; a request whose credential fails
// verification is anonymous too, or refused with 401 when
// opts.RejectInvalid. The subject is verified once per request. Configure
// [NewTiered] with a tier for every name the classifier can return.
func AuthClassifier(opts AuthOptions) (Classifier, error) {
	if opts.Subject == nil || opts.Anonymous == nil {
		return nil, errors.New("ratekeeper: middleware: AuthOptions.Subject and AuthOptions.Anonymous are required")
	}
	return func(r *http.Request) (string, string, error) {
		sub, err := opts.Subject(r)
		if err == nil {
			switch {
			case opts.Suspended != nil && opts.Suspended(sub, r):
				return TierSuspended, sub, nil
			case opts.Trusted != nil && opts.Trusted(sub, r):
				return TierTrusted, sub, nil
			}
			return TierAuthenticated, sub, nil
		}
		if !errors.Is(err, keyfunc.ErrNoIdentity) {
			return "", "", err
		}
		if opts.RejectInvalid && errors.Is(err, keyfunc.ErrInvalidToken) {
			return "", "", err
		}
		k, err := opts.Anonymous(r)
		return TierAnonymous, k, err
	}, nil
}

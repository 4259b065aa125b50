package middleware

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/store"
)

// Classifier assigns a request its tier name and identity. An error
// wrapping [keyfunc.ErrNoIdentity] answers 401, any other error 400; an
// empty identity is refused with 400. [AuthOptions] is the usual
// Classifier. A tier name that the limiter was not configured with is
// only found at request time, where it answers 500 and is logged.
type Classifier interface {
	Classify(r *http.Request) (tier, identity string, err error)
}

// NewTiered builds a Limiter whose requests are classified into tiers, each
// with its own limits ([limiter.Tier]), in one store s. Options apply to
// every tier; [Options].Limits is refused: tiers carry their limits.
//
// When c is an [AuthOptions], NewTiered checks that tiers has a tier for
// every name it can return (anonymous and authenticated, trusted when the
// Trusted hook is set, suspended when Suspended is), so that no request
// can meet an unknown tier.
func NewTiered(s store.Store, c Classifier, tiers []limiter.Tier, o Options) (*Limiter, error) {
	if c == nil {
		return nil, errors.New("ratekeeper: middleware: nil classifier")
	}
	if len(tiers) == 0 {
		return nil, errors.New("ratekeeper: middleware: no tiers")
	}
	if len(o.Limits) > 0 {
		return nil, errors.New("ratekeeper: middleware: Options.Limits is not valid with NewTiered; put the limits in the tiers")
	}
	if o.Store != nil {
		return nil, errors.New("ratekeeper: middleware: Options.Store is for LimitByIP; New and NewTiered take the store as their first argument")
	}
	var auth *AuthOptions
	switch a := c.(type) {
	case AuthOptions:
		auth = &a
	case *AuthOptions:
		if a == nil {
			return nil, errors.New("ratekeeper: middleware: nil classifier")
		}
		cp := *a
		auth = &cp
	}
	if auth == nil {
		return build(s, &o, c.Classify, nil, tiers)
	}
	if err := auth.validate(); err != nil {
		return nil, err
	}
	names := make(map[string]bool, len(tiers))
	for _, t := range tiers {
		names[t.Name] = true
	}
	for _, n := range auth.tierNames() {
		if !names[n] {
			return nil, fmt.Errorf("ratekeeper: middleware: AuthOptions can classify requests as %q, but no tier has that name", n)
		}
	}
	l, err := build(s, &o, nil, nil, tiers)
	if err != nil {
		return nil, err
	}
	h := l.h
	h.classify = func(r *http.Request) (string, string, error) {
		return auth.classify(r, h.invalidCredential)
	}
	return l, nil
}

// The tier names [AuthOptions] classifies requests into.
const (
	tierAnonymous     = "anonymous"
	tierAuthenticated = "authenticated"
	tierTrusted       = "trusted"
	tierSuspended     = "suspended"
)

// AuthOptions is the usual [Classifier]: a request with a verified subject
// is in the tier "authenticated" (or "trusted" / "suspended" as the hooks
// say) under that subject; a request without credentials is
// in the tier "anonymous" under its Anonymous identity (its address, say); a
// request whose credential fails verification is anonymous too, with the
// reason logged at debug level, or refused with 401 when RejectInvalid.
// Subjects and addresses live in separate tiers, so a subject can never
// share a bucket with an address. The subject is verified once per
// request.
type AuthOptions struct {
	// Subject derives the authenticated identity, for example
	// [keyfunc.JWTSubject] or [keyfunc.FromContextFunc]. Required.
	Subject keyfunc.KeyFunc
	// Anonymous derives the identity of callers without a credential, for
	// example [keyfunc.RemoteIP] or a [keyfunc.ClientIP]'s Key with trusted
	// proxies. Required.
	Anonymous keyfunc.KeyFunc
	// RejectInvalid answers 401 to a request that presents a credential
	// that fails verification ([keyfunc.ErrInvalidToken]) instead of
	// treating it as anonymous. Missing credentials are always anonymous.
	RejectInvalid bool
	// Trusted, when set, puts authenticated subjects for which it returns
	// true in the tier "trusted". It receives the subject as Subject returns it
	// ("alice"), and must be fast and safe for concurrent use.
	Trusted func(subject string, r *http.Request) bool
	// Suspended, when set, puts authenticated subjects for which it returns
	// true in the tier "suspended"; it is asked before Trusted. It receives the
	// subject as Trusted does.
	Suspended func(subject string, r *http.Request) bool
}

func (o *AuthOptions) validate() error {
	if o.Subject == nil || o.Anonymous == nil {
		return errors.New("ratekeeper: middleware: AuthOptions.Subject and AuthOptions.Anonymous are required")
	}
	return nil
}

// tierNames lists the tiers o can classify a request into.
func (o *AuthOptions) tierNames() []string {
	names := []string{tierAnonymous, tierAuthenticated}
	if o.Trusted != nil {
		names = append(names, tierTrusted)
	}
	if o.Suspended != nil {
		names = append(names, tierSuspended)
	}
	return names
}

// Classify implements [Classifier]. It returns an error, never a tier,
// when Subject or Anonymous is nil.
func (o AuthOptions) Classify(r *http.Request) (tier, identity string, err error) {
	if err := o.validate(); err != nil {
		return "", "", err
	}
	return o.classify(r, nil)
}

// classify classifies r; invalid, when set, is told about a credential
// that failed verification and was classified as anonymous.
func (o *AuthOptions) classify(r *http.Request, invalid func(*http.Request, error)) (string, string, error) {
	sub, err := o.Subject(r)
	if err == nil {
		switch {
		case o.Suspended != nil && o.Suspended(sub, r):
			return tierSuspended, sub, nil
		case o.Trusted != nil && o.Trusted(sub, r):
			return tierTrusted, sub, nil
		}
		return tierAuthenticated, sub, nil
	}
	if !errors.Is(err, keyfunc.ErrNoIdentity) {
		return "", "", err
	}
	if errors.Is(err, keyfunc.ErrInvalidToken) {
		if o.RejectInvalid {
			return "", "", err
		}
		if invalid != nil {
			invalid(r, err)
		}
	}
	id, err := o.Anonymous(r)
	return tierAnonymous, id, err
}

package contract

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

// maxRate is the largest Rate and Burst [store.Limit.Validate] accepts;
// a scaled limit never exceeds it (TestMaxRateIsValidates pins the two
// together).
const maxRate = 1 << 30

// EncodeOverride returns o's stored form, which the Redis scripts read:
// "exempt", "suspend" or "scale:<factor>" with the factor in Go's
// shortest round-tripping decimal form. TTL is not part of it (it is the
// key's).
func EncodeOverride(o store.Override) string {
	if o.Kind == store.OverrideScale {
		return "scale:" + strconv.FormatFloat(o.Scale, 'g', -1, 64)
	}
	return o.Kind.String()
}

// DecodeOverride parses [EncodeOverride]'s form. TTL is left zero. It
// returns an error wrapping [store.ErrInvalidRequest] for anything else,
// including a factor [store.Override.Validate] refuses.
func DecodeOverride(s string) (store.Override, error) {
	switch s {
	case "exempt":
		return store.Override{Kind: store.OverrideExempt}, nil
	case "suspend":
		return store.Override{Kind: store.OverrideSuspend}, nil
	}
	f, ok := strings.CutPrefix(s, "scale:")
	if !ok {
		return store.Override{}, fmt.Errorf("%w: unreadable override %q", store.ErrInvalidRequest, s)
	}
	x, err := strconv.ParseFloat(f, 64)
	o := store.Override{Kind: store.OverrideScale, Scale: x}
	// The bounds of Scale are Validate's; any valid TTL lets it judge them.
	if err != nil || (store.Override{Kind: o.Kind, Scale: x, TTL: time.Millisecond}).Validate() != nil {
		return store.Override{}, fmt.Errorf("%w: unreadable override %q", store.ErrInvalidRequest, s)
	}
	return o, nil
}

// ScaleLimit returns l under an [store.OverrideScale] override of factor
// scale for a request of the given cost: Rate and the capacity x each
// become floor(x·scale), at most 2³⁰ and at least 1 and min(cost, x), so
// that a cut never makes a cost the configured limit holds impossible,
// while a cost above the configured limit fits only if the scaled one
// holds it (Burst stays 0 when it was). The Redis scripts compute the
// same numbers.
func ScaleLimit(l store.Limit, scale float64, cost int64) store.Limit {
	sc := func(x int64) int64 {
		v := math.Floor(float64(x) * scale)
		if v > maxRate {
			v = maxRate
		}
		n := int64(v)
		return max(n, 1, min(cost, x))
	}
	if l.Burst != 0 {
		l.Burst = sc(l.Burst)
	}
	l.Rate = sc(l.Rate)
	return l
}

package contract

import (
	"errors"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

func TestValidateStack(t *testing.T) {
	a := store.Request{Key: "a", Limits: []store.Limit{store.PerMinute(5)}}
	b := store.Request{Key: "b", Limits: []store.Limit{store.PerMinute(5)}}
	withID := b
	withID.DedupID = "x"
	costly := b
	costly.Cost = 6
	overridden := b
	overridden.ApplyOverride = true
	suppressed := store.Request{Key: "s", Limits: []store.Limit{{Algorithm: Suppressed, Rate: 5, Burst: 10, Period: time.Minute}}}
	nine := make([]store.Request, store.MaxParts+1)
	for i := range nine {
		nine[i] = store.Request{Key: string(rune('a' + i)), Limits: []store.Limit{store.PerMinute(5)}}
	}
	for name, tc := range map[string]struct {
		reqs []store.Request
		want error
	}{
		"valid":      {[]store.Request{a, b}, nil},
		"one":        {[]store.Request{a}, nil},
		"empty":      {nil, store.ErrInvalidRequest},
		"too many":   {nine, store.ErrInvalidRequest},
		"same key":   {[]store.Request{a, a}, store.ErrInvalidRequest},
		"dedup":      {[]store.Request{a, withID}, store.ErrInvalidRequest},
		"overrides":  {[]store.Request{a, overridden}, store.ErrInvalidRequest},
		"suppressed": {[]store.Request{a, suppressed}, store.ErrInvalidLimit},
		"costly":     {[]store.Request{a, costly}, store.ErrCostExceedsCapacity},
	} {
		err := ValidateStack(tc.reqs)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", name, err, tc.want)
		}
	}
}

func TestMostRestrictive(t *testing.T) {
	admit := func(rem int64) store.Decision { return store.Decision{Allowed: true, Remaining: rem} }
	refuse := func(retry time.Duration) store.Decision { return store.Decision{RetryAfter: retry} }
	for name, tc := range map[string]struct {
		parts []store.Decision
		want  int
	}{
		"none":                      {nil, -1},
		"fewest remaining":          {[]store.Decision{admit(9), admit(3), admit(5)}, 1},
		"absolute, not relative":    {[]store.Decision{{Allowed: true, Capacity: 100, Remaining: 10}, {Allowed: true, Capacity: 20, Remaining: 11}}, 0},
		"tie: earliest":             {[]store.Decision{admit(3), admit(3)}, 0},
		"refusal beats remaining":   {[]store.Decision{admit(0), refuse(time.Second)}, 1},
		"longest retry":             {[]store.Decision{refuse(time.Second), admit(5), refuse(time.Minute)}, 2},
		"refusal tie: the earliest": {[]store.Decision{refuse(time.Second), refuse(time.Second)}, 0},
	} {
		if got := MostRestrictive(tc.parts); got != tc.want {
			t.Errorf("%s: got %d, want %d", name, got, tc.want)
		}
	}
}

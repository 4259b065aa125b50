package store

import (
	"errors"
	"testing"
	"time"
)

func TestValidateMulti(t *testing.T) {
	a := Request{Key: "a", Limits: []Limit{PerMinute(5)}}
	b := Request{Key: "b", Limits: []Limit{PerMinute(5)}}
	withID := b
	withID.DedupID = "x"
	costly := b
	costly.Cost = 6
	overridden := b
	overridden.Overrides = true
	suppressed := Request{Key: "s", Limits: []Limit{{Algorithm: Suppressed, Rate: 5, Period: time.Minute}}}
	nine := make([]Request, MaxParts+1)
	for i := range nine {
		nine[i] = Request{Key: string(rune('a' + i)), Limits: []Limit{PerMinute(5)}}
	}
	for name, tc := range map[string]struct {
		reqs []Request
		want error
	}{
		"valid":      {[]Request{a, b}, nil},
		"one":        {[]Request{a}, nil},
		"empty":      {nil, ErrInvalidRequest},
		"too many":   {nine, ErrInvalidRequest},
		"same key":   {[]Request{a, a}, ErrInvalidRequest},
		"dedup":      {[]Request{a, withID}, ErrInvalidRequest},
		"overrides":  {[]Request{a, overridden}, ErrInvalidRequest},
		"suppressed": {[]Request{a, suppressed}, ErrInvalidRequest},
		"costly":     {[]Request{a, costly}, ErrCostExceedsCapacity},
	} {
		err := ValidateMulti(tc.reqs)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", name, err, tc.want)
		}
	}
}

func TestMostRestrictive(t *testing.T) {
	admit := func(rem int64) Decision { return Decision{Allowed: true, Remaining: rem} }
	refuse := func(retry time.Duration) Decision { return Decision{RetryAfter: retry} }
	for name, tc := range map[string]struct {
		parts []Decision
		want  int
	}{
		"none":                      {nil, -1},
		"fewest remaining":          {[]Decision{admit(9), admit(3), admit(5)}, 1},
		"absolute, not relative":    {[]Decision{{Allowed: true, Limit: 100, Remaining: 10}, {Allowed: true, Limit: 20, Remaining: 11}}, 0},
		"tie: earliest":             {[]Decision{admit(3), admit(3)}, 0},
		"refusal beats remaining":   {[]Decision{admit(0), refuse(time.Second)}, 1},
		"longest retry":             {[]Decision{refuse(time.Second), admit(5), refuse(time.Minute)}, 2},
		"refusal tie: the earliest": {[]Decision{refuse(time.Second), refuse(time.Second)}, 0},
	} {
		if got := MostRestrictive(tc.parts); got != tc.want {
			t.Errorf("%s: got %d, want %d", name, got, tc.want)
		}
	}
}

package store

import (
	"errors"
	"testing"
	"time"
)

func TestRequestValidate(t *testing.T) {
	ok := Limit{Rate: 10, Period: time.Minute}
	tests := []struct {
		name string
		req  Request
		want error
	}{
		{"valid", Request{Key: "k", Limits: []Limit{ok}}, nil},
		{"empty key", Request{Limits: []Limit{ok}}, ErrInvalidRequest},
		{"no limits", Request{Key: "k"}, ErrInvalidRequest},
		{"negative cost", Request{Key: "k", Limits: []Limit{ok}, Cost: -1}, ErrInvalidRequest},
		{"cost above capacity", Request{Key: "k", Limits: []Limit{ok}, Cost: 11}, ErrCostExceedsCapacity},
		{"cost at capacity", Request{Key: "k", Limits: []Limit{ok}, Cost: 10}, nil},
		{"burst raises capacity", Request{Key: "k", Limits: []Limit{{Rate: 10, Period: time.Minute, Burst: 20}}, Cost: 20}, nil},
		{"zero rate", Request{Key: "k", Limits: []Limit{{Period: time.Minute}}}, ErrInvalidLimit},
		{"zero period", Request{Key: "k", Limits: []Limit{{Rate: 1}}}, ErrInvalidLimit},
		{"sub-ms period", Request{Key: "k", Limits: []Limit{{Rate: 1, Period: 1500 * time.Microsecond}}}, ErrInvalidLimit},
		{"unknown algorithm", Request{Key: "k", Limits: []Limit{{Algorithm: 99, Rate: 1, Period: time.Second}}}, ErrInvalidLimit},
		{"burst on window", Request{Key: "k", Limits: []Limit{{Algorithm: FixedWindow, Rate: 1, Period: time.Second, Burst: 5}}}, ErrInvalidLimit},
		{"mixed algorithms", Request{Key: "k", Limits: []Limit{ok, {Algorithm: FixedWindow, Rate: 1, Period: time.Hour}}}, ErrInvalidRequest},
		{"duplicate ids", Request{Key: "k", Limits: []Limit{ok, {Rate: 5, Period: time.Minute}}}, ErrInvalidRequest},
		{"named duplicates allowed", Request{Key: "k", Limits: []Limit{{Name: "a", Rate: 10, Period: time.Minute}, {Name: "b", Rate: 5, Period: time.Minute}}}, nil},
		{"block on gcra", Request{Key: "k", Limits: []Limit{{Rate: 5, Period: time.Minute, Block: 15 * time.Minute}}}, nil},
		{"negative block", Request{Key: "k", Limits: []Limit{{Rate: 5, Period: time.Minute, Block: -time.Second}}}, ErrInvalidLimit},
		{"sub-ms block", Request{Key: "k", Limits: []Limit{{Rate: 5, Period: time.Minute, Block: time.Microsecond}}}, ErrInvalidLimit},
		{"block max below block", Request{Key: "k", Limits: []Limit{{Rate: 5, Period: time.Minute, Block: time.Hour, BlockMax: time.Minute}}}, ErrInvalidLimit},
		{"block max without block", Request{Key: "k", Limits: []Limit{{Rate: 5, Period: time.Minute, BlockMax: time.Minute}}}, ErrInvalidLimit},
		{"count denied on window", Request{Key: "k", Limits: []Limit{{Algorithm: FixedWindow, Rate: 5, Period: time.Minute}}, CountDenied: true}, nil},
		{"count denied on bucket", Request{Key: "k", Limits: []Limit{{Algorithm: TokenBucket, Rate: 5, Period: time.Minute}}, CountDenied: true}, ErrInvalidRequest},
		{"control char in name", Request{Key: "k", Limits: []Limit{{Name: "a\nb", Rate: 1, Period: time.Second}}}, ErrInvalidLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.req.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestAlgorithmNames(t *testing.T) {
	for _, a := range Algorithms {
		got, err := ParseAlgorithm(a.String())
		if err != nil || got != a {
			t.Fatalf("ParseAlgorithm(%q) = %v, %v; want %v", a.String(), got, err, a)
		}
	}
	// Load shedding is a layer (package store/suppressed), not an
	// algorithm.
	if _, err := ParseAlgorithm("suppressed"); !errors.Is(err, ErrInvalidLimit) {
		t.Fatalf("ParseAlgorithm(%q): got %v, want ErrInvalidLimit", "suppressed", err)
	}
	if _, err := ParseAlgorithm("leaky"); !errors.Is(err, ErrInvalidLimit) {
		t.Fatalf("got %v, want ErrInvalidLimit", err)
	}
	if got := Algorithm(42).String(); got != "algorithm(42)" {
		t.Fatalf("got %q, want algorithm(42)", got)
	}
}

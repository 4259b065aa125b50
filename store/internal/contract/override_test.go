package contract

import (
	"errors"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
)

func TestOverrideEncodeRoundTrip(t *testing.T) {
	for _, o := range []store.Override{
		{Kind: store.OverrideExempt},
		{Kind: store.OverrideSuspend},
		{Kind: store.OverrideScale, Scale: 10},
		{Kind: store.OverrideScale, Scale: 0.1},
		{Kind: store.OverrideScale, Scale: 1.0 / 3},
		{Kind: store.OverrideScale, Scale: 1.0 / (1 << 20)},
		{Kind: store.OverrideScale, Scale: 1 << 20},
	} {
		got, err := DecodeOverride(EncodeOverride(o))
		if err != nil || got != o {
			t.Errorf("DecodeOverride(%q): got %+v, %v, want %+v", EncodeOverride(o), got, err, o)
		}
	}
	for _, s := range []string{"", "scale", "scale:", "scale:x", "scale:0", "scale:-1", "scale:2e6", "scale:NaN", "Exempt", "exempt ", "none"} {
		if _, err := DecodeOverride(s); !errors.Is(err, store.ErrInvalidRequest) {
			t.Errorf("DecodeOverride(%q): got %v, want store.ErrInvalidRequest", s, err)
		}
	}
}

func TestScaleLimit(t *testing.T) {
	tests := []struct {
		l          store.Limit
		scale      float64
		cost       int64
		rate, capy int64
	}{
		{store.Limit{Rate: 10, Period: time.Minute}, 2.5, 1, 25, 25},
		{store.Limit{Rate: 10, Period: time.Minute, Burst: 4}, 2.5, 1, 25, 10},
		{store.Limit{Rate: 10, Period: time.Minute}, 0.05, 1, 1, 1},
		{store.Limit{Rate: 10, Period: time.Minute}, 0.05, 3, 3, 3},
		{store.Limit{Algorithm: store.FixedWindow, Rate: 7, Period: time.Minute}, 1.0 / 3, 1, 2, 2},
		{store.Limit{Rate: 1 << 29, Period: time.Minute}, 1 << 20, 1, 1 << 30, 1 << 30},
		{store.Limit{Algorithm: Suppressed, Rate: 100, Burst: 200, Period: time.Minute}, 0.005, 1, 1, 1},
		{store.Limit{Algorithm: Suppressed, Rate: 100, Burst: 200, Period: time.Minute}, 0.333, 1, 33, 66},
	}
	for _, tt := range tests {
		got := ScaleLimit(tt.l, tt.scale, tt.cost)
		valid := got.Validate()
		if got.Algorithm == Suppressed {
			// A suppressed limit is valid when its hard limit (Burst) is
			// a valid counting limit that holds the soft one (Rate).
			valid = store.Limit{Algorithm: store.SlidingWindowCounter, Rate: got.Burst, Period: got.Period}.Validate()
			if got.Rate > got.Burst {
				valid = store.ErrInvalidLimit
			}
		}
		if got.Rate != tt.rate || got.Capacity() != tt.capy || valid != nil {
			t.Errorf("ScaleLimit(%+v, %v, %d): got rate %d capacity %d (%v), want %d and %d", tt.l, tt.scale, tt.cost, got.Rate, got.Capacity(), valid, tt.rate, tt.capy)
		}
	}
}

// TestMaxRateIsValidates pins maxRate, which bounds a scaled limit, to
// the largest Rate store.Limit.Validate accepts.
func TestMaxRateIsValidates(t *testing.T) {
	if err := (store.Limit{Rate: maxRate, Period: time.Minute}).Validate(); err != nil {
		t.Errorf("Rate %d: got %v, want nil", maxRate, err)
	}
	if err := (store.Limit{Rate: maxRate + 1, Period: time.Minute}).Validate(); !errors.Is(err, store.ErrInvalidLimit) {
		t.Errorf("Rate %d: got %v, want store.ErrInvalidLimit", maxRate+1, err)
	}
}

package store

import (
	"errors"
	"testing"
	"time"
)

func TestOverrideEncodeRoundTrip(t *testing.T) {
	for _, o := range []Override{
		{Kind: OverrideExempt},
		{Kind: OverrideSuspend},
		{Kind: OverrideScale, Scale: 10},
		{Kind: OverrideScale, Scale: 0.1},
		{Kind: OverrideScale, Scale: 1.0 / 3},
		{Kind: OverrideScale, Scale: MinOverrideScale},
		{Kind: OverrideScale, Scale: MaxOverrideScale},
	} {
		got, err := DecodeOverride(o.Encode())
		if err != nil || got != o {
			t.Errorf("DecodeOverride(%q): got %+v, %v, want %+v", o.Encode(), got, err, o)
		}
	}
	for _, s := range []string{"", "scale", "scale:", "scale:x", "scale:0", "scale:-1", "scale:2e6", "scale:NaN", "Exempt", "exempt ", "none"} {
		if _, err := DecodeOverride(s); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("DecodeOverride(%q): got %v, want ErrInvalidRequest", s, err)
		}
	}
}

func TestOverrideValidate(t *testing.T) {
	ok := []Override{
		{Kind: OverrideScale, Scale: 2, TTL: time.Millisecond},
		{Kind: OverrideExempt, TTL: 366 * 24 * time.Hour},
		{Kind: OverrideSuspend, TTL: time.Hour},
	}
	for _, o := range ok {
		if err := o.Validate(); err != nil {
			t.Errorf("%+v: got %v, want nil", o, err)
		}
	}
	bad := []Override{
		{},
		{Kind: OverrideScale, TTL: time.Hour},
		{Kind: OverrideScale, Scale: 1 << 21, TTL: time.Hour},
		{Kind: OverrideExempt, Scale: 1, TTL: time.Hour},
		{Kind: OverrideSuspend, TTL: 1500 * time.Microsecond},
		{Kind: OverrideSuspend, TTL: 367 * 24 * time.Hour},
		{Kind: OverrideSuspend},
		{Kind: 7, TTL: time.Hour},
	}
	for _, o := range bad {
		if err := o.Validate(); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%+v: got %v, want ErrInvalidRequest", o, err)
		}
	}
}

func TestScaleLimit(t *testing.T) {
	tests := []struct {
		l          Limit
		scale      float64
		cost       int64
		rate, capy int64
	}{
		{Limit{Rate: 10, Period: time.Minute}, 2.5, 1, 25, 25},
		{Limit{Rate: 10, Period: time.Minute, Burst: 4}, 2.5, 1, 25, 10},
		{Limit{Rate: 10, Period: time.Minute}, 0.05, 1, 1, 1},
		{Limit{Rate: 10, Period: time.Minute}, 0.05, 3, 3, 3},
		{Limit{Algorithm: FixedWindow, Rate: 7, Period: time.Minute}, 1.0 / 3, 1, 2, 2},
		{Limit{Rate: 1 << 29, Period: time.Minute}, 1 << 20, 1, 1 << 30, 1 << 30},
		{Limit{Algorithm: Suppressed, Rate: 100, Period: time.Minute}, 0.005, 1, 1, 1},
		{Limit{Algorithm: Suppressed, Rate: 100, Period: time.Minute}, 0.333, 1, 33, 66},
	}
	for _, tt := range tests {
		got := ScaleLimit(tt.l, tt.scale, tt.cost)
		if got.Rate != tt.rate || got.Capacity() != tt.capy || got.Validate() != nil {
			t.Errorf("ScaleLimit(%+v, %v, %d): got rate %d capacity %d (%v), want %d and %d", tt.l, tt.scale, tt.cost, got.Rate, got.Capacity(), got.Validate(), tt.rate, tt.capy)
		}
	}
	if k, err := ParseOverrideKind("suspend"); err != nil || k != OverrideSuspend {
		t.Errorf("ParseOverrideKind(suspend): got %v, %v", k, err)
	}
	if _, err := ParseOverrideKind("none"); err == nil {
		t.Error("ParseOverrideKind(none): got nil error, want one")
	}
}

package store

import (
	"errors"
	"testing"
	"time"
)

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

func TestParseOverrideKind(t *testing.T) {
	if k, err := ParseOverrideKind("suspend"); err != nil || k != OverrideSuspend {
		t.Errorf("ParseOverrideKind(suspend): got %v, %v", k, err)
	}
	if _, err := ParseOverrideKind("none"); err == nil {
		t.Error("ParseOverrideKind(none): got nil error, want one")
	}
}

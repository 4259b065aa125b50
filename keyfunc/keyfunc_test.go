package keyfunc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func constFn(k string) KeyFunc { return func(*http.Request) (string, error) { return k, nil } }

func TestJoin(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	a, _ := Join(constFn("a:b"), constFn("c"))(r)
	b, _ := Join(constFn("a"), constFn("b:c"))(r)
	if a == b {
		t.Errorf("(a:b, c) and (a, b:c) share identity %q", a)
	}
	got, err := Join(constFn("/x"), constFn("203.0.113.7"))(r)
	if want := "2:/x,11:203.0.113.7,"; err != nil || got != want {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}

	noID := func(*http.Request) (string, error) { return "", fmt.Errorf("none: %w", ErrNoIdentity) }
	bad := func(*http.Request) (string, error) { return "", errMalformedForwarding }
	empty := func(*http.Request) (string, error) { return "", nil }
	tests := []struct {
		name   string
		fn     KeyFunc
		want   error
		wantNo bool // want ErrNoIdentity
	}{
		{"no identity", Join(constFn("a"), noID), ErrNoIdentity, true},
		{"malformed", Join(bad, constFn("a")), errMalformedForwarding, false},
		{"empty part", Join(constFn("a"), empty), errEmptyKey, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.fn(r)
			if got != "" || !errors.Is(err, tt.want) || errors.Is(err, ErrNoIdentity) != tt.wantNo {
				t.Errorf("got %q, %v; want error %v (no identity: %v)", got, err, tt.want, tt.wantNo)
			}
		})
	}
}

func TestConstructionPanics(t *testing.T) {
	tests := []struct {
		name string
		fn   func()
	}{
		{"Join()", func() { Join() }},
		{"Join(nil)", func() { Join(constFn("a"), nil) }},
		{`Constant("")`, func() { Constant("") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", tt.name)
				}
			}()
			tt.fn()
		})
	}
}

func TestConstant(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	for _, key := range []string{"global", "{x}", strings.Repeat("k", 1000)} {
		got, err := Constant(key)(r)
		if err != nil || got != key {
			t.Errorf("Constant(%q): got %q, %v; want the key itself", key, got, err)
		}
	}
}

type ctxKey struct{}

func TestFromContextFunc(t *testing.T) {
	kf, err := FromContextFunc(func(ctx context.Context) (string, bool) {
		s, ok := ctx.Value(ctxKey{}).(string)
		return s, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		value any
		want  string
		noID  bool
	}{
		{"string", "alice", "alice", false},
		{"unescaped", "u{1} x", "u{1} x", false},
		{"absent", nil, "", true},
		{"empty", "", "", true},
		{"other type", 42, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			if tt.value != nil {
				r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, tt.value))
			}
			got, err := kf(r)
			if got != tt.want || errors.Is(err, ErrNoIdentity) != tt.noID || (err != nil) != tt.noID {
				t.Errorf("got %q, %v; want %q (no identity: %v)", got, err, tt.want, tt.noID)
			}
		})
	}
	if _, err := FromContextFunc(nil); err == nil {
		t.Error("FromContextFunc(nil): got nil error, want one")
	}
}

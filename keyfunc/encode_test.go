package keyfunc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// unescape inverts the escaping of [Encode]; it fails on text that Encode
// cannot produce.
func unescape(s string, namespace bool) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' {
			if i+2 >= len(s) {
				return "", fmt.Errorf("short escape at %d", i)
			}
			n, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil || strings.ToUpper(s[i+1:i+3]) != s[i+1:i+3] {
				return "", fmt.Errorf("bad escape at %d", i)
			}
			if !mustEscape(byte(n), namespace) {
				return "", fmt.Errorf("needless escape at %d", i)
			}
			b.WriteByte(byte(n))
			i += 2
			continue
		}
		if mustEscape(c, namespace) {
			return "", fmt.Errorf("unescaped byte %q at %d", c, i)
		}
		b.WriteByte(c)
	}
	return b.String(), nil
}

// decodeKey splits a key made by Encode back into namespace and value. It
// reports digest=true for keys whose value was hashed.
func decodeKey(t testing.TB, key string) (ns, value string, digest bool) {
	t.Helper()
	if strings.HasPrefix(key, "#") {
		return "", key, true
	}
	rawNS, rawValue, ok := strings.Cut(key, ":")
	if !ok {
		t.Fatalf("key %q has no ':'", key)
	}
	ns, err := unescape(rawNS, true)
	if err != nil {
		t.Fatalf("namespace of %q: %v", key, err)
	}
	if strings.HasPrefix(rawValue, "#") {
		return ns, rawValue, true
	}
	value, err = unescape(rawValue, false)
	if err != nil {
		t.Fatalf("value of %q: %v", key, err)
	}
	return ns, value, false
}

func checkKeyText(t testing.TB, key string) {
	t.Helper()
	if key == "" {
		t.Fatal("empty key")
	}
	if len(key) > MaxKeyLength {
		t.Errorf("key of %d bytes exceeds MaxKeyLength %d", len(key), MaxKeyLength)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c <= ' ' || c >= 0x7f || c == '{' || c == '}' {
			t.Errorf("key %q has byte %q at %d", key, c, i)
		}
	}
}

func TestEncode(t *testing.T) {
	long := strings.Repeat("x", MaxKeyLength)
	tests := []struct {
		ns, value, want string
	}{
		{"sub", "alice", "sub:alice"},
		{"sub", "", "sub:"},
		{"sub", "a:b", "sub:a:b"},
		{"a:b", "c", "a%3Ab:c"},
		{"sub", "a{b}c", "sub:a%7Bb%7Dc"},
		{"sub", "50%#1", "sub:50%25%231"},
		{"sub", "a\x00b", "sub:a%00b"},
		{"sub", "a b\tc\n", "sub:a%20b%09c%0A"},
		{"sub", "\x7f\x80\xff", "sub:%7F%80%FF"},
		{"sub", "caf\u00e9", "sub:caf%C3%A9"},
		{"sub", "cafe\u0301", "sub:cafe%CC%81"},
		{"sub", "auth0|abc@example.com", "sub:auth0|abc@example.com"},
		{"", "x", ":x"},
	}
	for _, tt := range tests {
		t.Run(tt.ns+"/"+tt.value, func(t *testing.T) {
			got := Encode(tt.ns, tt.value)
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			checkKeyText(t, got)
			ns, v, digest := decodeKey(t, got)
			if digest || ns != tt.ns || v != tt.value {
				t.Errorf("decoded (%q, %q, %v), want (%q, %q, false)", ns, v, digest, tt.ns, tt.value)
			}
		})
	}

	t.Run("long value hashed", func(t *testing.T) {
		got := Encode("sub", long)
		if !strings.HasPrefix(got, "sub:#") || len(got) != len("sub:#")+24 {
			t.Errorf("got %q, want sub:# and 24 characters", got)
		}
		checkKeyText(t, got)
		if other := Encode("sub", long+"x"); other == got {
			t.Errorf("two long values share key %q", got)
		}
		if other := Encode("ctx", long); other == got || !strings.HasPrefix(other, "ctx:#") {
			t.Errorf("namespaces: got %q and %q", got, other)
		}
	})
	t.Run("escaping counts toward the bound", func(t *testing.T) {
		v := strings.Repeat("{", 100) // 100 bytes, 300 escaped
		if got := Encode("sub", v); !strings.HasPrefix(got, "sub:#") {
			t.Errorf("got %q, want a digest", got)
		}
	})
	t.Run("longest kept value", func(t *testing.T) {
		v := long[:MaxKeyLength-len("sub:")]
		if got := Encode("sub", v); got != "sub:"+v {
			t.Errorf("got %q, want the value kept", got)
		}
		if got := Encode("sub", v+"x"); !strings.HasPrefix(got, "sub:#") {
			t.Errorf("got %q, want a digest one byte later", got)
		}
	})
	t.Run("long namespace hashed", func(t *testing.T) {
		got := Encode(strings.Repeat("n", 33), "v")
		if !strings.HasPrefix(got, "#") || len(got) != 25 {
			t.Errorf("got %q, want # and 24 characters", got)
		}
		if Encode(strings.Repeat("n", 32), "v") != strings.Repeat("n", 32)+":v" {
			t.Error("32-byte namespace not kept")
		}
	})
	t.Run("digest domain separated", func(t *testing.T) {
		// ("ab", "c...") and ("a", "bc...") hash different inputs.
		if digest("ab", "c"+long) == digest("a", "bc"+long) {
			t.Error("digest input is ambiguous")
		}
	})
}

func TestNamespacesDisjointFromIPKeys(t *testing.T) {
	ipKeys := []string{"203.0.113.7", "198.51.100.0/24", "2001:db8:1:2::/64", "::/64", "abcd:ef01::1", "fe80::/64", "::1"}
	for _, ns := range []string{"sub", "ctx", "route", "hdr", "const", "join"} {
		if strings.Trim(ns, "0123456789abcdef") == "" {
			t.Errorf("namespace %q is all hex digits", ns)
		}
		for _, k := range ipKeys {
			if strings.HasPrefix(k, ns+":") {
				t.Errorf("IP key %q is in namespace %q", k, ns)
			}
		}
	}
}

func constFn(k string) KeyFunc { return func(*http.Request) (string, error) { return k, nil } }

func TestJoin(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	a, _ := Join(constFn("a:b"), constFn("c"))(r)
	b, _ := Join(constFn("a"), constFn("b:c"))(r)
	if a == b {
		t.Errorf("(a:b, c) and (a, b:c) share key %q", a)
	}
	got, err := Join(constFn("route:/x"), constFn("203.0.113.7"))(r)
	if want := "join:8:route:/x,11:203.0.113.7,"; err != nil || got != want {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
	long, err := Join(constFn(strings.Repeat("k", 200)), constFn(strings.Repeat("k", 200)))(r)
	if err != nil || !strings.HasPrefix(long, "join:#") {
		t.Errorf("got %q, %v; want a digest", long, err)
	}

	noID := func(*http.Request) (string, error) { return "", fmt.Errorf("none: %w", ErrNoIdentity) }
	bad := func(*http.Request) (string, error) { return "", ErrMalformedForwarding }
	empty := constFn("")
	tests := []struct {
		name   string
		fn     KeyFunc
		want   error
		wantNo bool // want ErrNoIdentity
	}{
		{"no identity", Join(constFn("a"), noID), ErrNoIdentity, true},
		{"malformed", Join(bad, constFn("a")), ErrMalformedForwarding, false},
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

func TestFirst(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	noID := func(*http.Request) (string, error) { return "", fmt.Errorf("none: %w", ErrNoIdentity) }
	noToken := func(*http.Request) (string, error) { return "", fmt.Errorf("x: %w", ErrNoToken) }
	bad := func(*http.Request) (string, error) { return "", ErrMalformedRemoteAddr }
	calledAfter := false
	after := func(*http.Request) (string, error) { calledAfter = true; return "z", nil }
	tests := []struct {
		name    string
		fn      KeyFunc
		want    string
		wantErr []error
	}{
		{"first wins", First(constFn("a"), constFn("b")), "a", nil},
		{"skips no identity", First(noID, noToken, constFn("b")), "b", nil},
		{"all without identity", First(noID, noToken), "", []error{ErrNoIdentity, ErrNoToken}},
		{"malformed stops", First(noID, bad, after), "", []error{ErrMalformedRemoteAddr}},
		{"empty key is an error", First(constFn("")), "", []error{errEmptyKey}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.fn(r)
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if tt.wantErr == nil && err != nil {
				t.Errorf("got error %v, want nil", err)
			}
			for _, w := range tt.wantErr {
				if !errors.Is(err, w) {
					t.Errorf("got error %v, want one wrapping %v", err, w)
				}
			}
		})
	}
	if calledAfter {
		t.Error("First called a function after a malformed-request error")
	}
}

func TestCompositionPanicsAtConstruction(t *testing.T) {
	tests := []struct {
		name string
		fn   func()
	}{
		{"Join()", func() { Join() }},
		{"Join(nil)", func() { Join(constFn("a"), nil) }},
		{"First()", func() { First() }},
		{"First(nil)", func() { First(nil) }},
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
	tests := []struct{ key, want string }{
		{"global", "const:global"},
		{"", "const:"},
		{"{x}", "const:%7Bx%7D"},
	}
	for _, tt := range tests {
		got, err := Constant(tt.key)(r)
		if err != nil || got != tt.want {
			t.Errorf("Constant(%q): got %q, %v; want %q", tt.key, got, err, tt.want)
		}
	}
}

type ctxKey struct{}

type userID string

func TestFromContext(t *testing.T) {
	kf, err := FromContext(ctxKey{})
	if err != nil {
		t.Fatal(err)
	}
	fn, err := FromContextFunc(func(ctx context.Context) (string, bool) {
		s, ok := ctx.Value(ctxKey{}).(string)
		return s, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		kf     KeyFunc
		value  any
		want   string
		noID   bool
		anyErr bool
	}{
		{"string", kf, "alice", "ctx:alice", false, false},
		{"named string type", kf, userID("u{1}"), "ctx:u%7B1%7D", false, false},
		{"absent", kf, nil, "", true, true},
		{"empty", kf, "", "", true, true},
		{"wrong type", kf, 42, "", false, true},
		{"func string", fn, "bob", "ctx:bob", false, false},
		{"func absent", fn, nil, "", true, true},
		{"func empty", fn, "", "", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			if tt.value != nil {
				r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, tt.value))
			}
			got, err := tt.kf(r)
			if got != tt.want || (err != nil) != tt.anyErr || errors.Is(err, ErrNoIdentity) != tt.noID {
				t.Errorf("got %q, %v; want %q (error: %v, no identity: %v)", got, err, tt.want, tt.anyErr, tt.noID)
			}
		})
	}

	for _, k := range []any{nil, []string{"x"}} {
		if _, err := FromContext(k); err == nil {
			t.Errorf("FromContext(%v): got nil error, want one", k)
		}
	}
	if _, err := FromContextFunc(nil); err == nil {
		t.Error("FromContextFunc(nil): got nil error, want one")
	}
}

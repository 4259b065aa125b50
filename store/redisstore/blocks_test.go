package redisstore

import "testing"

func TestDecodeKeyUndoesEncodeKey(t *testing.T) {
	for _, k := range []string{
		"login:203.0.113.7",
		"api/authenticated:alice",
		"login:2001:db8::1",
		"x:{tag}%25~*?[]\\ \x00\xff é",
		"",
	} {
		enc := encodeKey(k)
		got, ok := decodeKey(enc)
		if !ok || got != k {
			t.Errorf("decodeKey(%q) = %q, %v; want %q, true", enc, got, ok, k)
		}
	}
	long := string(make([]byte, 200))
	if got, ok := decodeKey(encodeKey(long)); ok {
		t.Errorf("hashed key: got %q, true; want false", got)
	}
	for _, bad := range []string{"%", "%4", "%zz", "a%G0"} {
		if got, ok := decodeKey(bad); ok {
			t.Errorf("decodeKey(%q) = %q, true; want false", bad, got)
		}
	}
}

func TestDecodeBlockKey(t *testing.T) {
	tests := []struct {
		key, want string
		ok        bool
	}{
		{"rk:{login%3A203.0.113.7}:block", "login:203.0.113.7", true},
		{"rk:{api/free%3Adora}:block", "api/free:dora", true},
		{"rk:{login%3A1.2.3.4}:strikes", "", false},
		{"other:{login%3A1.2.3.4}:block", "", false},
		{"rk:{~abc}:block", "", false},
	}
	for _, tt := range tests {
		got, ok := decodeBlockKey("rk", tt.key)
		if got != tt.want || ok != tt.ok {
			t.Errorf("decodeBlockKey(%q) = %q, %v; want %q, %v", tt.key, got, ok, tt.want, tt.ok)
		}
	}
}

func TestGlobEscape(t *testing.T) {
	if got, want := globEscape(`a*b?c[d]e\f`), `a\*b\?c\[d\]e\\f`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

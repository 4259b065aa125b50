package keyfunc

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

func mustHeader(t testing.TB, name string, opts HeaderOptions) KeyFunc {
	t.Helper()
	k, err := Header(name, opts)
	if err != nil {
		t.Fatalf("Header(%q): %v", name, err)
	}
	return k
}

var headerKeyRE = regexp.MustCompile(`^[A-Za-z0-9_-]{24}$`)

func TestHeaderKey(t *testing.T) {
	const apiKey = "sk_live_0123456789"
	plain := mustHeader(t, "x-api-key", HeaderOptions{})
	keyed := mustHeader(t, "X-API-Key", HeaderOptions{Secret: []byte("a secret of thirty-two bytes!!!!")})
	keyed2 := mustHeader(t, "X-API-Key", HeaderOptions{Secret: []byte("another secret of 32 bytes......")})

	get := func(kf KeyFunc, values ...string) string {
		t.Helper()
		var hs []hdr
		for _, v := range values {
			hs = append(hs, hdr{"X-Api-Key", v})
		}
		k, err := kf(newRequest(t, "192.0.2.1:1", hs...))
		if err != nil {
			t.Fatalf("got error %v for %q", err, values)
		}
		return k
	}
	a := get(plain, apiKey)
	if !headerKeyRE.MatchString(a) {
		t.Errorf("got key %q, want it to match %s", a, headerKeyRE)
	}
	if strings.Contains(a, apiKey) || strings.Contains(a, "0123456789") {
		t.Errorf("key %q contains the header value", a)
	}
	if b := get(plain, " "+apiKey+"\t"); b != a {
		t.Errorf("surrounding whitespace: got %q, want %q", b, a)
	}
	if b := get(plain, apiKey+"x"); b == a {
		t.Errorf("two values share key %q", a)
	}
	if b := get(plain, strings.ToUpper(apiKey)); b == a {
		t.Errorf("values differing in case share key %q", a)
	}
	ka, kb := get(keyed, apiKey), get(keyed2, apiKey)
	if ka == a || ka == kb {
		t.Errorf("secrets do not change the key: plain %q, keyed %q, keyed2 %q", a, ka, kb)
	}
	if !headerKeyRE.MatchString(ka) {
		t.Errorf("got key %q, want it to match %s", ka, headerKeyRE)
	}
}

func TestHeaderNoIdentity(t *testing.T) {
	kf := mustHeader(t, "X-Api-Key", HeaderOptions{MaxLength: 16})
	tests := []struct {
		name    string
		headers []hdr
	}{
		{"absent", nil},
		{"empty", []hdr{{"X-Api-Key", ""}}},
		{"blank", []hdr{{"X-Api-Key", "  "}}},
		{"repeated", []hdr{{"X-Api-Key", "a"}, {"X-Api-Key", "b"}}},
		{"too long", []hdr{{"X-Api-Key", strings.Repeat("k", 17)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := kf(newRequest(t, "192.0.2.1:1", tt.headers...))
			if got != "" || !errors.Is(err, ErrNoIdentity) {
				t.Errorf("got %q, %v; want an error wrapping ErrNoIdentity", got, err)
			}
		})
	}
	if got, err := kf(newRequest(t, "192.0.2.1:1", hdr{"X-Api-Key", strings.Repeat("k", 16)})); err != nil || got == "" {
		t.Errorf("at MaxLength: got %q, %v; want a key", got, err)
	}
}

func TestHeaderOptionErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts HeaderOptions
	}{
		{"", HeaderOptions{}},
		{"X Api Key", HeaderOptions{}},
		{"X-Api-Key:", HeaderOptions{}},
		{"X-Api-Key", HeaderOptions{MaxLength: -1}},
	} {
		if _, err := Header(tt.name, tt.opts); err == nil {
			t.Errorf("Header(%q, %+v): got nil error, want one", tt.name, tt.opts)
		}
	}
}

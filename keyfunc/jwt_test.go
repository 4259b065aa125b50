package keyfunc

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var (
	testNow     = time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	testClock   = func() time.Time { return testNow }
	hmacSecret  = []byte("0123456789abcdef0123456789abcdef")
	otherSecret = []byte("fedcba9876543210fedcba9876543210")
)

// testKeys are generated once per test binary: RSA generation is slow.
type testKeys struct {
	rsa, rsa2 *rsa.PrivateKey
	rsaSmall  *rsa.PrivateKey
	ec256     *ecdsa.PrivateKey
	ec384     *ecdsa.PrivateKey
	ed        ed25519.PrivateKey
}

var keys = sync.OnceValue(func() testKeys {
	var k testKeys
	var err error
	must := func(e error) {
		if e != nil {
			panic(e)
		}
	}
	k.rsa, err = rsa.GenerateKey(rand.Reader, 2048)
	must(err)
	k.rsa2, err = rsa.GenerateKey(rand.Reader, 2048)
	must(err)
	k.rsaSmall, err = rsa.GenerateKey(rand.Reader, 1024)
	must(err)
	k.ec256, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	k.ec384, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	must(err)
	_, k.ed, err = ed25519.GenerateKey(rand.Reader)
	must(err)
	return k
})

// validClaims returns claims valid at testNow for subject "alice".
func validClaims() jwt.MapClaims {
	return jwt.MapClaims{
		"sub": "alice",
		"iss": "https://issuer.example",
		"aud": []string{"api"},
		"exp": testNow.Add(time.Hour).Unix(),
		"nbf": testNow.Add(-time.Minute).Unix(),
		"iat": testNow.Add(-time.Minute).Unix(),
	}
}

func sign(t testing.TB, m jwt.SigningMethod, key any, claims jwt.MapClaims, kid string) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("signing %s: %v", m.Alg(), err)
	}
	return s
}

func with(c jwt.MapClaims, kv ...any) jwt.MapClaims {
	out := jwt.MapClaims{}
	for k, v := range c {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
			continue
		}
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

func bearer(tok string) []hdr { return []hdr{{"Authorization", "Bearer " + tok}} }

func mustJWT(t testing.TB, opts JWTOptions) KeyFunc {
	t.Helper()
	if opts.Now == nil {
		opts.Now = testClock
	}
	k, err := JWTSubject(opts)
	if err != nil {
		t.Fatalf("JWTSubject: %v", err)
	}
	return k
}

// noneToken builds an unsigned token with alg "none".
func noneToken(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc([]byte(claims)) + "."
}

func TestJWTSubjectValid(t *testing.T) {
	k := keys()
	c := validClaims()
	hs := JWTOptions{Algorithms: []string{"HS256"}, Key: hmacSecret}
	tests := []struct {
		name    string
		opts    JWTOptions
		headers []hdr
		cookie  *http.Cookie
	}{
		{"HS256", hs, bearer(sign(t, jwt.SigningMethodHS256, hmacSecret, c, "")), nil},
		{"RS256", JWTOptions{Algorithms: []string{"RS256"}, Key: &k.rsa.PublicKey}, bearer(sign(t, jwt.SigningMethodRS256, k.rsa, c, "")), nil},
		{"RS256 private key given", JWTOptions{Algorithms: []string{"RS256"}, Key: k.rsa}, bearer(sign(t, jwt.SigningMethodRS256, k.rsa, c, "")), nil},
		{"PS256", JWTOptions{Algorithms: []string{"PS256"}, Key: &k.rsa.PublicKey}, bearer(sign(t, jwt.SigningMethodPS256, k.rsa, c, "")), nil},
		{"ES256", JWTOptions{Algorithms: []string{"ES256"}, Key: &k.ec256.PublicKey}, bearer(sign(t, jwt.SigningMethodES256, k.ec256, c, "")), nil},
		{"ES384", JWTOptions{Algorithms: []string{"ES384"}, Key: &k.ec384.PublicKey}, bearer(sign(t, jwt.SigningMethodES384, k.ec384, c, "")), nil},
		{"EdDSA", JWTOptions{Algorithms: []string{"EdDSA"}, Key: k.ed.Public()}, bearer(sign(t, jwt.SigningMethodEdDSA, k.ed, c, "")), nil},
		{"EdDSA private key given", JWTOptions{Algorithms: []string{"EdDSA"}, Key: k.ed}, bearer(sign(t, jwt.SigningMethodEdDSA, k.ed, c, "")), nil},
		{"lower-case scheme and spaces", hs, []hdr{{"Authorization", "  bearer   " + sign(t, jwt.SigningMethodHS256, hmacSecret, c, "") + " "}}, nil},
		{"custom header carries bare token", JWTOptions{Algorithms: []string{"HS256"}, Key: hmacSecret, Header: "x-access-token"}, []hdr{{"X-Access-Token", sign(t, jwt.SigningMethodHS256, hmacSecret, c, "")}}, nil},
		{"cookie", JWTOptions{Algorithms: []string{"HS256"}, Key: hmacSecret, Cookie: "session"}, nil, &http.Cookie{Name: "session", Value: sign(t, jwt.SigningMethodHS256, hmacSecret, c, "")}},
		{"issuer and audience", JWTOptions{Algorithms: []string{"HS256"}, Key: hmacSecret, Issuer: "https://issuer.example", Audience: []string{"web", "api"}}, bearer(sign(t, jwt.SigningMethodHS256, hmacSecret, c, "")), nil},
		{"expired within leeway", hs, bearer(sign(t, jwt.SigningMethodHS256, hmacSecret, with(c, "exp", testNow.Add(-20*time.Second).Unix()), "")), nil},
		{"nbf within leeway", hs, bearer(sign(t, jwt.SigningMethodHS256, hmacSecret, with(c, "nbf", testNow.Add(20*time.Second).Unix()), "")), nil},
		{"no exp when optional", JWTOptions{Algorithms: []string{"HS256"}, Key: hmacSecret, ExpirationOptional: true}, bearer(sign(t, jwt.SigningMethodHS256, hmacSecret, with(c, "exp", nil), "")), nil},
		{"mixed families by lookup, HS token", JWTOptions{Algorithms: []string{"HS256", "RS256"}, Keyfunc: familyLookup}, bearer(sign(t, jwt.SigningMethodHS256, hmacSecret, c, "hmac")), nil},
		{"mixed families by lookup, RS token", JWTOptions{Algorithms: []string{"HS256", "RS256"}, Keyfunc: familyLookup}, bearer(sign(t, jwt.SigningMethodRS256, k.rsa, c, "rsa")), nil},
		{"key set", JWTOptions{Algorithms: []string{"RS256"}, Keyfunc: func(*jwt.Token) (any, error) {
			return jwt.VerificationKeySet{Keys: []jwt.VerificationKey{&k.rsa2.PublicKey, k.rsa}}, nil
		}}, bearer(sign(t, jwt.SigningMethodRS256, k.rsa, c, "")), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kf := mustJWT(t, tt.opts)
			r := newRequest(t, "192.0.2.1:1", tt.headers...)
			if tt.cookie != nil {
				r.AddCookie(tt.cookie)
			}
			got, err := kf(r)
			if err != nil || got != "alice" {
				t.Errorf("got %q, %v; want %q, nil", got, err, "alice")
			}
		})
	}
}

// familyLookup returns the key named by "kid": an HMAC secret or an RSA
// public key.
func familyLookup(t *jwt.Token) (any, error) {
	switch t.Header["kid"] {
	case "hmac":
		return hmacSecret, nil
	case "rsa":
		return &keys().rsa.PublicKey, nil
	case "rsa-pem":
		return rsaPEM(), nil
	}
	return nil, fmt.Errorf("unknown kid %v", t.Header["kid"])
}

// rsaPEM is the PEM text of the test RSA public key: what a careless
// configuration might hand to an HMAC verifier.
var rsaPEM = sync.OnceValue(func() []byte {
	der, err := x509.MarshalPKIXPublicKey(&keys().rsa.PublicKey)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
})

func TestJWTSubjectRotation(t *testing.T) {
	k := keys()
	current := map[string]*rsa.PublicKey{"2024": &k.rsa.PublicKey}
	var mu sync.Mutex
	kf := mustJWT(t, JWTOptions{Algorithms: []string{"RS256"}, Keyfunc: func(tok *jwt.Token) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		kid, _ := tok.Header["kid"].(string)
		if pk, ok := current[kid]; ok {
			return pk, nil
		}
		return nil, fmt.Errorf("unknown kid %q", kid)
	}})
	old := sign(t, jwt.SigningMethodRS256, k.rsa, with(validClaims(), "sub", "old"), "2024")
	next := sign(t, jwt.SigningMethodRS256, k.rsa2, with(validClaims(), "sub", "new"), "2025")

	if got, err := kf(newRequest(t, "192.0.2.1:1", bearer(next)...)); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("before rotation: got %q, %v; want ErrInvalidToken", got, err)
	}
	mu.Lock()
	current["2025"] = &k.rsa2.PublicKey
	mu.Unlock()
	for tok, want := range map[string]string{old: "old", next: "new"} {
		if got, err := kf(newRequest(t, "192.0.2.1:1", bearer(tok)...)); err != nil || got != want {
			t.Errorf("after rotation: got %q, %v; want %q", got, err, want)
		}
	}
}

func TestJWTSubjectRejects(t *testing.T) {
	k := keys()
	c := validClaims()
	hs := JWTOptions{Algorithms: []string{"HS256"}, Key: hmacSecret}
	hsSigned := func(claims jwt.MapClaims) []hdr {
		return bearer(sign(t, jwt.SigningMethodHS256, hmacSecret, claims, ""))
	}
	valid := sign(t, jwt.SigningMethodHS256, hmacSecret, c, "")
	tests := []struct {
		name    string
		opts    JWTOptions
		headers []hdr
		want    error // besides ErrNoIdentity
		wantLib error // optional error of the jwt library
	}{
		{"no header", hs, nil, errNoToken, nil},
		{"basic scheme", hs, []hdr{{"Authorization", "Basic YWxpY2U6cHc="}}, errNoToken, nil},
		{"scheme only", hs, []hdr{{"Authorization", "Bearer"}}, errNoToken, nil},
		{"empty token", hs, []hdr{{"Authorization", "Bearer    "}}, errNoToken, nil},
		{"empty header", hs, []hdr{{"Authorization", ""}}, errNoToken, nil},
		{"bearer glued to token", hs, []hdr{{"Authorization", "Bearer" + valid}}, errNoToken, nil},
		{"two authorization headers", hs, []hdr{{"Authorization", "Bearer " + valid}, {"Authorization", "Bearer " + valid}}, ErrInvalidToken, nil},
		{"garbage", hs, bearer("not.a.jwt"), ErrInvalidToken, jwt.ErrTokenMalformed},
		{"alg none", hs, bearer(noneToken(`{"sub":"alice","exp":4102444800}`)), ErrInvalidToken, nil},
		{"alg none with none allowed by lookup", JWTOptions{Algorithms: []string{"HS256"}, Keyfunc: func(*jwt.Token) (any, error) { return jwt.UnsafeAllowNoneSignatureType, nil }}, bearer(noneToken(`{"sub":"alice","exp":4102444800}`)), ErrInvalidToken, nil},
		{"wrong signature", hs, bearer(sign(t, jwt.SigningMethodHS256, otherSecret, c, "")), ErrInvalidToken, jwt.ErrTokenSignatureInvalid},
		{"tampered payload", hs, bearer(tamper(valid)), ErrInvalidToken, jwt.ErrTokenSignatureInvalid},
		{"algorithm not allowed", hs, bearer(sign(t, jwt.SigningMethodHS384, slices.Concat(hmacSecret, hmacSecret[:16]), c, "")), ErrInvalidToken, nil},
		{"HS token against RSA public key (confusion)", JWTOptions{Algorithms: []string{"HS256", "RS256"}, Keyfunc: familyLookup}, bearer(sign(t, jwt.SigningMethodHS256, rsaPEM(), c, "rsa")), ErrInvalidToken, nil},
		{"HS token against RSA key given as PEM bytes", JWTOptions{Algorithms: []string{"HS256", "RS256"}, Keyfunc: familyLookup}, bearer(sign(t, jwt.SigningMethodHS256, rsaPEM(), c, "rsa-pem")), ErrInvalidToken, nil},
		{"RS token against HMAC secret", JWTOptions{Algorithms: []string{"HS256", "RS256"}, Keyfunc: familyLookup}, bearer(sign(t, jwt.SigningMethodRS256, k.rsa, c, "hmac")), ErrInvalidToken, nil},
		{"ES256 token against P-384 key", JWTOptions{Algorithms: []string{"ES256"}, Keyfunc: func(*jwt.Token) (any, error) { return &k.ec384.PublicKey, nil }}, bearer(sign(t, jwt.SigningMethodES256, k.ec256, c, "")), ErrInvalidToken, nil},
		{"EdDSA token against RSA key", JWTOptions{Algorithms: []string{"EdDSA"}, Keyfunc: func(*jwt.Token) (any, error) { return &k.rsa.PublicKey, nil }}, bearer(sign(t, jwt.SigningMethodEdDSA, k.ed, c, "")), ErrInvalidToken, nil},
		{"short HMAC key from lookup", JWTOptions{Algorithms: []string{"HS256"}, Keyfunc: func(*jwt.Token) (any, error) { return []byte("short"), nil }}, bearer(sign(t, jwt.SigningMethodHS256, []byte("short"), c, "")), ErrInvalidToken, nil},
		{"small RSA key from lookup", JWTOptions{Algorithms: []string{"RS256"}, Keyfunc: func(*jwt.Token) (any, error) { return &k.rsaSmall.PublicKey, nil }}, bearer(sign(t, jwt.SigningMethodRS256, k.rsaSmall, c, "")), ErrInvalidToken, nil},
		{"bad key in key set", JWTOptions{Algorithms: []string{"RS256"}, Keyfunc: func(*jwt.Token) (any, error) {
			return jwt.VerificationKeySet{Keys: []jwt.VerificationKey{&k.rsa.PublicKey, hmacSecret}}, nil
		}}, bearer(sign(t, jwt.SigningMethodRS256, k.rsa, c, "")), ErrInvalidToken, nil},
		// A lookup that misses in a map of private keys returns a nil
		// pointer: refused, never a panic.
		{"nil RSA private key from lookup", JWTOptions{Algorithms: []string{"RS256"}, Keyfunc: func(*jwt.Token) (any, error) { return (*rsa.PrivateKey)(nil), nil }}, bearer(sign(t, jwt.SigningMethodRS256, k.rsa, c, "")), ErrInvalidToken, nil},
		{"nil EC private key from lookup", JWTOptions{Algorithms: []string{"ES256"}, Keyfunc: func(*jwt.Token) (any, error) { return (*ecdsa.PrivateKey)(nil), nil }}, bearer(sign(t, jwt.SigningMethodES256, k.ec256, c, "")), ErrInvalidToken, nil},
		{"nil RSA public key from lookup", JWTOptions{Algorithms: []string{"RS256"}, Keyfunc: func(*jwt.Token) (any, error) { return (*rsa.PublicKey)(nil), nil }}, bearer(sign(t, jwt.SigningMethodRS256, k.rsa, c, "")), ErrInvalidToken, nil},
		{"nil private key in key set", JWTOptions{Algorithms: []string{"RS256"}, Keyfunc: func(*jwt.Token) (any, error) {
			return jwt.VerificationKeySet{Keys: []jwt.VerificationKey{&k.rsa.PublicKey, (*rsa.PrivateKey)(nil)}}, nil
		}}, bearer(sign(t, jwt.SigningMethodRS256, k.rsa, c, "")), ErrInvalidToken, nil},
		{"unknown kid", JWTOptions{Algorithms: []string{"HS256"}, Keyfunc: familyLookup}, bearer(sign(t, jwt.SigningMethodHS256, hmacSecret, c, "gone")), ErrInvalidToken, jwt.ErrTokenUnverifiable},
		{"expired", hs, hsSigned(with(c, "exp", testNow.Add(-31*time.Second).Unix())), ErrInvalidToken, jwt.ErrTokenExpired},
		{"expired without leeway", JWTOptions{Algorithms: []string{"HS256"}, Key: hmacSecret, Leeway: -1}, hsSigned(with(c, "exp", testNow.Add(-time.Second).Unix())), ErrInvalidToken, jwt.ErrTokenExpired},
		{"expired beyond custom leeway", JWTOptions{Algorithms: []string{"HS256"}, Key: hmacSecret, Leeway: 5 * time.Second}, hsSigned(with(c, "exp", testNow.Add(-10*time.Second).Unix())), ErrInvalidToken, jwt.ErrTokenExpired},
		{"nbf in future", hs, hsSigned(with(c, "nbf", testNow.Add(time.Minute).Unix())), ErrInvalidToken, jwt.ErrTokenNotValidYet},
		{"no exp", hs, hsSigned(with(c, "exp", nil)), ErrInvalidToken, jwt.ErrTokenRequiredClaimMissing},
		{"exp of wrong type", hs, hsSigned(with(c, "exp", "tomorrow")), ErrInvalidToken, nil},
		{"no sub", hs, hsSigned(with(c, "sub", nil)), ErrInvalidToken, nil},
		{"empty sub", hs, hsSigned(with(c, "sub", "")), ErrInvalidToken, nil},
		{"sub not a string", hs, hsSigned(with(c, "sub", 42)), ErrInvalidToken, nil},
		{"wrong issuer", JWTOptions{Algorithms: []string{"HS256"}, Key: hmacSecret, Issuer: "https://other.example"}, hsSigned(c), ErrInvalidToken, jwt.ErrTokenInvalidIssuer},
		{"missing issuer", JWTOptions{Algorithms: []string{"HS256"}, Key: hmacSecret, Issuer: "https://issuer.example"}, hsSigned(with(c, "iss", nil)), ErrInvalidToken, jwt.ErrTokenRequiredClaimMissing},
		{"wrong audience", JWTOptions{Algorithms: []string{"HS256"}, Key: hmacSecret, Audience: []string{"admin"}}, hsSigned(c), ErrInvalidToken, jwt.ErrTokenInvalidAudience},
		{"missing audience", JWTOptions{Algorithms: []string{"HS256"}, Key: hmacSecret, Audience: []string{"api"}}, hsSigned(with(c, "aud", nil)), ErrInvalidToken, jwt.ErrTokenRequiredClaimMissing},
		{"too long", JWTOptions{Algorithms: []string{"HS256"}, Key: hmacSecret, MaxTokenLength: 64}, bearer(valid), ErrInvalidToken, nil},
		{"too long by default", hs, bearer(strings.Repeat("a", defaultMaxTokenLength+1)), ErrInvalidToken, nil},
		{"no cookie", JWTOptions{Algorithms: []string{"HS256"}, Key: hmacSecret, Cookie: "session"}, bearer(valid), errNoToken, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kf := mustJWT(t, tt.opts)
			got, err := kf(newRequest(t, "192.0.2.1:1", tt.headers...))
			if got != "" {
				t.Errorf("got key %q, want none", got)
			}
			if !errors.Is(err, ErrNoIdentity) {
				t.Errorf("got error %v, want one wrapping ErrNoIdentity", err)
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("got error %v, want one wrapping %v", err, tt.want)
			}
			if tt.want == errNoToken && errors.Is(err, ErrInvalidToken) {
				t.Errorf("got error %v, a missing token must not wrap ErrInvalidToken", err)
			}
			if tt.wantLib != nil && !errors.Is(err, tt.wantLib) {
				t.Errorf("got error %v, want one wrapping %v", err, tt.wantLib)
			}
		})
	}
}

// tamper changes the subject in the payload of a signed token and keeps
// the signature.
func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	payload = []byte(strings.Replace(string(payload), `"alice"`, `"admin"`, 1))
	parts[1] = base64.RawURLEncoding.EncodeToString(payload)
	return strings.Join(parts, ".")
}

func TestJWTSubjectOptionErrors(t *testing.T) {
	k := keys()
	tests := []struct {
		name     string
		opts     JWTOptions
		contains string
	}{
		{"no algorithms", JWTOptions{Key: hmacSecret}, "Algorithms"},
		{"none", JWTOptions{Algorithms: []string{"none"}, Key: hmacSecret}, "Algorithms[0]"},
		{"none among others", JWTOptions{Algorithms: []string{"HS256", "none"}, Key: hmacSecret}, "Algorithms[1]"},
		{"unknown", JWTOptions{Algorithms: []string{"HS257"}, Key: hmacSecret}, "Algorithms[0]"},
		{"lower case", JWTOptions{Algorithms: []string{"hs256"}, Key: hmacSecret}, "Algorithms[0]"},
		{"no key", JWTOptions{Algorithms: []string{"HS256"}}, "Key or Keyfunc"},
		{"both keys", JWTOptions{Algorithms: []string{"HS256"}, Key: hmacSecret, Keyfunc: familyLookup}, "not both"},
		{"HMAC key with RS alg", JWTOptions{Algorithms: []string{"HS256", "RS256"}, Key: hmacSecret}, "RS256"},
		{"RSA key with HS alg", JWTOptions{Algorithms: []string{"RS256", "HS256"}, Key: &k.rsa.PublicKey}, "HS256"},
		{"PEM as HMAC secret", JWTOptions{Algorithms: []string{"HS256"}, Key: rsaPEM()}, "PEM"},
		{"string secret", JWTOptions{Algorithms: []string{"HS256"}, Key: string(hmacSecret)}, "[]byte"},
		{"short HMAC key", JWTOptions{Algorithms: []string{"HS256"}, Key: hmacSecret[:16]}, "32 bytes"},
		{"HS512 needs 64 bytes", JWTOptions{Algorithms: []string{"HS512"}, Key: hmacSecret}, "64 bytes"},
		{"small RSA key", JWTOptions{Algorithms: []string{"RS256"}, Key: &k.rsaSmall.PublicKey}, "2048"},
		{"nil RSA private key", JWTOptions{Algorithms: []string{"RS256"}, Key: (*rsa.PrivateKey)(nil)}, "nil *rsa.PrivateKey"},
		{"nil EC private key", JWTOptions{Algorithms: []string{"ES256"}, Key: (*ecdsa.PrivateKey)(nil)}, "nil *ecdsa.PrivateKey"},
		{"curve mismatch", JWTOptions{Algorithms: []string{"ES256"}, Key: &k.ec384.PublicKey}, "P-256"},
		{"one EC key for two curves", JWTOptions{Algorithms: []string{"ES256", "ES384"}, Key: &k.ec256.PublicKey}, "P-384"},
		{"Ed25519 key for ES", JWTOptions{Algorithms: []string{"ES256"}, Key: k.ed.Public()}, "ecdsa"},
		{"header and cookie", JWTOptions{Algorithms: []string{"HS256"}, Key: hmacSecret, Header: "X-Token", Cookie: "tok"}, "not both"},
		{"bad header", JWTOptions{Algorithms: []string{"HS256"}, Key: hmacSecret, Header: "X Token"}, "Header"},
		{"bad cookie", JWTOptions{Algorithms: []string{"HS256"}, Key: hmacSecret, Cookie: "a;b"}, "Cookie"},
		{"negative max length", JWTOptions{Algorithms: []string{"HS256"}, Key: hmacSecret, MaxTokenLength: -1}, "MaxTokenLength"},
		{"empty audience", JWTOptions{Algorithms: []string{"HS256"}, Key: hmacSecret, Audience: []string{""}}, "Audience[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kf, err := JWTSubject(tt.opts)
			if err == nil {
				t.Fatalf("got %v, nil; want an error", kf != nil)
			}
			if !strings.Contains(err.Error(), tt.contains) {
				t.Errorf("got error %q, want it to mention %q", err, tt.contains)
			}
		})
	}
}

// Regression: the identity was "sub:" and an escaped subject, so tier hooks
// comparing it with the subject never matched.
func TestJWTSubjectIdentityIsTheSubject(t *testing.T) {
	kf := mustJWT(t, JWTOptions{Algorithms: []string{"HS256"}, Key: hmacSecret})
	tests := []struct{ sub, want string }{
		{"auth0|123", "auth0|123"},
		{"mallory", "mallory"},
		{"a{b}c", "a{b}c"},
		{"caf\u00e9", "caf\u00e9"},
		{"cafe\u0301", "cafe\u0301"},
	}
	for _, tt := range tests {
		t.Run(tt.sub, func(t *testing.T) {
			tok := sign(t, jwt.SigningMethodHS256, hmacSecret, with(validClaims(), "sub", tt.sub), "")
			got, err := kf(newRequest(t, "192.0.2.1:1", bearer(tok)...))
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestJWTSubjectDoesNotModifyOptions(t *testing.T) {
	algs := []string{"HS256"}
	opts := JWTOptions{Algorithms: algs, Key: hmacSecret}
	kf := mustJWT(t, opts)
	algs[0] = "none"
	tok := sign(t, jwt.SigningMethodHS256, hmacSecret, validClaims(), "")
	if got, err := kf(newRequest(t, "192.0.2.1:1", bearer(tok)...)); err != nil || got != "alice" {
		t.Errorf("got %q, %v; want alice after the caller changed its slice", got, err)
	}
	if opts.Leeway != 0 || opts.MaxTokenLength != 0 || opts.Header != "" {
		t.Errorf("defaults written back into options: %+v", opts)
	}
}

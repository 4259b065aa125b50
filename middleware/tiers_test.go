package middleware

import (
	"bytes"
	"encoding/json"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/store"
)

// fakeSubject stands in for keyfunc.JWTSubject: "Bearer <name>-token"
// verifies as subject <name>, any other bearer token is invalid.
func fakeSubject(r *http.Request) (string, error) {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return "", keyfunc.ErrNoIdentity
	}
	if sub, ok := strings.CutSuffix(strings.TrimPrefix(auth, "Bearer "), "-token"); ok && sub != "" {
		return sub, nil
	}
	return "", keyfunc.ErrInvalidToken
}

var fourTiers = []limiter.Tier{
	{Name: tierAnonymous, Limits: []store.Limit{store.PerMinute(10)}},
	{Name: tierAuthenticated, Limits: []store.Limit{store.PerMinute(100)}},
	{Name: tierTrusted, Unlimited: true},
	{Name: tierSuspended, Suspended: true},
}

func TestTiers(t *testing.T) {
	st := &recordingStore{}
	mk := func(rejectInvalid bool) http.Handler {
		l, err := NewTiered(st, AuthOptions{Subject: fakeSubject, Anonymous: keyfunc.RemoteIP, RejectInvalid: rejectInvalid,
			Trusted:   func(s string, _ *http.Request) bool { return s == "vip" },
			Suspended: func(s string, _ *http.Request) bool { return s == "mallory" }},
			fourTiers, Options{Name: "api", Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return l.Handler(okHandler)
	}
	lenient, strict := mk(false), mk(true)
	tests := []struct {
		name     string
		h        http.Handler
		auth     string
		code     int
		key      string // expected store key, "" = store not called
		rate     int64
		headers  bool
		errorVal string
	}{
		{"anonymous by ip", lenient, "", 200, "api/anonymous:192.0.2.1", 10, true, ""},
		{"authenticated by subject", lenient, "Bearer alice-token", 200, "api/authenticated:alice", 100, true, ""},
		{"invalid token is anonymous", lenient, "Bearer forged", 200, "api/anonymous:192.0.2.1", 10, true, ""},
		{"invalid token rejected when configured", strict, "Bearer forged", 401, "", 0, false, "unauthorized"},
		{"missing token is anonymous even when strict", strict, "", 200, "api/anonymous:192.0.2.1", 10, true, ""},
		{"trusted is unlimited", lenient, "Bearer vip-token", 200, "", 0, false, ""},
		{"suspended is refused", lenient, "Bearer mallory-token", 403, "", 0, false, "suspended"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st.clear()
			var hdr []string
			if tt.auth != "" {
				hdr = []string{"Authorization", tt.auth}
			}
			rec := serveReq(tt.h, request("GET", "/api/ping", "192.0.2.1:4711", hdr...))
			if rec.Code != tt.code {
				t.Fatalf("status: got %d, want %d", rec.Code, tt.code)
			}
			if tt.key != "" {
				req := st.last(t)
				if req.Key != tt.key || req.Limits[0].Rate != tt.rate {
					t.Errorf("store request: got key %q rate %d, want %q %d", req.Key, req.Limits[0].Rate, tt.key, tt.rate)
				}
			} else if n := st.count(); n != 0 {
				t.Errorf("store called %d times, want 0", n)
			}
			if got := rec.Header().Get("X-Ratelimit-Limit") != ""; got != tt.headers {
				t.Errorf("rate-limit headers present: got %v, want %v", got, tt.headers)
			}
			if tt.errorVal != "" {
				var b map[string]any
				if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || b["error"] != tt.errorVal {
					t.Errorf("body: got %s, want error %q", rec.Body.String(), tt.errorVal)
				}
			}
		})
	}
}

// Regression: the hooks received the encoded key "sub:mallory", so a hook
// comparing with the subject let a suspended user through with the
// authenticated quota, and an unlimited operator was limited. They must
// see the subject as the token carries it, here from the real JWT key
// function.
func TestAuthHooksSeeTheSubject(t *testing.T) {
	secret := []byte("a test secret of at least 32 bytes")
	sub, err := keyfunc.JWTSubject(keyfunc.JWTOptions{Algorithms: []string{"HS256"}, Key: secret})
	if err != nil {
		t.Fatal(err)
	}
	token := func(subject string) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
			Subject: subject, ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour)),
		}).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + s
	}
	var seen []string
	st := &recordingStore{}
	lim, err := NewTiered(st, AuthOptions{Subject: sub, Anonymous: keyfunc.RemoteIP,
		Suspended: func(s string, _ *http.Request) bool { seen = append(seen, s); return s == "mallory" },
		Trusted:   func(s string, _ *http.Request) bool { return s == "operator" },
	}, fourTiers, Options{Name: "api", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	h := lim.Handler(okHandler)
	if rec := serveReq(h, request("GET", "/", "192.0.2.1:1", "Authorization", token("mallory"))); rec.Code != http.StatusForbidden {
		t.Errorf("suspended subject: got %d, want 403", rec.Code)
	}
	if rec := serveReq(h, request("GET", "/", "192.0.2.1:1", "Authorization", token("operator"))); rec.Code != 200 || rec.Header().Get("X-Ratelimit-Limit") != "" {
		t.Errorf("trusted subject: got %d with limit %q, want 200 unlimited", rec.Code, rec.Header().Get("X-Ratelimit-Limit"))
	}
	if n := st.count(); n != 0 {
		t.Errorf("store calls: got %d, want 0 for suspended and trusted subjects", n)
	}
	if len(seen) == 0 || seen[0] != "mallory" {
		t.Errorf("hook arguments: got %q, want the subject \"mallory\"", seen)
	}
}

// Regression: a tier list lacking a tier AuthOptions can return was
// accepted, and the first such request got 500.
func TestAuthOptionsTiersCheckedAtConstruction(t *testing.T) {
	limits := []store.Limit{store.PerMinute(1)}
	hook := func(string, *http.Request) bool { return false }
	tests := []struct {
		name    string
		opts    AuthOptions
		tiers   []limiter.Tier
		missing string // "" = valid
	}{
		{"anonymous missing", AuthOptions{Subject: fakeSubject, Anonymous: keyfunc.RemoteIP},
			[]limiter.Tier{{Name: tierAuthenticated, Limits: limits}}, tierAnonymous},
		{"trusted hook without tier", AuthOptions{Subject: fakeSubject, Anonymous: keyfunc.RemoteIP, Trusted: hook},
			[]limiter.Tier{{Name: tierAnonymous, Limits: limits}, {Name: tierAuthenticated, Limits: limits}}, tierTrusted},
		{"suspended hook without tier", AuthOptions{Subject: fakeSubject, Anonymous: keyfunc.RemoteIP, Suspended: hook},
			[]limiter.Tier{{Name: tierAnonymous, Limits: limits}, {Name: tierAuthenticated, Limits: limits}, {Name: tierTrusted, Unlimited: true}}, tierSuspended},
		{"complete without hooks", AuthOptions{Subject: fakeSubject, Anonymous: keyfunc.RemoteIP},
			[]limiter.Tier{{Name: tierAnonymous, Limits: limits}, {Name: tierAuthenticated, Limits: limits}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range []Classifier{tt.opts, &tt.opts} {
				_, err := NewTiered(&recordingStore{}, c, tt.tiers, Options{})
				if tt.missing == "" {
					if err != nil {
						t.Fatalf("%T: got %v, want no error", c, err)
					}
					continue
				}
				if err == nil || !strings.Contains(err.Error(), `"`+tt.missing+`"`) {
					t.Fatalf("%T: got %v, want an error naming the missing tier %q", c, err, tt.missing)
				}
			}
		})
	}
}

func TestNewTieredValidates(t *testing.T) {
	st := &recordingStore{}
	c := classifyFunc(func(*http.Request) (string, string, error) { return "a", "k", nil })
	ok := []store.Limit{store.PerMinute(1)}
	tests := []struct {
		name  string
		c     Classifier
		tiers []limiter.Tier
		o     Options
		want  string
	}{
		{"nil classifier", nil, []limiter.Tier{{Name: "a", Limits: ok}}, Options{}, "nil classifier"},
		{"nil AuthOptions pointer", (*AuthOptions)(nil), []limiter.Tier{{Name: "a", Limits: ok}}, Options{}, "nil classifier"},
		{"AuthOptions without Subject", AuthOptions{Anonymous: keyfunc.RemoteIP}, []limiter.Tier{{Name: "a", Limits: ok}}, Options{}, "required"},
		{"no tiers", c, nil, Options{}, "no tiers"},
		{"bad tier name", c, []limiter.Tier{{Name: "a b", Limits: ok}}, Options{}, "Options.Tiers[0].Name"},
		{"duplicate tier", c, []limiter.Tier{{Name: "a", Limits: ok}, {Name: "a", Limits: ok}}, Options{}, "configured twice"},
		{"tier without limits", c, []limiter.Tier{{Name: "a"}}, Options{}, "no Limits"},
		{"unlimited and suspended", c, []limiter.Tier{{Name: "a", Unlimited: true, Suspended: true}}, Options{}, "both"},
		{"invalid tier limit", c, []limiter.Tier{{Name: "a", Limits: []store.Limit{{Rate: 1}}}}, Options{}, "Period"},
		{"Options.Limits refused", c, []limiter.Tier{{Name: "a", Limits: ok}}, Options{Limits: []store.Limit{store.PerHour(5)}}, "Options.Limits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewTiered(st, tt.c, tt.tiers, tt.o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

// A custom classifier may still name a tier that does not exist; that is
// found at request time and answers 500.
func TestUnknownTierIs500(t *testing.T) {
	l, err := NewTiered(&recordingStore{}, classifyFunc(func(*http.Request) (string, string, error) { return "gold", "k", nil }),
		[]limiter.Tier{{Name: "silver", Limits: []store.Limit{store.PerMinute(1)}}}, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if rec := serveReq(l.Handler(okHandler), request("GET", "/", "192.0.2.1:1")); rec.Code != 500 {
		t.Fatalf("status: got %d, want 500", rec.Code)
	}
}

// Regression: Options.Name "api.authenticated" and tier "authenticated" of
// "api" shared one storage namespace.
func TestTierNamespacesDoNotCollide(t *testing.T) {
	st := mustMem(t)
	one := mustNew(t, st, constKey("k"), store.PerMinute(1), Options{Name: "api.authenticated"})
	tiered, err := NewTiered(st, classifyFunc(func(*http.Request) (string, string, error) { return "authenticated", "k", nil }),
		[]limiter.Tier{{Name: "authenticated", Limits: []store.Limit{store.PerMinute(1)}}}, Options{Name: "api", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if rec := do(one.Handler(okHandler)); rec.Code != 200 {
		t.Fatalf("first policy: got %d, want 200", rec.Code)
	}
	if rec := do(tiered.Handler(okHandler)); rec.Code != 200 {
		t.Fatalf("second policy: got %d, want 200 (its own counter)", rec.Code)
	}
}

// AuthOptions works as a Classifier on its own, and says so when it is
// incomplete instead of panicking.
func TestAuthOptionsClassify(t *testing.T) {
	o := AuthOptions{Subject: fakeSubject, Anonymous: keyfunc.RemoteIP}
	tier, id, err := o.Classify(request("GET", "/", "192.0.2.9:1", "Authorization", "Bearer bob-token"))
	if tier != tierAuthenticated || id != "bob" || err != nil {
		t.Errorf("got %q %q %v, want authenticated bob", tier, id, err)
	}
	if _, _, err := (AuthOptions{}).Classify(request("GET", "/", "192.0.2.9:1")); err == nil {
		t.Error("empty AuthOptions: got nil error, want one")
	}
}

// An invalid credential that leaves a request anonymous is logged at debug
// level with the reason, with the request's context.
func TestInvalidCredentialLoggedAtDebug(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	lim, err := NewTiered(&recordingStore{}, AuthOptions{Subject: fakeSubject, Anonymous: keyfunc.RemoteIP},
		fourTiers[:2], Options{Name: "api", Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	serveReq(lim.Handler(okHandler), request("GET", "/api/ping", "192.0.2.1:1", "Authorization", "Bearer forged"))
	var line struct {
		Level, Msg, Reason, Policy, Method string
	}
	found := false
	for _, l := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		if err := json.Unmarshal(l, &line); err == nil && strings.Contains(line.Msg, "classified as anonymous") {
			found = true
			break
		}
	}
	if !found {
		t.Fatalf("no debug line for the invalid credential in %s", buf.String())
	}
	if line.Level != "DEBUG" || !strings.Contains(line.Reason, "invalid token") || line.Policy != "api" || line.Method != "GET" {
		t.Errorf("line: got %+v, want DEBUG with the reason, policy and method", line)
	}
}

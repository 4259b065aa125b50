package admin

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestOverrideEndpoints: raising one client's limit while another stays
// limited, the override shown with the client's state, suspension (403),
// clearing, an expiring override, and the errors.
func TestOverrideEndpoints(t *testing.T) {
	f := newFixture(t, Options{Authorize: allowAll})
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	f.api.(*api).now = func() time.Time { return now }

	var res overrideResultJSON
	decode(t, f.call("POST", "/policies/api/override", `{"identity":"192.0.2.1","kind":"raise","scale":2,"ttl":"1h"}`), http.StatusOK, &res)
	if res.Override == nil || res.Override.Kind != "scale" || res.Override.Scale != 2 || res.Override.TTLSeconds != 3600 || !res.Override.Expires.Equal(now.Add(time.Hour)) {
		t.Fatalf("set: got %+v, want scale 2 for an hour", res.Override)
	}
	for i := 1; i <= 6; i++ {
		if code := f.hit("GET", "/api", "192.0.2.1"); code != http.StatusOK {
			t.Fatalf("raised client, request %d: got %d, want 200", i, code)
		}
	}
	if code := f.hit("GET", "/api", "192.0.2.1"); code != http.StatusTooManyRequests {
		t.Fatalf("raised client, request 7: got %d, want 429", code)
	}
	for i := 1; i <= 3; i++ {
		f.hit("GET", "/api", "192.0.2.2")
	}
	if code := f.hit("GET", "/api", "192.0.2.2"); code != http.StatusTooManyRequests {
		t.Fatalf("other client, request 4: got %d, want 429: its limit is 3", code)
	}
	var c clientJSON
	decode(t, f.call("GET", "/policies/api/client?identity=192.0.2.1", ""), http.StatusOK, &c)
	if c.Override == nil || c.Override.Kind != "scale" || c.State == nil || c.State.Capacity != 6 || c.State.Remaining != 0 {
		t.Fatalf("client: got override %+v, state %+v, want scale with capacity 6 and none remaining", c.Override, c.State)
	}
	// search shares api's quota, and so its overrides.
	decode(t, f.call("GET", "/policies/search/client?identity=192.0.2.1", ""), http.StatusOK, &c)
	if c.Override == nil || c.State.Capacity != 6 {
		t.Fatalf("search: got override %+v, state %+v, want api's override", c.Override, c.State)
	}
	if !strings.Contains(f.log.String(), `"action":"override"`) || !strings.Contains(f.log.String(), `"who":"alice"`) {
		t.Errorf("audit log: got %s, want an override line naming alice", f.log)
	}

	// Suspension: 403, then cleared.
	decode(t, f.call("POST", "/policies/api/override", `{"identity":"192.0.2.3","kind":"suspend","ttl":"10m"}`), http.StatusOK, &res)
	if code := f.hit("GET", "/api", "192.0.2.3"); code != http.StatusForbidden {
		t.Fatalf("suspended client: got %d, want 403", code)
	}
	decode(t, f.call("POST", "/policies/api/override/clear", `{"identity":"192.0.2.3"}`), http.StatusOK, &res)
	if res.Found == nil || !*res.Found {
		t.Fatalf("clear: got %+v, want found", res)
	}
	if code := f.hit("GET", "/api", "192.0.2.3"); code != http.StatusOK {
		t.Fatalf("after clear: got %d, want 200", code)
	}
	decode(t, f.call("POST", "/policies/api/override/clear", `{"identity":"192.0.2.3"}`), http.StatusOK, &res)
	if res.Found == nil || *res.Found {
		t.Fatalf("second clear: got %+v, want not found", res)
	}

	// An expiring override: exempt for 50ms.
	decode(t, f.call("POST", "/policies/api/override", `{"identity":"192.0.2.2","kind":"exempt","ttl":"50ms"}`), http.StatusOK, &res)
	if code := f.hit("GET", "/api", "192.0.2.2"); code != http.StatusOK {
		t.Fatalf("exempt client: got %d, want 200", code)
	}
	time.Sleep(80 * time.Millisecond)
	if code := f.hit("GET", "/api", "192.0.2.2"); code != http.StatusTooManyRequests {
		t.Fatalf("after the exemption expired: got %d, want 429", code)
	}

	for _, tc := range []struct {
		path, body string
		want       int
	}{
		{"/policies/api/override", `{"identity":"x","kind":"raise","scale":0.5,"ttl":"1h"}`, http.StatusBadRequest},
		{"/policies/api/override", `{"identity":"x","kind":"cut","scale":3,"ttl":"1h"}`, http.StatusBadRequest},
		{"/policies/api/override", `{"identity":"x","kind":"exempt","scale":3,"ttl":"1h"}`, http.StatusBadRequest},
		{"/policies/api/override", `{"identity":"x","kind":"pause","ttl":"1h"}`, http.StatusBadRequest},
		{"/policies/api/override", `{"identity":"x","kind":"exempt"}`, http.StatusBadRequest},
		{"/policies/api/override", `{"identity":"x","kind":"exempt","ttl":"-1h"}`, http.StatusBadRequest},
		{"/policies/api/override", `{"identity":"x","kind":"exempt","ttl":"9000h"}`, http.StatusBadRequest},
		{"/policies/api/override", `{"kind":"exempt","ttl":"1h"}`, http.StatusBadRequest},
		{"/policies/api/override", `{"identity":"x","kind":"exempt","ttl":"1h","extra":1}`, http.StatusBadRequest},
		{"/policies/login/override", `{"identity":"x","kind":"exempt","ttl":"1h"}`, http.StatusConflict},
		{"/policies/plans/override", `{"tier":"gold","identity":"x","kind":"exempt","ttl":"1h"}`, http.StatusBadRequest},
		// The identity and the tier are checked before whether the
		// policy applies overrides: plans and login apply none.
		{"/policies/plans/override", `{"identity":"x","kind":"exempt","ttl":"1h"}`, http.StatusBadRequest},
		{"/policies/plans/override", `{"tier":"free","kind":"exempt","ttl":"1h"}`, http.StatusBadRequest},
		{"/policies/plans/override", `{"tier":"free","identity":"x","kind":"exempt","ttl":"1h"}`, http.StatusConflict},
		{"/policies/login/override", `{"tier":"free","identity":"x","kind":"exempt","ttl":"1h"}`, http.StatusBadRequest},
		{"/policies/nope/override", `{"identity":"x","kind":"exempt","ttl":"1h"}`, http.StatusNotFound},
		{"/policies/login/override/clear", `{"identity":"x"}`, http.StatusConflict},
	} {
		if w := f.call("POST", tc.path, tc.body); w.Code != tc.want {
			t.Errorf("POST %s %s: got %d, want %d; body %s", tc.path, tc.body, w.Code, tc.want, w.Body)
		}
	}
}

package integration

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestOverridesOnRedis drives per-client overrides on real Redis through
// the admin API of one replica and the routes of another (separate
// clients, one Redis): a raised client gets its raised limit while
// another stays limited; a suspended client gets 403; an exemption
// expires with its TTL; an unauthorized call changes nothing; the
// override keys carry TTLs.
func TestOverridesOnRedis(t *testing.T) {
	srv := sharedRedis(t)
	prefix := randomPrefix(t)
	c1, c2 := newClient(t, srv), newClient(t, srv)
	one := adminApp(t, c1, prefix, bearer)
	two := adminApp(t, c2, prefix, bearer)
	const raised, other, suspended, exempt = "203.0.113.10", "203.0.113.11", "203.0.113.12", "203.0.113.13"
	get := func(h http.Handler, client string) int {
		code, _ := adminCall(t, h, "GET", "/api", "", "", client)
		return code
	}

	// Unauthorized: refused, and nothing is set.
	if code, _ := adminCall(t, one, "POST", "/admin/policies/api/override", "wrong", `{"identity":"`+raised+`","kind":"exempt","ttl":"1h"}`, raised); code != http.StatusUnauthorized {
		t.Fatalf("override without a valid token: got %d, want 401", code)
	}
	if code, body := adminCall(t, one, "POST", "/admin/policies/api/override", adminToken, `{"identity":"`+raised+`","kind":"raise","scale":2,"ttl":"1h"}`, raised); code != http.StatusOK {
		t.Fatalf("raise: got %d %s, want 200", code, body)
	}
	for i := 1; i <= 6; i++ {
		if code := get(two, raised); code != http.StatusOK {
			t.Fatalf("raised client, request %d on the other replica: got %d, want 200", i, code)
		}
	}
	if code := get(two, raised); code != http.StatusTooManyRequests {
		t.Fatalf("raised client, request 7: got %d, want 429", code)
	}
	for i := 1; i <= 3; i++ {
		if code := get(one, other); code != http.StatusOK {
			t.Fatalf("other client, request %d: got %d, want 200", i, code)
		}
	}
	if code := get(two, other); code != http.StatusTooManyRequests {
		t.Fatalf("other client, request 4: got %d, want 429: its limit stays 3", code)
	}
	code, body := adminCall(t, two, "GET", "/admin/policies/api/client?identity="+raised, adminToken, "", raised)
	if code != http.StatusOK || !strings.Contains(body, `"kind":"scale"`) || !strings.Contains(body, `"capacity":6`) {
		t.Errorf("client state: got %d %s, want the scale override and capacity 6", code, body)
	}

	if code, body := adminCall(t, one, "POST", "/admin/policies/api/override", adminToken, `{"identity":"`+suspended+`","kind":"suspend","ttl":"1h"}`, raised); code != http.StatusOK {
		t.Fatalf("suspend: got %d %s, want 200", code, body)
	}
	if code := get(two, suspended); code != http.StatusForbidden {
		t.Fatalf("suspended client: got %d, want 403", code)
	}

	// An exemption of 400ms: admitted past the limit, then limited again.
	if code, body := adminCall(t, one, "POST", "/admin/policies/api/override", adminToken, `{"identity":"`+exempt+`","kind":"exempt","ttl":"400ms"}`, raised); code != http.StatusOK {
		t.Fatalf("exempt: got %d %s, want 200", code, body)
	}
	for i := 1; i <= 5; i++ {
		if code := get(two, exempt); code != http.StatusOK {
			t.Fatalf("exempt client, request %d: got %d, want 200", i, code)
		}
	}
	time.Sleep(500 * time.Millisecond)
	for i := 1; i <= 3; i++ {
		if code := get(two, exempt); code != http.StatusOK {
			t.Fatalf("after the exemption, request %d: got %d, want 200: nothing was counted while exempt", i, code)
		}
	}
	if code := get(two, exempt); code != http.StatusTooManyRequests {
		t.Fatalf("after the exemption, request 4: got %d, want 429", code)
	}

	// Every key carries a TTL; the override keys at most their override's.
	overrides := 0
	for k, ttl := range keyTTLs(context.Background(), t, c1, prefix) {
		if ttl <= 0 {
			t.Errorf("key %s: got TTL %s, want one", k, ttl)
		}
		if strings.HasSuffix(k, ":o") {
			overrides++
			if ttl > time.Hour {
				t.Errorf("override key %s: got TTL %s, want at most 1h", k, ttl)
			}
		}
	}
	if overrides != 2 {
		t.Errorf("override keys: got %d, want 2 (raised and suspended; the exemption expired)", overrides)
	}

	if code, body := adminCall(t, two, "POST", "/admin/policies/api/override/clear", adminToken, `{"identity":"`+suspended+`"}`, raised); code != http.StatusOK || !strings.Contains(body, `"found":true`) {
		t.Fatalf("clear: got %d %s, want 200 found", code, body)
	}
	if code := get(one, suspended); code != http.StatusOK {
		t.Errorf("after clear: got %d, want 200", code)
	}
}

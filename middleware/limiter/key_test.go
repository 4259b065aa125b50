package limiter

import "testing"

func TestSplitStoreKeyReadsWhatStoreKeyBuilds(t *testing.T) {
	for _, tc := range []struct{ policy, tier, identity string }{
		{"api", "", "203.0.113.7"},
		{"api", "authenticated", "alice"},
		{"login", "", "2001:db8::1"},                // identities may hold ":"
		{"api", "anonymous", "a/b:c"},               // and "/"
		{"search.v2", "trusted", ""},                // an empty identity never reaches a store, but reads back
		{"x_y-z", "", "6:search,11:203.0.113.7,"},   // keyfunc.Join's netstrings
		{"api", "authenticated", "sub:alice/extra"}, // ":" and "/" after the first ":" belong to the identity
	} {
		key := StoreKey(tc.policy, tc.tier, tc.identity)
		p, tier, id, ok := SplitStoreKey(key)
		if !ok || p != tc.policy || tier != tc.tier || id != tc.identity {
			t.Errorf("SplitStoreKey(%q): got %q, %q, %q, %v; want %q, %q, %q, true", key, p, tier, id, ok, tc.policy, tc.tier, tc.identity)
		}
	}
	for _, key := range []string{"", "api", ":alice", "api/:alice", "/tier:alice"} {
		if p, tier, id, ok := SplitStoreKey(key); ok {
			t.Errorf("SplitStoreKey(%q): got %q, %q, %q, true; want ok false", key, p, tier, id)
		}
	}
}

package limiter

import (
	"context"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/internal/keybuf"
	"github.com/ratekeeper/ratekeeper/internal/keybuf/keybuftest"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
)

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

// TestDecisionStampsRealClock: a decision whose context lends memory to a
// memory store stamps it with the instant the limiter read its clock, the
// instant of its Reset, so that the store does not read the clock again;
// a limiter with its own Options.Clock stamps nothing (the store's clock
// is not its clock).
func TestDecisionStampsRealClock(t *testing.T) {
	lim := []store.Limit{{Rate: 10, Period: time.Minute}}
	s, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(s, Options{Name: "api", Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	ctx := &keybuftest.Ctx{Context: context.Background()}
	before := time.Now()
	d, err := l.Decide(ctx, Request{Identity: "alice"})
	after := time.Now()
	if err != nil || !d.Allowed {
		t.Fatalf("Decide: got allowed %t, error %v; want admitted", d.Allowed, err)
	}
	since, ok := keybuf.Since(ctx, before)
	if !ok {
		t.Fatal("real clock: the lent memory holds no instant, want the decision's")
	}
	if since < 0 || since > after.Sub(before) {
		t.Fatalf("stamped instant: %s after the call began, want between 0 and %s", since, after.Sub(before))
	}
	if want := before.Add(since + d.ResetAfter); !d.Reset.Equal(want) {
		t.Fatalf("Reset: got %s, want the stamped instant plus ResetAfter, %s", d.Reset, want)
	}

	fixed := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	l, err = New(s, Options{Name: "api", Limits: lim, Clock: func() time.Time { return fixed }})
	if err != nil {
		t.Fatal(err)
	}
	ctx = &keybuftest.Ctx{Context: context.Background()}
	if _, err := l.Decide(ctx, Request{Identity: "bob"}); err != nil {
		t.Fatal(err)
	}
	if since, ok := keybuf.Since(ctx, fixed); ok {
		t.Fatalf("Options.Clock: the lent memory holds an instant (%s after the fake clock's), want none", since)
	}
}

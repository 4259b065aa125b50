package middleware

import (
	"context"
	"errors"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/store"
)

func TestResetUnblocksClient(t *testing.T) {
	lim := mustNew(t, mustMem(t), keyfunc.RemoteIP,
		store.Limit{Algorithm: store.SlidingWindowLog, Rate: 1, Period: time.Minute, Block: time.Hour}, Options{Name: "login"})
	h := lim.Handler(okHandler)
	send := func() int { return serveReq(h, request("POST", "/login", "192.0.2.44:1000")).Code }
	send()
	send() // refused: starts the block
	if code := send(); code != 429 {
		t.Fatalf("blocked client: got %d, want 429", code)
	}
	if err := lim.Reset(context.Background(), "", "192.0.2.44"); err != nil {
		t.Fatal(err)
	}
	if code := send(); code != 200 {
		t.Fatalf("after Reset: got %d, want 200", code)
	}
	if err := lim.Reset(context.Background(), "gold", "192.0.2.44"); err == nil {
		t.Fatal("Reset with an unknown tier: got nil error, want one")
	}
	if err := lim.Reset(context.Background(), "", ""); err == nil {
		t.Fatal("Reset with an empty identity: got nil error, want one")
	}
}

// Regression: Reset(ctx, "authenticated", "alice") returned nil and reset
// nothing, since the state lived under "sub:alice"; a reset that matches
// nothing must say so.
func TestResetTakesTheSubjectAndReportsNotFound(t *testing.T) {
	lim, err := NewTiered(mustMem(t), AuthOptions{Subject: fakeSubject, Anonymous: keyfunc.RemoteIP},
		[]limiter.Tier{
			{Name: tierAnonymous, Limits: []store.Limit{store.PerMinute(1)}},
			{Name: tierAuthenticated, Limits: []store.Limit{store.PerMinute(1)}},
			{Name: tierTrusted, Unlimited: true},
		}, Options{Name: "api", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	h := lim.Handler(okHandler)
	send := func(hdr ...string) int { return serveReq(h, request("GET", "/", "192.0.2.5:1", hdr...)).Code }
	alice := []string{"Authorization", "Bearer alice-token"}
	send(alice...)
	if code := send(alice...); code != 429 {
		t.Fatalf("alice's second request: got %d, want 429", code)
	}
	ctx := context.Background()
	if err := lim.Reset(ctx, tierAuthenticated, "alice"); err != nil {
		t.Fatalf("Reset(authenticated, alice): %v", err)
	}
	if code := send(alice...); code != 200 {
		t.Fatalf("alice after Reset: got %d, want 200", code)
	}
	send()
	if err := lim.Reset(ctx, tierAnonymous, "192.0.2.5"); err != nil {
		t.Fatalf("Reset(anonymous, address): %v", err)
	}
	for _, tt := range []struct{ tier, identity string }{
		{tierAuthenticated, "sub:alice"}, // the old encoded form
		{tierAuthenticated, "bob"},       // never seen
		{tierAnonymous, "alice"},         // the wrong tier
		{tierTrusted, "operator"},        // a tier that stores nothing
	} {
		if err := lim.Reset(ctx, tt.tier, tt.identity); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Reset(%s, %s): got %v, want an error wrapping store.ErrNotFound", tt.tier, tt.identity, err)
		}
	}
}

// A store failure is returned as it is.
func TestResetPassesStoreErrors(t *testing.T) {
	s := &funcStore{reset: func(context.Context, store.Request) error { return errDown }}
	lim := mustNew(t, s, constKey("k"), store.PerMinute(1))
	if err := lim.Reset(context.Background(), "", "k"); !errors.Is(err, errDown) {
		t.Fatalf("got %v, want the store's error", err)
	}
}

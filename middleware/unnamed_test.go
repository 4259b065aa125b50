package middleware

import (
	"runtime"
	"strings"
	"testing"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/store"
)

// Regression: two limiters built on one store without a name were both
// "default" and silently shared one quota.
func TestSecondUnnamedLimiterOnOneStoreIsRefused(t *testing.T) {
	st := mustMem(t)
	first := mustNew(t, st, keyfunc.RemoteIP, store.PerMinute(5))
	_, err := New(st, keyfunc.RemoteIP, store.PerMinute(100), Options{})
	if !isUnnamedShared(err) {
		t.Fatalf("New: got %v, want the unnamed-limiter refusal", err)
	}
	_, err = NewTiered(st, AuthOptions{Subject: fakeSubject, Anonymous: keyfunc.RemoteIP}, fourTiers[:2], Options{})
	if !isUnnamedShared(err) {
		t.Fatalf("NewTiered: got %v, want the unnamed-limiter refusal", err)
	}
	_, err = New(mustMem(t), keyfunc.RemoteIP, store.PerMinute(100), Options{Fallback: st})
	if !isUnnamedShared(err) {
		t.Fatalf("on the first one's store as fallback: got %v, want the unnamed-limiter refusal", err)
	}
	runtime.KeepAlive(first)
}

// Sharing a quota on purpose stays possible: the same explicit name, a
// named limiter next to an unnamed one, WithCost variants, other stores.
func TestDeliberateSharingIsAllowed(t *testing.T) {
	st := mustMem(t)
	unnamedLim := mustNew(t, st, keyfunc.RemoteIP, store.PerMinute(5))
	if _, err := unnamedLim.WithCost(2); err != nil {
		t.Fatalf("WithCost: %v", err)
	}
	mustNew(t, st, keyfunc.RemoteIP, store.PerMinute(5), Options{Name: "default"})
	mustNew(t, st, keyfunc.RemoteIP, store.PerMinute(5), Options{Name: "default"})
	mustNew(t, st, keyfunc.RemoteIP, store.PerMinute(5), Options{Name: "api"})
	mustNew(t, mustMem(t), keyfunc.RemoteIP, store.PerMinute(5))
	runtime.KeepAlive(unnamedLim)
}

// A limiter nobody references any more does not hold its store's unnamed
// slot, even before a collection has run.
func TestUnnamedSlotIsFreedWithItsLimiter(t *testing.T) {
	st := mustMem(t)
	mustNew(t, st, keyfunc.RemoteIP, store.PerMinute(5)) // dropped at once
	second := mustNew(t, st, keyfunc.RemoteIP, store.PerMinute(5))
	if _, err := New(st, keyfunc.RemoteIP, store.PerMinute(5), Options{}); !isUnnamedShared(err) {
		t.Fatalf("third: got %v, want the unnamed-limiter refusal while the second lives", err)
	}
	runtime.KeepAlive(second)
}

// isUnnamedShared reports the refusal of a second limiter without a name
// on one store (package limiter's errUnnamedShared).
func isUnnamedShared(err error) bool {
	return err != nil && strings.Contains(err.Error(), "another limiter without a name uses this store")
}

package redisstore

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/storetest"
)

// exampleScript reads one of the user scripts in lua/examples.
func exampleScript(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("../../lua/examples/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestUserScriptConformance: the fixed window written as a user script
// passes the conformance suite's plain subset for the fixed window, on
// real time.
func TestUserScriptConformance(t *testing.T) {
	srv := requireServer(t)
	src := exampleScript(t, "fixed_window.lua")
	storetest.RunPlain(t, []store.Algorithm{store.FixedWindow}, func(t *testing.T) storetest.Harness {
		c := newClient(t, srv, nil)
		prefix := randomPrefix(t)
		s, err := newRedis(c, Options{Prefix: prefix, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		u, err := scriptOf(s, "fw", src)
		if err != nil {
			t.Fatal(err)
		}
		return storetest.Harness{Store: limitIDs{u}, Advance: time.Sleep, KeyTTLs: keyTTLs(c, prefix)}
	})
}

// TestUserScriptConformanceExact runs the same subset on a fake clock,
// which asserts exact durations and microsecond boundaries: the clock
// shim of the differential test wraps the user's script as it wraps the
// built-in ones.
func TestUserScriptConformanceExact(t *testing.T) {
	requireServer(t)
	src := exampleScript(t, "fixed_window.lua")
	storetest.RunPlain(t, []store.Algorithm{store.FixedWindow}, func(t *testing.T) storetest.Harness {
		s, clock := newClockedStore(t, time.Date(2025, time.March, 14, 15, 9, 26, 535897000, time.UTC).UnixMicro(), false)
		shim := strings.Replace(clockShim, "CLOCK", "'"+clock.key+"'", 1)
		shim = strings.Replace(shim, "EMULATE", "true", 1)
		u, err := scriptOf(s, "fw", shim+src)
		if err != nil {
			t.Fatal(err)
		}
		return storetest.Harness{
			Store:   limitIDs{u},
			Advance: func(d time.Duration) { clock.advance(d.Microseconds()) },
			Exact:   true,
		}
	})
}

// limitIDs reports the request's limit ID as LimitID, as the built-in
// stores do; a scriptStore reports its script's name.
type limitIDs struct{ *scriptStore }

func (l limitIDs) Take(ctx context.Context, req store.Request) (store.Decision, error) {
	d, err := l.scriptStore.Take(ctx, req)
	if err == nil && len(req.Limits) == 1 {
		d.LimitID = req.Limits[0].ID()
	}
	return d, err
}

func (l limitIDs) Peek(ctx context.Context, req store.Request) (store.Decision, error) {
	d, err := l.scriptStore.Peek(ctx, req)
	if err == nil && len(req.Limits) == 1 {
		d.LimitID = req.Limits[0].ID()
	}
	return d, err
}

// TestUserScriptConcurrencyCap: a per-key concurrency cap, which no
// built-in algorithm expresses, holds under 50 simultaneous requests and
// frees its slots on release.
func TestUserScriptConcurrencyCap(t *testing.T) {
	s, c := newStore(t, Options{})
	u, err := scriptOf(s, "inflight", exampleScript(t, "concurrency.lua"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := store.Request{Key: "user-1", Limits: []store.Limit{{Rate: 3, Period: time.Minute}}}
	var mu sync.Mutex
	admitted := 0
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := u.Take(ctx, req)
			if err != nil {
				t.Error(err)
				return
			}
			if d.Allowed {
				mu.Lock()
				admitted++
				mu.Unlock()
			} else if d.RetryAfter <= 0 || d.LimitID != "inflight" {
				t.Errorf("refusal: got %+v, want a RetryAfter and the script's name", d)
			}
		}()
	}
	wg.Wait()
	if admitted != 3 {
		t.Fatalf("50 simultaneous takes under a cap of 3: got %d admitted, want 3", admitted)
	}
	if d, _, err := u.call(ctx, "release", req); err != nil || d.Remaining != 1 {
		t.Fatalf("release: got %+v, %v, want 1 slot free", d, err)
	}
	if d, err := u.Take(ctx, req); err != nil || !d.Allowed || d.Remaining != 0 {
		t.Fatalf("take after a release: got %+v, %v, want admitted with 0 free", d, err)
	}
	for range 3 {
		if _, _, err := u.call(ctx, "release", req); err != nil {
			t.Fatal(err)
		}
	}
	if keys := prefixKeys(t, c, s.prefix); len(keys) != 0 {
		t.Fatalf("all released: got keys %q, want none", keys)
	}
	if err := u.Reset(ctx, req); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("reset of nothing: got %v, want ErrNotFound", err)
	}
}

// TestUserScriptErrors: a Lua error, a malformed reply, a script running
// past the budget and a request outside the contract are errors that name
// the script, never a panic or a silent admission.
func TestUserScriptErrors(t *testing.T) {
	ctx := context.Background()
	req := store.Request{Key: "k", Limits: []store.Limit{{Rate: 3, Period: time.Minute}}}
	cases := []struct {
		name string
		src  string
		kind string
	}{
		{"lua-error", "error('quota service says no')", "script"},
		{"not-an-array", "return 'yes'", "script"},
		{"short-reply", "return {1, 2}", "script"},
		{"allowed-with-retry", "return {1, 2, 0, 5}", "script"},
		{"refused-without-retry", "return {0, 0, 0, 0}", "script"},
		{"remaining-above-capacity", "return {1, 4, 0, 0}", "script"},
		{"syntax-error", "return {", "script"},
	}
	s, _ := newStore(t, Options{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u, err := scriptOf(s, tc.name, tc.src)
			if err != nil {
				t.Fatal(err)
			}
			d, err := u.Take(ctx, req)
			if err == nil || store.KindOf(err) != tc.kind || !strings.Contains(err.Error(), `script "`+tc.name+`"`) {
				t.Fatalf("got %+v, %v, want a %s error naming the script", d, err, tc.kind)
			}
			if d.Allowed {
				t.Fatal("an error admitted the request")
			}
		})
	}
	t.Run("extras", func(t *testing.T) {
		u, err := scriptOf(s, "extras", "return {1, 2, 0, 0, 'gold', ARGV[6]}", "eu-west")
		if err != nil {
			t.Fatal(err)
		}
		d, extra, err := u.call(ctx, modeTake, req)
		if err != nil || !d.Allowed || d.Remaining != 2 || len(extra) != 2 || extra[0] != "gold" || extra[1] != "eu-west" {
			t.Fatalf("got %+v, %v, %v; want admitted, 2 left, extras [gold eu-west]", d, extra, err)
		}
	})
	t.Run("outside the contract", func(t *testing.T) {
		u, err := scriptOf(s, "plain", "return {1, 0, 0, 0}")
		if err != nil {
			t.Fatal(err)
		}
		two := store.Request{Key: "k", Limits: []store.Limit{{Name: "a", Rate: 1, Period: time.Second}, {Name: "b", Rate: 1, Period: time.Minute}}}
		if _, err := u.Take(ctx, two); !errors.Is(err, store.ErrInvalidRequest) {
			t.Fatalf("two limits: got %v, want ErrInvalidRequest", err)
		}
	})
	for _, bad := range []struct{ name, source string }{{"", "return 1"}, {"a b", "return 1"}, {"ok", ""}} {
		if _, err := scriptOf(s, bad.name, bad.source); err == nil {
			t.Errorf("WithScript(%q, %q): got nil error, want one", bad.name, bad.source)
		}
	}
}

// TestUserScriptBudget: a script that runs past the budget fails with a
// timeout naming the script, within the budget.
func TestUserScriptBudget(t *testing.T) {
	srv := privateServer(t)
	c := newClient(t, srv, &redis.Options{})
	s, err := newRedis(c, Options{Prefix: randomPrefix(t), Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	slow := "local t = redis.call('TIME'); local s = t[1] * 1000000 + t[2]\n" +
		"while true do t = redis.call('TIME'); if t[1] * 1000000 + t[2] - s > 300000 then break end end\n" +
		"return {1, 0, 0, 0}"
	u, err := scriptOf(s, "slow", slow)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = u.Take(context.Background(), store.Request{Key: "k", Limits: []store.Limit{{Rate: 1, Period: time.Second}}})
	if took := time.Since(start); took > 250*time.Millisecond {
		t.Fatalf("took %s, want about the 50ms budget", took)
	}
	if store.KindOf(err) != "timeout" || !strings.Contains(err.Error(), `script "slow"`) {
		t.Fatalf("got %v, want a timeout naming the script", err)
	}
	time.Sleep(400 * time.Millisecond) // let the script end before the server stops
}

// scriptOf is [WithScript] with the concrete type.
func scriptOf(s *redisStore, name, source string, options ...string) (*scriptStore, error) {
	u, err := WithScript(s, name, source, options...)
	if err != nil {
		return nil, err
	}
	return u.(*scriptStore), nil
}

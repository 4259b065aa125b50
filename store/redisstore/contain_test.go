package redisstore

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store"
)

// slowScript is a user script that reads the server's clock for 300 ms
// and writes nothing, so that SCRIPT KILL can stop it.
const slowScript = "local t = redis.call('TIME'); local s = t[1] * 1000000 + t[2]\n" +
	"while true do t = redis.call('TIME'); if t[1] * 1000000 + t[2] - s > 300000 then break end end\n" +
	"return {1, 0, 0, 0}"

// TestUserScriptContained runs a 300 ms user script on a Redis whose
// busy-reply-threshold is 20 ms, while another limiter of the same store
// takes for 80 identities, one every 5 ms over 400 ms, each with the
// store's 50 ms budget. The user script's call fails as a timeout after
// its budget and the store has Redis kill the script then; the other
// limiter's calls that meet the BUSY reply meanwhile are sent again
// within their budget. Only the calls made before the kill can fail, as
// busy (which the middleware's breaker does not count) or timeout: at
// most 30 of the 80 (1 to 6 in most runs; before: every call made while
// the script ran failed, as script errors the breaker counts), and Redis
// answers again well before the script's 300 ms (about 50 to 80 ms).
func TestUserScriptContained(t *testing.T) {
	srv := privateServer(t)
	c := newClient(t, srv, &redis.Options{})
	ctx := context.Background()
	if err := c.ConfigSet(ctx, "busy-reply-threshold", "20").Err(); err != nil {
		t.Fatalf("CONFIG SET busy-reply-threshold: %v", err)
	}
	s, err := newRedis(c, Options{Prefix: randomPrefix(t), Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	u, err := scriptOf(s, "slow", slowScript)
	if err != nil {
		t.Fatal(err)
	}
	lim := []store.Limit{store.PerMinute(1000)}
	// Load the scripts and open the connections before the measurement.
	if _, err := s.Take(ctx, store.Request{Key: "warm", Limits: lim}); err != nil {
		t.Fatalf("take before the script: %v", err)
	}

	start := time.Now()
	userErr := make(chan error, 1)
	firstAfter := make(chan time.Duration, 1)
	go func() {
		_, err := u.Take(ctx, store.Request{Key: "slow", Limits: lim})
		userErr <- err
		for c.Ping(ctx).Err() != nil {
		}
		firstAfter <- time.Since(start)
	}()
	const others = 80
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		kinds = map[string]int{}
	)
	for i := range others {
		time.Sleep(time.Until(start.Add(time.Duration(i) * 5 * time.Millisecond)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Take(ctx, store.Request{Key: "other-" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Limits: lim})
			if err != nil {
				mu.Lock()
				kinds[store.KindOf(err)]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	err = <-userErr
	time.Sleep(300 * time.Millisecond) // let a script that was not killed end before the server stops
	if store.KindOf(err) != "timeout" || !strings.Contains(err.Error(), `script "slow"`) {
		t.Errorf("user script: got %v, want a timeout naming the script", err)
	}
	failed := 0
	for k, n := range kinds {
		failed += n
		if k != "busy" && k != "timeout" {
			t.Errorf("another limiter's calls: %d failed as %q, want busy or timeout", n, k)
		}
	}
	t.Logf("another limiter's calls during a 300 ms user script: %d of %d failed %v", failed, others, kinds)
	if failed > 30 {
		t.Errorf("another limiter's calls: %d of %d failed %v, want at most 30 (those made before the script was killed)", failed, others, kinds)
	}
	// The script was killed: the first call after the user script's
	// returned was answered before the script would have ended.
	if answered := <-firstAfter; answered > 250*time.Millisecond {
		t.Errorf("Redis answered again %s after the script started, want well before its 300 ms (killed after the 50 ms budget)", answered.Round(time.Millisecond))
	} else {
		t.Logf("Redis answered again %s after the script started", answered.Round(time.Millisecond))
	}
}

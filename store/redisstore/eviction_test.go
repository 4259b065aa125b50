package redisstore

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratekeeper/ratekeeper/internal/redistest"
	"github.com/ratekeeper/ratekeeper/internal/testlog"
	"github.com/ratekeeper/ratekeeper/store"
)

// TestEvictionPolicyChecked: on first use the store reads the server's
// maxmemory-policy in the background, warns once under allkeys-* (Redis
// may then drop limiter state, admitting clients afresh) and reports the
// policy; noeviction passes silently.
func TestEvictionPolicyChecked(t *testing.T) {
	for _, tc := range []struct {
		policy string
		warn   bool
	}{{"allkeys-lru", true}, {"noeviction", false}, {"volatile-ttl", false}} {
		t.Run(tc.policy, func(t *testing.T) {
			s := redistest.Require(t, "--maxmemory", "64mb", "--maxmemory-policy", tc.policy)
			srv := &server{Server: s, addr: s.Addr}
			var log testlog.Buffer
			st, err := newRedis(newClient(t, srv, nil), Options{Prefix: randomPrefix(t), Logger: slog.New(slog.NewTextHandler(&log, nil))})
			if err != nil {
				t.Fatal(err)
			}
			if got := st.EvictionPolicy(); got != "" {
				t.Fatalf("before first use: got %q, want \"\"", got)
			}
			if _, err := st.Take(context.Background(), store.Request{Key: "k", Limits: []store.Limit{store.PerSecond(5)}}); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for st.EvictionPolicy() == "" && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if got := st.EvictionPolicy(); got != tc.policy {
				t.Fatalf("got policy %q, want %q", got, tc.policy)
			}
			if warned := strings.Contains(log.String(), "may evict rate-limit state"); warned != tc.warn {
				t.Fatalf("warning logged %v, want %v: %q", warned, tc.warn, log.String())
			}
		})
	}
}

// TestEvictionPolicyUnknown: a server that refuses CONFIG (renamed away,
// as managed services do) gives "unknown" and no warning.
func TestEvictionPolicyUnknown(t *testing.T) {
	s := redistest.Require(t, "--rename-command", "CONFIG", "")
	srv := &server{Server: s, addr: s.Addr}
	st, err := newRedis(newClient(t, srv, nil), Options{Prefix: randomPrefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Take(context.Background(), store.Request{Key: "k", Limits: []store.Limit{store.PerSecond(5)}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for st.EvictionPolicy() == "" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := st.EvictionPolicy(); got != "unknown" {
		t.Fatalf("got %q, want unknown", got)
	}
}

// TestOutOfMemoryKind: a Redis at its maxmemory under noeviction refuses
// the scripts' writes with OOM, which the store reports as kind "oom",
// not as a script error.
func TestOutOfMemoryKind(t *testing.T) {
	s := redistest.Require(t, "--maxmemory", "2mb", "--maxmemory-policy", "noeviction")
	srv := &server{Server: s, addr: s.Addr}
	c := newClient(t, srv, nil)
	ctx := context.Background()
	// Fill the server past its limit: each SET is admitted while used
	// memory is below it, the last one takes it over.
	for i := 0; ; i++ {
		if err := c.Set(ctx, "fill"+strconv.Itoa(i), strings.Repeat("x", 256<<10), 0).Err(); err != nil {
			if !strings.HasPrefix(err.Error(), "OOM ") {
				t.Fatalf("filling: %v", err)
			}
			break
		}
		if i > 100 {
			t.Fatal("the server took 25 MB under a 2 MB maxmemory")
		}
	}
	st, err := newRedis(c, Options{Prefix: randomPrefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Take(ctx, store.Request{Key: "k", Limits: []store.Limit{store.PerSecond(5)}})
	if kind := store.KindOf(err); kind != "oom" {
		t.Fatalf("Take on a full server: kind %q (%v), want oom", kind, err)
	}
}

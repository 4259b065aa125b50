package integration

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/redisstore"
)

// lockedBuffer is a bytes.Buffer safe for concurrent writes (a log).
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRedisClusterDownSparesHealthyShards kills one master of a cluster
// of three masters with a replica each (cluster-node-timeout 1 s) while
// requests for identities served by the two other masters go through a
// fail-closed middleware (breaker threshold 3, cooldown 5 s), one every
// 5 ms, until two seconds after every healthy master reports
// cluster_state ok again (five seconds after the kill when they never
// report it down).
//
//   - full-coverage (Redis's default, cluster-require-full-coverage yes):
//     once the dead master is marked failing, the healthy masters answer
//     CLUSTERDOWN until its replica is promoted. Those replies are kind
//     "clusterdown", which the breakers do not count: no healthy master's
//     breaker opens, and no request made 200 ms or more after the cluster
//     is whole again fails (before: each healthy master's breaker opened,
//     and their requests kept failing for the cooldown, 5 s, after the
//     cluster was whole again).
//   - partial-coverage (cluster-require-full-coverage no, the setting
//     docs/failure-modes.md recommends): the healthy masters keep deciding
//     for their own slots and no request for their keys fails at all.
func TestRedisClusterDownSparesHealthyShards(t *testing.T) {
	for _, tc := range []struct {
		name         string
		fullCoverage bool
	}{
		{"full-coverage", true},
		{"partial-coverage", false},
	} {
		t.Run(tc.name, func(t *testing.T) { testClusterDown(t, tc.fullCoverage) })
	}
}

func testClusterDown(t *testing.T, fullCoverage bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cluster := startCluster(t, clusterSpec{masters: 3, replicas: 1, nodeTimeout: failoverNodeTimeout})
	if !fullCoverage {
		for _, p := range cluster.all() {
			c := redis.NewClient(&redis.Options{Addr: p.addr})
			err := c.ConfigSet(ctx, "cluster-require-full-coverage", "no").Err()
			_ = c.Close()
			if err != nil {
				t.Fatalf("CONFIG SET cluster-require-full-coverage no on %s: %v", p.addr, err)
			}
		}
	}
	cc := cluster.clientWith(t, redis.ClusterOptions{
		DialTimeout:  failoverClientTimeout,
		ReadTimeout:  failoverClientTimeout,
		WriteTimeout: failoverClientTimeout,
	})
	s := newStoreWith(t, cc, redisstore.Options{Prefix: randomPrefix(t), Timeout: 100 * time.Millisecond})

	const policy = "down"
	victim := cluster.nodes[0]
	var healthyIDs []string
	nodeOf := map[string]string{}
	for i := 0; len(healthyIDs) < 30 && i < 1000; i++ {
		id := "client-" + strconv.Itoa(i)
		n := s.NodeFor(ctx, store.Request{Key: policy + ":" + id})
		if n == "" {
			t.Fatalf("NodeFor %q: got \"\", want a master's address", id)
		}
		if n != victim.addr {
			healthyIDs = append(healthyIDs, id)
			nodeOf[id] = n
		}
	}
	var logs lockedBuffer
	var lastErr atomic.Value // the last store error the middleware met
	lim, err := middleware.New(s, func(r *http.Request) (string, error) { return r.Header.Get("X-Client"), nil },
		store.PerMinute(100000), middleware.Options{
			Name:             policy,
			FailureMode:      limiter.FailClosed,
			BreakerThreshold: 3,
			BreakerCooldown:  5 * time.Second,
			Logger:           slog.New(slog.NewTextHandler(&logs, nil)),
			Observer: func(_ context.Context, e limiter.Event) {
				if e.Err != nil {
					lastErr.Store(e.Err.Error())
				}
			},
		})
	if err != nil {
		t.Fatalf("middleware.New: %v", err)
	}
	h := lim.Handler(okHandler)
	send := func(id string) int {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Client", id)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Code
	}
	for _, id := range healthyIDs {
		if code := send(id); code != http.StatusOK {
			t.Fatalf("before the kill, %s: got %d, want 200", id, code)
		}
	}

	// Watch every healthy master's view of the cluster: each learns of
	// the promotion by itself, and the requests go to all of them.
	var watches []*redis.Client
	for _, n := range cluster.nodes[1:] {
		w := redis.NewClient(&redis.Options{Addr: n.addr})
		defer w.Close()
		watches = append(watches, w)
	}
	var (
		mu         sync.Mutex
		wasDown    bool
		whole      time.Time // when every healthy master was whole again
		watchDone  = make(chan struct{})
		stopWatch  = make(chan struct{})
		lastStatus string
	)
	go func() {
		defer close(watchDone)
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(10 * time.Millisecond):
			}
			states := make([]string, len(watches))
			for i, w := range watches {
				if info, err := w.ClusterInfo(ctx).Result(); err == nil {
					states[i] = parseClusterInfo(info)["cluster_state"]
				}
			}
			mu.Lock()
			lastStatus = strings.Join(states, ",")
			allOK := true
			for _, st := range states {
				if st == "fail" {
					wasDown = true
				}
				allOK = allOK && st == "ok"
			}
			if allOK && wasDown && whole.IsZero() {
				whole = time.Now()
			}
			mu.Unlock()
		}
	}()
	defer func() { close(stopWatch); <-watchDone }()

	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill master %s: %v", victim.addr, err)
	}
	<-victim.exited
	killed := time.Now()

	var total, failed, failedAfter int
	end := killed.Add(20 * time.Second)
	if !fullCoverage {
		end = killed.Add(5 * time.Second) // past the replica's promotion
	}
	for i := 0; time.Now().Before(end); i++ {
		at := time.Now()
		id := healthyIDs[i%len(healthyIDs)]
		code := send(id)
		total++
		mu.Lock()
		w := whole
		mu.Unlock()
		if code != http.StatusOK {
			failed++
			if !w.IsZero() && at.Sub(w) >= 200*time.Millisecond {
				failedAfter++
				t.Logf("%s (master %s) got %d %s after the cluster was whole: %v", id, nodeOf[id], code, at.Sub(w).Round(time.Millisecond), lastErr.Load())
			}
		}
		if !w.IsZero() && time.Since(w) > 2*time.Second {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	down, w, last := wasDown, whole, lastStatus
	mu.Unlock()
	var opened []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "circuit breaker opened") {
			opened = append(opened, line)
		}
	}
	wholeAfter := "never reported down"
	if !w.IsZero() {
		wholeAfter = "whole again " + w.Sub(killed).Round(time.Millisecond).String() + " after the kill"
	}
	t.Logf("healthy masters: %d requests, %d failed, %d failed 200 ms or more after the cluster was whole (%s); breakers opened: %d",
		total, failed, failedAfter, wholeAfter, len(opened))
	for _, line := range opened {
		t.Errorf("a healthy master's breaker opened: %s", line)
	}
	if fullCoverage {
		if !down || w.IsZero() {
			t.Fatalf("full coverage: cluster_state fail seen %v, ok again at %v (last %q); want both within 20 s of the kill", down, w, last)
		}
		if failedAfter != 0 {
			t.Errorf("full coverage: %d requests for the healthy masters failed after the cluster was whole again, want none", failedAfter)
		}
		return
	}
	if failed != 0 {
		t.Errorf("partial coverage: %d of %d requests for the healthy masters failed, want none", failed, total)
	}
}

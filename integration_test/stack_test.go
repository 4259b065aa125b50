package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
)

// The scenario of the stacking issue: a per-IP limit of 10 per hour
// before a route-wide one of 100 per hour. stackClients clients send
// stackRounds rounds of one request each, so that the route runs out
// while most clients still have IP quota. The tests of stacks count their
// limits per hour so that no unit comes back while they run: at 100 per
// minute one would after 0.6 s, which the scenario's 220 requests in
// turn can take on a loaded machine, and the route would then rightly
// admit a 101st.
const (
	stackIPRate    = 10
	stackRouteRate = 100
	stackClients   = 20
	stackRounds    = 11
)

// stackLimiters returns the per-IP and the route-wide limiter over s.
func stackLimiters(t testing.TB, s store.Store) (perIP, perRoute *middleware.Limiter) {
	t.Helper()
	perIP, err := middleware.New(s, keyfunc.RemoteIP, store.PerHour(stackIPRate), middleware.Options{Name: "ip"})
	if err != nil {
		t.Fatal(err)
	}
	perRoute, err = middleware.New(s, keyfunc.Constant("/search"), store.PerHour(stackRouteRate), middleware.Options{Name: "route"})
	if err != nil {
		t.Fatal(err)
	}
	return perIP, perRoute
}

func clientIP(i int) string { return fmt.Sprintf("198.51.100.%d", i+1) }

// get sends a request from ip through h.
func get(h http.Handler, ip string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, "/search", nil)
	req.RemoteAddr = ip + ":40000"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// ipCharged returns the units the IP policy holds for client i: its
// capacity minus what a peek finds left.
func ipCharged(t testing.TB, perIP *middleware.Limiter, i int) int64 {
	t.Helper()
	d, err := perIP.Peek(context.Background(), clientIP(i))
	if err != nil {
		t.Fatal(err)
	}
	if !d.Allowed {
		return stackIPRate
	}
	return stackIPRate - d.Remaining - 1 // a peek reports what would be left after it
}

// runStackScenario sends the rounds through h and returns the admissions
// and the units the IP policy was charged, in all.
func runStackScenario(t testing.TB, h http.Handler, perIP *middleware.Limiter) (admitted, charged int64) {
	t.Helper()
	for round := 0; round < stackRounds; round++ {
		for i := 0; i < stackClients; i++ {
			if rec := get(h, clientIP(i)); rec.Code == http.StatusOK {
				admitted++
			} else if rec.Code != http.StatusTooManyRequests {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
		}
	}
	for i := 0; i < stackClients; i++ {
		charged += ipCharged(t, perIP, i)
	}
	return admitted, charged
}

// TestStackChainedBaseline measures what the issue reports: the two
// limiters chained as two middlewares charge the IP policy for requests
// the route refuses.
func TestStackChainedBaseline(t *testing.T) {
	s := newStore(t, newClient(t, sharedRedis(t)), randomPrefix(t))
	perIP, perRoute := stackLimiters(t, s)
	admitted, charged := runStackScenario(t, perIP.Handler(perRoute.Handler(okHandler)), perIP)
	t.Logf("chained: %d admitted, IP policy charged %d units, %d of them for refused requests", admitted, charged, charged-admitted)
	if admitted != stackRouteRate || charged != stackClients*stackIPRate {
		t.Fatalf("chained: %d admitted, %d charged; want %d and %d", admitted, charged, stackRouteRate, stackClients*stackIPRate)
	}
}

func TestStackRedisRefusalsChargeNothing(t *testing.T) {
	s := newStore(t, newClient(t, sharedRedis(t)), randomPrefix(t))
	perIP, perRoute := stackLimiters(t, s)
	st, err := middleware.NewStack(perIP, perRoute)
	if err != nil {
		t.Fatal(err)
	}
	admitted, charged := runStackScenario(t, st(okHandler), perIP)
	t.Logf("stacked: %d admitted, IP policy charged %d units, %d of them for refused requests", admitted, charged, charged-admitted)
	if admitted != stackRouteRate || charged != admitted {
		t.Fatalf("stacked: %d admitted, IP charged %d; want %d and as many", admitted, charged, stackRouteRate)
	}
	if d, err := perRoute.Peek(context.Background(), "/search"); err != nil || d.Allowed {
		t.Fatalf("route after %d admissions: %+v, %v; want exhausted", admitted, d, err)
	}
}

// stackBody is the part of a 429 body the tests read.
type stackBody struct {
	Policy     string `json:"policy"`
	Limit      int64  `json:"limit"`
	RetryAfter int64  `json:"retry_after"`
}

func TestStackRedisHeaders(t *testing.T) {
	s := newStore(t, newClient(t, sharedRedis(t)), randomPrefix(t))
	// A route of 12 per minute: the IP (10) decides admissions and the
	// 11th request of a client; the route refuses the 13th admission.
	perIP, err := middleware.New(s, keyfunc.RemoteIP, store.PerHour(stackIPRate), middleware.Options{Name: "ip"})
	if err != nil {
		t.Fatal(err)
	}
	perRoute, err := middleware.New(s, keyfunc.Constant("/search"), store.PerHour(12), middleware.Options{Name: "route"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := middleware.NewStack(perIP, perRoute)
	if err != nil {
		t.Fatal(err)
	}
	h := st(okHandler)
	a, b := clientIP(0), clientIP(1)
	for n := 0; n < stackIPRate; n++ {
		rec := get(h, a)
		// IP: 10-n-1 left; route: 12-n-1 left. The IP has fewer.
		if rec.Code != http.StatusOK || rec.Header().Get("X-Ratelimit-Limit") != "10" || rec.Header().Get("X-Ratelimit-Remaining") != strconv.Itoa(stackIPRate-n-1) {
			t.Fatalf("admission %d: %d, Limit %s, Remaining %s; want the IP's 10 and %d", n, rec.Code,
				rec.Header().Get("X-Ratelimit-Limit"), rec.Header().Get("X-Ratelimit-Remaining"), stackIPRate-n-1)
		}
	}
	// Refused by the IP (the route has 2 left): the IP's 429.
	rec := get(h, a)
	var body stackBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != http.StatusTooManyRequests || body.Policy != "ip" || body.Limit != 10 {
		t.Fatalf("IP refusal: %d %s; want the IP's 429", rec.Code, rec.Body)
	}
	if ra := rec.Header().Get("Retry-After"); ra == "" || ra != strconv.FormatInt(body.RetryAfter, 10) {
		t.Fatalf("IP refusal: Retry-After %q, body retry_after %d", ra, body.RetryAfter)
	}
	// Another client: now the route (2 left, then 1) has fewer than its IP (9).
	for n := 0; n < 2; n++ {
		rec := get(h, b)
		if rec.Code != http.StatusOK || rec.Header().Get("X-Ratelimit-Limit") != "12" || rec.Header().Get("X-Ratelimit-Remaining") != strconv.Itoa(1-n) {
			t.Fatalf("client b admission %d: %d, Limit %s, Remaining %s; want the route's 12 and %d", n, rec.Code,
				rec.Header().Get("X-Ratelimit-Limit"), rec.Header().Get("X-Ratelimit-Remaining"), 1-n)
		}
	}
	rec = get(h, b)
	body = stackBody{}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != http.StatusTooManyRequests || body.Policy != "route" || body.Limit != 12 {
		t.Fatalf("route refusal: %d %s; want the route's 429", rec.Code, rec.Body)
	}
	if rec.Header().Get("X-Ratelimit-Limit") != "12" || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("route refusal headers: %v", rec.Header())
	}
	if got := ipCharged(t, perIP, 1); got != 2 {
		t.Fatalf("client b's IP charged %d after 2 admissions and a refusal, want 2", got)
	}
}

// TestStackRedisConcurrent runs several middleware instances, each with a
// client and store of its own, from many goroutines against one Redis:
// the totals must be exact.
func TestStackRedisConcurrent(t *testing.T) {
	srv := sharedRedis(t)
	prefix := randomPrefix(t)
	const instances, goroutines, perGoroutine = 4, 32, 12
	const ipRate, routeRate = 30, 150
	handlers := make([]http.Handler, instances)
	var perIP0 *middleware.Limiter
	for i := range handlers {
		s := newStore(t, newClient(t, srv), prefix)
		perIP, err := middleware.New(s, keyfunc.RemoteIP, store.PerHour(ipRate), middleware.Options{Name: "ip"})
		if err != nil {
			t.Fatal(err)
		}
		perRoute, err := middleware.New(s, keyfunc.Constant("/search"), store.PerHour(routeRate), middleware.Options{Name: "route"})
		if err != nil {
			t.Fatal(err)
		}
		st, err := middleware.NewStack(perIP, perRoute)
		if err != nil {
			t.Fatal(err)
		}
		handlers[i] = st(okHandler)
		if i == 0 {
			perIP0 = perIP
		}
	}
	// 8 clients of 4 goroutines each: 48 requests per client, 384 in all.
	const clients = 8
	var admitted atomic.Int64
	perClient := make([]atomic.Int64, clients)
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := g % clients
			for n := 0; n < perGoroutine; n++ {
				rec := get(handlers[(g+n)%instances], clientIP(c))
				switch rec.Code {
				case http.StatusOK:
					admitted.Add(1)
					perClient[c].Add(1)
				case http.StatusTooManyRequests:
				default:
					t.Errorf("status %d: %s", rec.Code, rec.Body)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := admitted.Load(); got != routeRate {
		t.Fatalf("admitted %d, want %d", got, routeRate)
	}
	var charged int64
	for c := 0; c < clients; c++ {
		d, err := perIP0.Peek(context.Background(), clientIP(c))
		if err != nil {
			t.Fatal(err)
		}
		used := int64(ipRate)
		if d.Allowed {
			used = ipRate - d.Remaining - 1
		}
		if used != perClient[c].Load() || used > ipRate {
			t.Fatalf("client %d: IP charged %d, admitted %d (limit %d)", c, used, perClient[c].Load(), ipRate)
		}
		charged += used
	}
	if charged != routeRate {
		t.Fatalf("IP policy charged %d in all, want %d (one per admission)", charged, routeRate)
	}
	ttls := keyTTLs(context.Background(), t, newClient(t, srv), prefix)
	for k, ttl := range ttls {
		if ttl <= 0 {
			t.Errorf("key %s has TTL %s", k, ttl)
		}
	}
}

// TestStackRedisCluster decides the stack on a Redis Cluster where the
// IP and route keys lie in different slots: each policy is its own step,
// and route refusals refund the IP step.
func TestStackRedisCluster(t *testing.T) {
	cluster := startCluster(t, clusterSpec{masters: 3})
	cc := cluster.client(t)
	prefix := randomPrefix(t)
	s := newStore(t, cc, prefix)
	perIP, perRoute := stackLimiters(t, s)
	st, err := middleware.NewStack(perIP, perRoute)
	if err != nil {
		t.Fatal(err)
	}
	admitted, charged := runStackScenario(t, st(okHandler), perIP)
	t.Logf("cluster, stacked: %d admitted, IP policy charged %d units, %d refunds", admitted, charged, s.Refunds())
	if admitted != stackRouteRate || charged != admitted {
		t.Fatalf("%d admitted, IP charged %d; want %d and as many", admitted, charged, stackRouteRate)
	}
	// Every refusal was the route's, after the IP step had admitted (no
	// client used up its IP quota, refunds included): each was refunded.
	if got, want := s.Refunds(), uint64(stackClients*stackRounds-stackRouteRate); got != want || s.Unrefunded() != 0 {
		t.Fatalf("Refunds() = %d, Unrefunded() = %d; want %d and 0", got, s.Unrefunded(), want)
	}
	// The keys of the two policies lie in different slots, and each has
	// a TTL.
	ctx := context.Background()
	ttls, err := clusterTTLs(ctx, cc, prefix)
	if err != nil {
		t.Fatal(err)
	}
	slots := map[int64]bool{}
	for k, ttl := range ttls {
		if ttl <= 0 {
			t.Errorf("key %s has TTL %s", k, ttl)
		}
		slot, err := cc.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		slots[slot] = true
	}
	if len(slots) < 2 {
		t.Fatalf("all keys in %d slot(s): the test does not exercise refunds", len(slots))
	}
	checkStackCounts(t, cc, s)

	t.Run("concurrent", func(t *testing.T) {
		testStackClusterConcurrent(t, cluster)
	})

}

// testStackClusterConcurrent runs several instances, each with a cluster
// client and store of its own, from many goroutines: the route admits
// exactly its limit, and the IP policy ends charged for admissions only,
// every refund applied once.
func testStackClusterConcurrent(t *testing.T, cluster *testCluster) {
	prefix := randomPrefix(t)
	const instances, goroutines, perGoroutine, clients = 3, 24, 10, 6
	const ipRate, routeRate = 40, 120
	stores := make([]redisStore, instances)
	handlers := make([]http.Handler, instances)
	var perIP0 *middleware.Limiter
	for i := range handlers {
		stores[i] = newStore(t, cluster.client(t), prefix)
		perIP, err := middleware.New(stores[i], keyfunc.RemoteIP, store.PerHour(ipRate), middleware.Options{Name: "ip"})
		if err != nil {
			t.Fatal(err)
		}
		perRoute, err := middleware.New(stores[i], keyfunc.Constant("/search"), store.PerHour(routeRate), middleware.Options{Name: "route"})
		if err != nil {
			t.Fatal(err)
		}
		st, err := middleware.NewStack(perIP, perRoute)
		if err != nil {
			t.Fatal(err)
		}
		handlers[i] = st(okHandler)
		if i == 0 {
			perIP0 = perIP
		}
	}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < perGoroutine; n++ {
				rec := get(handlers[(g+n)%instances], clientIP(g%clients))
				switch rec.Code {
				case http.StatusOK:
					admitted.Add(1)
				case http.StatusTooManyRequests:
				default:
					t.Errorf("status %d: %s", rec.Code, rec.Body)
					return
				}
			}
		}()
	}
	wg.Wait()
	var charged int64
	for c := 0; c < clients; c++ {
		d, err := perIP0.Peek(context.Background(), clientIP(c))
		if err != nil {
			t.Fatal(err)
		}
		used := int64(ipRate)
		if d.Allowed {
			used = ipRate - d.Remaining - 1
		}
		charged += used
	}
	var refunds, unrefunded uint64
	for _, s := range stores {
		refunds += s.Refunds()
		unrefunded += s.Unrefunded()
	}
	t.Logf("cluster, concurrent: %d requests, %d admitted, IP charged %d, %d refunds", goroutines*perGoroutine, admitted.Load(), charged, refunds)
	if admitted.Load() != routeRate || charged != routeRate || unrefunded != 0 || refunds == 0 {
		t.Fatalf("admitted %d, IP charged %d, %d refunds, %d unrefunded; want %d, %d, some and 0",
			admitted.Load(), charged, refunds, unrefunded, routeRate, routeRate)
	}
}

// checkStackCounts checks, through the store, that a stack with its
// parts in two slots refunds the first step at the store level too, and
// reports it in the decision.
func checkStackCounts(t *testing.T, cc *redis.ClusterClient, s redisStore) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reqs := []store.Request{
		{Key: "a", Limits: []store.Limit{{Name: "a", Rate: 5, Period: time.Minute}}},
		{Key: "b", Limits: []store.Limit{{Name: "b", Rate: 1, Period: time.Minute}}},
	}
	a, _ := cc.ClusterKeySlot(ctx, "{a}").Result()
	b, _ := cc.ClusterKeySlot(ctx, "{b}").Result()
	if a == b {
		t.Fatalf("keys a and b share slot %d", a)
	}
	if md, err := s.TakeMulti(ctx, reqs); err != nil || !md.Allowed {
		t.Fatalf("first stacked take: %+v, %v", md, err)
	}
	md, err := s.TakeMulti(ctx, reqs)
	if err != nil || md.Allowed || md.Refunded != 1 || md.Part != 1 {
		t.Fatalf("second stacked take: %+v, %v; want refused by b with 1 refund", md, err)
	}
	if d, err := s.Peek(ctx, reqs[0]); err != nil || d.Remaining != 3 {
		t.Fatalf("a after 1 admission and 1 refunded refusal: %+v, %v; want 3 left after a peek", d, err)
	}
}

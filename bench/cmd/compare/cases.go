package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/ratekeeper/ratekeeper/bench/internal/peers"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-chi/httprate"
	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/sethvargo/go-limiter/httplimit"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	goredisstore "github.com/throttled/throttled/v2/store/goredisstore.v9"
	ulule "github.com/ulule/limiter/v3"
	ululestdlib "github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	ululememory "github.com/ulule/limiter/v3/drivers/store/memory"
	ululeredis "github.com/ulule/limiter/v3/drivers/store/redis"
	"golang.org/x/time/rate"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/hybrid"
	"github.com/ratekeeper/ratekeeper/store/memstore"
	"github.com/ratekeeper/ratekeeper/store/redisstore"
	"github.com/ratekeeper/ratekeeper/store/suppressed"
)

// Names of the reference cases the ratio columns divide by.
const (
	refRedisRate = "redis_rate"
	refPing      = "floor/PING"
)

// openRate is the per-hour rate of the ordinary groups: with a burst as
// large, every call is admitted, so the limiters do their full work
// (read, update, write) on every call.
const openRate = 1 << 30

// Limit of the denial-heavy groups: one key sends far more than this.
const (
	denyRate   = 10
	denyPeriod = time.Hour
)

// group is one cell of the matrix: how many callers, over how many keys,
// and whether the one key is far over its limit.
type group struct {
	callers int
	keys    int
	deny    bool
}

func (g group) String() string {
	s := plural(g.callers, "caller", "callers") + ", " + plural(g.keys, "key", "keys")
	if g.deny {
		s += fmt.Sprintf(", over its limit (%d per %s)", denyRate, periodName(denyPeriod))
	}
	return s
}

// limit returns the group's rate and period.
func (g group) limit() (int64, time.Duration) {
	if g.deny {
		return denyRate, denyPeriod
	}
	return openRate, time.Hour
}

// env is what the cases share: the one go-redis client, the key spread
// and a request per key.
type env struct {
	rdb *redis.Client
	// rdbDeadlines is a second client, the same but for go-redis's
	// ContextTimeoutEnabled, for the case that shows what it changes.
	rdbDeadlines *redis.Client
	// ring is a Ring of one shard, the same server: the Redis store
	// sends one script call per decision through it, as through a
	// Cluster, whose batches it cannot decide in one call.
	ring    *redis.Ring
	keys    []string        // client identities (IPv4 addresses)
	reqs    []*http.Request // one GET per identity, RemoteAddr set
	evalSHA string          // SHA1 of the "return 1" floor script
	runID   string
	seq     int
	// loneSpin is every ratekeeper Redis store's Options.LoneSpin (0:
	// the store's default; negative: never polls).
	loneSpin time.Duration
}

// newEnv prepares n identities and loads the floor script.
func newEnv(ctx context.Context, rdb *redis.Client, n int, runID string) (*env, error) {
	e := &env{rdb: rdb, runID: runID}
	e.keys = make([]string, n)
	e.reqs = make([]*http.Request, n)
	for i := range n {
		ip := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
		e.keys[i] = ip
		r := httptest.NewRequest(http.MethodGet, "/api/items", nil)
		r.RemoteAddr = ip + ":40000"
		e.reqs[i] = r
	}
	sha, err := rdb.ScriptLoad(ctx, "return 1").Result()
	if err != nil {
		return nil, fmt.Errorf("SCRIPT LOAD: %w", err)
	}
	e.evalSHA = sha
	return e, nil
}

// prefix returns a key prefix no earlier case used. Every prefix contains
// the run id, so a run's keys can be found on a shared server.
func (e *env) prefix() string {
	e.seq++
	return fmt.Sprintf("rkbench%s-%d", e.runID, e.seq)
}

// caseDef is one limiter setup of the comparison.
type caseDef struct {
	name string
	// redis cases touch the Redis server: Redis CPU is reported.
	redis bool
	// oneKey cases are a single limiter with no notion of keys: they run
	// only in one-key groups.
	oneKey bool
	// make builds a fresh instance for group g, keeping its Redis state
	// under prefix.
	make func(e *env, g group, prefix string) (*instance, error)
}

// instance is a case ready to run: do makes one decision for identity k.
type instance struct {
	do    func(w *worker, k int) (admitted bool, err error)
	close func()
}

func (c *caseDef) applies(g group) bool { return !c.oneKey || g.keys == 1 }

// allCases returns every case, in report order.
func allCases() []*caseDef {
	cases := []*caseDef{
		{name: refPing, redis: true, make: pingCase},
		{name: "floor/EVALSHA return 1", redis: true, make: evalCase},
		{name: "floor/http handler", make: httpFloorCase},
	}
	for _, alg := range store.Algorithms {
		cases = append(cases, &caseDef{name: "ratekeeper/redis/" + alg.String(), redis: true, make: rkRedisCase(alg, true, true)})
	}
	for _, alg := range store.Algorithms {
		cases = append(cases, &caseDef{name: "ratekeeper/redis/" + alg.String() + stackedSuffix, redis: true, make: rkStackCase(alg)})
		cases = append(cases, &caseDef{name: "ratekeeper/redis/" + alg.String() + oneCallSuffix, redis: true, make: rkOneCallCase(alg)})
	}
	cases = append(cases,
		&caseDef{name: "ratekeeper/redis/suppressed", redis: true, make: rkSuppressedCase},
		&caseDef{name: "ratekeeper/redis/gcra overrides", redis: true, make: rkOverridesCase},
		&caseDef{name: "ratekeeper/redis/gcra max wait", redis: true, make: rkWaitCase},
		&caseDef{name: "ratekeeper/redis/in-flight acquire+release", redis: true, make: rkInFlightCase},
		&caseDef{name: "ratekeeper/redis/gcra reserve+settle", redis: true, make: rkSettleCase(store.GCRA)},
		&caseDef{name: "ratekeeper/redis/fixed_window reserve+settle", redis: true, make: rkSettleCase(store.FixedWindow)},
		&caseDef{name: "ratekeeper/redis/gcra no batching", redis: true, make: rkRedisCase(store.GCRA, false, true)},
		&caseDef{name: "ratekeeper/redis/gcra no deny cache", redis: true, make: rkRedisCase(store.GCRA, true, false)},
	)
	for _, alg := range store.Algorithms {
		cases = append(cases, &caseDef{name: rkRedisName(alg) + deadlinesSuffix, redis: true, make: rkDeadlinesCase(alg)})
	}
	cases = append(cases,
		&caseDef{name: "ratekeeper/memory/gcra", make: rkMemCase},
		&caseDef{name: "ratekeeper/hybrid/gcra", redis: true, make: rkHybridCase},
		&caseDef{name: "ratekeeper/middleware/redis", redis: true, make: rkMiddlewareCase(true, true)},
		&caseDef{name: "ratekeeper/middleware/redis no batching", redis: true, make: rkMiddlewareCase(true, false)},
		&caseDef{name: "ratekeeper/middleware/memory", make: rkMiddlewareCase(false, true)},
		&caseDef{name: refRedisRate, redis: true, make: redisRateCase},
		&caseDef{name: "ulule/redis", redis: true, make: ululeCase},
		&caseDef{name: "throttled/redis", redis: true, make: throttledCase},
		&caseDef{name: "sethvargo/memory", make: sethvargoCase},
		&caseDef{name: caseSethvargoMiddleware, make: sethvargoMiddlewareCase},
		&caseDef{name: caseHttprateMiddleware, make: httprateCase},
		&caseDef{name: caseUluleMiddleware, make: ululeMiddlewareCase},
		&caseDef{name: "x/time/rate/middleware", make: xrateMiddlewareCase},
		&caseDef{name: "x/time/rate/Allow one limiter", oneKey: true, make: xrateAllowCase},
		&caseDef{name: caseXRateKeys, make: xrateKeysCase},
	)
	return cases
}

func pingCase(e *env, _ group, _ string) (*instance, error) {
	return &instance{do: func(w *worker, _ int) (bool, error) {
		return true, e.rdb.Ping(w.ctx).Err()
	}}, nil
}

func evalCase(e *env, _ group, _ string) (*instance, error) {
	return &instance{do: func(w *worker, _ int) (bool, error) {
		return true, e.rdb.EvalSha(w.ctx, e.evalSHA, nil).Err()
	}}, nil
}

// okHandler is the application behind every middleware: it answers 200
// with an empty body.
var okHandler = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

func httpFloorCase(e *env, _ group, _ string) (*instance, error) {
	return &instance{do: serve(okHandler, e.reqs)}, nil
}

// errStatus reports a middleware answer other than 2xx or 429.
var errStatus = errors.New("unexpected HTTP status")

// serve returns a decision function that runs h on identity k's request
// with the worker's reusable recorder: 429 is a refusal, 2xx an admission.
func serve(h http.Handler, reqs []*http.Request) func(w *worker, k int) (bool, error) {
	return func(w *worker, k int) (bool, error) {
		w.rec.reset()
		h.ServeHTTP(w.rec, reqs[k])
		switch code := w.rec.code; {
		case code == http.StatusTooManyRequests:
			return false, nil
		case code >= 200 && code < 300:
			return true, nil
		default:
			w.status = code
			return false, errStatus
		}
	}
}

// rkOptions returns the Redis store options of a ratekeeper case. batch
// false asks for one script call per Take (no batching of concurrent
// Takes); deny false turns off the local cache of refusals.
func (e *env) rkOptions(prefix string, batch, deny bool) redisstore.Options {
	o := redisstore.Options{Prefix: prefix, Timeout: time.Second, LoneSpin: e.loneSpin}
	if !batch {
		o.MaxBatch = 1
	}
	if !deny {
		o.DenyCacheSize = -1
	}
	return o
}

// rkVariants reports whether rkOptions distinguishes its variants.
const rkVariants = true

// closeIfCloser closes v when it has a Close method (a store with
// background work).
func closeIfCloser(v any) {
	switch c := v.(type) {
	case interface{ Close() error }:
		_ = c.Close()
	case interface{ Close() }:
		c.Close()
	}
}

func rkRequests(e *env, g group, alg store.Algorithm) []store.Request {
	n, per := g.limit()
	limits := []store.Limit{{Algorithm: alg, Rate: n, Period: per}}
	reqs := make([]store.Request, g.keys)
	for i := range reqs {
		reqs[i] = store.Request{Key: e.keys[i], Limits: limits}
	}
	return reqs
}

func rkRedisCase(alg store.Algorithm, batch, deny bool) func(*env, group, string) (*instance, error) {
	return rkRedisCaseOf(alg, batch, deny, false)
}

// rkOverridesCase is GCRA for a policy that applies per-client
// overrides (none is set): the full script, which also reads the
// override key.
var rkOverridesCase = rkRedisCaseOf(store.GCRA, true, true, true)

// rkRedisCaseOf returns the case of Take for alg on the Redis store, with
// the store options of rkOptions and requests that read overrides when
// overrides is set.
func rkRedisCaseOf(alg store.Algorithm, batch, deny, overrides bool) func(*env, group, string) (*instance, error) {
	return func(e *env, g group, prefix string) (*instance, error) {
		reqs := rkRequests(e, g, alg)
		for i := range reqs {
			reqs[i].ApplyOverride = overrides
		}
		return rkTakeCase(e.rdb, e.rkOptions(prefix, batch, deny), reqs)
	}
}

// rkWaitCase is GCRA for requests that may wait a second for their turn
// (store.Request.MaxWait): the waiting script, which decides like the full
// script and, for a request that would wait, reserves its place. Where the
// limit refuses (the denial-heavy groups), the turn is beyond the second
// and the request is refused.
func rkWaitCase(e *env, g group, prefix string) (*instance, error) {
	reqs := rkRequests(e, g, store.GCRA)
	for i := range reqs {
		reqs[i].MaxWait = time.Second
	}
	return rkTakeCase(e.rdb, e.rkOptions(prefix, true, true), reqs)
}

// rkSuppressedCase is load shedding (package store/suppressed) over a
// sliding window counter on the Redis store, with the soft limit equal to
// the hard one: the rate stays within the valid range.
func rkSuppressedCase(e *env, g group, prefix string) (*instance, error) {
	reqs := rkRequests(e, g, store.SlidingWindowCounter)
	wrap := func(s store.Store) (store.Store, error) {
		return suppressed.New(s, suppressed.Options{Soft: func(l store.Limit) int64 { return l.Rate }})
	}
	return rkTakeCaseOf(e.rdb, e.rkOptions(prefix, true, true), reqs, wrap)
}

// oneCallSuffix ends the name of a case whose store sends one script call
// per decision: "ratekeeper/redis/<algorithm> one call each".
const oneCallSuffix = " one call each"

// rkOneCallCase returns the case of Take for alg on a Redis store over a
// Ring of one shard: the same server and batching, but one script call
// per decision, as on a Redis Cluster, instead of one lean batch call per
// batch.
func rkOneCallCase(alg store.Algorithm) func(*env, group, string) (*instance, error) {
	return func(e *env, g group, prefix string) (*instance, error) {
		return rkTakeCase(e.ring, e.rkOptions(prefix, true, true), rkRequests(e, g, alg))
	}
}

// rkTakeCase returns the case of Take for reqs on a Redis store over c.
func rkTakeCase(c redis.UniversalClient, opts redisstore.Options, reqs []store.Request) (*instance, error) {
	return rkTakeCaseOf(c, opts, reqs, func(s store.Store) (store.Store, error) { return s, nil })
}

// rkTakeCaseOf is rkTakeCase on the store wrap returns for the Redis
// store.
func rkTakeCaseOf(c redis.UniversalClient, opts redisstore.Options, reqs []store.Request, wrap func(store.Store) (store.Store, error)) (*instance, error) {
	rs, err := redisstore.New(c, opts)
	if err != nil {
		return nil, err
	}
	s, err := wrap(rs)
	if err != nil {
		return nil, err
	}
	return &instance{
		do: func(w *worker, k int) (bool, error) {
			d, err := s.Take(w.ctx, reqs[k])
			return d.Allowed, err
		},
		close: func() {
			closeIfCloser(s)
			if s != rs {
				closeIfCloser(rs)
			}
		},
	}, nil
}

// deadlinesSuffix ends the name of a case through the client the README
// recommends: "ratekeeper/redis/<algorithm> ctx deadlines".
const deadlinesSuffix = " ctx deadlines"

// rkDeadlinesCase returns the case of alg through the client with
// ContextTimeoutEnabled: the store then sends a lone call from its
// caller's goroutine.
func rkDeadlinesCase(alg store.Algorithm) func(*env, group, string) (*instance, error) {
	return func(e *env, g group, prefix string) (*instance, error) {
		return rkTakeCase(e.rdbDeadlines, e.rkOptions(prefix, true, true), rkRequests(e, g, alg))
	}
}

// stackedSuffix ends the name of a stacked case: "ratekeeper/redis/<algorithm> stacked".
const stackedSuffix = " stacked"

// rkStackCase returns the case that decides two policies as one
// (store.MultiStore): the identity's own limit of alg and a route-wide
// GCRA limit that never refuses, one script for both keys. For GCRA and
// the token bucket that is the lean stacked script, for the others the
// lean stacked script of window parts; the calls that share a pipeline
// travel as one stacked batch.
func rkStackCase(alg store.Algorithm) func(*env, group, string) (*instance, error) {
	return func(e *env, g group, prefix string) (*instance, error) {
		s, err := redisstore.New(e.rdb, e.rkOptions(prefix, true, true))
		if err != nil {
			return nil, err
		}
		ms := s.(store.MultiStore)
		reqs := rkRequests(e, g, alg)
		route := store.Request{Key: "route:/api", Limits: []store.Limit{{Rate: 1 << 30, Period: time.Second}}}
		stacks := make([][]store.Request, len(reqs))
		for i := range reqs {
			stacks[i] = []store.Request{reqs[i], route}
		}
		return &instance{
			do: func(w *worker, k int) (bool, error) {
				d, err := ms.TakeMulti(w.ctx, stacks[k])
				return d.Allowed, err
			},
			close: func() { closeIfCloser(s) },
		}, nil
	}
}

// rkHybridCase is GCRA on the hybrid store (package store/hybrid, default
// options) over the Redis store: hot keys are answered from local leases
// and committed to Redis once per sync interval.
func rkHybridCase(e *env, g group, prefix string) (*instance, error) {
	wrap := func(s store.Store) (store.Store, error) { return hybrid.New(s, hybrid.Options{}) }
	return rkTakeCaseOf(e.rdb, e.rkOptions(prefix, true, true), rkRequests(e, g, store.GCRA), wrap)
}

// rkSettleCase is a cost settled after the response (store.Refunder) for
// alg: each decision reserves an estimate of 2 units (Request.Reserve,
// which a window algorithm's settlement needs) and, when admitted,
// settles at an actual cost of 1, a second script call. Its Redis CPU per
// decision is the two calls'.
func rkSettleCase(alg store.Algorithm) func(*env, group, string) (*instance, error) {
	return func(e *env, g group, prefix string) (*instance, error) {
		s, err := redisstore.New(e.rdb, e.rkOptions(prefix, true, true))
		if err != nil {
			return nil, err
		}
		rf := s.(store.Refunder)
		reqs := rkRequests(e, g, alg)
		for i := range reqs {
			reqs[i].Cost, reqs[i].Reserve = 2, alg != store.GCRA && alg != store.TokenBucket
		}
		return &instance{
			do: func(w *worker, k int) (bool, error) {
				d, err := s.Take(w.ctx, reqs[k])
				if err != nil || !d.Allowed {
					return false, err
				}
				return true, rf.Settle(w.ctx, reqs[k], d, 1)
			},
			close: func() { closeIfCloser(s) },
		}, nil
	}
}

func rkMemCase(e *env, g group, _ string) (*instance, error) {
	s, err := memstore.New(memstore.Options{})
	if err != nil {
		return nil, err
	}
	reqs := rkRequests(e, g, store.GCRA)
	return &instance{do: func(w *worker, k int) (bool, error) {
		d, err := s.Take(w.ctx, reqs[k])
		return d.Allowed, err
	}}, nil
}

// rkMiddlewareCase returns the case of the middleware on the Redis store
// (onRedis) or the memory store; batch false sets the Redis store's
// MaxBatch to 1.
func rkMiddlewareCase(onRedis, batch bool) func(*env, group, string) (*instance, error) {
	return func(e *env, g group, prefix string) (*instance, error) {
		var s store.Store
		if onRedis {
			rs, err := redisstore.New(e.rdb, e.rkOptions(prefix, batch, true))
			if err != nil {
				return nil, err
			}
			s = rs
		} else {
			ms, err := memstore.New(memstore.Options{})
			if err != nil {
				return nil, err
			}
			s = ms
		}
		h, err := rkMiddleware(s, g)
		if err != nil {
			return nil, err
		}
		return &instance{do: serve(h, e.reqs), close: func() { closeIfCloser(s) }}, nil
	}
}

// rkMiddleware returns the middleware on s for g's limit in front of
// okHandler. It keeps its default decision budget; a store failure or a
// blown budget answers 503, counted as an error.
func rkMiddleware(s store.Store, g group) (http.Handler, error) {
	n, per := g.limit()
	l, err := middleware.New(s, keyfunc.RemoteIP, store.Limit{Rate: n, Period: per},
		middleware.Options{FailureMode: limiter.FailClosed, Logger: discardLogger},
	)
	if err != nil {
		return nil, err
	}
	return l.Handler(okHandler), nil
}

func redisRateCase(e *env, g group, prefix string) (*instance, error) {
	l := redis_rate.NewLimiter(e.rdb)
	n, per := g.limit()
	limit := redis_rate.Limit{Rate: int(n), Burst: int(n), Period: per}
	keys := prefixed(prefix+":", e.keys[:g.keys])
	return &instance{do: func(w *worker, k int) (bool, error) {
		res, err := l.Allow(w.ctx, keys[k], limit)
		if err != nil {
			return false, err
		}
		return res.Allowed > 0, nil
	}}, nil
}

func ululeCase(e *env, g group, prefix string) (*instance, error) {
	st, err := ululeredis.NewStoreWithOptions(e.rdb, ulule.StoreOptions{Prefix: prefix})
	if err != nil {
		return nil, err
	}
	n, per := g.limit()
	l := ulule.New(st, ulule.Rate{Period: per, Limit: n})
	return &instance{do: func(w *worker, k int) (bool, error) {
		c, err := l.Get(w.ctx, e.keys[k])
		return err == nil && !c.Reached, err
	}}, nil
}

func throttledCase(e *env, g group, prefix string) (*instance, error) {
	st, err := goredisstore.NewCtx(e.rdb, prefix+":")
	if err != nil {
		return nil, err
	}
	n, per := g.limit()
	rl, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{
		MaxRate:  throttled.PerDuration(int(n), per),
		MaxBurst: int(n) - 1, // the quota admits MaxBurst+1 at once
	})
	if err != nil {
		return nil, err
	}
	return &instance{do: func(w *worker, k int) (bool, error) {
		limited, _, err := rl.RateLimitCtx(w.ctx, e.keys[k], 1)
		return err == nil && !limited, err
	}}, nil
}

func sethvargoCase(e *env, g group, _ string) (*instance, error) {
	n, per := g.limit()
	st, err := memorystore.New(&memorystore.Config{Tokens: uint64(n), Interval: per})
	if err != nil {
		return nil, err
	}
	return &instance{
		do: func(w *worker, k int) (bool, error) {
			_, _, _, ok, err := st.Take(w.ctx, e.keys[k])
			return ok, err
		},
		close: func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = st.Close(ctx)
		},
	}, nil
}

// sethvargoMiddlewareCase is go-limiter's httplimit middleware on its
// memory store, keyed by the peer address.
func sethvargoMiddlewareCase(e *env, g group, _ string) (*instance, error) {
	n, per := g.limit()
	st, err := memorystore.New(&memorystore.Config{Tokens: uint64(n), Interval: per})
	if err != nil {
		return nil, err
	}
	mw, err := httplimit.NewMiddleware(st, peers.RemoteHost)
	if err != nil {
		return nil, err
	}
	return &instance{
		do: serve(mw.Handle(okHandler), e.reqs),
		close: func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = st.Close(ctx)
		},
	}, nil
}

// ululeMiddlewareCase is ulule/limiter's net/http middleware on its
// memory store (it keys by the peer address by default).
func ululeMiddlewareCase(e *env, g group, _ string) (*instance, error) {
	n, per := g.limit()
	l := ulule.New(ululememory.NewStore(), ulule.Rate{Period: per, Limit: n})
	return &instance{do: serve(ululestdlib.NewMiddleware(l).Handler(okHandler), e.reqs)}, nil
}

func httprateCase(e *env, g group, _ string) (*instance, error) {
	n, per := g.limit()
	mw := httprate.LimitBy(int(n), per, func(r *http.Request) (string, error) {
		host, err := peers.RemoteHost(r)
		return httprate.CanonicalizeIP(host), err
	})
	return &instance{do: serve(mw(okHandler), e.reqs)}, nil
}

// xrateLimit returns the x/time/rate form of the group's limit.
func xrateLimit(g group) (rate.Limit, int) {
	n, per := g.limit()
	return rate.Limit(float64(n) / per.Seconds()), int(n)
}

func xrateMiddlewareCase(e *env, g group, _ string) (*instance, error) {
	lim, burst := xrateLimit(g)
	h := peers.NewXRate(lim, burst, okHandler)
	return &instance{do: serve(h, e.reqs)}, nil
}

func xrateAllowCase(_ *env, g group, _ string) (*instance, error) {
	lim, burst := xrateLimit(g)
	l := rate.NewLimiter(lim, burst)
	return &instance{do: func(*worker, int) (bool, error) { return l.Allow(), nil }}, nil
}

// xrateKeysCase is x/time/rate's Allow on one rate.Limiter per identity
// in a map under a mutex, as a user writes it: the in-process baseline of
// the memory store's Take over many keys.
func xrateKeysCase(e *env, g group, _ string) (*instance, error) {
	lim, burst := xrateLimit(g)
	x := peers.NewXRateKeys(lim, burst)
	return &instance{do: func(_ *worker, k int) (bool, error) { return x.Allow(e.keys[k]), nil }}, nil
}

// prefixed returns each key with p in front.
func prefixed(p string, keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = p + k
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return groupDigits(int64(n)) + " " + many
}

// rkInFlightCase is an in-flight cap on the Redis store (store.SlotStore):
// each decision acquires a slot of the key's cap and, when admitted,
// releases it, two script calls, as the middleware makes around a
// handler. The cap is the group's rate (10 for the denial-heavy group,
// whose callers then contend for ten slots; open otherwise).
func rkInFlightCase(e *env, g group, prefix string) (*instance, error) {
	rs, err := redisstore.New(e.rdb, e.rkOptions(prefix, true, true))
	if err != nil {
		return nil, err
	}
	ss, ok := rs.(store.SlotStore)
	if !ok {
		return nil, errors.New("the Redis store keeps no in-flight caps")
	}
	n, _ := g.limit()
	n = min(n, store.MaxSlots)
	var seq atomic.Uint64
	return &instance{
		do: func(w *worker, k int) (bool, error) {
			slot := store.Slot{Key: e.keys[k], ID: strconv.FormatUint(seq.Add(1), 36)}
			ok, _, err := ss.Acquire(w.ctx, slot, n, 30*time.Second)
			if err != nil || !ok {
				return false, err
			}
			return true, ss.Release(w.ctx, slot)
		},
		close: func() { closeIfCloser(rs) },
	}, nil
}

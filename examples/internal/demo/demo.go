package demo

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"errors"
	"fmt"
	"github.com/ratekeeper/ratekeeper/middleware/limiter"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/metrics"
	"github.com/ratekeeper/ratekeeper/middleware"
	"github.com/ratekeeper/ratekeeper/middleware/admin"
	"github.com/ratekeeper/ratekeeper/middleware/policy"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/memstore"
	"github.com/ratekeeper/ratekeeper/store/redisstore"
)

// DemoSecret is the HS256 secret used when JWT_SECRET is unset. It is
// public: set JWT_SECRET to anything else outside a demo.
const DemoSecret = "ratekeeper-demo-secret-change-me"

// Env holds the example's settings, read from the environment.
type Env struct {
	// Addr is the listen address: ADDR, default ":8080".
	Addr string
	// RedisURL selects the Redis store (REDIS_URL, e.g.
	// "redis://127.0.0.1:6379/0"); empty means the in-memory store.
	RedisURL string
	// JWTSecret verifies HS256 bearer tokens: JWT_SECRET, default
	// [DemoSecret]. At least 32 bytes, as HS256 needs.
	JWTSecret string
	// LogLevel is LOG_LEVEL: "debug" logs every decision (keys hashed);
	// default "info".
	LogLevel slog.Level
	// PolicyFile is POLICY_FILE: a policy file to run instead of the
	// embedded policies.yaml, reloaded on SIGHUP.
	PolicyFile string
	// PolicyWatch is POLICY_WATCH (a duration such as "2s"): when set
	// with POLICY_FILE, the file is also polled and reloaded when it
	// changes.
	PolicyWatch time.Duration
	// AdminToken is ADMIN_TOKEN: when set (at least 16 bytes), the admin
	// API is served under /admin/ to requests with "Authorization: Bearer
	// <token>"; unset, there is no admin API.
	AdminToken string
	// TrustedProxies is TRUSTED_PROXIES: comma-separated CIDR prefixes or
	// addresses of the reverse proxies (nginx, a load balancer) whose
	// X-Forwarded-For the service believes. Unset, clients are keyed by
	// the peer address alone, so behind a proxy they all share the
	// proxy's limit.
	TrustedProxies []string
}

// minAdminToken is the shortest ADMIN_TOKEN accepted.
const minAdminToken = 16

// ReadEnv returns the settings from the process environment. It fails
// for a POLICY_WATCH that is not a duration and an ADMIN_TOKEN shorter
// than 16 bytes.
func ReadEnv() (Env, error) {
	e := Env{Addr: os.Getenv("ADDR"), RedisURL: os.Getenv("REDIS_URL"), JWTSecret: os.Getenv("JWT_SECRET"), LogLevel: slog.LevelInfo, PolicyFile: os.Getenv("POLICY_FILE"), AdminToken: os.Getenv("ADMIN_TOKEN")}
	if e.AdminToken != "" && len(e.AdminToken) < minAdminToken {
		return e, fmt.Errorf("ADMIN_TOKEN: want at least %d bytes, got %d", minAdminToken, len(e.AdminToken))
	}
	if w := os.Getenv("POLICY_WATCH"); w != "" {
		d, err := time.ParseDuration(w)
		if err != nil || d <= 0 {
			return e, fmt.Errorf("POLICY_WATCH: want a positive duration such as 2s, got %q", w)
		}
		e.PolicyWatch = d
	}
	if tp := os.Getenv("TRUSTED_PROXIES"); tp != "" {
		for _, p := range strings.Split(tp, ",") {
			if p = strings.TrimSpace(p); p != "" {
				e.TrustedProxies = append(e.TrustedProxies, p)
			}
		}
		if _, err := clientIP(e.TrustedProxies); err != nil {
			return e, fmt.Errorf("TRUSTED_PROXIES: %w", err)
		}
	}
	if strings.EqualFold(os.Getenv("LOG_LEVEL"), "debug") {
		e.LogLevel = slog.LevelDebug
	}
	if e.Addr == "" {
		e.Addr = ":8080"
	}
	if e.JWTSecret == "" {
		e.JWTSecret = DemoSecret
	}
	return e, nil
}

// Store is the example's store: the Redis store and its client when
// REDIS_URL is set, else the in-memory store (Redis nil).
type Store struct {
	store.Store
	Redis redis.UniversalClient
	// Close releases the store.
	Close func()
}

// clientIP returns the key function of the client address: the peer
// address, or with trusted proxies the address they forward.
func clientIP(trusted []string) (keyfunc.KeyFunc, error) {
	if len(trusted) == 0 {
		return keyfunc.RemoteIP, nil
	}
	c, err := keyfunc.NewClientIP(keyfunc.IPOptions{TrustedProxies: trusted})
	if err != nil {
		return nil, err
	}
	return c.Key, nil
}

// OpenStore returns the Redis store when url is set, else the in-memory
// store. A Redis that does not answer at start is not an error: the
// service starts, every policy applies its failure mode while Redis is
// away, and a watcher logs when it answers (until ctx ends). Each
// decision reaches Redis by itself once it is back. With Redis, go-redis's
// own log lines (a connection it failed to dial, as many as its pool has
// room for while Redis is away) go to logger too, at most one every
// redisLogEvery (redis.SetLogger, which sets go-redis's logger for the
// whole process).
func OpenStore(ctx context.Context, url string, logger *slog.Logger) (*Store, error) {
	if url == "" {
		m, err := memstore.New(memstore.Options{})
		if err != nil {
			return nil, err
		}
		return &Store{Store: m, Close: func() {}}, nil
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	redis.SetLogger(&redisLog{logger: logger, every: redisLogEvery, now: time.Now})
	// With deadlines honoured, the store sends a lone call from the
	// caller's goroutine (see package redisstore, "Time budget and
	// batching").
	opt.ContextTimeoutEnabled = true
	client := redis.NewClient(opt)
	rs, err := redisstore.New(client, redisstore.Options{Logger: logger})
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	wctx, stop := context.WithCancel(ctx)
	if err := ping(wctx, client); err != nil {
		logger.Warn("redis does not answer; serving under each policy's failure mode until it does",
			slog.String("addr", opt.Addr), slog.String("error", err.Error()))
		go awaitRedis(wctx, client, opt.Addr, logger)
	}
	return &Store{Store: rs, Redis: client, Close: func() { stop(); _ = client.Close() }}, nil
}

// redisLogEvery is how often go-redis's own log lines reach the service's
// log at most.
const redisLogEvery = 10 * time.Second

// redisLog passes go-redis's log lines to a slog.Logger as warnings, at
// most one every every, each with how many were held back since the line
// written before it (not_logged), however long ago: while Redis is away,
// go-redis writes a line for each connection it fails to dial, several a
// second under traffic, until as many have failed as its pool holds.
type redisLog struct {
	logger *slog.Logger
	every  time.Duration
	now    func() time.Time

	mu   sync.Mutex
	last time.Time // when the last line was written; zero: never
	held int       // lines held back since
}

// Printf implements go-redis's Logging.
func (l *redisLog) Printf(ctx context.Context, format string, v ...any) {
	now := l.now()
	l.mu.Lock()
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.held++
		l.mu.Unlock()
		return
	}
	held := l.held
	l.last, l.held = now, 0
	l.mu.Unlock()
	l.logger.LogAttrs(ctx, slog.LevelWarn, "redis client",
		slog.String("message", strings.TrimSpace(fmt.Sprintf(format, v...))),
		slog.Int("not_logged", held))
}

// ping asks Redis for PONG within three seconds.
func ping(ctx context.Context, c redis.UniversalClient) error {
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return c.Ping(pctx).Err()
}

// redisRetry is how often awaitRedis asks a Redis that did not answer.
const redisRetry = time.Second

// awaitRedis pings Redis every redisRetry until it answers, then logs
// that it does; it gives up silently when ctx ends.
func awaitRedis(ctx context.Context, c redis.UniversalClient, addr string, logger *slog.Logger) {
	t := time.NewTicker(redisRetry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ping(ctx, c) == nil {
			logger.Info("redis answers; decisions use it again", slog.String("addr", addr))
			return
		}
	}
}

// DefaultPolicies is policies.yaml, the policy file the examples run
// unless POLICY_FILE names another.
//
//go:embed policies.yaml
var DefaultPolicies []byte

// Policies are the example's policies and metrics.
type Policies struct {
	// Set runs the policies of the policy file (see policies.yaml):
	// "api" for /api/ping, "search" for /api/search (5 units of the api
	// quota) and "login" for POST /login.
	Set *policy.Set
	// Metrics serves /metrics.
	Metrics http.Handler
	// Admin is the admin API (package middleware/admin) for /admin/,
	// authorized by the bearer token env.AdminToken; nil without one.
	Admin http.Handler
	// Auth is the classifier the policy file names "auth" (the api
	// policy's), for servers of other protocols that decide under the same
	// policies: the gRPC example classifies its calls with it.
	Auth middleware.AuthOptions
}

// NewPolicies builds the policies of env.PolicyFile, or of the embedded
// [DefaultPolicies] when it is empty, on st, registering metrics on a new
// registry, and the admin API when env.AdminToken is set. The file names
// the key function "ip" (the client address: the peer, or what trusted
// proxies forward) and the classifier "auth" (a verified HS256 JWT's
// subject, else the client address).
func NewPolicies(st *Store, env Env, logger *slog.Logger) (*Policies, error) {
	reg := prometheus.NewRegistry()
	obs, err := metrics.New(reg, metrics.Options{Store: st.Store})
	if err != nil {
		return nil, err
	}
	sub, err := keyfunc.JWTSubject(keyfunc.JWTOptions{Algorithms: []string{"HS256"}, Key: []byte(env.JWTSecret)})
	if err != nil {
		return nil, err
	}
	// The clients refused most over the last 15 minutes, for the admin
	// API's top endpoint: at most 100 per policy and minute.
	top := &admin.Top{Clients: 100, Minutes: 15}
	ip, err := clientIP(env.TrustedProxies)
	if err != nil {
		return nil, fmt.Errorf("TRUSTED_PROXIES: %w", err)
	}
	auth := middleware.AuthOptions{Subject: sub, Anonymous: ip}
	opts := policy.Options{
		Keys:        map[string]keyfunc.KeyFunc{"ip": ip},
		Classifiers: map[string]middleware.Classifier{"auth": auth},
		Logger:      logger,
		Middleware: middleware.Options{
			Observer:    obs.Observe,
			RefusalHook: func(_ context.Context, d limiter.Decision, identity string) { top.Record(d, identity) },
		},
	}
	var set *policy.Set
	if env.PolicyFile != "" {
		set, err = policy.Load(env.PolicyFile, st.Store, opts)
	} else {
		set, err = policy.New("policies.yaml (embedded)", DefaultPolicies, st.Store, opts)
	}
	if err != nil {
		return nil, err
	}
	if err := metrics.RegisterPolicySet(reg, set, metrics.Options{}); err != nil {
		return nil, err
	}
	p := &Policies{Set: set, Metrics: promhttpHandler(reg), Auth: auth}
	if env.AdminToken != "" {
		if len(env.AdminToken) < minAdminToken {
			return nil, fmt.Errorf("ADMIN_TOKEN: want at least %d bytes, got %d", minAdminToken, len(env.AdminToken))
		}
		ao := admin.Options{Authorize: bearer(env.AdminToken), Top: top, Logger: logger}
		api, err := admin.New(set, st.Store, ao)
		if err != nil {
			return nil, err
		}
		p.Admin = http.StripPrefix("/admin", api)
	}
	return p, nil
}

// bearer authorizes requests carrying "Authorization: Bearer <token>",
// compared in constant time, as the operator "admin-token".
func bearer(token string) func(*http.Request) (string, error) {
	want := sha256.Sum256([]byte(token))
	return func(r *http.Request) (string, error) {
		scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return "", admin.ErrUnauthenticated
		}
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			return "", admin.ErrUnauthenticated
		}
		return "admin-token", nil
	}
}

// Token signs an HS256 token for subject, valid for ttl.
func Token(secret, subject string, ttl time.Duration) (string, error) {
	if subject == "" {
		return "", errors.New("empty subject")
	}
	now := time.Now()
	t := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Subject:   subject,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	})
	return t.SignedString([]byte(secret))
}

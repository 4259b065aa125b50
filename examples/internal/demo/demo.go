package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/headers"
	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/metrics"
	"github.com/ratekeeper/ratekeeper/middleware"
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
}

// ReadEnv returns the settings from the process environment.
func ReadEnv() Env {
	e := Env{Addr: os.Getenv("ADDR"), RedisURL: os.Getenv("REDIS_URL"), JWTSecret: os.Getenv("JWT_SECRET"), LogLevel: slog.LevelInfo}
	if strings.EqualFold(os.Getenv("LOG_LEVEL"), "debug") {
		e.LogLevel = slog.LevelDebug
	}
	if e.Addr == "" {
		e.Addr = ":8080"
	}
	if e.JWTSecret == "" {
		e.JWTSecret = DemoSecret
	}
	return e
}

// OpenStore returns the Redis store when url is set (checking that Redis
// answers), else the in-memory store. close releases it.
func OpenStore(ctx context.Context, url string) (st store.Store, close func(), err error) {
	if url == "" {
		m, err := memstore.New(memstore.Options{})
		if err != nil {
			return nil, nil, err
		}
		return m, func() {}, nil
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	client := redis.NewClient(opt)
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := client.Ping(pctx).Err(); err != nil {
		_ = client.Close()
		return nil, nil, fmt.Errorf("redis at %s: %w", opt.Addr, err)
	}
	rs, err := redisstore.New(client, redisstore.Options{})
	if err != nil {
		_ = client.Close()
		return nil, nil, err
	}
	return rs, func() { _ = client.Close() }, nil
}

// Policies are the example's limiters.
type Policies struct {
	// API limits /api/ping: anonymous clients 10 per minute per IP (burst
	// 10), authenticated clients 100 per minute per JWT subject. It sends
	// the X-RateLimit-* and the IETF RateLimit fields.
	API *middleware.Limiter
	// Search is API at cost 5: /api/search takes 5 units of the same quota.
	Search *middleware.Limiter
	// Login limits POST /login per IP: 5 attempts per minute (the 6th
	// blocks for 15 minutes) and 20 per day (the 21st blocks for 24 hours).
	// Every attempt counts, no X-RateLimit-* state is sent (a refusal still
	// carries Retry-After), and it fails closed.
	Login *middleware.Limiter
	// Metrics serves /metrics.
	Metrics http.Handler
}

// NewPolicies builds the policies on st, registering metrics on a new
// registry.
func NewPolicies(st store.Store, env Env, logger *slog.Logger) (*Policies, error) {
	reg := prometheus.NewRegistry()
	obs, err := metrics.New(reg, metrics.Options{})
	if err != nil {
		return nil, err
	}
	sub, err := keyfunc.JWTSubject(keyfunc.JWTOptions{Algorithms: []string{"HS256"}, Key: []byte(env.JWTSecret)})
	if err != nil {
		return nil, err
	}
	classify := middleware.AuthOptions{Subject: sub, Anonymous: keyfunc.RemoteIP}
	common := []middleware.Option{middleware.WithObserver(obs.Observe), middleware.WithLogger(logger)}
	api, err := middleware.NewTiered(st, classify, []middleware.Tier{
		{Name: middleware.TierAnonymous, Limits: []store.Limit{{Rate: 10, Period: time.Minute, Burst: 10}}},
		{Name: middleware.TierAuthenticated, Limits: []store.Limit{{Rate: 100, Period: time.Minute, Burst: 100}}},
	}, append(common,
		middleware.WithName("api"),
		// Both header sets: X-RateLimit-* and the IETF RateLimit fields.
		middleware.WithHeaders(headers.Writer{IETF: true}),
	)...)
	if err != nil {
		return nil, err
	}
	search, err := api.WithCost(5)
	if err != nil {
		return nil, err
	}
	login, err := middleware.New(st, keyfunc.RemoteIP, store.Limit{
		Name: "minute", Algorithm: store.SlidingWindowLog, Rate: 5, Period: time.Minute, Block: 15 * time.Minute,
	}, append(common,
		middleware.WithName("login"),
		middleware.WithLimits(store.Limit{Name: "day", Algorithm: store.SlidingWindowLog, Rate: 20, Period: 24 * time.Hour, Block: 24 * time.Hour}),
		middleware.WithCountDenied(),
		middleware.WithHeaders(headers.Writer{Omit: true}),
		middleware.WithFailureMode(middleware.FailClosed),
	)...)
	if err != nil {
		return nil, err
	}
	return &Policies{API: api, Search: search, Login: login, Metrics: promhttpHandler(reg)}, nil
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

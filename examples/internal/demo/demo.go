package demo

import (
	"context"
	_ "embed"
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

	"github.com/ratekeeper/ratekeeper/keyfunc"
	"github.com/ratekeeper/ratekeeper/metrics"
	"github.com/ratekeeper/ratekeeper/middleware"
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
}

// ReadEnv returns the settings from the process environment. It fails
// only for a POLICY_WATCH that is not a duration.
func ReadEnv() (Env, error) {
	e := Env{Addr: os.Getenv("ADDR"), RedisURL: os.Getenv("REDIS_URL"), JWTSecret: os.Getenv("JWT_SECRET"), LogLevel: slog.LevelInfo, PolicyFile: os.Getenv("POLICY_FILE")}
	if w := os.Getenv("POLICY_WATCH"); w != "" {
		d, err := time.ParseDuration(w)
		if err != nil || d <= 0 {
			return e, fmt.Errorf("POLICY_WATCH: want a positive duration such as 2s, got %q", w)
		}
		e.PolicyWatch = d
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
}

// NewPolicies builds the policies of env.PolicyFile, or of the embedded
// [DefaultPolicies] when it is empty, on st, registering metrics on a new
// registry. The file names the key function "ip" (the peer address) and
// the classifier "auth" (a verified HS256 JWT's subject, else the peer
// address).
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
	opts := policy.Options{
		Keys:        map[string]keyfunc.KeyFunc{"ip": keyfunc.RemoteIP},
		Classifiers: map[string]middleware.Classifier{"auth": middleware.AuthOptions{Subject: sub, Anonymous: keyfunc.RemoteIP}},
		Logger:      logger,
		Middleware:  []middleware.Option{middleware.WithObserver(obs.Observe)},
	}
	var set *policy.Set
	if env.PolicyFile != "" {
		set, err = policy.Load(env.PolicyFile, st, opts)
	} else {
		set, err = policy.New("policies.yaml (embedded)", DefaultPolicies, st, opts)
	}
	if err != nil {
		return nil, err
	}
	if err := metrics.RegisterPolicySet(reg, set, metrics.Options{}); err != nil {
		return nil, err
	}
	return &Policies{Set: set, Metrics: promhttpHandler(reg)}, nil
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

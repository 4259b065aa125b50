package demo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func promhttpHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// Healthz answers 200 "ok".
func Healthz(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") }

// Ping answers 200 "pong".
func Ping(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "pong\n") }

// Search answers 200 with the query echoed as JSON-safe text.
func Search(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = fmt.Fprintf(w, "results for %q\n", r.URL.Query().Get("q"))
}

// ExportWork is how long Export works on a report.
const ExportWork = 300 * time.Millisecond

// Export answers 200 after ExportWork (a slow report), or returns early
// when the client goes away.
func Export(w http.ResponseWriter, r *http.Request) {
	select {
	case <-time.After(ExportWork):
		_, _ = io.WriteString(w, "report ready\n")
	case <-r.Context().Done():
	}
}

// Login accepts any credentials in this demo; the point is the limiter in
// front of it.
func Login(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "welcome\n") }

// Also is a server an example runs next to its HTTP server, on the same
// policies: it serves until ctx is done, then returns nil, or returns the
// error that stopped it.
type Also func(ctx context.Context, p *Policies, logger *slog.Logger) error

// Main runs an example service: "token <subject>" prints a demo JWT;
// otherwise it serves routes(policies) on ADDR, and runs each of also,
// until SIGINT or SIGTERM, reloading POLICY_FILE on SIGHUP (and every
// POLICY_WATCH when set; without POLICY_FILE a SIGHUP is logged and
// changes nothing).
func Main(name string, routes func(*Policies) http.Handler, also ...Also) {
	env, err := ReadEnv()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: env.LogLevel}))
	if err != nil {
		logger.Error("exiting", slog.String("error", err.Error()))
		os.Exit(2)
	}
	if len(os.Args) == 3 && os.Args[1] == "token" {
		tok, err := Token(env.JWTSecret, os.Args[2], time.Hour)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println(tok)
		return
	}
	if err := serve(name, env, logger, routes, also); err != nil {
		logger.Error("exiting", slog.String("error", err.Error()))
		os.Exit(1)
	}
}

func serve(name string, env Env, logger *slog.Logger, routes func(*Policies) http.Handler, also []Also) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := OpenStore(ctx, env.RedisURL, logger)
	if err != nil {
		return err
	}
	defer st.Close()
	p, err := NewPolicies(st, env, logger)
	if err != nil {
		return err
	}
	go onHangup(ctx, hangups(), p, env.PolicyFile != "", logger)
	if env.PolicyFile != "" && env.PolicyWatch > 0 {
		go func() { _ = p.Set.Watch(ctx, env.PolicyWatch) }()
	}
	srv := &http.Server{Addr: env.Addr, Handler: routes(p), ReadHeaderTimeout: 5 * time.Second}
	storeName := "memory"
	if env.RedisURL != "" {
		storeName = "redis"
	}
	// The pid is the server's own: under `go run` it is not the pid of
	// the go command, so SIGHUP (reload) goes to this one.
	logger.Info("listening", slog.String("example", name), slog.String("addr", env.Addr), slog.String("store", storeName),
		slog.String("policies", p.Set.Status().Source), slog.Bool("admin", p.Admin != nil),
		slog.Int("pid", os.Getpid()), slog.Any("trusted_proxies", env.TrustedProxies))
	warnDemoSecret(env, logger)
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	alsoc := make(chan error, len(also))
	for _, a := range also {
		go func() { alsoc <- a(ctx, p, logger) }()
	}
	pending := len(also)
	select {
	case err := <-errc:
		return err
	case err := <-alsoc:
		if err != nil || ctx.Err() == nil {
			return cmp.Or(err, errors.New("a server stopped"))
		}
		pending--
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	// The other servers stop with ctx: wait for them, within the same
	// bound.
	for range pending {
		select {
		case err := <-alsoc:
			if err != nil {
				return err
			}
		case <-sctx.Done():
			return sctx.Err()
		}
	}
	return nil
}

// warnDemoSecret logs a warning when the service verifies bearer tokens
// with DemoSecret, which anyone can read and sign tokens with.
func warnDemoSecret(env Env, logger *slog.Logger) {
	if env.JWTSecret == DemoSecret {
		logger.Warn("JWT_SECRET is unset: bearer tokens are verified with the public demo secret, so anyone can sign one and take the authenticated tier's limit; set JWT_SECRET outside a demo")
	}
}

// hangups returns a channel that receives SIGHUP, which then no longer
// ends the process.
func hangups() <-chan os.Signal {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	return hup
}

// onHangup reloads the policy file at every signal from hup until ctx is
// done; without a file (reload false) it logs that there is none. A
// reload that fails is logged by the Set, which keeps the running
// policies.
func onHangup(ctx context.Context, hup <-chan os.Signal, p *Policies, reload bool, logger *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if !reload {
				logger.Warn("SIGHUP: no POLICY_FILE to reload; the embedded policies stay")
				continue
			}
			logger.Info("SIGHUP: reloading the policy file")
			_ = p.Set.Reload()
		}
	}
}

// Routes are the service's routes on a net/http ServeMux, each behind the
// policy of the file that names it (examples/stdlib and examples/grpc).
func Routes(p *Policies) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", Healthz)
	mux.Handle("GET /metrics", p.Metrics)
	mux.Handle("GET /api/ping", p.Set.Handler("api")(http.HandlerFunc(Ping)))
	mux.Handle("GET /api/search", p.Set.Handler("search")(http.HandlerFunc(Search)))
	mux.Handle("GET /api/export", p.Set.Handler("export")(http.HandlerFunc(Export)))
	mux.Handle("POST /login", p.Set.Handler("login")(http.HandlerFunc(Login)))
	if p.Admin != nil {
		mux.Handle("/admin/", p.Admin)
	}
	return mux
}

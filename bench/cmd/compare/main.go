// Command compare measures ratekeeper beside other Go rate limiters on one
// machine and one redis-server, and prints markdown tables: decisions per
// second, latency percentiles, allocations and CPU (client and Redis) per
// decision for every case, and the Redis memory each identity costs.
//
// Every case runs for a fixed time after a warm-up, the whole matrix is
// repeated for several rounds with the case order rotated between rounds,
// and the tables show medians across rounds. Without -redis it starts its
// own redis-server on a free loopback port (no persistence) and stops it
// at the end; only that server is ever flushed.
//
// Usage:
//
//	go run ./cmd/compare [-redis ADDR] [-duration 1s] [-rounds 3]
//	    [-callers 1,16,64,256] [-keys 1,10000] [-cases REGEXP] [-markdown FILE]
//	    [-targets]
//
// The report opens with a Targets table: each speed target of the project
// (the middleware on the memory store against the fastest peer
// middleware, a lone caller and a crowd on Redis against redis_rate and
// PING, Redis CPU per decision) beside what this run measured, for the
// targets whose cases ran. -targets selects the cases and caller counts
// that answer all of them.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// config is the command line.
type config struct {
	redisAddr   string
	redisServer string
	duration    time.Duration
	warmup      time.Duration
	rounds      int
	callers     []int
	keys        []int
	deny        bool
	cases       *regexp.Regexp
	markdown    string
	memory      bool
	identities  int
	timeout     time.Duration
	rate        float64       // open-loop arrivals per second; 0 runs the matrix
	ctxDeadline bool          // the open loop's client has ContextTimeoutEnabled
	loneSpin    time.Duration // every ratekeeper Redis store's Options.LoneSpin; 0: the default
	capacity    bool
	cpuProfile  string // write the client's CPU profile here; empty: none
}

// poolSize is the go-redis pool of the one shared client: room for 256
// callers and the store's own goroutines.
const poolSize = 300

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.StringVar(&c.redisAddr, "redis", "", "address of a Redis to use (never flushed); empty starts a private redis-server")
	fs.StringVar(&c.redisServer, "redis-server", "", "redis-server binary to start when -redis is empty (default: PATH, then /usr/bin/redis-server)")
	fs.DurationVar(&c.duration, "duration", time.Second, "measured time per case and round")
	fs.DurationVar(&c.warmup, "warmup", 200*time.Millisecond, "unmeasured warm-up before each measurement")
	fs.IntVar(&c.rounds, "rounds", 3, "times the whole matrix runs; tables show medians")
	callers := fs.String("callers", "1,16,64,256", "comma-separated numbers of concurrent callers")
	keys := fs.String("keys", "1,10000", "comma-separated key spreads (distinct client identities)")
	fs.BoolVar(&c.deny, "deny", true, "also run the denial-heavy groups: one key far over a limit of 10/hour")
	cases := fs.String("cases", "", "regular expression selecting cases by name ("+refPing+" and "+refRedisRate+" always run, for the ratios)")
	fs.StringVar(&c.markdown, "markdown", "", "also write the tables to this file")
	fs.BoolVar(&c.memory, "memory", true, "measure Redis memory per identity")
	fs.IntVar(&c.identities, "identities", 10000, "identities of the memory measurement")
	fs.Float64Var(&c.rate, "rate", 0, "open loop instead of the matrix: this many requests per second through the middleware on Redis, for -warmup then -duration, reporting added latency p50/p99/p99.9/max")
	fs.BoolVar(&c.ctxDeadline, "context-deadlines", false, "with -rate: the client cuts socket I/O at context deadlines (go-redis ContextTimeoutEnabled), so that a lone decision is sent from its request's goroutine")
	fs.DurationVar(&c.loneSpin, "lone-spin", 0, "the LoneSpin of every ratekeeper Redis store (the matrix's cases and -rate's): how long a lone call polls for its reply before it sleeps (0: the store's default; negative: never polls)")
	fs.DurationVar(&c.timeout, "timeout", 0, "abort after this long (0: twice the planned time plus two minutes)")
	targets := fs.Bool("targets", false, "run what the speed targets need (1, 64 and 256 callers and the cases of the Targets table) unless -callers or -cases say otherwise")
	fs.BoolVar(&c.capacity, "capacity", false, "print the capacity tables (Redis cost per decision per algorithm, plain and stacked; memory per identity); unless given, -cases selects every algorithm's plain and stacked case, -callers is 64, -keys 10000 and -deny false")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of this process (the benchmark client and the limiters it runs, not redis-server) over the whole run to this file, for go tool pprof; the report says that its figures include the profiler's cost")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	preset := func(name string, v *string, to string) {
		if !set[name] {
			*v = to
		}
	}
	switch {
	case *targets && c.capacity:
		return c, errors.New("-targets and -capacity are two different runs: give one")
	case *targets:
		preset("cases", cases, targetsCases)
		preset("callers", callers, "1,64,256")
	case c.capacity:
		preset("cases", cases, capacityCases)
		preset("callers", callers, "64")
		preset("keys", keys, "10000")
		if !set["deny"] {
			c.deny = false
		}
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if c.callers, err = parseInts("callers", *callers); err != nil {
		return c, err
	}
	if c.keys, err = parseInts("keys", *keys); err != nil {
		return c, err
	}
	if c.cases, err = regexp.Compile(*cases); err != nil {
		return c, fmt.Errorf("-cases: %w", err)
	}
	switch {
	case c.duration <= 0:
		return c, errors.New("-duration must be positive")
	case c.warmup < 0:
		return c, errors.New("-warmup must not be negative")
	case c.rate < 0 || c.rate > 1e6:
		return c, errors.New("-rate must be between 0 and 1000000")
	case c.rate > 0 && c.warmup+c.duration > time.Minute:
		return c, errors.New("-rate: -warmup plus -duration must not exceed a minute")
	case c.rounds < 1:
		return c, errors.New("-rounds must be at least 1")
	case c.identities < 1 || c.identities > 1<<20:
		return c, errors.New("-identities must be between 1 and 1048576")
	case slices.Max(c.keys) > 1<<20:
		return c, errors.New("-keys: at most 1048576")
	case slices.Max(c.callers) > 4096:
		return c, errors.New("-callers: at most 4096")
	}
	return c, nil
}

func parseInts(name, s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-%s: %q is not a positive integer", name, f)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(2)
	}
	stopProfile, err := startProfile(cfg.cpuProfile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, cfg, os.Stdout, os.Stderr)
	stop()
	if perr := stopProfile(); perr != nil && err == nil {
		err = perr
	}
	if n := lingering(); n > 0 {
		fmt.Fprintf(os.Stderr, "compare: %d goroutines still running at exit\n", n)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

// startProfile starts the CPU profile -cpuprofile asks for, written to
// path, and returns what stops it and closes the file; with path empty
// it starts nothing.
func startProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		return nil
	}, nil
}

// lingering returns how many goroutines besides main and the signal
// package's receiver are still running after a moment's grace: everything
// a run starts should have ended.
func lingering() int {
	deadline := time.Now().Add(2 * time.Second)
	for {
		n := 0
		buf := make([]byte, 1<<20)
		for g := range strings.SplitSeq(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if !strings.Contains(g, "main.lingering(") && !strings.Contains(g, "os/signal.signal_recv") {
				n++
			}
		}
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// buildPlan returns the groups in report order with their selected cases.
func buildPlan(cfg config) []groupPlan {
	var groups []group
	for _, c := range cfg.callers {
		for _, k := range cfg.keys {
			groups = append(groups, group{callers: c, keys: k})
		}
		if cfg.deny {
			groups = append(groups, group{callers: c, keys: 1, deny: true})
		}
	}
	var selected []*caseDef
	for _, c := range allCases() {
		if cfg.cases.MatchString(c.name) || c.name == refPing || c.name == refRedisRate {
			selected = append(selected, c)
		}
	}
	plan := make([]groupPlan, 0, len(groups))
	for _, g := range groups {
		gp := groupPlan{g: g}
		for _, c := range selected {
			if c.applies(g) {
				gp.cases = append(gp.cases, c)
			}
		}
		gp.cells = make([][]*sample, len(gp.cases))
		for i := range gp.cells {
			gp.cells[i] = make([]*sample, cfg.rounds)
		}
		gp.fails = make([]string, len(gp.cases))
		plan = append(plan, gp)
	}
	return plan
}

func run(ctx context.Context, cfg config, stdout, stderr io.Writer) (err error) {
	began := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(stderr, "compare: "+format+"\n", args...)
	}

	var plan []groupPlan
	if cfg.rate == 0 {
		plan = buildPlan(cfg)
	} else {
		cfg.memory = false
	}
	runs := 0
	for _, gp := range plan {
		runs += len(gp.cases) * cfg.rounds
	}
	perRun := cfg.warmup + cfg.duration + 50*time.Millisecond
	planned := time.Duration(runs) * perRun
	if cfg.rate > 0 {
		planned = perRun
	}
	if cfg.memory {
		planned += 20 * time.Second
	}
	budget := cfg.timeout
	if budget == 0 {
		budget = 2*planned + 2*time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	if cfg.rate == 0 {
		logf("%d case runs of %s + %s warm-up: about %s (aborts after %s)", runs, cfg.duration, cfg.warmup, planned.Round(time.Second), budget.Round(time.Second))
	}

	addr, where := cfg.redisAddr, "at "+cfg.redisAddr+" (not started by this program, never flushed)"
	own := addr == ""
	if own {
		bin, err := findServer(cfg.redisServer)
		if err != nil {
			return err
		}
		srv, err := startServer(ctx, bin)
		if err != nil {
			return err
		}
		defer func() {
			srv.stop()
			logf("stopped redis-server (pid %d)", srv.cmd.Process.Pid)
		}()
		addr = srv.addr
		where = "started by this program on " + addr + " (no persistence)"
		logf("started %s on %s (pid %d)", bin, addr, srv.cmd.Process.Pid)
	}

	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: poolSize})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("PING %s: %w", addr, err)
	}
	version, err := infoField(ctx, rdb, "server", "redis_version")
	if err != nil {
		return err
	}
	var id [4]byte
	_, _ = rand.Read(id[:])
	identities := slices.Max(cfg.keys)
	if cfg.memory {
		identities = max(identities, cfg.identities)
	}
	e, err := newEnv(ctx, rdb, identities, hex.EncodeToString(id[:]))
	if err != nil {
		return err
	}
	e.loneSpin = cfg.loneSpin
	e.rdbDeadlines = redis.NewClient(&redis.Options{Addr: addr, PoolSize: poolSize, ContextTimeoutEnabled: true})
	defer e.rdbDeadlines.Close()
	e.ring = redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"only": addr}, PoolSize: poolSize})
	defer e.ring.Close()
	if !own {
		defer func() {
			cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer ccancel()
			if err := deleteRunKeys(cctx, e); err != nil {
				logf("removing this run's keys: %v", err)
			}
		}()
	}

	if cfg.rate > 0 {
		return runOpen(ctx, cfg, e, stdout, logf)
	}
	h := newHarness(slices.Max(cfg.callers))
	done := 0
	for r := range cfg.rounds {
		for gi := range plan {
			gp := &plan[gi]
			n := len(gp.cases)
			for j := range n {
				ci := (j + r) % n // rotate the order each round
				c := gp.cases[ci]
				done++
				s, err := runCase(ctx, e, h, c, gp.g, own, cfg.warmup, cfg.duration)
				if ctx.Err() != nil {
					return fmt.Errorf("stopped during %s (%s): %w", c.name, gp.g, context.Cause(ctx))
				}
				if err != nil {
					gp.fails[ci] = err.Error()
					logf("round %d/%d [%d/%d] %s | %s: %v", r+1, cfg.rounds, done, runs, gp.g, c.name, err)
					continue
				}
				gp.cells[ci][r] = &s
				if s.firstErr != nil && gp.fails[ci] == "" {
					gp.fails[ci] = fmt.Sprintf("%d of %d calls failed, first: %v", s.errs, s.calls, s.firstErr)
				}
				logf("round %d/%d [%d/%d] %s | %s: %s/s p99 %s%s", r+1, cfg.rounds, done, runs, gp.g, c.name,
					groupDigits(int64(s.rate())), fmtDur(s.p99), errNote(s))
			}
		}
	}

	var mem []memResult
	var memErr error
	if cfg.memory {
		for _, mc := range memCases() {
			m, err := measureMemory(ctx, e, mc, cfg.identities, own)
			if ctx.Err() != nil {
				return fmt.Errorf("stopped during the memory measurement: %w", context.Cause(ctx))
			}
			if err != nil {
				memErr = err
				break
			}
			logf("memory %s: %.0f bytes/identity", mc.name, float64(m.stateBytes+m.replayBytes)/float64(m.identities))
			mem = append(mem, m)
		}
	}

	f := facts{
		gomaxprocs:   runtime.GOMAXPROCS(0),
		numCPU:       runtime.NumCPU(),
		goVersion:    runtime.Version(),
		platform:     runtime.GOOS + "/" + runtime.GOARCH,
		cpu:          cpuModel(),
		redisVersion: version,
		redisWhere:   where,
		poolSize:     poolSize,
		loneSpin:     cfg.loneSpin,
		duration:     cfg.duration,
		warmup:       cfg.warmup,
		rounds:       cfg.rounds,
		modules:      modules(),
		checkout:     checkout(ctx),
		started:      began,
		took:         time.Since(began),
		capacity:     cfg.capacity,
		cpuProfile:   cfg.cpuProfile,
	}
	var out bytes.Buffer
	writeReport(&out, f, plan, mem, memErr)
	if _, err := stdout.Write(out.Bytes()); err != nil {
		return err
	}
	if cfg.markdown != "" {
		if err := os.WriteFile(cfg.markdown, out.Bytes(), 0o644); err != nil {
			return err
		}
		logf("wrote %s", cfg.markdown)
	}
	logf("done in %s", time.Since(began).Round(time.Second))
	return nil
}

// runCase measures one case in one group on a clean slate: a flushed
// server (when it is this program's), a collected heap and a fresh prefix.
func runCase(ctx context.Context, e *env, h *harness, c *caseDef, g group, flush bool, warm, dur time.Duration) (sample, error) {
	if flush && c.redis {
		if err := e.rdb.FlushAll(ctx).Err(); err != nil {
			return sample{}, fmt.Errorf("FLUSHALL: %w", err)
		}
	}
	runtime.GC()
	inst, err := c.make(e, g, e.prefix())
	if err != nil {
		return sample{}, fmt.Errorf("setup: %w", err)
	}
	if inst.close != nil {
		defer inst.close()
	}
	return h.measure(ctx, e, inst, g, c.redis, warm, dur)
}

func errNote(s sample) string {
	if s.errs == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d errors: %v)", s.errs, s.firstErr)
}

// modules lists the versions of the compared modules this binary was
// built with.
func modules() []string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return []string{"unknown"}
	}
	var out []string
	for _, d := range bi.Deps {
		switch {
		case strings.Contains(d.Path, "redis_rate"), strings.Contains(d.Path, "ulule/limiter"),
			strings.Contains(d.Path, "throttled"), strings.Contains(d.Path, "sethvargo/go-limiter"),
			strings.Contains(d.Path, "httprate"), d.Path == "golang.org/x/time",
			d.Path == "github.com/redis/go-redis/v9":
			out = append(out, d.Path+" "+d.Version)
		}
	}
	return out
}

// checkout describes the ratekeeper source the run was built from. A
// binary that go build stamped with its version control state
// (-buildvcs) names the commit it was built from. Otherwise the
// repository is asked at run time: its commit, marked when tracked files
// outside bench/ differ from it, and said to be read at run time, since a
// binary built earlier may hold other code (go run, as make bench-compare
// uses, builds and runs the same tree). The repository is found from this
// file's path when the build kept it, else taken to be the parent of the
// working directory.
func checkout(ctx context.Context) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		if s := stampedCheckout(bi.Settings); s != "" {
			return s
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	root := ".."
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		root = filepath.Join(filepath.Dir(file), "..", "..", "..")
	}
	rev, err := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "local checkout (commit unknown)"
	}
	s := "commit " + strings.TrimSpace(string(rev))
	diff := exec.CommandContext(ctx, "git", "-C", root, "diff", "--quiet", "HEAD", "--", ".", ":(exclude)bench")
	if diff.Run() != nil {
		s += " with uncommitted changes"
	}
	return s + " (the checkout at run time; the binary carries no build stamp)"
}

// stampedCheckout describes the commit of a binary's build settings, or
// returns "" when the build recorded none.
func stampedCheckout(settings []debug.BuildSetting) string {
	var rev, modified string
	for _, st := range settings {
		switch st.Key {
		case "vcs.revision":
			rev = st.Value
		case "vcs.modified":
			modified = st.Value
		}
	}
	if rev == "" {
		return ""
	}
	s := "commit " + rev[:min(len(rev), 7)]
	if modified == "true" {
		s += " with uncommitted changes"
	}
	return s + " (built from)"
}

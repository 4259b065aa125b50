package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store/redisstore"
)

// The open-loop mode (-rate): requests arrive on a fixed schedule, each in
// its own goroutine as net/http serves them, whatever the earlier ones
// wait for, so that a stall shows in every request that arrives during it
// instead of holding back the next arrivals (a closed loop's coordinated
// omission). They go through the middleware on the Redis store with the
// store's default options (a 50 ms decision budget) to an empty handler:
// the time ServeHTTP takes is the latency the middleware adds.

// openResult is one open-loop measurement.
type openResult struct {
	added    hist // ServeHTTP, from the request's goroutine
	schedule hist // from the scheduled arrival to the end
	n        uint64
	errs     uint64 // answers other than 2xx and 429 (a degraded decision)
	lagMax   time.Duration
	gcs      uint32
	gcMax    time.Duration
	sched    time.Duration // p99.9 of the runtime's goroutine scheduling latency
	schedMax time.Duration
	// The go-redis pools (main and pipeline) during the measurement:
	// connections opened, waits for a connection and their total time.
	dials, waits uint32
	waited       time.Duration
	goroutines   uint64 // started, besides the one per request the harness starts
}

// openState is what the requests of one measurement share.
type openState struct {
	mu      sync.Mutex
	res     openResult
	measure atomic.Bool
	recs    sync.Pool
}

// runOpen measures the middleware at cfg.rate requests per second for
// cfg.warmup (not counted) and then cfg.duration, and writes the result.
func runOpen(ctx context.Context, cfg config, e *env, w io.Writer, logf func(string, ...any)) error {
	g := group{callers: 1, keys: cfg.keys[len(cfg.keys)-1]}
	// A client with go-redis's defaults, as an application's would be.
	rdb := redis.NewClient(&redis.Options{Addr: e.rdb.Options().Addr, ContextTimeoutEnabled: cfg.ctxDeadline})
	defer rdb.Close()
	rs, err := redisstore.New(rdb, redisstore.Options{Prefix: e.prefix(), LoneSpin: e.loneSpin})
	if err != nil {
		return err
	}
	h, err := rkMiddleware(rs, g)
	if err != nil {
		return err
	}
	st := &openState{recs: sync.Pool{New: func() any { return &recorder{h: make(http.Header)} }}}
	interval := time.Duration(float64(time.Second) / cfg.rate)
	logf("open loop: %.0f requests/s over %d identities, %s warm-up, %s measured", cfg.rate, g.keys, cfg.warmup, cfg.duration)
	var wg sync.WaitGroup
	var before openProbe
	start := time.Now()
	measureAt, end := start.Add(cfg.warmup), start.Add(cfg.warmup+cfg.duration)
	for i := 0; ; i++ {
		due := start.Add(time.Duration(i) * interval)
		if !due.Before(end) || ctx.Err() != nil {
			break
		}
		if !st.measure.Load() && !due.Before(measureAt) {
			before = probe(rdb)
			st.measure.Store(true)
		}
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		if lag := time.Since(due); st.measure.Load() && lag > st.res.lagMax {
			st.res.lagMax = lag // only this goroutine writes it before wg.Wait
		}
		wg.Add(1)
		go st.serve(h, e.reqs[i%g.keys], due, &wg)
	}
	wg.Wait()
	before.since(probe(rdb), &st.res)
	st.res.goroutines -= min(st.res.goroutines, st.res.n)
	if err := ctx.Err(); err != nil {
		return err
	}
	writeOpen(w, cfg, g, &st.res)
	return nil
}

// serve runs one request that was due at due and records it.
func (st *openState) serve(h http.Handler, r *http.Request, due time.Time, wg *sync.WaitGroup) {
	defer wg.Done()
	rec := st.recs.Get().(*recorder)
	rec.reset()
	began := time.Now()
	h.ServeHTTP(rec, r)
	ended := time.Now()
	code := rec.code
	st.recs.Put(rec)
	if !st.measure.Load() {
		return
	}
	st.mu.Lock()
	st.res.added.record(ended.Sub(began))
	st.res.schedule.record(ended.Sub(due))
	st.res.n++
	if code != http.StatusTooManyRequests && (code < 200 || code > 299) {
		st.res.errs++
	}
	st.mu.Unlock()
}

// openProbe is the runtime's counters at one moment.
type openProbe struct {
	gc    debug.GCStats
	sched metrics.Float64Histogram
	pool  redis.PoolStats
	gs    uint64 // goroutines created
}

const (
	schedMetric   = "/sched/latencies:seconds"
	createdMetric = "/sched/goroutines-created:goroutines"
)

func probe(rdb *redis.Client) openProbe {
	var p openProbe
	p.pool = *rdb.PoolStats()
	if pp := p.pool.PipelineStats; pp != nil {
		p.pool.Misses += pp.Misses
		p.pool.WaitCount += pp.WaitCount
		p.pool.WaitDurationNs += pp.WaitDurationNs
	}
	debug.ReadGCStats(&p.gc)
	s := []metrics.Sample{{Name: schedMetric}, {Name: createdMetric}}
	metrics.Read(s)
	if s[1].Value.Kind() == metrics.KindUint64 {
		p.gs = s[1].Value.Uint64()
	}
	if s[0].Value.Kind() == metrics.KindFloat64Histogram {
		h := s[0].Value.Float64Histogram()
		p.sched = metrics.Float64Histogram{Counts: append([]uint64(nil), h.Counts...), Buckets: h.Buckets}
	}
	return p
}

// since sets res's runtime figures from p to now: the collections and
// their longest pause, and the scheduling latency of goroutines.
func (p openProbe) since(now openProbe, res *openResult) {
	res.dials = now.pool.Misses - p.pool.Misses
	res.waits = now.pool.WaitCount - p.pool.WaitCount
	res.waited = time.Duration(now.pool.WaitDurationNs - p.pool.WaitDurationNs)
	res.goroutines = now.gs - p.gs
	res.gcs = uint32(now.gc.NumGC - p.gc.NumGC)
	for i, pause := range now.gc.Pause {
		if i >= int(res.gcs) { // Pause is newest first
			break
		}
		res.gcMax = max(res.gcMax, pause)
	}
	if len(now.sched.Counts) != len(p.sched.Counts) {
		return
	}
	var total uint64
	delta := make([]uint64, len(now.sched.Counts))
	for i := range delta {
		delta[i] = now.sched.Counts[i] - p.sched.Counts[i]
		total += delta[i]
	}
	rank := uint64(math.Ceil(0.999 * float64(total)))
	var seen uint64
	for i, c := range delta {
		if c == 0 {
			continue
		}
		hi := now.sched.Buckets[i+1]
		if math.IsInf(hi, 1) {
			hi = now.sched.Buckets[i]
		}
		seen += c
		if seen >= rank && res.sched == 0 {
			res.sched = time.Duration(hi * float64(time.Second))
		}
		res.schedMax = time.Duration(hi * float64(time.Second))
	}
}

// writeOpen writes the open-loop result as a markdown table.
func writeOpen(w io.Writer, cfg config, g group, r *openResult) {
	fmt.Fprintf(w, "## Open loop: %.0f requests/s through the middleware on Redis\n\n", cfg.rate)
	fmt.Fprintf(w, "%s measured after %s, %d identities, ContextTimeoutEnabled %t, LoneSpin %s, GOMAXPROCS %d, %s. Latency is ServeHTTP of the middleware in front of an empty handler (the latency it adds); \"from schedule\" also counts how late the request's goroutine started.\n\n",
		cfg.duration, cfg.warmup, g.keys, cfg.ctxDeadline, loneSpinText(cfg.loneSpin), runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Fprintln(w, "| | p50 | p99 | p99.9 | max |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, row := range []struct {
		name string
		h    *hist
	}{{"added", &r.added}, {"from schedule", &r.schedule}} {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", row.name, fmtDur(row.h.quantile(0.5)), fmtDur(row.h.quantile(0.99)),
			fmtDur(row.h.quantile(0.999)), fmtDur(row.h.quantile(1)))
	}
	fmt.Fprintf(w, "\n%d requests, %d degraded (503); dispatcher at most %s late; %d GCs, longest pause %s; goroutine scheduling latency p99.9 %s, max %s; %d connections opened, %d waits for a pooled connection (%s in all); %.2f goroutines started per request by the middleware and the store.\n",
		r.n, r.errs, fmtDur(r.lagMax), r.gcs, fmtDur(r.gcMax), fmtDur(r.sched), fmtDur(r.schedMax), r.dials, r.waits, fmtDur(r.waited), float64(r.goroutines)/float64(max(r.n, 1)))
}

// loneSpinText describes a LoneSpin setting.
func loneSpinText(d time.Duration) string {
	switch {
	case d == 0:
		return "default"
	case d < 0:
		return "off"
	}
	return d.String()
}

package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

var discardLogger = slog.New(slog.DiscardHandler)

// recorder is a ResponseWriter reused by one worker for all its requests:
// it keeps the status and one header map and drops the body, so that the
// allocations counted are the middleware's, not the harness's.
type recorder struct {
	h     http.Header
	code  int
	wrote bool
	_     [cacheLinePad - 24]byte
}

// cacheLinePad is the size the per-caller structures are padded to: two
// 64-byte cache lines (the pair the adjacent-line prefetcher fetches), so
// that two callers' writes never share a line. Without it, callers on
// different cores invalidate each other's lines on every call, a cost that
// depends on the harness rather than on the case.
const cacheLinePad = 128

func (r *recorder) Header() http.Header { return r.h }

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.code, r.wrote = code, true
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return len(b), nil
}

func (r *recorder) reset() {
	clear(r.h)
	r.code, r.wrote = http.StatusOK, false
}

// Phases of a measurement, read by the workers before every call.
const (
	phaseWarm int32 = iota
	phaseMeasure
	phaseStop
)

// worker is one caller: a goroutine making decisions back to back. Only
// calls started during phaseMeasure are counted.
type worker struct {
	ctx      context.Context
	rec      *recorder
	hist     *hist
	calls    uint64
	errs     uint64
	admitted uint64
	err      error // first error seen
	status   int   // last unexpected HTTP status
	_        [cacheLinePad - 80]byte
}

func (w *worker) loop(do func(*worker, int) (bool, error), first, nkeys int, phase *atomic.Int32) {
	k := first
	// One clock reading per call: a call's latency runs from the reading
	// after the previous call to the one after it, so it also holds this
	// loop's few nanoseconds of bookkeeping. Reading the clock before and
	// after each call (time.Now, then time.Since) cost 74 ns per call on a
	// 2-core AMD EPYC guest: a constant added to every in-process case,
	// which pulled their ratios towards 1.
	base := time.Now()
	last := time.Since(base)
	for {
		p := phase.Load()
		if p == phaseStop {
			return
		}
		ok, err := do(w, k)
		end := time.Since(base)
		d := end - last
		last = end
		if p == phaseMeasure {
			w.hist.record(d)
			w.calls++
			switch {
			case err != nil:
				w.errs++
				if w.err == nil {
					w.err = err
				}
			case ok:
				w.admitted++
			}
		}
		if k++; k == nkeys {
			k = 0
		}
	}
}

// sample is one measurement of one case.
type sample struct {
	calls     uint64 // calls started in the measured window
	errs      uint64
	admitted  uint64
	elapsed   time.Duration
	p50, p99  time.Duration
	mallocs   uint64
	redisCPU  float64 // seconds; meaningful for Redis cases only
	scriptUS  float64 // µs Redis spent in scripts; Redis cases only
	clientCPU time.Duration
	firstErr  error
}

// decisions returns the calls that produced a decision (no error).
func (s sample) decisions() uint64 { return s.calls - s.errs }

func (s sample) rate() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(s.decisions()) / s.elapsed.Seconds()
}

// harness holds what measurements reuse: one histogram and one recorder
// per possible caller, allocated once.
type harness struct {
	hists []*hist
	recs  []*recorder
}

func newHarness(maxCallers int) *harness {
	h := &harness{hists: make([]*hist, maxCallers), recs: make([]*recorder, maxCallers)}
	for i := range h.hists {
		h.hists[i] = new(hist)
		h.recs[i] = &recorder{h: make(http.Header, 8)}
	}
	return h
}

// measure runs inst with g.callers workers: warm-up for warm, then a
// measured window of dur. Redis CPU is read around the window when
// withRedis is set.
func (h *harness) measure(ctx context.Context, e *env, inst *instance, g group, withRedis bool, warm, dur time.Duration) (sample, error) {
	var phase atomic.Int32
	workers := make([]*worker, g.callers)
	var wg sync.WaitGroup
	for i := range workers {
		h.hists[i].reset()
		w := &worker{ctx: ctx, rec: h.recs[i], hist: h.hists[i]}
		workers[i] = w
		first := i * g.keys / g.callers
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.loop(inst.do, first, g.keys, &phase)
		}()
	}
	stop := func() {
		phase.Store(phaseStop)
		wg.Wait()
	}
	if !sleepCtx(ctx, warm) {
		stop()
		return sample{}, ctx.Err()
	}

	var s sample
	var rc0 redisCounters
	if withRedis {
		var err error
		if rc0, err = readRedisCounters(ctx, e.rdb); err != nil {
			stop()
			return s, err
		}
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	c0 := processCPU()
	t0 := time.Now()
	phase.Store(phaseMeasure)
	ok := sleepCtx(ctx, dur)
	phase.Store(phaseStop)
	s.elapsed = time.Since(t0)
	wg.Wait()
	s.clientCPU = processCPU() - c0
	runtime.ReadMemStats(&m1)
	s.mallocs = m1.Mallocs - m0.Mallocs
	if !ok {
		return s, ctx.Err()
	}
	if withRedis {
		rc1, err := readRedisCounters(ctx, e.rdb)
		if err != nil {
			return s, err
		}
		s.redisCPU, s.scriptUS = rc1.cpu-rc0.cpu, rc1.scripts-rc0.scripts
	}

	all := h.hists[0]
	for i, w := range workers {
		s.calls += w.calls
		s.errs += w.errs
		s.admitted += w.admitted
		if s.firstErr == nil && w.err != nil {
			s.firstErr = w.err
			if w.err == errStatus {
				s.firstErr = fmt.Errorf("%w %d", errStatus, w.status)
			}
		}
		if i > 0 {
			all.merge(h.hists[i])
		}
	}
	s.p50, s.p99 = all.quantile(0.50), all.quantile(0.99)
	return s, nil
}

// sleepCtx sleeps for d and reports whether ctx was still live at the end.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return ctx.Err() == nil
	case <-ctx.Done():
		return false
	}
}

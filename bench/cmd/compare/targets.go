package main

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/ratekeeper/ratekeeper/store"
)

// Names of the cases the targets read, besides the reference cases.
const (
	caseSethvargoMiddleware = "sethvargo/middleware/memory"
	caseHttprateMiddleware  = "httprate/middleware/memory"
	caseUluleMiddleware     = "ulule/middleware/memory"
	caseXRateKeys           = "x/time/rate/Allow per key"
	caseRKMiddlewareMemory  = "ratekeeper/middleware/memory"
	caseRKMiddlewareRedis   = "ratekeeper/middleware/redis"
	caseRKMemory            = "ratekeeper/memory/gcra"
)

// peerMiddlewares are the in-process middlewares of other libraries that
// the in-process target is measured against.
var peerMiddlewares = []string{caseSethvargoMiddleware, caseHttprateMiddleware, caseUluleMiddleware}

// rkRedisName returns the name of the Take case of alg on Redis.
func rkRedisName(alg store.Algorithm) string { return "ratekeeper/redis/" + alg.String() }

// targetRow is one measured figure against its target.
type targetRow struct {
	target   string
	group    string
	measured string
	needed   string
	met      bool
}

// writeTargets prints the speed targets that the cases of this run can
// answer, each figure from this run only: ratios are medians of per-round
// ratios, as in the group tables. A target whose cases did not run is left
// out.
func writeTargets(w io.Writer, plan []groupPlan) {
	var rows []targetRow
	for i := range plan {
		gp := &plan[i]
		rows = append(rows, gp.inProcessTargets()...)
		rows = append(rows, gp.redisTargets()...)
	}
	fmt.Fprintf(w, "### Targets\n\n")
	if len(rows) == 0 {
		fmt.Fprintf(w, "No target's cases ran in this run.\n\n")
		return
	}
	met := 0
	fmt.Fprintln(w, "| target | group | measured | needed | met |")
	fmt.Fprintln(w, "|---|---|--:|--:|---|")
	for _, r := range rows {
		mark := "no"
		if r.met {
			mark = "yes"
			met++
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", r.target, r.group, r.measured, r.needed, mark)
	}
	fmt.Fprintf(w, "\n%d of %d met.\n\n", met, len(rows))
}

// inProcessTargets: the middleware on the memory store against the fastest
// peer middleware (every group), its allocations per admitted request,
// and the memory store's Take against x/time/rate over many keys.
func (gp *groupPlan) inProcessTargets() []targetRow {
	var rows []targetRow
	if r, ok := gp.ratioToBest(caseRKMiddlewareMemory, peerMiddlewares); ok {
		rows = append(rows, atLeast("middleware, memory store ÷ fastest peer middleware", gp.g, r, 1.5))
	}
	if a, ok := gp.allocs(caseRKMiddlewareMemory); ok && !gp.g.deny {
		rows = append(rows, targetRow{"middleware, memory store: allocations per admitted request", gp.g.String(),
			fmt.Sprintf("%.1f", a), "≤ 1", a <= 1.05})
	}
	if gp.g.keys > 1 && !gp.g.deny {
		if r, ok := gp.ratioToBest(caseXRateKeys, []string{caseRKMemory}); ok {
			rows = append(rows, atMost("x/time/rate Allow per key ÷ memory store Take", gp.g, r, 1.5))
		}
		if a, ok := gp.allocs(caseRKMemory); ok {
			rows = append(rows, targetRow{"memory store Take: allocations", gp.g.String(),
				fmt.Sprintf("%.1f", a), "0", a < 0.05})
		}
	}
	return rows
}

// redisTargets: a lone caller (1 caller) and a crowd (64 and 256 callers)
// for each algorithm against redis_rate and PING, and Redis CPU per
// decision against redis_rate's.
func (gp *groupPlan) redisTargets() []targetRow {
	if gp.g.deny {
		return nil
	}
	var rows []targetRow
	switch c := gp.g.callers; {
	case c == 1:
		// Each algorithm through go-redis's default client, then through
		// the one the README recommends.
		var names []string
		for _, alg := range store.Algorithms {
			names = append(names, rkRedisName(alg), rkRedisName(alg)+deadlinesSuffix)
		}
		for _, n := range names {
			rows = append(rows, gp.vs(n, refRedisRate, "lone caller: "+n+" ÷ redis_rate", 1.2)...)
			rows = append(rows, gp.vs(n, refPing, "lone caller: "+n+" ÷ PING", 0.85)...)
		}
	case c == 64 || c == 256:
		if c == 64 && gp.g.keys > 1 {
			gcra := rkRedisName(store.GCRA)
			rows = append(rows, gp.vs(gcra, refRedisRate, "crowd: "+gcra+" ÷ redis_rate", 2)...)
			rows = append(rows, gp.vs(caseRKMiddlewareRedis, refRedisRate, "crowd: "+caseRKMiddlewareRedis+" ÷ redis_rate", 2)...)
			rows = append(rows, gp.vs(gcra, refPing, "crowd: "+gcra+" ÷ PING", 1.3)...)
		}
		for _, alg := range store.Algorithms {
			n := rkRedisName(alg)
			rows = append(rows, gp.vs(n, refRedisRate, "crowd: "+n+" ÷ redis_rate", 1.5)...)
			rows = append(rows, gp.redisCPUTarget(n)...)
		}
	}
	return rows
}

// vs returns the row "case a ÷ case b ≥ min" when both ran in the group.
func (gp *groupPlan) vs(a, b, what string, min float64) []targetRow {
	r, ok := gp.ratioToBest(a, []string{b})
	if !ok {
		return nil
	}
	return []targetRow{atLeast(what, gp.g, r, min)}
}

// redisCPUTarget returns the row "Redis CPU per decision of case n ≤
// redis_rate's" when both ran.
func (gp *groupPlan) redisCPUTarget(n string) []targetRow {
	ours, ok1 := gp.redisCPU(n)
	theirs, ok2 := gp.redisCPU(refRedisRate)
	if !ok1 || !ok2 {
		return nil
	}
	return []targetRow{{"Redis CPU per decision: " + n + " vs redis_rate", gp.g.String(),
		fmt.Sprintf("%s vs %s µs", fmtMicros(ours), fmtMicros(theirs)), "≤ redis_rate's", ours <= theirs}}
}

func atLeast(what string, g group, r, min float64) targetRow {
	return targetRow{what, g.String(), fmt.Sprintf("%.2f×", r), fmt.Sprintf("≥ %.2f×", min), r >= min}
}

func atMost(what string, g group, r, max float64) targetRow {
	return targetRow{what, g.String(), fmt.Sprintf("%.2f×", r), fmt.Sprintf("≤ %.2f×", max), r <= max}
}

// ratioToBest returns the median over rounds of case a's rate divided by
// the best rate among others in the same round, and whether a and at least
// one of others ran in some round.
func (gp *groupPlan) ratioToBest(a string, others []string) (float64, bool) {
	ia := gp.index(a)
	if ia < 0 {
		return 0, false
	}
	var ratios []float64
	for r, s := range gp.cells[ia] {
		if s == nil || s.decisions() == 0 {
			continue
		}
		best := 0.0
		for _, o := range others {
			if i := gp.index(o); i >= 0 {
				best = math.Max(best, gp.ref(i, r))
			}
		}
		if best > 0 {
			ratios = append(ratios, s.rate()/best)
		}
	}
	if len(ratios) == 0 {
		return 0, false
	}
	return median(ratios), true
}

// allocs returns case n's median allocations per decision.
func (gp *groupPlan) allocs(n string) (float64, bool) {
	return gp.medianPer(n, func(s *sample) float64 { return float64(s.mallocs) })
}

// redisCPU returns case n's median Redis CPU per decision, in µs.
func (gp *groupPlan) redisCPU(n string) (float64, bool) {
	return gp.medianPer(n, func(s *sample) float64 { return s.redisCPU * 1e6 })
}

// medianPer returns the median over rounds of total(s) per decision of
// case n, and whether n ran.
func (gp *groupPlan) medianPer(n string, total func(*sample) float64) (float64, bool) {
	i := gp.index(n)
	if i < 0 {
		return 0, false
	}
	var xs []float64
	for _, s := range gp.cells[i] {
		if s != nil && s.decisions() > 0 {
			xs = append(xs, total(s)/float64(s.decisions()))
		}
	}
	if len(xs) == 0 {
		return 0, false
	}
	return median(xs), true
}

// targetsCases is the -cases expression of the run that answers every
// target (see BENCHMARKS.md).
var targetsCases = strings.Join([]string{
	"^floor/PING$", "^redis_rate$", "^ratekeeper/redis/[a-z_]+( ctx deadlines)?$",
	"^ratekeeper/(memory/gcra|middleware/(redis|memory))$", "/middleware/memory$", "^x/time/rate/Allow per key$",
}, "|")

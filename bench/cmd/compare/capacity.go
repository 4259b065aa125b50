package main

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/ratekeeper/ratekeeper/store"
)

// capacityCases selects the cases of -capacity: every algorithm's plain,
// one-call-each and stacked case (the references always run).
const capacityCases = `^ratekeeper/redis/(gcra|token_bucket|sliding_window_log|sliding_window_counter|fixed_window)( stacked| one call each)?$`

// perDecision returns the median over rounds of f(sample) / decisions for
// case i, and the median over rounds of its ratio to case ref's (NaN when
// ref did not run); both NaN when case i never decided.
func (gp *groupPlan) perDecision(i, ref int, f func(*sample) float64) (float64, float64) {
	var xs, ratios []float64
	for r, s := range gp.cells[i] {
		if s == nil || s.decisions() == 0 {
			continue
		}
		x := f(s) / float64(s.decisions())
		xs = append(xs, x)
		if ref < 0 || gp.cells[ref][r] == nil || gp.cells[ref][r].decisions() == 0 {
			continue
		}
		if y := f(gp.cells[ref][r]) / float64(gp.cells[ref][r].decisions()); y > 0 {
			ratios = append(ratios, x/y)
		}
	}
	return median(xs), median(ratios)
}

// capacityRow is one algorithm's Redis cost per decision, plain (in lean
// batches), one call each and stacked, in µs.
type capacityRow struct {
	name                 string
	script, ratio, cpu   float64
	oneCPU               float64
	stScript, stCPU      float64
	memBytes             float64
	hasStacked, hasPlain bool
	hasOneCall           bool
}

// capacityRows returns redis_rate's row and then each algorithm's, from
// the cases of gp, with the memory per identity of mem.
func capacityRows(gp *groupPlan, mem []memResult) []capacityRow {
	rr := gp.index(refRedisRate)
	scriptUS := func(s *sample) float64 { return s.scriptUS }
	cpuUS := func(s *sample) float64 { return s.redisCPU * 1e6 }
	memOf := func(name string) float64 {
		for _, m := range mem {
			if m.name == name {
				return float64(m.stateBytes+m.replayBytes) / float64(m.identities)
			}
		}
		return math.NaN()
	}
	names := []string{refRedisRate}
	for _, alg := range store.Algorithms {
		names = append(names, "ratekeeper/redis/"+alg.String())
	}
	var rows []capacityRow
	for _, name := range names {
		row := capacityRow{name: name, memBytes: memOf(name)}
		if i := gp.index(name); i >= 0 {
			row.hasPlain = true
			row.script, row.ratio = gp.perDecision(i, rr, scriptUS)
			row.cpu, _ = gp.perDecision(i, -1, cpuUS)
		}
		if i := gp.index(name + oneCallSuffix); i >= 0 {
			row.hasOneCall = true
			row.oneCPU, _ = gp.perDecision(i, -1, cpuUS)
		}
		if i := gp.index(name + stackedSuffix); i >= 0 {
			row.hasStacked = true
			row.stScript, _ = gp.perDecision(i, -1, scriptUS)
			row.stCPU, _ = gp.perDecision(i, -1, cpuUS)
		}
		rows = append(rows, row)
	}
	return rows
}

// writeCapacity prints the capacity table of every group of many keys
// that is not over its limit: per algorithm, the Redis time per decision
// in scripts and in all (INFO commandstats and INFO cpu), the decisions
// one Redis core makes per second at that cost, the Redis CPU and
// decisions per core with one script call per decision (as on a Redis
// Cluster), the same for the stacked decision, and the memory per
// identity.
func writeCapacity(w io.Writer, plan []groupPlan, mem []memResult) {
	for gi := range plan {
		gp := &plan[gi]
		if gp.g.deny || gp.g.keys == 1 {
			continue
		}
		fmt.Fprintf(w, "#### Capacity: Redis cost per decision, %s\n\n", gp.g)
		fmt.Fprintln(w, "Script µs: INFO commandstats (EVAL/EVALSHA usec) per decision; Redis CPU µs: INFO cpu (user + system, I/O included) per decision; decisions/s per core: 10⁶ / Redis CPU µs. Plain: a single server, where a batch's plain calls of one algorithm travel as one lean batch call. One call each: the same through a Ring of one shard, one script call per decision, as on a Redis Cluster. Stacked: the algorithm's limit plus a route-wide GCRA limit, one TakeMulti. Memory: MEMORY USAGE per identity, one limit.")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| algorithm | script µs | script × redis_rate | Redis CPU µs | decisions/s per core | one call each: Redis CPU µs | one call each: decisions/s per core | stacked script µs | stacked Redis CPU µs | stacked decisions/s per core | bytes/identity |")
		fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
		for _, r := range capacityRows(gp, mem) {
			cells := []string{strings.TrimPrefix(r.name, "ratekeeper/redis/"), "-", "-", "-", "-", "-", "-", "-", "-", "-", fmtBytes(r.memBytes)}
			if r.hasPlain {
				cells[1], cells[2], cells[3], cells[4] = fmtMicros(r.script), fmtRatio([]float64{r.ratio}), fmtMicros(r.cpu), fmtPerCore(r.cpu)
			}
			if r.hasOneCall {
				cells[5], cells[6] = fmtMicros(r.oneCPU), fmtPerCore(r.oneCPU)
			}
			if r.hasStacked {
				cells[7], cells[8], cells[9] = fmtMicros(r.stScript), fmtMicros(r.stCPU), fmtPerCore(r.stCPU)
			}
			fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
		}
		fmt.Fprintln(w)
	}
}

// fmtPerCore formats the decisions per second of one core at us µs each.
func fmtPerCore(us float64) string {
	if !(us > 0) {
		return "-"
	}
	return groupDigits(int64(math.Round(1e6/us/100) * 100))
}

// fmtBytes formats a byte count, or "-" when it was not measured.
func fmtBytes(b float64) string {
	if math.IsNaN(b) {
		return "-"
	}
	return fmt.Sprintf("%.0f", b)
}

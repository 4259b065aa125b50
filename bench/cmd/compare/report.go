package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// groupPlan is one group and the cases that run in it.
type groupPlan struct {
	g     group
	cases []*caseDef
	// cells[i][r] is case i's sample of round r, nil when it did not run.
	cells [][]*sample
	fails []string // per case: why a round failed, if one did
}

// facts describe the machine and the run for the report's header.
type facts struct {
	gomaxprocs   int
	numCPU       int
	goVersion    string
	platform     string
	cpu          string
	redisVersion string
	redisWhere   string
	poolSize     int
	loneSpin     time.Duration // the ratekeeper Redis stores' LoneSpin
	duration     time.Duration
	warmup       time.Duration
	rounds       int
	modules      []string
	checkout     string
	started      time.Time
	took         time.Duration
	capacity     bool   // print the capacity tables (-capacity)
	cpuProfile   string // the client ran under the CPU profiler, writing here (-cpuprofile)
}

func writeReport(w io.Writer, f facts, plan []groupPlan, mem []memResult, memErr error) {
	defer func() {
		if f.capacity {
			writeCapacity(w, plan, mem)
		}
	}()
	fmt.Fprintf(w, "### Machine and run\n\n")
	cpu := ""
	if f.cpu != "" {
		cpu = ", " + f.cpu
	}
	fmt.Fprintf(w, "- GOMAXPROCS %d (%d CPUs%s), %s %s\n", f.gomaxprocs, f.numCPU, cpu, f.goVersion, f.platform)
	fmt.Fprintf(w, "- redis-server %s, %s; one go-redis client (PoolSize %d) shared by every Redis case but the \"… ctx deadlines\" ones, whose own client (the one the README recommends) differs only in ContextTimeoutEnabled\n", f.redisVersion, f.redisWhere, f.poolSize)
	fmt.Fprintf(w, "- ratekeeper Redis stores: LoneSpin %s\n", loneSpinText(f.loneSpin))
	fmt.Fprintf(w, "- each case: %s warm-up, then %s measured; %d round(s), case order rotated each round; medians across rounds\n", f.warmup, f.duration, f.rounds)
	fmt.Fprintf(w, "- started %s, took %s\n", f.started.UTC().Format(time.RFC3339), f.took.Round(time.Second))
	fmt.Fprintf(w, "- ratekeeper: %s; peers: %s\n", f.checkout, strings.Join(f.modules, ", "))
	fmt.Fprintf(w, "- caveat: the client and redis-server share the same %d cores, so every Redis case competes with its own client for CPU; compare ratios, not absolute figures\n", f.numCPU)
	if f.cpuProfile != "" {
		fmt.Fprintf(w, "- the client ran under the CPU profiler (-cpuprofile %s): its figures include the profiler's cost, so compare them only with other profiled runs\n", f.cpuProfile)
	}
	if !rkVariants {
		fmt.Fprintf(w, "- the ratekeeper \"no batching\" and \"no deny cache\" cases run the same store as the default one: this redisstore.Options has no batching or deny-cache settings\n")
	}
	fmt.Fprintln(w)
	writeTargets(w, plan)

	for _, gp := range plan {
		fmt.Fprintf(w, "#### %s\n\n", gp.g)
		fmt.Fprintln(w, "| case | decisions/s | × redis_rate | × PING | p50 | p99 | allocs/decision | Redis CPU µs/decision | script µs/decision | client CPU µs/decision | admitted |")
		fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
		rr, ping := gp.index(refRedisRate), gp.index(refPing)
		var notes []string
		for i, c := range gp.cases {
			row := gp.row(i, rr, ping, c.redis)
			fmt.Fprintf(w, "| %s | %s |\n", c.name, strings.Join(row, " | "))
			if gp.fails[i] != "" {
				notes = append(notes, fmt.Sprintf("- %s: %s", c.name, gp.fails[i]))
			}
		}
		if len(notes) > 0 {
			fmt.Fprintf(w, "\nErrors:\n\n%s\n", strings.Join(notes, "\n"))
		}
		fmt.Fprintln(w)
	}

	fmt.Fprintf(w, "#### Redis memory per identity\n\n")
	if memErr != nil {
		fmt.Fprintf(w, "Not measured: %v\n\n", memErr)
		return
	}
	if len(mem) == 0 {
		fmt.Fprintf(w, "Not measured (-memory=false).\n\n")
		return
	}
	fmt.Fprintf(w, "One admitted decision for each of %s identities under a limit of %d per %s; keys and bytes are per identity.\n\n", groupDigits(int64(mem[0].identities)), memRate, periodName(memPeriod))
	fmt.Fprintln(w, "| limiter | state keys | state bytes (MEMORY USAGE) | replay-record bytes | used_memory Δ bytes |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|")
	for _, m := range mem {
		n := float64(m.identities)
		fmt.Fprintf(w, "| %s | %.2f | %.0f | %.0f | %.0f |\n", m.name, float64(m.stateKeys)/n, float64(m.stateBytes)/n, float64(m.replayBytes)/n, float64(m.usedDelta)/n)
	}
	fmt.Fprintln(w)
	if slices.ContainsFunc(mem, func(m memResult) bool { return m.replayKeys > 0 }) {
		fmt.Fprintf(w, "Replay records are the short-lived per-take keys (\"...:op:<nonce>\") that versions before the no-re-send path wrote; the column shows whether any are left.\n\n")
	}
}

// index returns the position of the case named name, or -1.
func (gp *groupPlan) index(name string) int {
	return slices.IndexFunc(gp.cases, func(c *caseDef) bool { return c.name == name })
}

// row formats case i's columns after its name.
func (gp *groupPlan) row(i, rr, ping int, redis bool) []string {
	var rates, p50s, p99s, allocs, rcpu, scpu, ccpu, vsRR, vsPing []float64
	var decisions, admitted, errs uint64
	for r, s := range gp.cells[i] {
		if s == nil {
			continue
		}
		errs += s.errs
		d := s.decisions()
		if d == 0 {
			continue
		}
		decisions += d
		admitted += s.admitted
		rates = append(rates, s.rate())
		p50s = append(p50s, float64(s.p50))
		p99s = append(p99s, float64(s.p99))
		allocs = append(allocs, float64(s.mallocs)/float64(d))
		rcpu = append(rcpu, s.redisCPU*1e6/float64(d))
		scpu = append(scpu, s.scriptUS/float64(d))
		ccpu = append(ccpu, s.clientCPU.Seconds()*1e6/float64(d))
		if ref := gp.ref(rr, r); ref > 0 {
			vsRR = append(vsRR, s.rate()/ref)
		}
		if ref := gp.ref(ping, r); ref > 0 {
			vsPing = append(vsPing, s.rate()/ref)
		}
	}
	if len(rates) == 0 {
		row := []string{"failed", "-", "-", "-", "-", "-", "-", "-", "-", "-"}
		if errs > 0 {
			row[9] = fmt.Sprintf("%d errors", errs)
		}
		return row
	}
	redisCol, scriptCol, clientCol := "-", "-", "-"
	if redis {
		redisCol, scriptCol = fmtMicros(median(rcpu)), fmtMicros(median(scpu))
	}
	if clientCPUMeasured {
		clientCol = fmtMicros(median(ccpu))
	}
	adm := fmt.Sprintf("%.3g%%", 100*float64(admitted)/float64(decisions))
	if errs > 0 {
		adm += fmt.Sprintf(" (%d errors)", errs)
	}
	return []string{
		groupDigits(int64(math.Round(median(rates)))),
		fmtRatio(vsRR),
		fmtRatio(vsPing),
		fmtDur(time.Duration(median(p50s))),
		fmtDur(time.Duration(median(p99s))),
		strconv.FormatFloat(median(allocs), 'f', 1, 64),
		redisCol,
		scriptCol,
		clientCol,
		adm,
	}
}

// ref returns the rate of reference case i in round r, or 0.
func (gp *groupPlan) ref(i, r int) float64 {
	if i < 0 || r >= len(gp.cells[i]) || gp.cells[i][r] == nil {
		return 0
	}
	return gp.cells[i][r].rate()
}

// median returns the median of xs (the mean of the middle two for an even
// count), or NaN for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func fmtRatio(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	m := median(xs)
	switch {
	case m >= 100:
		return fmt.Sprintf("%.0f", m)
	case m >= 10:
		return fmt.Sprintf("%.1f", m)
	default:
		return fmt.Sprintf("%.2f", m)
	}
}

func fmtMicros(us float64) string {
	if us >= 10 {
		return fmt.Sprintf("%.1f", us)
	}
	return fmt.Sprintf("%.2f", us)
}

func fmtDur(d time.Duration) string {
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%d ns", d.Nanoseconds())
	case d < time.Millisecond:
		return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
	default:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
}

// periodName returns "hour", "minute" or "second" for those periods and
// d's String form otherwise.
func periodName(d time.Duration) string {
	switch d {
	case time.Hour:
		return "hour"
	case time.Minute:
		return "minute"
	case time.Second:
		return "second"
	}
	return d.String()
}

// groupDigits formats n with a comma between groups of three digits.
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

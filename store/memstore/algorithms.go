package memstore

import (
	"math"
	"sort"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// The functions below compute in integer microseconds and float64, in the
// order a Lua script evaluates the same expressions left to right, so that
// the Redis store reproduces every decision. Products are never followed
// directly by an addition, so no fused multiply-add can change a result.

// outcome is one limit's verdict on a request: whether it admits it, its
// remaining units and time to reset (µs) without the request (rem0,
// reset0) and, when it admits it, after it (rem1, reset1); when it refuses
// it, the wait until it would admit it (retry, µs). next is the state to
// store if the request is recorded: when it is admitted, and for the
// window algorithms also when it is refused (a counted refusal, which may
// take the count past the capacity). next0 and next1 are, for the sliding
// window log and counter only, the time (µs) until the limit admits one
// unit more than rem0 and rem1 (0 when full); the other algorithms derive
// it from the remaining units and the reset time (contract.NextUS).
type outcome struct {
	allowed      bool
	rem0, reset0 int64
	rem1, reset1 int64
	next0, next1 int64
	retry        int64
	next         counts
	// Suppressed only: the factor the request met (ppm), whether a
	// refusal is a random draw rather than the hard limit's, and the
	// suppressed part of the next state (op.record stores it in next.sup).
	fppm    int64
	drawn   bool
	nextSup suppression
}

// evaluate sets o, which must be zero, to limit l's outcome for a request
// of cost c at now, st being the limit's live state (nil when it has
// none); u is the request's random value in [0, 1), which only the
// suppressed strategy reads.
func evaluate(l *store.Limit, st *counts, now, c int64, u float64, o *outcome) {
	switch l.Algorithm {
	case contract.Suppressed:
		suppressed(l, st, now, c, u, o)
	case store.SlidingWindowCounter:
		slidingCounter(l, st, now, c, o)
	case store.FixedWindow:
		fixedWindow(l, st, now, c, o)
	default: // GCRA and TokenBucket
		bucket(l, st, now, c, o)
	}
}

// bucket implements GCRA and the token bucket, one algorithm under two
// names, with the state {ts, used} of package store: the units used at
// ts, draining at R/P per µs. Storing units used rather than a GCRA
// theoretical arrival time keeps every quantity exact (a float64 TAT in µs
// has a resolution of 0.25µs today) and lets a changed limit apply at once
// to what was used.
func bucket(l *store.Limit, st *counts, now, c int64, o *outcome) {
	bucketOf(l, st, now, c, o, true)
}

// bucketOf is bucket; without before, an admitting outcome leaves rem0
// and reset0 zero, for a caller that reads them only from a refusal.
func bucketOf(l *store.Limit, st *counts, now, c int64, o *outcome, before bool) {
	capacity := l.Capacity()
	r, p, b := float64(l.Rate), float64(l.Period.Microseconds()), float64(capacity)
	cf := float64(c)
	u := usedAt(st, now, r, p)
	if before || u+cf > b {
		o.rem0, o.reset0 = floorUnits(b-u, capacity), ceilUS(u*p/r)
	}
	if u+cf <= b {
		used := u + cf
		o.allowed = true
		o.rem1 = floorUnits(b-used, capacity)
		o.reset1 = ceilUS(used * p / r)
		// The state expires once it decides exactly like no state: the
		// first microsecond at which used, in float64, has drained to 0
		// (usedAt of the new state, whose ts is now). The closed form
		// reset1 may be a microsecond short, and state dropped a
		// microsecond early would admit a whole-capacity request before
		// the RetryAfter it was told. This is earliest, written out: it
		// runs on every admission.
		d := max(o.reset1, 1)
		for i := 0; i < fixupSteps && !(used-float64(d)*r/p <= 0); i++ {
			d++
		}
		for i := 0; i < fixupSteps && d > 1 && used-float64(d-1)*r/p <= 0; i++ {
			d--
		}
		o.next = counts{exp: now + d, ts: now, used: used}
		return
	}
	o.retry = earliest(ceilUS((u+cf-b)*p/r), func(d int64) bool {
		return usedAt(st, now+d, r, p)+cf <= b
	})
}

// usedAt returns the units used of state st (nil: none) at time t: the
// stored units less (t − ts)·R/P, at least 0.
func usedAt(st *counts, t int64, r, p float64) float64 {
	if st == nil {
		return 0
	}
	d := t - st.ts
	if d < 0 {
		d = 0
	}
	u := st.used - float64(d)*r/p
	if u < 0 {
		u = 0
	}
	return u
}

// windowStart returns the start of the window of length p containing t:
// windows are aligned at multiples of p since the Unix epoch.
func windowStart(t, p int64) int64 {
	m := t % p
	if m < 0 {
		m += p
	}
	return t - m
}

// counterAt returns the window containing t and the counts of that window
// and the one before it, as state st (nil: none; its ts is the start of
// the window cur counts) shows them at t. A stored window later than t's
// (a clock that stepped back) stays current, so that counts are never
// forgotten early.
func counterAt(st *counts, t, p int64) (ws, cur, prev int64) {
	ws = windowStart(t, p)
	if st == nil {
		return ws, 0, 0
	}
	switch {
	case st.ts == ws:
		return ws, st.cur, st.prev
	case st.ts == ws-p:
		return ws, 0, st.cur
	case st.ts > ws:
		return st.ts, st.cur, st.prev
	}
	return ws, 0, 0
}

// estimate returns prev·(P − e)/P + cur, e = t − ws being the time elapsed
// in the current window.
func estimate(t, ws, p, cur, prev int64) float64 {
	return float64(prev)*float64(ws+p-t)/float64(p) + float64(cur)
}

// slidingCounter implements the sliding window counter. ResetAfter is the
// time to the end of the next window while cur > 0, else to the end of
// this one while prev > 0.
func slidingCounter(l *store.Limit, st *counts, now, c int64, o *outcome) {
	p, capacity := l.Period.Microseconds(), l.Capacity()
	ws, cur, prev := counterAt(st, now, p)
	est := estimate(now, ws, p, cur, prev)
	rf, cf := float64(capacity), float64(c)
	o.rem0 = floorUnits(rf-est, capacity)
	o.next = counts{exp: ws + 2*p, ts: ws, cur: cur + c, prev: prev}
	switch {
	case cur > 0:
		o.reset0 = ws + 2*p - now
	case prev > 0:
		o.reset0 = ws + p - now
	}
	o.next0 = counterNext(st, now, p, c, capacity, o.rem0)
	if est+cf <= rf {
		o.allowed = true
		o.rem1 = floorUnits(rf-(est+cf), capacity)
		o.reset1 = ws + 2*p - now
		o.next1 = counterNext(&o.next, now, p, c, capacity, o.rem1)
		return
	}
	// First guess: inside this window when the weight of prev can fall far
	// enough, else inside the next one, where cur has become prev.
	var at int64
	switch avail := capacity - c - cur; {
	case avail >= 0 && prev > 0:
		at = ws + ceilUS(float64(p)-float64(avail)*float64(p)/float64(prev))
	case cur > 0:
		at = ws + p + ceilUS(float64(p)-float64(capacity-c)*float64(p)/float64(cur))
	default:
		at = ws + p
	}
	o.retry = earliest(at-now, func(d int64) bool {
		t := now + d
		ws, cur, prev := counterAt(st, t, p)
		return estimate(t, ws, p, cur, prev)+cf <= rf
	})
}

// counterNext returns the time (µs) until a sliding window counter of
// capacity b and period p, in state st (nil: none) with rem units
// remaining at now, admits rem+1 units: until est + rem + 1 ≤ b, written
// as the wait of a request of cost c under a limit of b − rem − 1 + c, as
// the script writes it (counter_wait reads the request's cost). 0 when
// rem is b.
func counterNext(st *counts, now, p, c, b, rem int64) int64 {
	if rem >= b {
		return 0
	}
	return retryUnder(st, now, p, float64(c), float64(b-rem-1+c))
}

// ppm is the scale of a suppression factor: parts per million.
const ppm = 1_000_000

// suppressionCacheUS returns how long a suppression factor computed for a
// limit of period p (µs) is reused: contract.SuppressionCache, or p/10 when
// shorter.
func suppressionCacheUS(p int64) int64 {
	return min(contract.SuppressionCache.Microseconds(), p/10)
}

// suppressed implements the suppressed strategy (package
// store/suppressed): accepted and offered units counted in the windows of the
// sliding window counter, a soft limit (the rate) up to which every
// request is admitted, a hard limit (the capacity) past which every
// request is refused, and in between an admission when u is at least the
// suppression factor 1 − rate·(hard − accepted)/((hard − rate)·offered),
// offered being the period's offered load with this request, or the
// cached factor while it is fresh and higher. The
// next state (next and nextSup), set whatever the verdict, counts the
// request as offered; a take that admits it adds it to the accepted units
// too.
func suppressed(l *store.Limit, st *counts, now, c int64, u float64, o *outcome) {
	p, hard, soft := l.Period.Microseconds(), l.Capacity(), l.Rate
	ws, cur, prev := counterAt(st, now, p)
	sup := offeredAt(st, now, p)
	acc := estimate(now, ws, p, cur, prev)
	hf, cf := float64(hard), float64(c)
	o.rem0 = floorUnits(hf-acc, hard)
	switch {
	case cur > 0:
		o.reset0 = ws + 2*p - now
	case prev > 0:
		o.reset0 = ws + p - now
	}
	o.next = counts{exp: ws + 2*p, ts: ws, cur: cur, prev: prev}
	o.nextSup = suppression{ocur: sup.ocur + c, oprev: sup.oprev, fppm: sup.fppm, fts: sup.fts}
	// What a refused request waits for: room under the hard limit, or,
	// for a request refused by the draw, under the soft limit (its own
	// cost when larger), where it is admitted whatever the draw.
	limit := hf
	switch {
	case acc+cf <= float64(soft):
		o.allowed = true
	case acc+cf > hf:
		o.fppm = ppm
	default:
		// Aim at admitting, over the next period, rate·(hard − acc)/
		// (hard − rate) units out of the offered load: the rate at the
		// soft limit, down to none at the hard limit.
		off := estimate(now, ws, p, sup.ocur, sup.oprev)
		share := float64(soft) * (hf - acc) / (float64(hard-soft) * (off + cf))
		o.fppm, o.drawn = o.factor(factorPPM(share), now, p), true
		o.allowed = u*ppm >= float64(o.fppm)
		limit = float64(max(soft, c))
	}
	if o.allowed {
		// next.cur stays as it is: the request is accepted only if every
		// limit admits it (see op.record).
		o.rem1 = floorUnits(hf-(acc+cf), hard)
		o.reset1 = ws + 2*p - now
		return
	}
	if acc+cf <= limit {
		// A cost above the soft limit, with nothing accepted in the
		// window: the draw alone decides, and a retry may be admitted
		// at once.
		o.retry = 1
		return
	}
	o.retry = retryUnder(st, now, p, cf, limit)
}

// offeredAt returns the suppressed part of state st (nil: none) as it
// shows at t: the offered units of t's window and the one before it, and
// the cached factor with the time it was computed.
func offeredAt(st *counts, t, p int64) suppression {
	if st == nil || st.sup == nil {
		return suppression{}
	}
	_, ocur, oprev := counterAt(&counts{ts: st.ts, cur: st.sup.ocur, prev: st.sup.oprev}, t, p)
	return suppression{ocur: ocur, oprev: oprev, fppm: st.sup.fppm, fts: st.sup.fts}
}

// factorPPM returns the suppression factor 1 − share in ppm, rounded to
// the nearest and kept within [0, ppm]. The conversion keeps the product
// and the addition apart (no fused multiply-add), as in Lua.
func factorPPM(share float64) int64 {
	return min(max(int64(math.Floor(float64((1-share)*ppm)+0.5)), 0), ppm)
}

// factor returns the factor a request meets at now when f is the one
// computed for it: the cached factor of o.nextSup while it is fresh and
// not below f, so that suppression rises at once and eases off at most
// once per cache period; otherwise f, which becomes the cached factor.
func (o *outcome) factor(f, now, p int64) int64 {
	if fts := o.nextSup.fts; fts <= now && now-fts < suppressionCacheUS(p) && o.nextSup.fppm >= f {
		return o.nextSup.fppm
	}
	o.nextSup.fppm, o.nextSup.fts = f, now
	return f
}

// retryUnder returns the wait (µs) until a request of cost cf fits under
// limit in the windows of the sliding window counter state st (nil: none)
// of period p, from now. The first guess is made as for the sliding window
// counter, with limit for the capacity.
func retryUnder(st *counts, now, p int64, cf, limit float64) int64 {
	ws, cur, prev := counterAt(st, now, p)
	var at int64
	switch avail := limit - cf - float64(cur); {
	case avail >= 0 && prev > 0:
		at = ws + ceilUS(float64(p)-avail*float64(p)/float64(prev))
	case cur > 0:
		at = ws + p + ceilUS(float64(p)-(limit-cf)*float64(p)/float64(cur))
	default:
		at = ws + p
	}
	return earliest(at-now, func(d int64) bool {
		t := now + d
		ws, cur, prev := counterAt(st, t, p)
		return estimate(t, ws, p, cur, prev)+cf <= limit
	})
}

// fixedWindow implements the fixed window, in integer counts only.
func fixedWindow(l *store.Limit, st *counts, now, c int64, o *outcome) {
	capacity := l.Capacity()
	ws, end := fixedWindowAt(l, now)
	var cur int64
	if st != nil && st.ts >= ws {
		// st.ts > ws only when the clock stepped back: keep the newer
		// window rather than forget its count.
		ws, cur = st.ts, st.cur
		_, end = fixedWindowAt(l, ws)
	}
	left := end - now
	o.rem0 = floorUnits(float64(capacity-cur), capacity)
	if cur > 0 {
		o.reset0 = left
	}
	o.next = counts{exp: end, ts: ws, cur: cur + c}
	if cur+c <= capacity {
		o.allowed = true
		o.rem1 = capacity - cur - c
		o.reset1 = left
		return
	}
	o.retry = left
}

// evaluateLog fills out with every limit's outcome against the sliding
// window log lg (nil when the key has none) and reports whether all admit.
func evaluateLog(limits []store.Limit, lg *runLog, now, c int64, out []outcome) bool {
	allowed := true
	for i := range limits {
		l := &limits[i]
		var idx int
		var before int64
		if lg != nil {
			idx, before = lg.after(now - l.Period.Microseconds())
		}
		out[i] = outcome{} // out may hold an earlier evaluation (multi.go)
		logOutcome(l, lg, logCut{idx, before}, now, c, &out[i])
		allowed = allowed && out[i].allowed
	}
	return allowed
}

// logCut is where a limit's window starts in a log: the index and the
// units before it, as runLog.after reports them.
type logCut struct {
	idx    int
	before int64
}

// logOutcome sets o, which must be zero, to limit l's outcome against the
// sliding window log lg (nil when the key has none), cut being where
// lg.after(now − l's period) puts the window's start.
func logOutcome(l *store.Limit, lg *runLog, cut logCut, now, c int64, o *outcome) {
	idx, before := cut.idx, cut.before
	p, capacity := l.Period.Microseconds(), l.Capacity()
	var count int64
	if lg != nil {
		count = lg.total() - before
	}
	o.rem0 = floorUnits(float64(capacity-count), capacity)
	if count > 0 {
		// The newest entry overall is inside every window that holds any.
		o.reset0 = lg.newest() + p - now
		// One unit more is admitted once count has fallen to
		// capacity − rem0 − 1: once the (capacity − rem0)-th newest entry
		// has left the window (the oldest one unless counted refusals
		// took count past the capacity).
		o.next0 = lg.kth(idx, before, count-capacity+o.rem0+1) + p - now
	}
	if count+c <= capacity {
		// Admitted, the newest entry would be at now.
		o.allowed = true
		o.rem1 = capacity - count - c
		o.reset1 = p
		// The oldest entry in the window is the first to leave it.
		o.next1 = p
		if count > 0 {
			o.next1 = o.next0
		}
		return
	}
	// count+c > capacity >= c, so count > 0 and lg holds entries: once the
	// k-th oldest entry in the window leaves it, the request fits.
	o.retry = lg.kth(idx, before, count+c-capacity) + p - now
}

// run is a group of log entries sharing one timestamp. cum counts every
// unit recorded in the log up to and including this run, so the units
// between two runs are a subtraction and the k-th entry a binary search.
type run struct {
	ts  int64
	cum int64
}

// runLog is a sliding window log: runs sorted by time, the pruned ones
// before head.
type runLog struct {
	runs []run
	head int
	base int64 // cum of the last pruned run
}

func (l *runLog) live() []run { return l.runs[l.head:] }

func (l *runLog) total() int64 {
	if r := l.live(); len(r) > 0 {
		return r[len(r)-1].cum
	}
	return l.base
}

// newest returns the time of the newest entry; the log must not be empty.
func (l *runLog) newest() int64 { return l.runs[len(l.runs)-1].ts }

// after returns the index in live() of the first run later than cutoff and
// the cumulative count before it.
func (l *runLog) after(cutoff int64) (int, int64) {
	r := l.live()
	// sort.Search, written out: this runs on every decision of a log.
	i, j := 0, len(r)
	for i < j {
		h := int(uint(i+j) >> 1)
		if r[h].ts > cutoff {
			j = h
		} else {
			i = h + 1
		}
	}
	if i == 0 {
		return 0, l.base
	}
	return i, r[i-1].cum
}

// kth returns the time of the k-th oldest entry at or after run i of
// live(), whose preceding cumulative count is before.
func (l *runLog) kth(i int, before, k int64) int64 {
	r := l.live()[i:]
	j := sort.Search(len(r), func(j int) bool { return r[j].cum-before >= k })
	if j == len(r) { // cannot happen for k <= count; stay in range
		j = len(r) - 1
	}
	return r[j].ts
}

// prune drops the entries at or before cutoff.
func (l *runLog) prune(cutoff int64) {
	i, before := l.after(cutoff)
	l.pruneAt(i, before)
}

// pruneAt is prune for i and before given by l.after(cutoff).
func (l *runLog) pruneAt(i int, before int64) {
	l.head += i
	l.base = before
	l.compact()
}

// trim keeps only the newest k entries. The oldest run kept may lose some
// of its entries: base then falls inside it.
func (l *runLog) trim(k int64) {
	cut := l.total() - k
	if cut <= l.base {
		return
	}
	r := l.live()
	l.head += sort.Search(len(r), func(i int) bool { return r[i].cum > cut })
	l.base = cut
	l.compact()
}

// compact moves the live runs to the front once the pruned ones are as
// many, and returns memory after a large shrink.
func (l *runLog) compact() {
	n := len(l.runs) - l.head
	if l.head > 0 && l.head >= n {
		copy(l.runs, l.runs[l.head:])
		l.runs = l.runs[:n]
		l.head = 0
	}
	if cap(l.runs) > 256 && 4*len(l.runs) < cap(l.runs) {
		l.runs = append(make([]run, 0, 2*len(l.runs)), l.runs...)
	}
}

// add records c entries at now. Entries are never recorded before the
// newest one, so the log stays sorted.
func (l *runLog) add(now, c int64) {
	if r := l.live(); len(r) > 0 && r[len(r)-1].ts >= now {
		l.runs[len(l.runs)-1].cum += c
		return
	}
	l.runs = append(l.runs, run{ts: now, cum: l.total() + c})
}

func (l *runLog) clear() {
	l.runs = l.runs[:0]
	l.head = 0
	l.base = 0
}

// fixupSteps bounds the correction of a retry time computed in floating
// point; the first guess is within a microsecond or two.
const fixupSteps = 64

// earliest returns the smallest d >= 1 near guess for which ok(d) holds:
// ok is the admission test a later Take would run, monotone in d, so the
// reported retry time is exact to the microsecond despite float rounding.
func earliest(guess int64, ok func(d int64) bool) int64 {
	d := max(guess, 1)
	for i := 0; i < fixupSteps && !ok(d); i++ {
		d++
	}
	for i := 0; i < fixupSteps && d > 1 && ok(d-1); i++ {
		d--
	}
	return d
}

// ceilUS rounds a duration in microseconds up to a whole microsecond.
func ceilUS(x float64) int64 {
	switch {
	case !(x > 0): // also NaN
		return 0
	case x >= math.MaxInt64/2:
		return math.MaxInt64 / 2
	}
	return int64(math.Ceil(x))
}

// floorUnits rounds a number of units down, within [0, hi].
func floorUnits(x float64, hi int64) int64 {
	switch {
	case !(x > 0):
		return 0
	case x >= float64(hi):
		return hi
	}
	return int64(math.Floor(x))
}

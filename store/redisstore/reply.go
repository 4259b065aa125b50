package redisstore

import (
	"errors"
	"fmt"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// maxReplyMicros bounds the durations a script may report: 2^53µs (285
// years), beyond which a float64 is no longer exact. Valid limits stay far
// below it (package store bounds a bucket's drain time to 100 periods of
// 366 days); anything larger means a script or server that does not follow
// the contract.
const maxReplyMicros = int64(1) << 53

// errBadReply reports a script reply that breaks the contract.
var errBadReply = errors.New("redisstore: unexpected script reply")

// reply is a decoded script reply.
type reply struct {
	allowed      bool
	index        int // -1 when blocked
	blocked      bool
	blockStarted bool
	duplicate    bool
	repaired     bool
	override     store.OverrideKind
	// The limits as the script applied them: scaled under an override.
	limits [store.MaxLimits]store.Limit
	// Per limit, in request order: remaining units and reset after (µs).
	remaining [store.MaxLimits]int64
	resetUS   [store.MaxLimits]int64
	// Per limit: the time until one unit more is admitted (µs), from the
	// script (sliding window log and counter) or contract.NextUS.
	nextUS [store.MaxLimits]int64
	// Of the deciding limit, or the block's remaining time.
	retryUS int64
	// The block's scope when blocked.
	scope string
	// Suppressed strategy only: the largest factor met (ppm) and whether
	// the refusal was by the draw.
	suppression int64
	suppressed  bool
}

// fullReply is the layout of a full script reply (package lua, "Reply of
// the full scripts"), read by name: {allowed, index, remaining, reset
// after, retry after, blocked, block started, duplicate, repaired,
// override, then per limit remaining and reset after, then scope and
// override value}, then for the sliding window log and counter the time
// until one unit more of each limit (unless an exempt or suspend override
// answered), and for the suppressed strategy two integers more.
type fullReply struct {
	// Of the deciding limit (index), or of the block: times in µs.
	allowed, index, remaining, resetAfter, retryAfter int64
	// Flags (0 or 1), then the applied override's code.
	blocked, blockStarted, duplicate, repaired, override int64
	perLimit                                             []any  // remaining and reset after µs of each limit
	scope                                                string // the block's scope when blocked, else ""
	overrideValue                                        string // the override as stored when one applied, else ""
	// suppression holds the suppressed strategy's factor (ppm) and drawn
	// flag: nil for the other algorithms, and when an exempt or suspend
	// override answered before the strategy ran.
	suppression []any
	// next holds the time until one unit more of each limit (µs): nil
	// but for the sliding window log and counter.
	next []any
}

// scriptNext reports whether the scripts of alg report the time until
// one unit more of each limit (contract.NextUS cannot derive it).
func scriptNext(alg store.Algorithm) bool {
	return alg == store.SlidingWindowLog || alg == store.SlidingWindowCounter
}

// replyHead is the number of integers a full reply starts with, before
// the per-limit pairs.
const replyHead = 10

// readFullReply reads v by the full reply's layout for a request with n
// limits of algorithm alg; it checks the shape and types, not the values.
func readFullReply(v any, alg store.Algorithm, n int) (fullReply, error) {
	var f fullReply
	arr, ok := v.([]any)
	if !ok {
		return f, fmt.Errorf("%w: got %T, want an array", errBadReply, v)
	}
	if alg == contract.Suppressed && len(arr) == replyHead+2*n+4 {
		arr, f.suppression = arr[:len(arr)-2], arr[len(arr)-2:]
	}
	if scriptNext(alg) && len(arr) == replyHead+3*n+2 {
		arr, f.next = arr[:len(arr)-n], arr[len(arr)-n:]
	}
	if len(arr) != replyHead+2*n+2 {
		return f, fmt.Errorf("%w: got %d elements, want %d", errBadReply, len(arr), replyHead+2*n+2)
	}
	var okScope, okOverride bool
	f.scope, okScope = arr[len(arr)-2].(string)
	f.overrideValue, okOverride = arr[len(arr)-1].(string)
	if !okScope || !okOverride {
		return f, fmt.Errorf("%w: scope and override are %T and %T, want strings", errBadReply, arr[len(arr)-2], arr[len(arr)-1])
	}
	f.perLimit = arr[replyHead : len(arr)-2]
	return f, readInts(arr[:replyHead], &f.allowed, &f.index, &f.remaining, &f.resetAfter, &f.retryAfter,
		&f.blocked, &f.blockStarted, &f.duplicate, &f.repaired, &f.override)
}

// readInts reads the integers arr into dst, in order; dst names every
// element arr may have.
func readInts(arr []any, dst ...*int64) error {
	if len(arr) > len(dst) {
		return fmt.Errorf("%w: %d elements, want at most %d", errBadReply, len(arr), len(dst))
	}
	for i, e := range arr {
		iv, ok := e.(int64)
		if !ok {
			return fmt.Errorf("%w: element %d is %T, want an integer", errBadReply, i, e)
		}
		*dst[i] = iv
	}
	return nil
}

// decodeReply checks and decodes a full script reply for a request with
// the given (validated) limits and cost. It never panics: any surprise is
// an error wrapping errBadReply.
func decodeReply(v any, limits []store.Limit, cost int64) (reply, error) {
	f, err := readFullReply(v, limits[0].Algorithm, len(limits))
	if err != nil {
		return reply{}, err
	}
	if err := f.checkHead(len(limits)); err != nil {
		return reply{}, err
	}
	r := reply{
		allowed: f.allowed == 1, index: int(f.index), retryUS: f.retryAfter,
		blocked: f.blocked == 1, blockStarted: f.blockStarted == 1, duplicate: f.duplicate == 1,
		repaired: f.repaired == 1, scope: f.scope, override: store.OverrideKind(f.override),
	}
	if err := f.applyOverride(&r, limits, cost); err != nil {
		return reply{}, err
	}
	if err := f.readLimits(&r, len(limits)); err != nil {
		return reply{}, err
	}
	if err := f.readSuppression(&r, limits[0].Algorithm); err != nil {
		return reply{}, err
	}
	if err := f.readNext(&r, len(limits)); err != nil {
		return reply{}, err
	}
	return r, nil
}

// readNext sets r's time until one unit more of each limit: read and
// checked from the reply for the sliding window log and counter (present
// unless an exempt or suspend override answered), else derived. Under an
// exempt override nothing is to come; under a suspend one, nothing before
// it ends.
func (f *fullReply) readNext(r *reply, n int) error {
	suspend := r.override == store.OverrideSuspend
	if r.override == store.OverrideExempt || suspend {
		if f.next != nil {
			return fmt.Errorf("%w: %d next times with override %d", errBadReply, len(f.next), r.override)
		}
		for i := range n {
			if suspend {
				r.nextUS[i] = r.retryUS
			}
		}
		return nil
	}
	if f.next == nil {
		if scriptNext(r.limits[0].Algorithm) {
			return fmt.Errorf("%w: no next times", errBadReply)
		}
		for i := range n {
			r.nextUS[i], _ = contract.NextUS(&r.limits[i], r.remaining[i], r.resetUS[i])
		}
		return nil
	}
	for i := range n {
		var us int64
		if err := readInts(f.next[i:i+1], &us); err != nil {
			return fmt.Errorf("limit %d: next: %w", i, err)
		}
		if err := checkNext(us, r.remaining[i], r.limits[i].Capacity()); err != nil {
			return fmt.Errorf("limit %d: %w", i, err)
		}
		r.nextUS[i] = us
	}
	return nil
}

// checkNext checks a script's time until one unit more, us, of a limit
// with rem of capacity units remaining: 0 exactly when it is full.
func checkNext(us, rem, capacity int64) error {
	if us < 0 || us > maxReplyMicros || (us == 0) != (rem >= capacity) {
		return fmt.Errorf("%w: next after %dµs with %d of %d remaining", errBadReply, us, rem, capacity)
	}
	return nil
}

// checkHead checks the head's values for a request with n limits: flags
// are 0 or 1 and agree with each other, with the override and with the
// deciding limit's index.
func (f *fullReply) checkHead(n int) error {
	for _, fl := range [...]struct {
		name string
		v    int64
	}{{"allowed", f.allowed}, {"blocked", f.blocked}, {"block started", f.blockStarted}, {"duplicate", f.duplicate}, {"repaired", f.repaired}} {
		if fl.v != 0 && fl.v != 1 {
			return fmt.Errorf("%w: %s flag %d", errBadReply, fl.name, fl.v)
		}
	}
	allowed, blocked := f.allowed == 1, f.blocked == 1
	exempt, suspend := f.override == int64(store.OverrideExempt), f.override == int64(store.OverrideSuspend)
	switch {
	case (exempt && !allowed) || (suspend && (allowed || f.retryAfter == 0)):
		return fmt.Errorf("%w: override %d answered allowed %d, retry after %dµs", errBadReply, f.override, f.allowed, f.retryAfter)
	case (exempt || suspend) && (blocked || f.duplicate == 1):
		return fmt.Errorf("%w: override %d answered as blocked or duplicate", errBadReply, f.override)
	case f.retryAfter < 0 || f.retryAfter > maxReplyMicros || (allowed && f.retryAfter != 0):
		return fmt.Errorf("%w: retry after %dµs", errBadReply, f.retryAfter)
	case f.blockStarted == 1 && !blocked:
		return fmt.Errorf("%w: block started without blocking", errBadReply)
	case f.duplicate == 1 && !allowed:
		return fmt.Errorf("%w: refused duplicate", errBadReply)
	case blocked && (allowed || f.index != -1 || f.remaining != 0 || f.resetAfter != f.retryAfter || f.retryAfter == 0 || f.scope == ""):
		return fmt.Errorf("%w: blocked reply: allowed %d, index %d, remaining %d, reset after %dµs, retry after %dµs, scope %q",
			errBadReply, f.allowed, f.index, f.remaining, f.resetAfter, f.retryAfter, f.scope)
	case !blocked && (f.index < 0 || f.index >= int64(n)):
		return fmt.Errorf("%w: limit index %d of %d", errBadReply, f.index, n)
	case !blocked && f.scope != "":
		return fmt.Errorf("%w: scope %q without a block", errBadReply, f.scope)
	}
	return nil
}

// applyOverride checks the applied override's code against its value and
// sets r's limits as the script applied them: scaled under a scale
// override.
func (f *fullReply) applyOverride(r *reply, limits []store.Limit, cost int64) error {
	copy(r.limits[:], limits)
	if f.override == 0 {
		if f.overrideValue != "" {
			return fmt.Errorf("%w: override %q without its code", errBadReply, f.overrideValue)
		}
		return nil
	}
	o, err := contract.DecodeOverride(f.overrideValue)
	if err != nil || int64(o.Kind) != f.override {
		return fmt.Errorf("%w: override %d applied as %q", errBadReply, f.override, f.overrideValue)
	}
	if o.Kind == store.OverrideScale {
		for i, l := range limits {
			r.limits[i] = contract.ScaleLimit(l, o.Scale, cost)
		}
	}
	return nil
}

// readLimits reads and checks the per-limit pairs into r, whose limits
// are set, and checks that the head repeats the deciding limit's pair.
func (f *fullReply) readLimits(r *reply, n int) error {
	for i, l := range r.limits[:n] {
		var rem, reset int64
		if err := readInts(f.perLimit[2*i:2*i+2], &rem, &reset); err != nil {
			return fmt.Errorf("limit %d: %w", i, err)
		}
		if rem < 0 || rem > l.Capacity() {
			return fmt.Errorf("%w: limit %d: remaining %d of %d", errBadReply, i, rem, l.Capacity())
		}
		if reset < 0 || reset > maxReplyMicros {
			return fmt.Errorf("%w: limit %d: reset after %dµs", errBadReply, i, reset)
		}
		r.remaining[i], r.resetUS[i] = rem, reset
	}
	if !r.blocked && (f.remaining != r.remaining[r.index] || f.resetAfter != r.resetUS[r.index]) {
		return fmt.Errorf("%w: deciding limit %d reported as %d/%dµs and %d/%dµs",
			errBadReply, r.index, f.remaining, f.resetAfter, r.remaining[r.index], r.resetUS[r.index])
	}
	return nil
}

// readSuppression reads and checks the suppressed strategy's two integers
// into r: present for its requests unless an exempt or suspend override
// answered first.
func (f *fullReply) readSuppression(r *reply, alg store.Algorithm) error {
	if f.suppression == nil {
		if alg == contract.Suppressed && r.override != store.OverrideExempt && r.override != store.OverrideSuspend {
			return fmt.Errorf("%w: suppressed reply without its factor", errBadReply)
		}
		return nil
	}
	var factor, drawn int64
	if err := readInts(f.suppression, &factor, &drawn); err != nil {
		return fmt.Errorf("suppression: %w", err)
	}
	switch {
	case factor < 0 || factor > ppm:
		return fmt.Errorf("%w: suppression factor %d ppm", errBadReply, factor)
	case drawn != 0 && drawn != 1 || drawn == 1 && r.allowed:
		return fmt.Errorf("%w: suppressed flag %d (allowed %v)", errBadReply, drawn, r.allowed)
	}
	r.suppression, r.suppressed = factor, drawn == 1
	return nil
}

// ppm is the scale of a suppression factor in a script reply.
const ppm = 1_000_000

// decision turns a decoded reply into the Decision for limits. PerLimit is
// set only for requests with more than one limit. A blocked decision names
// the block's scope as Policy; Index and Limit are those of the limit with
// that ID in limits, or -1 and the first limit's capacity when the block
// was started by a limit this request does not carry.
func (r *reply) decision(limits []store.Limit) store.Decision {
	return r.decisionOf(limits, "")
}

// decisionOf is decision with the ID of a request's one limit when id is
// not empty (a limitInfo's, which Limit.ID would build again).
func (r *reply) decisionOf(limits []store.Limit, id string) store.Decision {
	limits = r.limits[:len(limits)]
	idOf := func(i int) string {
		if id != "" && len(limits) == 1 {
			return id
		}
		return limits[i].ID()
	}
	var d store.Decision
	if r.blocked {
		d = store.Decision{
			Capacity:     limits[0].Capacity(),
			ResetAfter:   micros(r.retryUS),
			NextAfter:    micros(r.retryUS),
			RetryAfter:   micros(r.retryUS),
			LimitID:      r.scope,
			Index:        -1,
			Blocked:      true,
			BlockStarted: r.blockStarted,
		}
		for i, l := range limits {
			if idOf(i) == r.scope {
				d.Index, d.Capacity = i, l.Capacity()
				break
			}
		}
	} else {
		l := limits[r.index]
		d = store.Decision{
			Allowed:    r.allowed,
			Capacity:   l.Capacity(),
			Remaining:  r.remaining[r.index],
			ResetAfter: micros(r.resetUS[r.index]),
			NextAfter:  micros(r.nextUS[r.index]),
			RetryAfter: micros(r.retryUS),
			LimitID:    idOf(r.index),
			Index:      r.index,
			Duplicate:  r.duplicate,
		}
		if !r.allowed {
			// As the memory store: the next unit comes no later than
			// the request fits.
			d.NextAfter = min(d.NextAfter, d.RetryAfter)
		}
	}
	d.Repaired = r.repaired
	d.Override = r.override
	d.Suppression = float64(r.suppression) / ppm
	d.Suppressed = r.suppressed
	if len(limits) > 1 {
		d.PerLimit = make([]store.LimitState, len(limits))
		for i := range limits {
			d.PerLimit[i] = store.LimitState{Remaining: r.remaining[i], ResetAfter: micros(r.resetUS[i]), NextAfter: micros(r.nextUS[i])}
		}
	}
	return d
}

// decodeLean checks and decodes the reply of a lean script, {allowed,
// remaining, reset after µs, retry after µs} and, from the built-in
// scripts, a fifth integer, repaired (0 or 1), and for the sliding window
// log and counter a sixth, the time until one unit more (µs), into the
// decision for the limit li. User scripts' replies reach it cut to their
// first four elements (the caller then sets NextAfter). A lean batch's
// admission that repaired nothing comes as its compact element (see
// admission). It never panics.
func decodeLean(v any, li *limitInfo) (store.Decision, error) {
	if a, ok := v.(*admission); ok {
		return decodeAdmission(*a, li)
	}
	arr := leanArray(v)
	if len(arr) < 4 || len(arr) > 6 {
		return store.Decision{}, fmt.Errorf("%w: got %T %v, want 4 to 6 integers", errBadReply, v, v)
	}
	return decodeLeanInts(arr, &li.l, li.id)
}

// decodeAdmission decodes the compact element of a lean batch's
// admission, arr (2 or 3 integers: remaining, reset after µs, and next
// after µs from the sliding window log and counter), as the lean reply
// {1, remaining, reset, 0, 0[, next]}.
func decodeAdmission(arr []any, li *limitInfo) (store.Decision, error) {
	if len(arr) != 2 && len(arr) != 3 {
		return store.Decision{}, fmt.Errorf("%w: an admission of %d integers, want 2 or 3", errBadReply, len(arr))
	}
	x := leanReply{allowed: 1}
	if err := readInts(arr, &x.remaining, &x.resetAfter, &x.next); err != nil {
		return store.Decision{}, err
	}
	return leanDecision(x, len(arr)+3, &li.l, li.id)
}

// leanArray returns the elements of a lean reply as a call gets it: the
// array of a call sent alone, or the pointer to it of a call answered in
// a lean batch (batchItem); nil for anything else.
func leanArray(v any) []any {
	switch x := v.(type) {
	case []any:
		return x
	case *[]any:
		return *x
	}
	return nil
}

// leanReply is the layout of a lean script reply, read by name:
// {allowed, remaining, reset after µs, retry after µs, repaired, next
// after µs}; user scripts' replies have only the first four, and only the
// sliding window log and counter report next.
type leanReply struct {
	allowed, remaining, resetAfter, retryAfter, repaired, next int64
}

// decodeLeanInts decodes a lean reply's integers, arr (4 to 6 elements),
// for the limit l (as the script applied it) of ID id.
func decodeLeanInts(arr []any, l *store.Limit, id string) (store.Decision, error) {
	var x leanReply
	if err := readInts(arr, &x.allowed, &x.remaining, &x.resetAfter, &x.retryAfter, &x.repaired, &x.next); err != nil {
		return store.Decision{}, err
	}
	return leanDecision(x, len(arr), l, id)
}

// leanDecision checks the lean reply x, of n integers (4 to 6), and
// returns its decision for the limit l of ID id.
func leanDecision(x leanReply, n int, l *store.Limit, id string) (store.Decision, error) {
	limit := l.Capacity()
	next, derived := contract.NextUS(l, x.remaining, x.resetAfter)
	if !derived && n == 6 {
		if err := checkNext(x.next, x.remaining, limit); err != nil {
			return store.Decision{}, err
		}
		next = x.next
	} else if derived == (n == 6) && n > 4 {
		return store.Decision{}, fmt.Errorf("%w: %d integers for %s", errBadReply, n, l.Algorithm)
	}
	switch {
	case x.allowed != 0 && x.allowed != 1:
		return store.Decision{}, fmt.Errorf("%w: allowed flag %d", errBadReply, x.allowed)
	case x.remaining < 0 || x.remaining > limit:
		return store.Decision{}, fmt.Errorf("%w: remaining %d of %d", errBadReply, x.remaining, limit)
	case x.resetAfter < 0 || x.resetAfter > maxReplyMicros:
		return store.Decision{}, fmt.Errorf("%w: reset after %dµs", errBadReply, x.resetAfter)
	case x.retryAfter < 0 || x.retryAfter > maxReplyMicros || (x.allowed == 1) != (x.retryAfter == 0):
		return store.Decision{}, fmt.Errorf("%w: retry after %dµs (allowed %d)", errBadReply, x.retryAfter, x.allowed)
	case x.repaired != 0 && x.repaired != 1:
		return store.Decision{}, fmt.Errorf("%w: repaired flag %d", errBadReply, x.repaired)
	}
	if x.allowed == 0 {
		next = min(next, x.retryAfter) // as the memory store
	}
	return store.Decision{
		Allowed:    x.allowed == 1,
		Capacity:   limit,
		Remaining:  x.remaining,
		ResetAfter: micros(x.resetAfter),
		NextAfter:  micros(next),
		RetryAfter: micros(x.retryAfter),
		LimitID:    id,
		Repaired:   x.repaired == 1,
	}, nil
}

// decodeLeanOverride decodes the reply of the lean script with overrides
// (package lua, "<algorithm>/lean-override") for a request with limit l and cost: the lean
// reply's five integers, then the applied override's code and value, as
// in the full reply. Under a scale override the decision describes the
// scaled limit. It never panics.
func decodeLeanOverride(v any, l store.Limit, cost int64, li *limitInfo) (store.Decision, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 7 && len(arr) != 8 {
		return store.Decision{}, fmt.Errorf("%w: got %T %v, want 5 integers, the override's code and value, and the time until one unit more", errBadReply, v, v)
	}
	// After the lean reply: the applied override's code and value.
	kind, okKind := arr[5].(int64)
	ov, okValue := arr[6].(string)
	if !okKind || !okValue {
		return store.Decision{}, fmt.Errorf("%w: override is %T and %T, want an integer and a string", errBadReply, arr[5], arr[6])
	}
	limit := li.l
	switch {
	case kind == 0:
		if ov != "" {
			return store.Decision{}, fmt.Errorf("%w: override %q without its code", errBadReply, ov)
		}
	case kind >= int64(store.OverrideScale) && kind <= int64(store.OverrideSuspend):
		o, err := contract.DecodeOverride(ov)
		if err != nil || int64(o.Kind) != kind {
			return store.Decision{}, fmt.Errorf("%w: override %d applied as %q", errBadReply, kind, ov)
		}
		if o.Kind == store.OverrideScale {
			limit = contract.ScaleLimit(l, o.Scale, cost)
		}
	default:
		return store.Decision{}, fmt.Errorf("%w: override code %d", errBadReply, kind)
	}
	ints := append(arr[:5:5], arr[7:]...)
	if kind == int64(store.OverrideExempt) || kind == int64(store.OverrideSuspend) {
		// Answered before the algorithm ran: nothing more is to come
		// (exempt), or nothing before the suspension ends.
		limit.Algorithm = store.FixedWindow
	}
	d, err := decodeLeanInts(ints, &limit, li.id)
	if err != nil {
		return store.Decision{}, err
	}
	d.Override = store.OverrideKind(kind)
	switch {
	case d.Override == store.OverrideExempt && !d.Allowed, d.Override == store.OverrideSuspend && d.Allowed:
		return store.Decision{}, fmt.Errorf("%w: %s override answered allowed %v", errBadReply, d.Override, d.Allowed)
	}
	return d, nil
}

// micros converts a microsecond count to a Duration.
func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

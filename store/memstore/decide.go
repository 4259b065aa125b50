package memstore

import (
	"math"
	"time"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// A decision runs in three steps: resolve (validate the request, find its
// limits' IDs, read the clock), decide (under the key's shard lock: read
// the key's record and evaluate the block, the de-duplication id and every
// limit) and, for Take, write (record the request, remember its id or
// start a block, making room when the store is full). The answer is then
// built from the verdict.

// op is one decision in progress under its shard's lock.
type op struct {
	s     *memStore
	sh    *shard
	h     uint64 // keyHash of the request's key
	req   store.Request
	cost  int64
	now   int64
	u     float64                 // the request's random value (Suppressed)
	ids   [store.MaxLimits]string // the limits' IDs, in request order
	logID [1]string               // a sliding window log's state ID
	rec   *record                 // the key's record; nil when it has none
	ks    *keyState               // the key's live key state, or nil
	v     verdict
	pool  *int // room reserved for a stacked decision (multi.go), or nil
}

// verdict is what the key's block and remembered ids and every limit make
// of the request. Each limit's outcome is kept apart, in a slice on the
// stack that methods take as a parameter: stored in a struct that also
// holds strings, it would escape to the heap.
type verdict struct {
	allowed   bool   // every limit admits the request
	blocked   bool   // the key is blocked (or the request started a block)
	started   bool   // the request started the block
	blockEnd  int64  // the block's end, ms
	scope     string // the ID of the limit that started the block
	duplicate bool   // the request replays a remembered id
	exhausted bool   // the request repeats a remembered id with no replay left
	dedup     dedupKey
	created   bool // the write created a record or a state
}

func (s *memStore) decide(req store.Request, take bool) (store.Decision, error) {
	if err := req.Validate(); err != nil {
		return store.Decision{}, err
	}
	return s.run(req, take)
}

// run is decide on a request already checked.
func (s *memStore) run(req store.Request, take bool) (store.Decision, error) {
	var o op
	o.s, o.req, o.cost = s, req, contract.Cost(&req)
	// One outcome per limit: most requests have one limit, and zeroing
	// room for eight costs more than deciding one.
	var out []outcome
	if len(req.Limits) == 1 {
		var one [1]outcome
		out = one[:]
	} else {
		var all [store.MaxLimits]outcome
		out = all[:len(req.Limits)]
	}
	s.limitIDs(req.Limits, &o.ids)
	if o.isLog() {
		o.logID[0] = s.logID(req.Limits)
	}
	if o.isSuppressed() {
		o.u = s.draw()
	}
	now := s.now()
	o.sh, o.h = s.locate(req.Key)
	o.sh.lock()
	o.now = o.sh.clock(now)
	var kind store.OverrideKind
	if req.ApplyOverride {
		var scaled [store.MaxLimits]store.Limit
		if d, done, err := o.overridden(take, &scaled, &kind); done {
			o.sh.mu.Unlock()
			return d, err
		}
	}
	var granted, delay int64
	var res []byte
	if req.Partial {
		granted = o.grant(out)
	} else {
		o.evaluate(out)
		if req.MaxWait > 0 {
			delay, res = o.wait(out)
		}
	}
	var err error
	if take {
		err = o.write(out)
	}
	o.sh.mu.Unlock()
	if err != nil {
		return store.Decision{}, err
	}
	d := o.decision(out)
	d.Override = kind
	if d.Allowed {
		o.admitted(&d, take, granted, delay, res)
	}
	return d, nil
}

// overridden applies the key's override to o (its limits scaled into
// scaled) under the shard's lock, setting kind. done reports that the
// override decided the request (exempt, suspend) or that the cost does
// not fit the limits it leaves: d and err are then the answer.
func (o *op) overridden(take bool, scaled *[store.MaxLimits]store.Limit, kind *store.OverrideKind) (d store.Decision, done bool, err error) {
	if *kind, d = o.applyOverride(take, scaled); *kind == store.OverrideExempt || *kind == store.OverrideSuspend {
		return d, true, nil
	}
	// Validate left the cost to be checked against the limits the
	// override leaves (a scaled limit holds at least the cost).
	if err := contract.CheckCost(o.cost, o.req.Limits); err != nil {
		return store.Decision{}, true, err
	}
	return store.Decision{}, false, nil
}

// admitted fills what an admission of o's request reports besides the
// limits: the units granted to a partial request, the delay and
// reservation of a request that waits, and the time of a reservation.
func (o *op) admitted(d *store.Decision, take bool, granted, delay int64, res []byte) {
	d.Granted = granted
	d.Delay = micros(delay)
	if take && delay > 0 {
		d.Reservation = string(res)
	}
	if take && o.req.Reserve && !d.Duplicate {
		d.Taken = time.UnixMicro(o.now)
	}
}

func (o *op) isLog() bool { return o.req.Limits[0].Algorithm == store.SlidingWindowLog }

// isSuppressed reports a request of the suppressed strategy, whose takes
// record refused requests as offered load.
func (o *op) isSuppressed() bool { return o.req.Limits[0].Algorithm == contract.Suppressed }

// stateIDs returns the IDs of the request's states: one per limit, or the
// one sliding window log.
func (o *op) stateIDs() []string {
	if o.isLog() {
		return o.logID[:]
	}
	return o.ids[:len(o.req.Limits)]
}

// liveState returns the live state of ID id, or nil.
func (o *op) liveState(id string) *limitState {
	if o.rec == nil {
		return nil
	}
	if i := o.rec.find(o.req.Limits[0].Algorithm, id); i >= 0 && o.rec.states[i].exp > o.now {
		return &o.rec.states[i]
	}
	return nil
}

// evaluate reads the key's record and fills the verdict and out.
func (o *op) evaluate(out []outcome) {
	v, now := &o.v, o.now
	o.rec = o.sh.index.get(o.req.Key, o.h)
	if o.rec != nil && o.rec.ks != nil && o.rec.ks.exp > now {
		o.ks = o.rec.ks
	}
	// Only requests with a blocking limit are subject to the key's block
	// (package store, "Blocks").
	if v.blocked = blocks(o.req.Limits) && o.ks.blocked(now); v.blocked {
		v.blockEnd, v.scope = o.ks.blockEnd, o.ks.scope
	}
	if !v.blocked && o.req.DedupID != "" {
		v.dedup = dedupKeyOf(o.req.DedupID)
		if e, ok := o.ks.remembered(v.dedup, now); ok {
			replays, _ := contract.DedupBound(&o.req)
			v.duplicate = e.replays < replays
			v.exhausted = !v.duplicate
		}
	}
	limits := o.req.Limits
	if o.isLog() {
		var lg *runLog
		if st := o.liveState(o.logID[0]); st != nil {
			lg = st.log
		}
		v.allowed = evaluateLog(limits, lg, now, o.cost, out)
		return
	}
	v.allowed = true
	for i := range limits {
		var c *counts
		if st := o.liveState(o.ids[i]); st != nil {
			c = &st.counts
		}
		evaluate(&limits[i], c, now, o.cost, o.u, &out[i])
		v.allowed = v.allowed && out[i].allowed
	}
}

// write applies a Take: it records the request, remembers its
// de-duplication id or starts a block, as the verdict and the limits'
// outcomes say, and updates the verdict.
func (o *op) write(out []outcome) error {
	v := &o.v
	if o.rec != nil {
		o.renew()
	}
	var err error
	switch {
	case v.blocked:
		// Only a counted refusal writes; skipped when it does not fit.
		if o.req.CountDenied && o.room(o.missing()) {
			o.record(out)
		}
	case v.duplicate:
		// The replay is counted against the id's bound.
		e := o.ks.ids[v.dedup]
		e.replays++
		o.ks.ids[v.dedup] = e
	case v.allowed:
		need := o.missing()
		if o.req.DedupID != "" && !v.exhausted {
			// The id, and the key state to hold it. An expired entry of
			// the id is written over; a live one, with no replay left, is
			// kept as it is until it expires.
			if o.ks == nil {
				need += 2
			} else if _, ok := o.ks.ids[v.dedup]; !ok {
				need++
			}
		}
		if !o.room(need) {
			err = &store.BackendError{Op: "take", Kind: "capacity", Err: store.ErrTooManyKeys}
			break
		}
		o.record(out)
		if o.req.DedupID != "" && !v.exhausted {
			o.remember()
		}
	default:
		o.writeRefused(out)
	}
	o.finish()
	return err
}

// writeRefused writes what a refusal by a limit writes: the request when
// refusals count (or the limit is suppressed), and a block when a refusing
// limit blocks. Nothing is written when the states it needs do not fit.
func (o *op) writeRefused(out []outcome) {
	v := &o.v
	strikes := o.ks.strikeCount(o.now)
	best, ms := blockFor(o.req.Limits, out, strikes)
	// A suppressed limit counts every refused request as offered.
	counted := o.req.CountDenied || o.isSuppressed()
	need := 0
	if counted {
		need += o.missing()
	}
	if best >= 0 && o.ks == nil {
		need++
	}
	if !o.room(need) {
		return
	}
	if counted {
		o.record(out)
	}
	if best >= 0 {
		o.startBlock(best, ms, strikes)
		v.blocked, v.started = true, true
		v.blockEnd, v.scope = o.ks.blockEnd, o.ks.scope
	}
}

// renew prepares the key's record for writing. States of the request
// that have expired are cleared in place, to be written afresh without
// counting as new; the record's other expired states, and its key state
// once expired, are dropped.
func (o *op) renew() {
	r, own := o.rec, o.stateIDs()
	freed := 0
	for i := 0; i < len(r.states); {
		st := &r.states[i]
		if st.exp > o.now {
			i++
			continue
		}
		if st.alg == o.req.Limits[0].Algorithm && contains(own, st.id) {
			st.counts = counts{}
			if st.log != nil {
				st.log.clear()
			}
			i++
			continue
		}
		r.removeState(i)
		freed++
	}
	if r.ks != nil && o.ks == nil {
		freed += 1 + len(r.ks.ids)
		r.ks = nil
	}
	o.sh.size -= freed
	o.s.budget.give(freed)
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// missing returns how many limit states recording the request creates.
func (o *op) missing() int {
	if o.rec == nil {
		return len(o.stateIDs())
	}
	n := 0
	for _, id := range o.stateIDs() {
		if o.rec.find(o.req.Limits[0].Algorithm, id) < 0 {
			n++
		}
	}
	return n
}

// room reports whether need new states fit, making room when the store is
// full.
func (o *op) room(need int) bool {
	if o.pool != nil {
		return o.draw(need)
	}
	return need == 0 || o.s.makeRoom(o.sh, o.now, need, o.rec)
}

// finish moves the key to the front of its shard's list (a Take is a use
// of the key, whatever the verdict), drops a record left empty and, when
// the write created state, lets the shard examine a few records for
// expired state.
func (o *op) finish() {
	if o.rec != nil {
		if o.rec.size() == 0 {
			o.sh.remove(o.rec)
			o.rec = nil
		} else {
			o.sh.touch(o.rec, o.now)
		}
	}
	if o.v.created && o.pool == nil {
		o.s.budget.give(o.sh.sweepSome(o.now-sweepGrace, sweepBatch, o.rec))
	}
}

// sweepBatch is how many records a write that created state examines for
// expired state.
const sweepBatch = 4

// sweepGrace is how long (µs) expired state stays before the amortized
// sweep drops it, so that a key back within that time finds its record
// and renews it in place instead of the shard indexing a new one and
// dropping an old one on every request. Expired state reads as absent
// all the same, and a full store drops it at once (makeRoom).
const sweepGrace = 1_000_000

// ensureRecord returns the key's record, creating it.
func (o *op) ensureRecord() *record {
	if o.rec == nil {
		o.rec = o.sh.newRecord(o.req.Key, o.h, o.now)
		o.v.created = true
	}
	return o.rec
}

// state returns the record's state of ID id, adding it when missing.
func (o *op) state(id string) *limitState {
	r, alg := o.ensureRecord(), o.req.Limits[0].Algorithm
	if i := r.find(alg, id); i >= 0 {
		return &r.states[i]
	}
	r.states = append(r.states, limitState{alg: alg, id: id})
	o.sh.size++
	o.v.created = true
	return &r.states[len(r.states)-1]
}

// record adds the request to every limit: an admitted request, or a
// refused one whose attempt counts.
func (o *op) record(out []outcome) {
	if !o.isLog() {
		for i, id := range o.ids[:len(o.req.Limits)] {
			st := o.state(id)
			sup := st.sup
			st.counts = out[i].next
			if o.isSuppressed() {
				if sup == nil {
					sup = new(suppression)
				}
				*sup = out[i].nextSup
				st.sup = sup
				if o.v.allowed {
					st.cur += o.cost // offered and accepted
				}
			}
			o.sh.expiresAt(st.exp)
		}
		return
	}
	var most int64
	for _, l := range o.req.Limits {
		most = max(most, l.Rate)
	}
	longest := longestPeriod(o.req.Limits)
	st := o.state(o.logID[0])
	if st.log == nil {
		st.log = &runLog{}
	}
	st.log.prune(o.now - longest)
	st.log.add(o.now, o.cost)
	if o.req.CountDenied {
		// Counted refusals can outgrow every window's capacity. A
		// decision never looks past the (capacity − cost + 1)-th newest
		// entry, so keeping the newest (largest rate + cost) changes none.
		st.log.trim(most + o.cost)
	}
	st.exp = st.log.newest() + longest
	o.sh.expiresAt(st.exp)
}

// keyState returns the key's state, creating it when the key has none.
func (o *op) keyState() *keyState {
	if o.ks == nil {
		o.ks = &keyState{}
		o.ensureRecord().ks = o.ks
		o.sh.size++
		o.v.created = true
	}
	return o.ks
}

// remember stores the admitted request's de-duplication id for its window
// ([contract.DedupBound]), with no replay yet. Expired ids are pruned
// once the key holds twice as many as at the last pruning (plus 16):
// amortized O(1) per id.
func (o *op) remember() {
	ks := o.keyState()
	if ks.ids == nil {
		ks.ids = make(map[dedupKey]dedupEntry)
	}
	if _, ok := ks.ids[o.v.dedup]; !ok {
		o.sh.size++
	}
	_, window := contract.DedupBound(&o.req)
	exp := o.now + window
	ks.ids[cloneID(o.v.dedup)] = dedupEntry{exp: exp}
	ks.idsEnd = max(ks.idsEnd, exp)
	o.sh.expiresAt(exp)
	if len(ks.ids) > 2*ks.idsLive+16 {
		n := ks.pruneIDs(o.now)
		o.sh.size -= n
		o.s.budget.give(n)
	}
	ks.updateExp()
}

// startBlock blocks the key for ms milliseconds on behalf of limit best
// and, when that limit escalates, counts the strike. strikes is the
// key's strike count before this block.
func (o *op) startBlock(best int, ms, strikes int64) {
	ks := o.keyState()
	l := o.req.Limits[best]
	nowMS := floorMS(o.now)
	ks.blockEnd = nowMS + ms
	ks.scope = o.ids[best]
	if l.BlockMax > l.Block {
		ks.strikes = strikes + 1
		ks.strikesEnd = nowMS + ms + l.BlockMax.Milliseconds()
	}
	ks.updateExp()
	o.sh.expiresAt(ks.exp)
}

// decision builds the answer, after the shard's lock is released: it
// reads only the verdict, the outcomes and the request. A blocked request
// reports the block: as RetryAfter and ResetAfter the later of its end
// (its remaining time in whole milliseconds) and the longest retry time
// of the limits that refuse the request, and the limit that started it as
// LimitID (Index -1 when that limit is not in the request). Otherwise the
// deciding limit is, for a refused request, the refusing limit with the
// longest retry time, for an admitted one (a duplicate included) the limit
// with the fewest units remaining; ties go to the earliest limit. Remaining,
// ResetAfter and PerLimit describe the limits after the request when it
// was admitted and recorded, and without it otherwise.
func (o *op) decision(out []outcome) store.Decision {
	v := &o.v
	n := len(o.req.Limits)
	allowed := !v.blocked && (v.duplicate || v.allowed)
	after := allowed && !v.duplicate
	var dec store.Decision
	if v.blocked {
		dec = o.blockDecision(out)
	} else {
		d := deciding(out, allowed, after)
		dec = store.Decision{
			Allowed:    allowed,
			Capacity:   o.req.Limits[d].Capacity(),
			Remaining:  out[d].remaining(after),
			ResetAfter: micros(out[d].resetAfter(after)),
			NextAfter:  micros(out[d].nextAfter(&o.req.Limits[d], after)),
			LimitID:    o.ids[d],
			Index:      d,
			Duplicate:  v.duplicate,
		}
		if !allowed {
			dec.RetryAfter = micros(out[d].retry)
			// The next unit comes no later than the request fits; the
			// derived time may be a microsecond or two late.
			dec.NextAfter = min(dec.NextAfter, dec.RetryAfter)
		}
	}
	if o.isSuppressed() {
		f, drawn := suppressionOf(out, allowed)
		dec.Suppression, dec.Suppressed = f, drawn && !v.blocked
	}
	if n > 1 {
		dec.PerLimit = make([]store.LimitState, n)
		for i := range out {
			dec.PerLimit[i] = store.LimitState{
				Remaining:  out[i].remaining(after),
				ResetAfter: micros(out[i].resetAfter(after)),
				NextAfter:  micros(out[i].nextAfter(&o.req.Limits[i], after)),
			}
		}
	}
	return dec
}

// blockDecision describes the block the request met or started.
func (o *op) blockDecision(out []outcome) store.Decision {
	v := &o.v
	// A retry at the block's end must also fit every limit.
	left := (v.blockEnd - floorMS(o.now)) * 1000
	for i := range out {
		if !out[i].allowed && out[i].retry > left {
			left = out[i].retry
		}
	}
	dec := store.Decision{
		Capacity:     o.req.Limits[0].Capacity(),
		ResetAfter:   micros(left),
		NextAfter:    micros(left),
		RetryAfter:   micros(left),
		LimitID:      v.scope,
		Index:        -1,
		Blocked:      true,
		BlockStarted: v.started,
	}
	for i, id := range o.ids[:len(o.req.Limits)] {
		if id == v.scope {
			dec.Capacity, dec.Index = o.req.Limits[i].Capacity(), i
			break
		}
	}
	return dec
}

// deciding returns the index of the limit that decides a request that met
// no block: for a refused request the refusing limit with the longest
// retry time, for an admitted one the limit with the fewest units
// remaining, after the request when it was recorded (after) and without
// it otherwise; ties go to the earliest limit.
func deciding(out []outcome, allowed, after bool) int {
	d := -1
	for i := range out {
		switch {
		case allowed:
			if d < 0 || out[i].remaining(after) < out[d].remaining(after) {
				d = i
			}
		case !out[i].allowed:
			if d < 0 || out[i].retry > out[d].retry {
				d = i
			}
		}
	}
	return d
}

// suppressionOf returns the suppression of a request of the suppressed
// strategy: the largest factor met, and whether a refusal was drawn, which
// it is when every refusing limit refused by the draw.
func suppressionOf(out []outcome, allowed bool) (factor float64, drawn bool) {
	var f int64
	drawn = !allowed
	for i := range out {
		f = max(f, out[i].fppm)
		if !out[i].allowed && !out[i].drawn {
			drawn = false
		}
	}
	return float64(f) / ppm, drawn
}

// remaining returns the limit's units left after the request (after) or
// without it.
func (o *outcome) remaining(after bool) int64 {
	if after {
		return o.rem1
	}
	return o.rem0
}

// resetAfter returns the limit's time to full capacity in µs, after the
// request (after) or without it.
func (o *outcome) resetAfter(after bool) int64 {
	if after {
		return o.reset1
	}
	return o.reset0
}

// nextAfter returns the time (µs) until limit l, whose outcome this is,
// admits one unit more than it has remaining, after the request (after)
// or without it: derived from the remaining units and the reset time
// where they say it (contract.NextUS), else next0 or next1.
func (o *outcome) nextAfter(l *store.Limit, after bool) int64 {
	rem, reset, next := o.rem0, o.reset0, o.next0
	if after {
		rem, reset, next = o.rem1, o.reset1, o.next1
	}
	if us, ok := contract.NextUS(l, rem, reset); ok {
		return us
	}
	return next
}

// micros converts microseconds to a Duration, saturating: a bucket with a
// large burst and a slow rate can take longer than a Duration holds to
// refill.
func micros(us int64) time.Duration {
	if us > math.MaxInt64/int64(time.Microsecond) {
		return math.MaxInt64
	}
	return time.Duration(us) * time.Microsecond
}

// blocks reports whether one of limits blocks (Block > 0).
func blocks(limits []store.Limit) bool {
	for i := range limits {
		if limits[i].Block > 0 {
			return true
		}
	}
	return false
}

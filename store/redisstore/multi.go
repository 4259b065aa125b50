package redisstore

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

var _ store.MultiStore = (*redisStore)(nil)

// refundAttempts is how many times a refund is sent before its outcome is
// given up as unknown. A receipt makes every attempt safe to repeat.
const refundAttempts = 3

// stackCounts counts the refunds of stacked decisions.
type stackCounts struct {
	refunds    atomic.Uint64
	unrefunded atomic.Uint64
}

// Refunds returns how many parts of stacked decisions (TakeMulti)
// recorded a request and were refunded because a later step refused it,
// since the Store was created. Only stacks whose keys lie in several Redis
// Cluster slots take several steps. Metrics collectors find it through
// the method set, as an interface{ Refunds() uint64 }. Safe for
// concurrent use.
func (s *redisStore) Refunds() uint64 { return s.stack.refunds.Load() }

// Unrefunded returns how many parts of stacked decisions should have been
// refunded but could not be, because Redis failed for every attempt: their
// units stay charged until they expire. Safe for concurrent use.
func (s *redisStore) Unrefunded() uint64 { return s.stack.unrefunded.Load() }

// stackPart is one request of a stack, with its full-script call when a
// step may run the general stacked script or a refund (see
// redisStore.stackPart). li must be set: decoding reads it.
type stackPart struct {
	req  *store.Request
	cost int64
	li   *limitInfo // of the request's first limit
	// key is a plain request's one state key; for other requests, with
	// the full call, the last of their state keys (read only for plain
	// parts).
	key string
	// nonce names a sliding window log take's units; "" for others.
	nonce   string
	keys    []any // the full script's KEYS; nil when not needed
	argv    []any // the full script's ARGV, mode first; nil when not needed
	receipt string
}

// TakeMulti implements [store.MultiStore].
//
// On a single Redis node (a *redis.Client, Sentinel included) the whole
// stack is one atomic script: the parts are evaluated, then written all
// or nothing, whatever their keys. On a Redis Cluster the parts whose keys
// hash to one slot form one step, run as one atomic script; the steps run
// in the order of their first part (on a Ring, whose sharding the store
// does not know, every part is a step). A step that admits writes, with its
// records, a receipt per part (a key in the part's slot, holding the
// take's time, that expires once no refund can come: after the stack's
// steps and refund attempts, (steps + 4) Timeouts and at least a second,
// or the part's longest period when shorter). When a later
// step refuses, or fails, every earlier step, and the failing one, is
// refunded part by part: the refund script undoes the part's records and
// marks its receipt as used, in one atomic step, so that
//
//   - a refund is applied at most once: a resent refund (after a lost
//     reply) finds the receipt used and changes nothing;
//   - a refund never gives back what was not recorded: a take whose reply
//     was lost and that did not run left no receipt;
//   - its outcome is known: every answer says whether the refund was
//     applied now, before, or had nothing to undo. A refund is sent up
//     to three times, each within the store's Timeout and detached from
//     ctx (a client that goes away does not leave units charged); only
//     when all fail is the part counted in the decision's Unrefunded
//     ([store.MultiDecision]) and Unrefunded, its units charged until they expire (the error
//     errs on the strict side, never on the lenient one). Likewise, a
//     step whose reply timed out may still run after its refund found no
//     receipt; its units then stay charged until they expire.
//
// Refunded parts are counted in the decision's Refunded and in
// Refunds. Parts with CountDenied are not refunded: their attempt
// counts. Steps after a refusing one are not taken: they are peeked, to
// describe the refusal with the longest retry time, and so start no block
// and count no refusal. Between a step and its refund, other requests see
// the refunded units as used: a stack split over slots is exact in what
// it finally charges, not atomic.
//
// Refusals of stacked decisions are not cached. A refusal that Take
// cached (see Take) is not undone by a refund that frees units of
// its key: it refuses until its retry time, as after a Reset made
// elsewhere. Errors are as for Take.
func (s *redisStore) TakeMulti(ctx context.Context, reqs []store.Request) (store.MultiDecision, error) {
	if err := contract.ValidateStack(reqs); err != nil {
		return store.MultiDecision{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.MultiDecision{}, backendError(modeTake, err)
	}
	s.eviction.start(s.client)
	groups := s.stackGroups(reqs)
	// A stack decided in one step by a lean stacked script, the common
	// case, never needs the parts' full-script calls: only the stacked
	// script and refunds read them.
	withFull := len(groups) > 1 ||
		stackKind(groups[0], func(i int) *store.Request { return &reqs[i] }) == stackGeneral
	var buf [store.MaxParts]stackPart
	parts := buf[:len(reqs)]
	for i := range reqs {
		parts[i] = s.stackPart(&reqs[i], withFull)
	}
	var receiptMS int64
	if len(groups) > 1 {
		receiptMS = max(1000, int64(len(groups)+refundAttempts+1)*s.timeout.Milliseconds())
		nonce := s.nonce()
		for i := range parts {
			if !reqs[i].CountDenied {
				parts[i].receipt = keyBase(s.prefix, encodeKey(reqs[i].Key)) + "receipt:" + nonce
			}
		}
	}
	md := store.MultiDecision{Parts: make([]store.Decision, len(parts))}
	for gi, g := range groups {
		allowed, err := s.runStep(ctx, modeTake, stackStep{parts: parts, g: g, receiptMS: receiptMS, out: md.Parts})
		if err != nil {
			// Whether the failed step ran is unknown: its receipts tell.
			s.refundSteps(ctx, parts, groups[:gi+1], &md)
			return store.MultiDecision{}, err
		}
		if allowed {
			continue
		}
		s.refundSteps(ctx, parts, groups[:gi], &md)
		for _, later := range groups[gi+1:] {
			if _, err := s.runStep(ctx, modePeek, stackStep{parts: parts, g: later, out: md.Parts}); err != nil {
				// Unknown: described as admitting, so that the refusal
				// of the steps that answered decides.
				for _, i := range later {
					md.Parts[i] = store.Decision{Allowed: true, Capacity: reqs[i].Limits[0].Capacity(), Remaining: reqs[i].Limits[0].Capacity(), LimitID: reqs[i].Limits[0].ID()}
				}
				continue
			}
			for _, i := range later {
				withoutRequest(&md.Parts[i], &parts[i])
			}
		}
		break
	}
	md.Part = contract.MostRestrictive(md.Parts)
	md.Decision = md.Parts[md.Part]
	md.Allowed = true
	for i := range md.Parts {
		md.Allowed = md.Allowed && md.Parts[i].Allowed
	}
	return md, nil
}

// stackPart builds the part of a validated request in mode take, with its
// full-script call when withFull is set.
func (s *redisStore) stackPart(req *store.Request, withFull bool) stackPart {
	p := stackPart{req: req, cost: contract.Cost(req), li: s.limits.get(req.Limits[0])}
	if !withFull {
		p.key = keyOf(s.prefix, req.Key, p.li.suffix)
		if req.Limits[0].Algorithm == store.SlidingWindowLog {
			p.nonce = s.nonce()
		}
		return p
	}
	base := keyBase(s.prefix, encodeKey(req.Key))
	args := s.fullArgs(modeTake, base, &s.scripts.byAlgorithm[req.Limits[0].Algorithm][full], req, p.cost)
	nk := args[2].(int)
	p.keys, p.argv = args[3:3+nk], args[3+nk:]
	p.key = p.keys[len(p.keys)-1].(string) // a plain request's one state key, after the four fixed keys
	p.nonce = p.argv[2].(string)
	return p
}

// singleSteps[n] is the one step of a stack of n parts on a single node:
// every part, in order. Steps are only read.
var singleSteps = func() (steps [store.MaxParts + 1][][]int) {
	for n := range steps {
		all := make([]int, n)
		for i := range all {
			all[i] = i
		}
		steps[n] = [][]int{all}
	}
	return steps
}()

// stackGroups splits a stack into the steps it is decided in: one for a
// single node, one per hash slot on a Redis Cluster (in the order of
// their first part), one per part for other clients (a Ring), whose
// sharding the store does not know.
func (s *redisStore) stackGroups(reqs []store.Request) [][]int {
	if _, single := s.client.(*redis.Client); single {
		return singleSteps[len(reqs)]
	}
	var groups [][]int
	var slots []int
	for i := range reqs {
		slot := -1 - i // a part of its own
		if s.pipes.cluster != nil {
			slot = hashSlot(encodeKey(reqs[i].Key))
		}
		j := 0
		for j < len(slots) && slots[j] != slot {
			j++
		}
		if j == len(slots) {
			slots = append(slots, slot)
			groups = append(groups, nil)
		}
		groups[j] = append(groups[j], i)
	}
	return groups
}

// stackStep is one step of a stacked decision: the parts g of parts,
// decided by one script run.
type stackStep struct {
	parts []stackPart
	g     []int
	// receiptMS, for a take, is the TTL of the receipts the step writes;
	// 0 for none.
	receiptMS int64
	// out receives the parts' decisions, indexed like parts.
	out []store.Decision
}

// stackScript says which stacked script decides a step.
type stackScript int

const (
	// stackGeneral is the stacked script: any parts.
	stackGeneral stackScript = iota
	// stackLean is the lean stacked script: plain GCRA and token bucket
	// parts only.
	stackLean
	// stackLeanWindows is the lean stacked script of window parts: plain
	// parts of those and of the fixed window, the sliding window counter
	// and the sliding window log, at least one of these.
	stackLeanWindows
)

// lean returns the lean stacked script that decides the step, when its
// every part is a plain request (one limit, none of the features that
// need the general script); otherwise stackGeneral.
func (st *stackStep) lean() stackScript {
	return stackKind(st.g, func(i int) *store.Request { return st.parts[i].req })
}

// stackKind is stackStep.lean for the parts g of a stack, req(i) being
// part i's request.
func stackKind(g []int, req func(int) *store.Request) stackScript {
	kind := stackLean
	for _, i := range g {
		switch partKind(req(i)) {
		case stackGeneral:
			return stackGeneral
		case stackLeanWindows:
			kind = stackLeanWindows
		}
	}
	return kind
}

// partKind returns the stacked script one part needs: stackLean for a
// plain GCRA or token bucket request, stackLeanWindows for a plain
// request of a window algorithm, else stackGeneral.
func partKind(req *store.Request) stackScript {
	switch alg := req.Limits[0].Algorithm; {
	case variantOf(req) != lean:
		return stackGeneral
	case alg == store.FixedWindow || alg == store.SlidingWindowCounter || alg == store.SlidingWindowLog:
		return stackLeanWindows
	}
	return stackLean
}

// runStep runs the stacked script for st in mode, writing its parts'
// decisions into st.out, and reports whether every part admitted.
func (s *redisStore) runStep(ctx context.Context, mode string, st stackStep) (bool, error) {
	return s.runStepWith(ctx, mode, &st, st.lean())
}

// runStepWith is runStep with the stacked script kind, which must decide
// st's parts: st.lean's, or stackGeneral.
func (s *redisStore) runStepWith(ctx context.Context, mode string, st *stackStep, kind stackScript) (bool, error) {
	cmd := command{sc: &s.scripts.stacked}
	switch kind {
	case stackLean:
		cmd.sc = &s.scripts.stackedLean
		cmd.args = st.leanArgs(s, mode, cmd.sc, false)
	case stackLeanWindows:
		cmd.sc = &s.scripts.stackedLeanWindows
		cmd.args = st.leanArgs(s, mode, cmd.sc, true)
		cmd.own = st.nonces()
	default:
		cmd.args = st.args(mode, cmd.sc)
	}
	cmd.key = cmd.args[3].(string)
	v, err := s.do(ctx, mode, &cmd)
	if err != nil {
		return false, err
	}
	decode := st.decode
	if kind != stackGeneral {
		decode = st.decodeLean
	}
	all, err := decode(v)
	if err != nil {
		return false, backendError(mode, err)
	}
	return all, nil
}

// decode checks and decodes the stacked reply v into st.out: {allowed
// (1 when every part admits), each part's full-script reply...}.
func (st *stackStep) decode(v any) (bool, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 1+len(st.g) {
		return false, fmt.Errorf("%w: stacked reply %T of %d parts", errBadReply, v, len(st.g))
	}
	flagV, ok := arr[0].(int64)
	if !ok || (flagV != 0 && flagV != 1) {
		return false, fmt.Errorf("%w: stacked allowed flag %v", errBadReply, arr[0])
	}
	all := true
	for j, i := range st.g {
		p := &st.parts[i]
		r, err := decodeReply(arr[1+j], p.req.Limits, p.cost)
		if err != nil {
			return false, fmt.Errorf("part %d: %w", i, err)
		}
		st.out[i] = r.decisionOf(p.req.Limits, p.li.id)
		all = all && st.out[i].Allowed
	}
	if all != (flagV == 1) {
		return false, fmt.Errorf("%w: stacked allowed flag %d disagrees with its parts", errBadReply, flagV)
	}
	return all, nil
}

// decodeLean checks and decodes the reply v of a lean stacked script
// into st.out: one flat array, {allowed (1 when every part admits), then
// each part's lean reply: allowed, remaining, reset after µs, retry after
// µs, repaired, and the time until one unit more from the sliding window
// log and counter}.
func (st *stackStep) decodeLean(v any) (bool, error) {
	arr, ok := v.([]any)
	want := 1
	for _, i := range st.g {
		want += leanStackedInts(st.parts[i].li.l.Algorithm)
	}
	if !ok || len(arr) != want {
		return false, fmt.Errorf("%w: lean stacked reply %T of %d parts, want %d integers", errBadReply, v, len(st.g), want)
	}
	flagV, ok := arr[0].(int64)
	if !ok || (flagV != 0 && flagV != 1) {
		return false, fmt.Errorf("%w: stacked allowed flag %v", errBadReply, arr[0])
	}
	all, at := true, 1
	for _, i := range st.g {
		p := &st.parts[i]
		n := leanStackedInts(p.li.l.Algorithm)
		d, err := decodeLeanInts(arr[at:at+n], &p.li.l, p.li.id)
		if err != nil {
			return false, fmt.Errorf("part %d: %w", i, err)
		}
		at += n
		st.out[i] = d
		all = all && d.Allowed
	}
	if all != (flagV == 1) {
		return false, fmt.Errorf("%w: stacked allowed flag %d disagrees with its parts", errBadReply, flagV)
	}
	return all, nil
}

// leanStackedInts is how many integers a lean stacked script answers for a
// part of alg: the lean reply's five, and the time until one unit more
// from the algorithms whose scripts report it.
func leanStackedInts(alg store.Algorithm) int {
	if scriptNext(alg) {
		return 6
	}
	return 5
}

// args returns the stacked script sc's EVALSHA arguments for st in mode.
func (st *stackStep) args(mode string, sc *script) []any {
	nk, na := 0, 0
	for _, i := range st.g {
		nk += len(st.parts[i].keys)
		na += len(st.parts[i].argv)
		if st.receiptMS > 0 {
			nk++
		}
	}
	args := make([]any, 0, 3+nk+3+3*len(st.g)+na)
	args = append(args, "evalsha", sc.sha, nk)
	for _, i := range st.g {
		args = append(args, st.parts[i].keys...)
	}
	args = st.appendReceipts(args, mode)
	for _, i := range st.g {
		p := &st.parts[i]
		args = append(args, int(p.req.Limits[0].Algorithm), len(p.keys), len(p.argv))
	}
	for _, i := range st.g {
		start := len(args)
		args = append(args, st.parts[i].argv...)
		args[start] = mode
	}
	return args
}

// appendReceipts appends to a stacked script call's arguments, after the
// parts' keys, their receipt keys (with receipts: receiptMS > 0), then
// ARGV[1..3]: the mode, the receipts' TTL or "", and the number of parts.
func (st *stackStep) appendReceipts(args []any, mode string) []any {
	var ttl any = ""
	if st.receiptMS > 0 {
		for _, i := range st.g {
			// A part that counts refusals gets no receipt; the script
			// writes none for it, and any key of its slot will do.
			r := st.parts[i].receipt
			if r == "" {
				r = st.parts[i].keys[0].(string)
			}
			args = append(args, r)
		}
		ttl = st.receiptMS
	}
	return append(args, modeArg(mode), ttl, len(st.g))
}

// nonces returns how many of st's parts are sliding window log parts,
// whose nonces end the arguments of the lean stacked script of window
// parts (leanArgs).
func (st *stackStep) nonces() int {
	n := 0
	for _, i := range st.g {
		if st.parts[i].req.Limits[0].Algorithm == store.SlidingWindowLog {
			n++
		}
	}
	return n
}

// leanArgs returns the lean stacked script sc's EVALSHA arguments for st
// (whose every part st.lean accepts) in mode; with algorithms, each
// part's arguments start with its algorithm's index, and the sliding
// window log parts' nonces follow the parts (the window parts' script).
func (st *stackStep) leanArgs(s *redisStore, mode string, sc *script, algorithms bool) []any {
	nk := len(st.g)
	if st.receiptMS > 0 {
		nk *= 2
	}
	per := 5 // and a log part's nonce, with algorithms
	if algorithms {
		per = 6
	}
	args := make([]any, 0, 3+nk+3+per*len(st.g))
	args = append(args, argEvalSHA, sc.shaArg, nk)
	for _, i := range st.g {
		args = append(args, st.parts[i].key)
	}
	args = st.appendReceipts(args, mode)
	for _, i := range st.g {
		p := &st.parts[i]
		if algorithms {
			args = append(args, int(p.req.Limits[0].Algorithm))
		}
		args = append(args, p.cost, p.li.rate, p.li.period, p.li.capacity)
	}
	if algorithms {
		// Each log part's nonce, the one its full-script arguments
		// carry when it has them (mode, cost, nonce, ...), which a
		// refund names its units by.
		for _, i := range st.g {
			if p := &st.parts[i]; p.req.Limits[0].Algorithm == store.SlidingWindowLog {
				args = append(args, p.nonce)
			}
		}
	}
	return args
}

// refundSteps refunds every part of the steps groups that has a receipt,
// and counts the outcomes in md and the store.
func (s *redisStore) refundSteps(ctx context.Context, parts []stackPart, groups [][]int, md *store.MultiDecision) {
	for _, g := range groups {
		for _, i := range g {
			p := &parts[i]
			if p.receipt == "" {
				continue
			}
			switch s.refund(ctx, p) {
			case refundApplied:
				md.Refunded++
				s.stack.refunds.Add(1)
				withoutRequest(&md.Parts[i], p)
			case refundUnknown:
				md.Unrefunded++
				s.stack.unrefunded.Add(1)
			}
		}
	}
}

// withoutRequest turns the decision of a part that admitted the request
// after it (a take since refunded, or a peek) into one without it, as a
// part that admits a refused stack is described: its units remaining
// include the request's cost again. ResetAfter and NextAfter are left as
// they were, but a limit that is full again has no more quota to come.
func withoutRequest(d *store.Decision, p *stackPart) {
	if !d.Allowed {
		return
	}
	d.Remaining = min(d.Remaining+p.cost, d.Capacity)
	if d.Remaining == d.Capacity {
		d.NextAfter = 0
	}
	for k := range d.PerLimit {
		c := p.req.Limits[k].Capacity()
		d.PerLimit[k].Remaining = min(d.PerLimit[k].Remaining+p.cost, c)
		if d.PerLimit[k].Remaining == c {
			d.PerLimit[k].NextAfter = 0
		}
	}
}

// Refund outcomes.
const (
	refundNothing = iota // no receipt: nothing was recorded, or it expired
	refundApplied        // applied, by this call or by an attempt whose reply was lost
	refundUnknown        // every attempt failed
)

// refund gives back what part p recorded, at most once, trying up to
// refundAttempts times.
func (s *redisStore) refund(ctx context.Context, p *stackPart) int {
	sc := &s.scripts.refund
	state := p.keys[4:] // after the block, strike, de-duplication and override keys
	n := len(p.req.Limits)
	args := make([]any, 0, 3+1+len(state)+5+3*n)
	args = append(args, "evalsha", sc.sha, 1+len(state), p.receipt)
	args = append(args, state...)
	args = append(args, "refund", int(p.req.Limits[0].Algorithm), p.cost, p.argv[2], n)
	for _, l := range p.req.Limits {
		li := s.limits.get(l)
		args = append(args, li.rate, li.period, li.capacity)
	}
	ctx = context.WithoutCancel(ctx)
	for attempt := 0; attempt < refundAttempts; attempt++ {
		v, err := s.do(ctx, "refund", &command{key: p.receipt, sc: sc, args: args})
		if err != nil {
			continue
		}
		switch v {
		case int64(1), int64(2):
			return refundApplied
		case int64(0):
			return refundNothing
		}
	}
	return refundUnknown
}

// hashSlot returns the Redis Cluster slot of a key whose hash tag is tag:
// CRC-16/XMODEM of the tag, modulo 16384.
func hashSlot(tag string) int {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) & 16383
}

package memstore

import (
	"context"
	"slices"
	"strings"

	"github.com/ratekeeper/ratekeeper/internal/keybuf"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

var _ store.MultiStore = (*memStore)(nil)

// TakeMulti implements [store.MultiStore] in one atomic step: it locks the
// shards of every part's key, in shard order (so that concurrent stacks
// and Takes cannot deadlock), evaluates every part as Take would, and
// records the request in every part only if all admit it. A refusing
// part writes what its own refusal writes (a counted refusal, a block); a
// part that admits while another refuses records nothing, unless it
// counts refusals. No other decision can see a stack half written.
//
// Room for the states the stack creates is reserved before anything is
// written, evicting as Take does when the store is full; when it cannot be
// had, TakeMulti records nothing and returns a *[store.BackendError] of
// Kind "capacity", as Take does. Errors for invalid stacks are those
// of [contract.ValidateStack]. ctx is consulted only to copy a key held
// in memory the request lends (as Take does).
func (s *memStore) TakeMulti(ctx context.Context, reqs []store.Request) (store.MultiDecision, error) {
	if err := contract.ValidateStack(reqs); err != nil {
		return store.MultiDecision{}, err
	}
	reqs = ownKeys(ctx, reqs)
	// A stack has at most store.MaxParts parts: its working memory stays
	// on the stack, but for the outcomes of parts with several limits.
	var (
		opsBuf    [store.MaxParts]op
		outsBuf   [store.MaxParts][]outcome
		oneBuf    [store.MaxParts]outcome
		shardsBuf [store.MaxParts]*shard
	)
	ops, shards := opsBuf[:len(reqs)], shardsBuf[:0]
	for i := range reqs {
		// Written through the arrays, not the slices over them, which
		// would move them to the heap.
		if len(reqs[i].Limits) == 1 {
			outsBuf[i] = oneBuf[i : i+1 : i+1]
		} else {
			outsBuf[i] = make([]outcome, len(reqs[i].Limits))
		}
		sh := s.shardFor(reqs[i].Key)
		if !slices.Contains(shards, sh) {
			shards = append(shards, sh)
		}
	}
	slices.SortFunc(shards, func(a, b *shard) int { return a.pos - b.pos })
	outs := outsBuf[:len(reqs)]

	all, reserved, err := s.lockAndReserve(reqs, ops, outs, shards)
	if err != nil {
		return store.MultiDecision{}, err
	}
	pool := reserved
	var heldBuf [store.MaxParts]bool
	held := heldBuf[:len(ops)]
	for i := range ops {
		o := &ops[i]
		o.pool = &pool
		if all || !o.admits() {
			_ = o.write(outs[i]) // the reserved room covers every write
			continue
		}
		// The part admits but the stack refuses: write as for a refusal
		// by no limit (a counted refusal only, no block).
		held[i] = true
		o.v.allowed = false
		_ = o.write(outs[i])
		o.v.allowed = true
	}
	for i := len(shards) - 1; i >= 0; i-- {
		shards[i].mu.Unlock()
	}
	s.budget.give(pool)

	return stackDecision(ops, outs, held, all), nil
}

// lockAndReserve evaluates the stack under the lock of every shard of its
// keys, sorted, and reserves the room its writes need. Making room locks
// other shards, which must not be held then: when the store is full, it
// unlocks, makes room under the last shard's lock alone, and evaluates
// again. It returns with every shard locked, whether all parts admit and
// the room reserved; or, when no room can be had, with none locked and
// nothing reserved, and the error Take returns then.
func (s *memStore) lockAndReserve(reqs []store.Request, ops []op, outs [][]outcome, shards []*shard) (all bool, reserved int, err error) {
	for attempt := 0; ; attempt++ {
		for _, sh := range shards {
			sh.lock()
		}
		all = s.evaluateStack(reqs, ops, outs)
		need := 0
		for i := range ops {
			need += ops[i].stackNeed(all)
		}
		if need <= reserved || s.budget.take(need-reserved) {
			return all, max(reserved, need), nil
		}
		for i := len(shards) - 1; i >= 0; i-- {
			shards[i].mu.Unlock()
		}
		top := shards[len(shards)-1]
		top.lock()
		ok := attempt < 2 && s.makeRoom(top, top.clock(s.now()), need-reserved, nil)
		top.mu.Unlock()
		if !ok {
			s.budget.give(reserved)
			return false, 0, &store.BackendError{Op: "take", Kind: "capacity", Err: store.ErrTooManyKeys}
		}
		reserved = need
	}
}

// stackDecision describes a written stack: each part's decision, a part
// held back (admitting while the stack refuses) without the request, and
// the most restrictive part.
func stackDecision(ops []op, outs [][]outcome, held []bool, all bool) store.MultiDecision {
	md := store.MultiDecision{Parts: make([]store.Decision, len(ops))}
	for i := range ops {
		o := &ops[i]
		if held[i] {
			// Decided as admitted but described without the request, as
			// a duplicate is: nothing was recorded.
			o.v.duplicate = true
			md.Parts[i] = o.decision(outs[i])
			md.Parts[i].Duplicate = false
			continue
		}
		md.Parts[i] = o.decision(outs[i])
	}
	md.Part = contract.MostRestrictive(md.Parts)
	md.Decision = md.Parts[md.Part]
	md.Allowed = all
	return md
}

// evaluateStack evaluates every part, whose shards the caller holds
// locked, afresh, and reports whether all admit.
func (s *memStore) evaluateStack(reqs []store.Request, ops []op, outs [][]outcome) bool {
	now := s.now()
	all := true
	for i := range ops {
		o := &ops[i]
		*o = op{s: s, req: reqs[i], cost: contract.Cost(&reqs[i])}
		s.limitIDs(o.req.Limits, &o.ids)
		if o.isLog() {
			o.logID[0] = s.logID(o.req.Limits)
		}
		o.sh, o.h = s.locate(o.req.Key)
		o.now = o.sh.clock(now)
		o.evaluate(outs[i])
		all = all && o.admits()
	}
	return all
}

// stackNeed returns how many new states the write of an evaluated part
// may create: its missing limit states when it records (an admitted
// stack, or a counted refusal), and the key state when a refusal may
// start a block.
func (o *op) stackNeed(all bool) int {
	need := 0
	if (all && o.admits()) || o.req.CountDenied {
		need += o.missing()
	}
	if !o.admits() && !o.v.blocked && o.ks == nil && blocks(o.req.Limits) {
		need++
	}
	return need
}

// admits reports whether the evaluated part admits the request.
func (o *op) admits() bool { return !o.v.blocked && (o.v.duplicate || o.v.allowed) }

// draw takes need states from the room reserved for a stacked decision.
func (o *op) draw(need int) bool {
	if *o.pool < need {
		return false
	}
	*o.pool -= need
	return true
}

// ownKeys returns reqs, or a copy of it whose keys held in memory ctx
// lends are copied, so that records made from them keep no request's
// memory (see Take).
func ownKeys(ctx context.Context, reqs []store.Request) []store.Request {
	var own []store.Request
	for i := range reqs {
		if !keybuf.Holds(ctx, reqs[i].Key) {
			continue
		}
		if own == nil {
			own = slices.Clone(reqs)
		}
		own[i].Key = strings.Clone(reqs[i].Key)
	}
	if own == nil {
		return reqs
	}
	return own
}

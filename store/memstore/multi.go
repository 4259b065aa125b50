package memstore

import (
	"context"
	"slices"

	"github.com/ratekeeper/ratekeeper/store"
)

var _ store.MultiStore = (*Store)(nil)

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
// Kind [store.KindCapacity], as Take does. Errors for invalid stacks are those
// of [store.ValidateMulti]. ctx is not consulted.
func (s *Store) TakeMulti(_ context.Context, reqs []store.Request) (store.MultiDecision, error) {
	if err := store.ValidateMulti(reqs); err != nil {
		return store.MultiDecision{}, err
	}
	ops := make([]op, len(reqs))
	outs := make([][]outcome, len(reqs))
	for i := range reqs {
		outs[i] = make([]outcome, len(reqs[i].Limits))
	}
	shards := s.stackShards(reqs)
	all, reserved, ok := s.evaluateAndReserve(shards, reqs, ops, outs)
	if !ok {
		return store.MultiDecision{}, &store.BackendError{Op: "take", Kind: store.KindCapacity, Err: store.ErrTooManyKeys}
	}
	pool := reserved
	held := writeStack(ops, outs, all, &pool)
	for i := len(shards) - 1; i >= 0; i-- {
		shards[i].mu.Unlock()
	}
	s.budget.give(pool)

	md := store.MultiDecision{Parts: describeStack(ops, outs, held)}
	md.Part = store.MostRestrictive(md.Parts)
	md.Decision = md.Parts[md.Part]
	md.Allowed = all
	return md, nil
}

// stackShards returns the shards of the parts' keys, each once, in shard
// order: the order in which a stack locks them, so that concurrent stacks
// and Takes cannot deadlock.
func (s *Store) stackShards(reqs []store.Request) []*shard {
	shards := make([]*shard, 0, len(reqs))
	for i := range reqs {
		sh := s.shardFor(reqs[i].Key)
		if !slices.Contains(shards, sh) {
			shards = append(shards, sh)
		}
	}
	slices.SortFunc(shards, func(a, b *shard) int { return a.pos - b.pos })
	return shards
}

// evaluateAndReserve locks shards, evaluates every part and reserves the
// room the writes need; it reports whether all parts admit and how many
// states it reserved, and returns with the shards locked. Making room
// locks other shards, which must not be held then: when the store is
// full, it unlocks, makes room under the last shard's lock alone, and
// evaluates again. When the room cannot be had, it returns ok false with
// nothing reserved and no shard locked.
func (s *Store) evaluateAndReserve(shards []*shard, reqs []store.Request, ops []op, outs [][]outcome) (all bool, reserved int, ok bool) {
	for attempt := 0; ; attempt++ {
		for _, sh := range shards {
			sh.mu.Lock()
		}
		all = s.evaluateStack(reqs, ops, outs)
		need := 0
		for i := range ops {
			need += ops[i].stackNeed(all)
		}
		if need <= reserved || s.budget.take(need-reserved) {
			return all, max(reserved, need), true
		}
		for i := len(shards) - 1; i >= 0; i-- {
			shards[i].mu.Unlock()
		}
		top := shards[len(shards)-1]
		top.mu.Lock()
		made := attempt < 2 && s.makeRoom(top, top.clock(s.now()), need-reserved, nil)
		top.mu.Unlock()
		if !made {
			s.budget.give(reserved)
			return false, 0, false
		}
		reserved = need
	}
}

// writeStack writes every evaluated part, drawing its new states from
// pool, and reports which parts were held: parts that admit the request
// while the stack refuses it, written as for a refusal by no limit (a
// counted refusal only, no block).
func writeStack(ops []op, outs [][]outcome, all bool, pool *int) []bool {
	held := make([]bool, len(ops))
	for i := range ops {
		o := &ops[i]
		o.pool = pool
		if all || !o.admits() {
			_ = o.write(outs[i]) // the reserved room covers every write
			continue
		}
		held[i] = true
		o.v.allowed = false
		_ = o.write(outs[i])
		o.v.allowed = true
	}
	return held
}

// describeStack returns every part's decision. A held part is decided as
// admitted but described without the request, as a duplicate is: nothing
// was recorded.
func describeStack(ops []op, outs [][]outcome, held []bool) []store.Decision {
	parts := make([]store.Decision, len(ops))
	for i := range ops {
		o := &ops[i]
		if held[i] {
			o.v.duplicate = true
			parts[i] = o.decision(outs[i])
			parts[i].Duplicate = false
			continue
		}
		parts[i] = o.decision(outs[i])
	}
	return parts
}

// evaluateStack evaluates every part, whose shards the caller holds
// locked, afresh, and reports whether all admit.
func (s *Store) evaluateStack(reqs []store.Request, ops []op, outs [][]outcome) bool {
	now := s.now()
	all := true
	for i := range ops {
		o := &ops[i]
		*o = op{s: s, req: reqs[i], cost: reqs[i].EffectiveCost()}
		s.limitIDs(o.req.Limits, &o.ids)
		if o.isLog() {
			o.logID[0] = s.logID(o.req.Limits)
		}
		o.sh = s.shardFor(o.req.Key)
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

package redisstore

import (
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/ratekeeper/ratekeeper/lua"
	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
)

// script is one Lua script: its source and SHA-1.
type script struct {
	src    string
	sha    string
	shaArg any // sha as a command argument, converted once
	// batch is the script that decides several calls of this one in
	// one command (a lean script's lean batch, a lean stacked script's
	// stacked batch; see merge); nil for the others.
	batch *script
	// perCall marks a stacked batch, whose reply holds each call's reply
	// as the call alone would have had it (see stackedBatchArgs); a lean
	// batch's reply is flat (see batchItem).
	perCall bool
}

// newScript returns the script of source src.
func newScript(src string) script {
	sha := redis.NewScript(src).Hash()
	return script{src: src, sha: sha, shaArg: sha}
}

// variant is the family of script that decides a request, with its
// calling convention and reply layout (package lua).
type variant uint8

const (
	// full decides every request: several limits, blocks, counted
	// refusals, de-duplication, overrides, the suppressed strategy.
	full variant = iota
	// lean decides a plain request: see variantOf.
	lean
	// leanOverride decides a plain request that applies its key's
	// override.
	leanOverride
	// partialGrant decides a request with store.Request.Partial: the full
	// script's calling convention, one integer more in the reply.
	partialGrant
	// calendarWindows decides a request with a calendar limit
	// (store.Limit.Calendar): the full script's calling convention, four
	// window bounds per limit more in ARGV.
	calendarWindows
	// waiting decides a request with store.Request.MaxWait (GCRA and the
	// token bucket): the full script's calling convention with the most
	// µs to wait last, and the delay and reservation after the reply.
	waiting
	// reservation decides a request with store.Request.Reserve: the full
	// script's calling convention, the decision's time (µs) more in the
	// reply.
	reservation

	variants // the number of variants
)

// scriptSuffix is the lua script name of each variant after the
// algorithm's name.
var scriptSuffix = [variants]string{full: "", lean: "/lean", leanOverride: "/lean-override", partialGrant: "/partial", calendarWindows: "/calendar", waiting: "/wait", reservation: "/reserve"}

// variantOf returns the script family that decides a validated request:
// lean for a plain request of a counting algorithm, leanOverride for one
// that also applies its key's override, partialGrant for a partial
// request, calendarWindows for one with a calendar limit, waiting for one
// that may wait, reservation for a reservation, else full (the suppressed
// strategy always runs its full script).
func variantOf(req *store.Request) variant {
	switch {
	case req.MaxWait > 0:
		return waiting
	case req.Reserve:
		return reservation
	case req.Partial:
		return partialGrant
	case calendarRequest(req):
		return calendarWindows
	case !contract.Plain(req) || req.Limits[0].Algorithm == contract.Suppressed:
		return full
	case req.ApplyOverride:
		return leanOverride
	}
	return lean
}

// scriptTable holds every built-in script: one per algorithm and variant
// (the zero script where package lua has none), and the stacked and
// refund scripts. It is the same for every Store.
type scriptTable struct {
	byAlgorithm [contract.Suppressed + 1][variants]script
	stacked     script // the stacked decision (store.MultiStore)
	stackedLean script // the stacked decision of plain GCRA and token bucket parts
	// stackedLeanWindows is the stacked decision of plain parts of those
	// and of the fixed window and the sliding window counter.
	stackedLeanWindows script
	refund             script // the refund of one part of a stacked decision
	slots              script // the slots of in-flight caps (slots.go)
	// leanBatch decides several lean calls of an algorithm in one
	// command: the batch of byAlgorithm[alg][lean].
	leanBatch [contract.Suppressed]script
	// stackedLeanBatch and stackedLeanWindowsBatch decide several calls
	// of stackedLean and of stackedLeanWindows in one command.
	stackedLeanBatch, stackedLeanWindowsBatch script
}

// scriptName returns the name of alg's scripts in package lua: the
// algorithm's, or "suppressed" for the strategy of package
// store/suppressed.
func scriptName(alg store.Algorithm) string {
	if alg == contract.Suppressed {
		return "suppressed"
	}
	return alg.String()
}

// builtinScripts returns the table, built once.
var builtinScripts = sync.OnceValues(func() (*scriptTable, error) {
	t := new(scriptTable)
	src := func(name string) (script, error) {
		s, err := lua.Source(name)
		if err != nil {
			return script{}, fmt.Errorf("redisstore: %w", err)
		}
		return newScript(s), nil
	}
	var err error
	for alg := range t.byAlgorithm {
		for v := range variants {
			if store.Algorithm(alg) == contract.Suppressed && v != full {
				continue // the suppressed strategy has only its full script
			}
			if v == calendarWindows && store.Algorithm(alg) != store.FixedWindow {
				continue // only fixed windows follow a calendar
			}
			if v == waiting && store.Algorithm(alg) != store.GCRA && store.Algorithm(alg) != store.TokenBucket {
				continue // only GCRA and the token bucket wait
			}
			if t.byAlgorithm[alg][v], err = src(scriptName(store.Algorithm(alg)) + scriptSuffix[v]); err != nil {
				return nil, err
			}
		}
	}
	for alg := range t.leanBatch {
		if t.leanBatch[alg], err = src(scriptName(store.Algorithm(alg)) + "/lean-batch"); err != nil {
			return nil, err
		}
		t.byAlgorithm[alg][lean].batch = &t.leanBatch[alg]
	}
	for _, s := range []struct {
		dst  *script
		name string
	}{{&t.stacked, "stacked"}, {&t.stackedLean, "stacked/lean"}, {&t.stackedLeanWindows, "stacked/lean-windows"}, {&t.refund, "refund"}, {&t.slots, "slots"},
		{&t.stackedLeanBatch, "stacked/lean-batch"}, {&t.stackedLeanWindowsBatch, "stacked/lean-windows-batch"}} {
		if *s.dst, err = src(s.name); err != nil {
			return nil, err
		}
	}
	t.stackedLeanBatch.perCall = true
	t.stackedLeanWindowsBatch.perCall = true
	t.stackedLean.batch = &t.stackedLeanBatch
	t.stackedLeanWindows.batch = &t.stackedLeanWindowsBatch
	return t, nil
})

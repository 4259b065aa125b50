package storetest

import (
	"testing"

	"github.com/ratekeeper/ratekeeper/store"
)

// algorithmTest runs once per algorithm it applies to, as
// "<algorithm>/<name>".
type algorithmTest struct {
	name string
	only func(store.Algorithm) bool // nil: every algorithm
	fn   func(e *env, alg store.Algorithm)
}

// generalTest runs once, as "<name>".
type generalTest struct {
	name string
	fn   func(e *env)
}

func onlyBuckets(a store.Algorithm) bool { return bucketLike(a) }

func onlyLog(a store.Algorithm) bool { return a == store.SlidingWindowLog }

var algorithmTests = []algorithmTest{
	{"limit", nil, testLimit},
	{"burst", onlyBuckets, testBurst},
	{"cost", nil, testCost},
	{"many-units-at-once", nil, testManyUnits},
	{"refill", nil, testRefill},
	{"retry-after-cost-1", nil, func(e *env, a store.Algorithm) { testRetryAfter(e, a, 1) }},
	{"retry-after-cost-3", nil, func(e *env, a store.Algorithm) { testRetryAfter(e, a, 3) }},
	{"retry-after-random", nil, testRetryAfterRandom},
	{"next-after", nil, testNextAfter},
	{"next-after-values", nil, testNextAfterValues},
	{"exact", nil, testExact},
	{"peek", nil, testPeek},
	{"peek-creates-nothing", nil, testPeekCreatesNothing},
	{"reset", nil, testReset},
	{"reset-not-found", nil, testResetNotFound},
	{"limit-change", nil, testLimitChange},
	{"period-change", nil, testPeriodChange},
	{"isolation", nil, testIsolation},
	{"hostile-keys", nil, testHostileKeys},
	{"concurrent", nil, testConcurrent},
	{"multi-all-or-nothing", nil, testMultiAllOrNothing},
	{"multi-deciding-limit", nil, testMultiDecidingLimit},
	{"multi-exact", onlyBuckets, testMultiExact},
	{"ttl", nil, testTTL},
	{"block", nil, testBlock},
	{"block-started-once", nil, testBlockStartedOnce},
	{"block-escalation", nil, testBlockEscalation},
	{"block-choice", nil, testBlockChoice},
	{"block-reset", nil, testBlockReset},
	{"block-ttl", nil, testBlockTTL},
	{"peek-blocks", nil, testPeekBlocks},
	{"retry-after-block-shorter-than-window", onlyLog, testRetryAfterBlockShorterThanWindow},
	{"threshold", windowAlg, testThreshold},
	{"count-denied", windowAlg, testCountDenied},
	{"dedup", nil, testDedup},
	{"dedup-bound", nil, testDedupBound},
	{"override-scale", nil, testOverrideScale},
	{"override-cut", nil, testOverrideCut},
	{"override-exempt-suspend", nil, testOverrideExemptSuspend},
	{"override-expiry", nil, testOverrideExpiry},
	{"override-concurrent", nil, testOverrideConcurrent},
	{"override-cost", nil, testOverrideCost},
	{"partial", nil, testPartial},
	{"partial-multi", nil, testPartialMulti},
	{"partial-block", nil, testPartialBlock},
	{"partial-concurrent", nil, testPartialConcurrent},
	{"settle", onlyBuckets, testSettle},
	{"wait", onlyBuckets, testWait},
	{"wait-cancel", onlyBuckets, testWaitCancel},
	{"wait-concurrent", onlyBuckets, testWaitConcurrent},
	{"wait-block", onlyBuckets, testWaitBlock},
	{"settle-windows", windowAlg, testSettleWindows},
	{"settle-window-moved", windowAlg, testSettleWindowMoved},
	{"settle-concurrent", nil, testSettleConcurrent},
	{"settle-ttl", nil, testSettleTTL},
}

var generalTests = []generalTest{
	{"invalid-requests", testInvalid},
	{"invalid-requests-record-nothing", testInvalidRecordsNothing},
	{"reset-ignores-cost", testResetIgnoresCost},
	{"override-invalid", testOverrideInvalid},
	{"block-listing", testBlockListing},
	{"partial-invalid", testPartialInvalid},
	{"calendar", testCalendar},
	{"calendar-zones", testCalendarZones},
	{"calendar-months", testCalendarMonths},
	{"calendar-mixed", testCalendarMixed},
	{"calendar-invalid", testCalendarInvalid},
	{"settle-invalid", testSettleInvalid},
	{"wait-invalid", testWaitInvalid},
	{"slots-cap", testSlotsCap},
	{"slots-concurrent", testSlotsConcurrent},
	{"slots-release", testSlotsRelease},
	{"slots-lease", testSlotsLease},
	{"slots-renew", testSlotsRenew},
	{"slots-invalid", testSlotsInvalid},
	{"slots-ttl", testSlotsTTL},
}

// Run runs the conformance suite: one subtest per algorithm and property
// (named like "gcra/limit" or "sliding_window_log/retry-after-cost-3"),
// the suppressed strategy's ("suppressed/regimes", ...; most need
// [Harness.Rand]), the cross-cutting ones ("invalid-requests", ...) and
// those of stacked decisions ("gcra/stack-all-or-nothing", ...,
// "stack-invalid"), which skip unless the store implements
// [store.MultiStore] (and when [Harness.RealTimeStacks] is set). Every subtest calls t.Parallel, builds its own
// harness with newHarness and uses keys of its own. See the package
// documentation for what each subtest asserts.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Helper()
	for _, alg := range store.Algorithms {
		for _, tc := range algorithmTests {
			if tc.only != nil && !tc.only(alg) {
				continue
			}
			t.Run(alg.String()+"/"+tc.name, func(t *testing.T) {
				tc.fn(newEnv(t, newHarness), alg)
			})
		}
	}
	for _, tc := range suppressedTests {
		t.Run("suppressed/"+tc.name, func(t *testing.T) {
			e := newEnv(t, newHarness)
			e.suppress()
			tc.fn(e)
		})
	}
	for _, tc := range generalTests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(newEnv(t, newHarness))
		})
	}
	runStack(t, newHarness)
}

// runStack runs the subtests of stacked decisions, which skip unless the
// store implements store.MultiStore.
func runStack(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Helper()
	for _, alg := range store.Algorithms {
		for _, tc := range stackTests {
			if tc.only != nil && !tc.only(alg) {
				continue
			}
			t.Run(alg.String()+"/"+tc.name, func(t *testing.T) {
				e := newEnv(t, newHarness)
				e.needMulti()
				tc.fn(e, alg)
			})
		}
	}
	t.Run("stack-invalid", func(t *testing.T) {
		e := newEnv(t, newHarness)
		e.needMulti()
		testStackInvalid(e)
	})
}

// plainTests are the algorithm tests that send only plain requests: one
// limit, no block, no counted refusals, no de-duplication id.
var plainTests = map[string]bool{
	"limit": true, "burst": true, "cost": true, "many-units-at-once": true,
	"refill": true, "retry-after-cost-1": true, "retry-after-cost-3": true,
	"exact": true, "peek": true,
	"isolation": true, "hostile-keys": true,
}

// RunPlain runs the part of the suite that applies to a store deciding
// only plain requests (one limit; no Block, CountDenied or DedupID) with
// the given algorithms' semantics: a user script under the Redis store's
// script contract, for example, which may implement one algorithm. The
// subtests are those of [Run] for these algorithms whose requests are all
// plain.
func RunPlain(t *testing.T, algs []store.Algorithm, newHarness func(t *testing.T) Harness) {
	t.Helper()
	for _, alg := range algs {
		for _, tc := range algorithmTests {
			if !plainTests[tc.name] || tc.only != nil && !tc.only(alg) {
				continue
			}
			t.Run(alg.String()+"/"+tc.name, func(t *testing.T) {
				tc.fn(newEnv(t, newHarness), alg)
			})
		}
	}
}

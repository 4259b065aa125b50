package lua

import (
	_ "embed" // the scripts are embedded at build time
	"errors"
	"fmt"
	"regexp"
	"strings"
)

//go:embed common.lua
var common string

//go:embed unreadable.lua
var unreadable string

//go:embed override.lua
var override string

//go:embed prelude.lua
var prelude string

//go:embed lean_args.lua
var leanArgs string

//go:embed lean_fixed_window.lua
var leanFixedWindowFile string

//go:embed lean_sliding_window_counter.lua
var leanSlidingWindowCounter string

//go:embed lean_sliding_window_log.lua
var leanSlidingWindowLog string

//go:embed lean_override.lua
var leanOverride string

//go:embed bucket.lua
var bucket string

//go:embed lean_bucket.lua
var leanBucket string

//go:embed sliding_window_log.lua
var slidingWindowLog string

//go:embed counter.lua
var counter string

//go:embed sliding_window_counter.lua
var slidingWindowCounter string

//go:embed fixed_window.lua
var fixedWindowFile string

//go:embed window.lua
var alignedWindow string

//go:embed calendar.lua
var calendarArgs string

//go:embed calendar_window.lua
var calendarWindow string

//go:embed suppressed.lua
var suppressed string

//go:embed part.lua
var part string

//go:embed multi.lua
var multi string

//go:embed lean_multi.lua
var leanMulti string

//go:embed lean_multi_windows.lua
var leanMultiWindows string

//go:embed refund.lua
var refund string

//go:embed partial.lua
var partialDriver string

//go:embed wait.lua
var waitDriver string

//go:embed slots.lua
var slots string

//go:embed lean_batch.lua
var leanBatchDriver string

//go:embed stacked_batch.lua
var stackedBatchDriver string

//go:embed batch_error.lua
var batchError string

// The algorithm files, each with what it follows: sliding_window_counter
// and suppressed count in counter.lua's windows; fixed_window follows
// window.lua, its windows (calendar_window.lua in the calendar script).
var (
	windowCounter  = counter + "\n" + slidingWindowCounter
	suppressedBody = counter + "\n" + suppressed
	fixedWindow    = alignedWindow + "\n" + fixedWindowFile
)

// leanFamily is the lean script of one algorithm, built from its
// algorithm file after lean_args.lua, which parses the lean arguments.
type leanFamily struct {
	// unreadable: the window algorithms repair unreadable state with
	// unreadable.lua, which precedes their lean files; lean_bucket.lua
	// repairs its own.
	unreadable bool
	// body is the algorithm file (the sliding window counter's after
	// counter.lua, its windows).
	body string
}

// The lean families: GCRA and the token bucket share one.
var (
	leanBuckets     = leanFamily{body: leanBucket}
	leanLog         = leanFamily{unreadable: true, body: leanSlidingWindowLog}
	leanCounter     = leanFamily{unreadable: true, body: counter + "\n" + leanSlidingWindowCounter}
	leanFixedWindow = leanFamily{unreadable: true, body: leanFixedWindowFile}
)

// lone is the lean script: common.lua, unreadable.lua for the window
// algorithms, lean_args.lua and the algorithm file. One limit and nothing
// else.
func (f leanFamily) lone() []string {
	parts := []string{common}
	if f.unreadable {
		parts = append(parts, unreadable)
	}
	return append(parts, leanArgs, f.body)
}

// withOverride is the lean script of a request that applies its key's
// override: the override is read and applied first (lean_override.lua),
// then lean_args.lua and the algorithm file run as the body of decide.
func (f leanFamily) withOverride() []string {
	return []string{common, unreadable, override, leanOverride,
		"local function decide()", leanArgs, f.body, "end", leanOverrideReply}
}

// batch is the lean batch script: common.lua, lean_args.lua as the
// function check, which returns the scalars it parsed, the algorithm file
// as the function decide of the key, the arguments and those scalars,
// with its replies returned as values (repliesAsValues), then
// batch_error.lua and lean_batch.lua, which checks each argument list its
// requests share once and calls decide once per request. The window
// algorithms' unreadable.lua precedes decide, whose first line starts
// each request unrepaired: its functions are then made once per call, not
// once per request (about 3% of a fixed window decision in a batch).
func (f leanFamily) batch() []string {
	parts := []string{common, "local function check(KEYS, ARGV)", leanArgs, "return cost, rate, p, cap", "end"}
	if f.unreadable {
		parts = append(parts, unreadable, "local function decide(key, ARGV, cost, rate, p, cap)", unrepaired)
	} else {
		parts = append(parts, "local function decide(key, ARGV, cost, rate, p, cap)")
	}
	return append(parts, repliesAsValues(f.body), "end", batchError, leanBatchDriver)
}

// unrepaired starts a request of a batch whose script holds unreadable.lua
// once for all its requests.
const unrepaired = "repaired = 0"

// scripts is the one table of every script: its name (see the script names) and the
// texts it is made of, in order, joined with newlines. The calling
// convention of each family (full, lean, lean-override, stacked,
// stacked/lean, stacked/lean-windows, refund) is in the package
// documentation.
var scripts = [...]struct {
	name  string
	parts []string
}{
	{"gcra", full(bucket)},
	{"gcra/lean", leanBuckets.lone()},
	{"gcra/lean-override", leanBuckets.withOverride()},
	{"token_bucket", full(bucket)},
	{"token_bucket/lean", leanBuckets.lone()},
	{"token_bucket/lean-override", leanBuckets.withOverride()},
	{"sliding_window_log", full(slidingWindowLog)},
	{"sliding_window_log/lean", leanLog.lone()},
	{"sliding_window_log/lean-override", leanLog.withOverride()},
	{"sliding_window_counter", full(windowCounter)},
	{"sliding_window_counter/lean", leanCounter.lone()},
	{"sliding_window_counter/lean-override", leanCounter.withOverride()},
	{"fixed_window", full(fixedWindow)},
	{"fixed_window/lean", leanFixedWindow.lone()},
	{"fixed_window/lean-override", leanFixedWindow.withOverride()},
	// The suppressed strategy runs its full script for every request.
	{"suppressed", full(suppressedBody)},
	{"stacked", stacked()},
	{"stacked/lean", leanStacked},
	{"stacked/lean-windows", leanStackedWindows},
	{"refund", []string{common, refund}},
	// Partial grants (partial.go).
	{"gcra/partial", partial(bucket)},
	{"token_bucket/partial", partial(bucket)},
	{"sliding_window_log/partial", partial(slidingWindowLog)},
	{"sliding_window_counter/partial", partial(windowCounter)},
	{"fixed_window/partial", partial(fixedWindow)},
	// Calendar quotas (calendar.go).
	{"fixed_window/calendar", calendar()},
	// Waiting instead of refusing.
	{"gcra/wait", waiting},
	{"token_bucket/wait", waiting},
	// In-flight caps.
	{"slots", []string{common, slots}},
	// Reservations (reserve.go).
	{"gcra/reserve", reserve(bucket)},
	{"token_bucket/reserve", reserve(bucket)},
	{"sliding_window_log/reserve", reserve(slidingWindowLog)},
	{"sliding_window_counter/reserve", reserve(windowCounter)},
	{"fixed_window/reserve", reserve(fixedWindow)},
	// Lean batches: several lean requests in one call.
	{"gcra/lean-batch", leanBuckets.batch()},
	{"token_bucket/lean-batch", leanBuckets.batch()},
	{"sliding_window_log/lean-batch", leanLog.batch()},
	{"sliding_window_counter/lean-batch", leanCounter.batch()},
	{"fixed_window/lean-batch", leanFixedWindow.batch()},
	// Stacked batches: several lean stacked requests in one call.
	{"stacked/lean-batch", stackedBatch(leanStacked)},
	{"stacked/lean-windows-batch", stackedBatch(leanStackedWindows)},
}

// stackedBatch is the batch variant of a lean stacked script, whose parts
// start with common.lua: common.lua, the rest of the script as the body
// of the function decide, which returns its reply, then batch_error.lua
// and stacked_batch.lua, which calls decide once per request. Everything
// the lean stacked script keeps per call (unreadable.lua's repairs, the
// cost counter.lua's functions read) is then decide's own.
func stackedBatch(leanParts []string) []string {
	parts := []string{common, "local function decide(KEYS, ARGV)"}
	parts = append(parts, leanParts[1:]...)
	return append(parts, "end", batchError, stackedBatchDriver)
}

// leanStacked is the lean stacked script of GCRA and token bucket parts.
var leanStacked = []string{common, unreadable, leanMulti}

// leanReply matches a lean script's reply: a line that returns one table
// constructor, "return {...}", the only form the lean files answer in (a
// checkout with CRLF line ends included).
var leanReply = regexp.MustCompile(`(?m)^([ \t]*)return[ \t]*\{(.*)\}[ \t\r]*$`)

// repliesAsValues rewrites the replies of a lean script's part from
// "return {a, b, ...}" to "return a, b, ...". The lone lean script answers
// the table, which Redis turns into an array; in a batch, a table per
// request that Redis would turn into an array after looking up its error
// and status fields cost it about a sixth of a GCRA decision, so decide
// returns the integers as values and lean_batch.lua writes them into one
// flat array. A function wrapped around the lone script instead would
// cost each lone call the closure.
func repliesAsValues(part string) string {
	return leanReply.ReplaceAllString(part, "${1}return $2")
}

// waiting is the script of a request that may wait: common.lua, then the
// full script of GCRA and the token bucket as the function decide (which
// sees the clock and the mode of common.lua, which wait.lua sets), then
// wait.lua.
var waiting = []string{common, "local function decide()", unreadable, override, prelude, bucket, "end", waitDriver}

// full is the full script of an algorithm file: every feature of a
// request (several limits, blocks, counted refusals, de-duplication,
// overrides).
func full(body string) []string { return []string{common, unreadable, override, prelude, body} }

// leanOverrideReply ends the lean script with overrides: the lean reply's
// five integers, marked repaired when the override was, the override's
// code and value, then the lean reply's sixth integer when it has one.
const leanOverrideReply = `local reply = decide()
if type(reply) == 'table' and reply[1] then
  if repaired == 1 then
    reply[5] = 1
  end
  local nxt = reply[6]
  reply[6] = override_kind
  reply[7] = override_value
  reply[8] = nxt
end
return reply
`

// leanStackedWindows is the lean stacked script of steps with window
// parts: common.lua, unreadable.lua, the cost counter.lua's functions
// read (lean_multi_windows.lua sets it per part), counter.lua and
// lean_multi_windows.lua.
var leanStackedWindows = []string{common, unreadable, "local cost = 0", counter, leanMultiWindows}

// stacked is the stacked script: one function per algorithm file
// (unreadable.lua, prelude.lua, part.lua and the file, with KEYS and ARGV
// as parameters so that each part sees its own), the table parts from the
// store's algorithm indexes to them (GCRA and the token bucket share
// one), then multi.lua. The suppressed strategy is not stacked.
func stacked() []string {
	fn := func(name, body string) string {
		return "local function part_" + name + "(KEYS, ARGV)\n" +
			strings.Join([]string{unreadable, prelude, part, body}, "\n") + "\nend"
	}
	return []string{common, override, "local parts = {}",
		fn("gcra", bucket), "parts[0] = part_gcra", "parts[1] = part_gcra",
		fn("sliding_window_log", slidingWindowLog), "parts[2] = part_sliding_window_log",
		fn("sliding_window_counter", windowCounter), "parts[3] = part_sliding_window_counter",
		fn("fixed_window", fixedWindow), "parts[4] = part_fixed_window",
		multi}
}

// errUnknownScript is returned by [Source] for a name that is not one of
// the script names.
var errUnknownScript = errors.New("lua: unknown script")

// names returns the name of every script [Source] knows, in table order:
// for each algorithm of package store, by its name, "<algorithm>" (the
// full script), "<algorithm>/lean" and "<algorithm>/lean-override" (none
// for the suppressed strategy); then "stacked", "stacked/lean",
// "stacked/lean-windows" and
// "refund"; then "<algorithm>/partial" for each counting algorithm,
// "fixed_window/calendar", "gcra/wait" and "token_bucket/wait"; "slots";
// "<algorithm>/reserve" and then "<algorithm>/lean-batch" for each
// counting algorithm; then "stacked/lean-batch" and
// "stacked/lean-windows-batch". The slice is a fresh copy.
func names() []string {
	out := make([]string, len(scripts))
	for i := range scripts {
		out[i] = scripts[i].name
	}
	return out
}

// Source returns the complete text of the script name (see "Scripts" in
// the package documentation), the exact text to pass to EVAL or SCRIPT LOAD; its SHA-1 is stable for a
// given build. The calling convention of each family is in the package
// documentation. It returns an error for any other name. Source is safe for concurrent use.
func Source(name string) (string, error) {
	for i := range scripts {
		if scripts[i].name == name {
			return strings.Join(scripts[i].parts, "\n"), nil
		}
	}
	return "", fmt.Errorf("%w %q", errUnknownScript, name)
}

// Package lua holds the Redis Lua scripts behind
// [github.com/ratekeeper/ratekeeper/store/redisstore]. The scripts
// implement the semantics documented in package
// [github.com/ratekeeper/ratekeeper/store], with the same arithmetic, step
// for step, as the in-memory store
// [github.com/ratekeeper/ratekeeper/store/memstore], so that both reach the
// same decisions. Their clock is the server's TIME in integer microseconds.
// The scripts need Redis 5 or later (effects replication by default). The
// sources are embedded at build time; the package has no dependencies.
//
// # Scripts
//
// [Source] returns a script by name; one table in lua.go says which files
// make each script. A script name is "<algorithm>[/<variant>]", with the
// algorithm names of package store ("gcra/lean", "fixed_window"),
// "suppressed" (the strategy of package store/suppressed), or a stacked
// or refund script ("stacked", "stacked/lean", "stacked/lean-windows",
// "refund"), a batch ("<algorithm>/lean-batch", "stacked/lean-batch",
// "stacked/lean-windows-batch"), or the slots of
// in-flight caps ("slots"). Each family has one calling convention,
// stated below:
//
//	name                         files                                       convention
//	<algorithm>                  common, unreadable, override, prelude,      full scripts
//	                             the algorithm file
//	<algorithm>/lean             common, unreadable, lean_args, the          lean scripts
//	                             algorithm's lean file (the sliding window
//	                             counter's after counter; GCRA and the
//	                             token bucket: common, lean_args and
//	                             lean_bucket)
//	<algorithm>/lean-override    common, unreadable, override,               lean scripts with overrides
//	                             lean_override, then the lean script as
//	                             the body of a function
//	stacked                      common, override, one function per          stacked decisions
//	                             algorithm file (unreadable, prelude,
//	                             part and the file), multi
//	stacked/lean                 common, unreadable, lean_multi              stacked decisions, lean
//	stacked/lean-windows         common, unreadable, the cost, counter,      stacked decisions, lean
//	                             lean_multi_windows
//	refund                       common, refund                              stacked decisions (refund), settlements
//	<algorithm>/partial          the full script as the body of a            partial grants
//	                             function, then partial
//	fixed_window/calendar        common, calendar, unreadable, override,     calendar quotas
//	                             prelude, calendar_window, fixed_window
//	gcra/wait, token_bucket/wait common, then unreadable, override,          waiting
//	                             prelude and bucket as the body of a
//	                             function, then wait
//	slots                        common, slots                               in-flight caps
//	<algorithm>/reserve          common, then the rest of the full script    reservations
//	                             as the body of a function, then reserve
//	<algorithm>/lean-batch       common, lean_args as the body of a          lean batches
//	                             function, unreadable for the window
//	                             algorithms, the algorithm's lean file as
//	                             the body of a function that returns its
//	                             reply as values, then batch_error and
//	                             lean_batch
//	stacked/lean-batch,          common, then the rest of the lean stacked   stacked batches
//	stacked/lean-windows-batch   script as the body of a function, then
//	                             batch_error and stacked_batch
//
// common.lua holds rounding helpers, the clock and the mode;
// unreadable.lua repairs state the script cannot read; override.lua reads
// a key's override. prelude.lua is the prelude of every full script:
// argument parsing for several limits, the block and de-duplication
// checks, block starts with escalation, remembering de-duplication ids and
// the choice of the deciding limit.
//
// The algorithm files (bucket.lua for GCRA and the token bucket, which are
// one algorithm; sliding_window_log.lua, sliding_window_counter.lua,
// fixed_window.lua, which follows window.lua, its aligned windows)
// evaluate every limit and supply the function that records a request,
// under prelude.lua. suppressed.lua, the suppressed strategy, has only its
// full script, which the Redis store runs for every request of the
// strategy. sliding_window_counter.lua and suppressed.lua follow
// counter.lua, their windows.
//
// The lean scripts decide the common request (one limit, no block, no
// de-duplication id, no counted refusals): they parse five arguments into
// scalars and answer five integers; nothing else runs. Each repeats its
// algorithm file's arithmetic and state step for step, for one limit:
// lean_args.lua parses the arguments, then lean_bucket.lua for GCRA and
// the token bucket, lean_fixed_window.lua, lean_sliding_window_counter.lua
// (after counter.lua) or lean_sliding_window_log.lua decides. The lean log counts
// with calls that answer integers (ZCARD, then a take's trim, which runs
// on refusals too, or a peek's ZCOUNT) and reads a score only where the
// reply needs one: the oldest unit inside the window on an admission, the
// newest and the ranks the retry times name on a refusal.
// docs/capacity.md gives each script's Redis time per decision.
//
// # Calling convention: lean scripts
//
//	KEYS[1]   the limit's state key
//	ARGV[1]   "take" (check and record) or "peek" (check, write nothing)
//	ARGV[2]   cost, an integer >= 1
//	ARGV[3]   rate
//	ARGV[4]   period in microseconds (a whole number of milliseconds)
//	ARGV[5]   capacity (the store's Limit.Capacity)
//	ARGV[6]   sliding_window_log takes only: a nonce unique to the take,
//	          free of ':', which makes the log's members unique
//
// The reply is {allowed (1 or 0), remaining, reset after µs, retry after
// µs, repaired (1 or 0; see "Unreadable state")}: after the request when it
// is admitted, else as the limit stands. The sliding window log and counter
// add a sixth integer, next after µs: the time until the limit admits one
// unit more than it has remaining, 0 when it is full (package store, "Next
// quota"; the store derives it for the other algorithms).
//
// # Calling convention: lean batches
//
// "<algorithm>/lean-batch" (every algorithm but the suppressed strategy)
// decides several lean requests of one algorithm in one call, as the
// lean script would decide each alone, in order, at one reading of the
// clock. The Redis store sends one in place of the pipelined lean calls
// of a batch wherever one command may name all their keys (a single
// Redis server, not a Cluster or a Ring): Redis then parses, looks up and
// answers one command instead of one per request.
//
//	KEYS[i]   request i's state key
//	ARGV[1]   n, the number of arguments of every request
//	ARGV[2]   m, the number of argument lists the requests share
//	ARGV[3]   e, the number of each request's last arguments that are its
//	          own (0 with m = 0; with m > 0, fewer than n): a list holds
//	          the first s = n - e
//	ARGV[...] m = 0: request i's lean arguments, ARGV[4+(i-1)*n] to ARGV[3+i*n]
//	          m = 1: one list, ARGV[4] to ARGV[3+s], every request's first s
//	          m > 1: list t at ARGV[4+(t-1)*s] to ARGV[3+t*s], then request
//	          i's list number (from 1) at ARGV[3+m*s+i]
//	          m > 0: then request i's own e arguments, in request order
//
// Shared lists are for the common batch, whose requests are of one limit
// and one cost: Redis then parses their arguments once per call rather
// than once per request (about a tenth of its time per GCRA decision in a
// batch of 17). The driver also parses and checks a shared list once
// (lean_args.lua, as the function check), when its first request is
// decided, and decides each of its requests with the scalars it parsed,
// where each request would parse and check them again: about a twentieth
// of Redis's time per GCRA decision in a batch of 18, a fourteenth of a
// fixed window's. A list that fails its check fails each of its requests
// with that error. The store shares up to 8 lists when that does
// not make the command longer; the sliding window log's takes share the
// first five arguments and send their nonces as their own (e = 1). A
// list number that names no list fails its request alone, as malformed
// arguments; counts that do not match the command's length fail it whole.
//
// The reply is one flat array, with the elements of each request in
// order: the number of integers of its lean reply (5, or 6 for the
// sliding window log and counter), then those integers; or, for a
// request admitted without a repair, the compact form: 2 (3 for the log
// and the counter), then its remaining count, its reset time and the
// log's and counter's sixth integer, the others being 1, 0 and 0; or, for
// a request whose decision failed, one string: the error it would have
// met alone, its code first ("READONLY ...", "OOM ..."; "ERR ..." for a
// Lua error). A sliding window log batch of an admission, a failure and
// a refusal answers
//
//	{3, 9, 60000000, 60000000, "ERR ...", 6, 0, 0, 4000, 4000, 0, 4000}
//
// Most requests of a batch are admitted: three integers fewer for each
// cost Redis about a fourteenth of its time per GCRA decision in a batch
// of 16, and the store as much less to read.
//
// Flat, because Redis turns every table of a reply into an array one
// element at a time after looking up its error and status fields: an
// array per request cost about a sixth of Redis's time for a GCRA
// decision in a batch. The batch's function decide is therefore the
// lean script's text with each reply "return {...}" written "return ...":
// it returns the integers as values, which the driver writes into the
// flat reply. An error is a string rather than an error
// element because a client may stop reading an array at an error element
// (go-redis does, for codes such as READONLY and OOM). A request that
// fails stops nothing: the requests before it keep what they wrote, and
// the ones after it are decided. One difference from lone calls: Redis
// refuses a script's writes when it is out of memory (maxmemory) only
// until the script has written once, so in a batch whose first requests
// wrote, a later request may write where alone it would have failed
// with OOM.
//
// # Calling convention: lean scripts with overrides
//
// A request that would be lean but applies its key's override
// ("<algorithm>/lean-override"; every algorithm but the suppressed strategy)
// takes the lean arguments (the sliding window log's nonce included) with
// one more key:
//
//	KEYS[1]   the limit's state key
//	KEYS[2]   the request key's override
//
// The override is read and applied as in step 0 of the full scripts
// (override.lua holds the reading, shared by both): exempt and suspend
// answer before anything else, a scale applies to the limit, and a cost the
// limit left cannot hold is answered with "RKCOST limit 1". The reply is the
// lean reply's five integers, then the override applied (0 none, 1 scale,
// 2 exempt, 3 suspend) and its value as stored ("" for none), then the lean
// reply's sixth integer when it has one (not when exempt or suspend
// answered). Without an
// override it costs one PTTL more than the plain lean script, far less than
// the full script.
//
// # User scripts
//
// An application may write its own limiter in Lua and run it through the
// Redis store ([github.com/ratekeeper/ratekeeper/store/redisstore.WithScript]).
// The contract is the lean one above, so a user script gets the same
// inputs as a built-in lean script and answers the same way:
//
//	KEYS[1]   the request's state key, built by the store:
//	          "<prefix>:{<encoded client key>}:u:<script name>:<limit>", in
//	          the slot of the client key's hash tag (Redis Cluster safe;
//	          client input cannot steer it). Use only this key, or keys
//	          that start with it and keep its hash tag.
//	ARGV[1]   the mode: "take" (decide and record), "peek" (decide, write
//	          nothing) or a mode of the script's own (such as "release")
//	ARGV[2]   cost, an integer >= 1
//	ARGV[3]   rate
//	ARGV[4]   period in microseconds
//	ARGV[5]   capacity
//	ARGV[6..] the script's options, as configured
//
// The reply is an array of at least four integers, {allowed (1 or 0),
// remaining (0 to capacity), reset after µs, retry after µs (0 when
// allowed, above 0 when refused)}, followed by any extras the application
// wants to read back. Every key the script writes must get a TTL. A Lua
// error, a reply that breaks the contract or no reply within the store's
// budget is a store error naming the script, handled by the failure mode:
// never a panic, never an admission. examples/fixed_window.lua (a fixed
// window that passes the conformance suite's plain subset) and
// examples/concurrency.lua (a per-key concurrency cap released when a
// request ends) are worked examples.
//
// # Calling convention: full scripts
//
//	KEYS[1]        the request key's block; when no limit blocks the
//	               script does not touch it, and the store passes the first
//	               state key (a command on a Redis Cluster slot being
//	               migrated runs only when every key it names exists)
//	KEYS[2]        the request key's strike counter (block escalation); when
//	               no limit escalates (block_max <= block) the script does
//	               not touch it, and any key of the slot will do
//	KEYS[3]        the request key's de-duplication hash; when the dedup id
//	               is empty the script does not touch it, and any key of the
//	               slot will do
//	KEYS[4]        the request key's override; when ARGV[9] is "0" the
//	               script does not touch it, and any key of the slot will do
//	KEYS[5..n+4]   one state key per limit, in request order
//	               (sliding_window_log: KEYS[5] only, one sorted set shared
//	               by every limit of the request)
//	ARGV[1]        "take" or "peek"
//	ARGV[2]        cost, an integer >= 1
//	ARGV[3]        nonce: unique per take, free of ':' (sliding window log
//	               members); may be empty for other algorithms; for
//	               suppressed, the request's random value in [0, 1) as a
//	               decimal (Go's shortest form, which Lua reads back to
//	               the same double), take and peek alike
//	ARGV[4]        "1" to record refused requests too (window algorithms
//	               only; the bucket script fails on it), else "0"
//	ARGV[5]        de-duplication id as stored, "" for none
//	ARGV[6]        the replays an admitted id allows (0 without an id)
//	ARGV[7]        the id's window in microseconds (0 without an id)
//	ARGV[8]        n, the number of limits (at least 1)
//	ARGV[9]        "1" to apply the key's override (KEYS[4]), else "0"
//	ARGV[10..]     per limit i, six values: rate, period in microseconds,
//	               capacity, block and block_max in milliseconds (0 for
//	               none; block_max is 0 or at least block), and scope: the
//	               limit's ID when block > 0, else ""
//
// All keys must share one hash tag so that the script runs on Redis Cluster.
// Malformed arguments make the script fail with an error reply; stored
// state never does (see "Unreadable state"), nor does a placeholder (see
// "Slot migration").
//
// # Steps
//
// One script run is one atomic decision:
//
//  0. Override, when ARGV[9] is "1": the override key holds "exempt",
//     "suspend" or "scale:<factor>" and has a TTL. exempt answers an
//     admission and suspend a refusal lasting the key's PTTL, before
//     anything else and writing nothing; scale multiplies every limit's
//     rate and capacity by the factor (floor, at least 1 and the cost, at
//     most 2^30; contract.ScaleLimit) for the rest of the run. A value that
//     cannot be read, or a key without TTL, is repaired and applies
//     nothing. Without an override, a cost above a limit's capacity (which
//     the store could not refuse before knowing the override) is answered
//     with the error reply "RKCOST limit <i>".
//  1. Block check, when a limit of the request blocks (block > 0; other
//     requests are not subject to blocks): when the block key exists with
//     a PTTL above 0 the
//     request is refused as blocked, whatever the limits say. With counted
//     refusals it is recorded in every limit; nothing else is written.
//  2. De-duplication check (dedup id set): an id remembered, not expired
//     and replayed fewer times than allowed admits the request as a
//     duplicate; a take counts the replay and writes nothing else. An id
//     with no replay left is decided as in step 3 and left as it is.
//  3. Every limit evaluates the request.
//  4. Admitted (take): the request is recorded in every limit and its dedup
//     id remembered for its window (unless it is live with no replay left). Refused (take): with counted
//     refusals it is recorded anyway; then, if a refusing limit has a
//     block, the one with the longest block (after escalation; ties: the
//     earliest) blocks the key: SET block scope PX duration NX, and, when
//     that limit escalates, INCR the strike counter and PEXPIRE it to the
//     duration plus block_max. The n-th block (n = strikes + 1) lasts
//     min(block·2^(n−1), block_max).
//
// A peek runs steps 1 to 3 and writes nothing: it reports an existing block
// or a remembered id, else the limits' verdict (refused, not blocked, where
// a take would start a block).
//
// # Reply of the full scripts
//
// An array of 10 + 2n integers followed by two strings (and, from the
// sliding window log and counter, n integers more):
//
//	1  allowed: 1 when the request is admitted, else 0
//	2  index of the deciding limit, from 0; -1 when blocked
//	3  units the deciding limit still admits (after this request if
//	   admitted); 0 when blocked
//	4  the deciding limit's reset after, microseconds; when blocked, the
//	   retry after below
//	5  retry after, microseconds; 0 when allowed; when blocked, the later
//	   of the block's remaining time (its PTTL, or its duration when this
//	   run started it) and the longest retry after of the refusing limits
//	6  blocked: 1 when refused because of a block (existing or started)
//	7  block started: 1 when this run started the block
//	8  duplicate: 1 when admitted as a repeat of the dedup id
//	9  repaired: 1 when the run replaced state it could not read (see
//	   "Unreadable state")
//	10 override applied: 0 none, 1 scale, 2 exempt, 3 suspend. Under
//	   exempt every limit reports its full capacity and reset after 0;
//	   under suspend, 0 units and the override's remaining time, which is
//	   also the retry after
//	then per limit i: the units it still admits and its reset after, after
//	the request when it was admitted and recorded, else as it stands
//	without the request
//	then: the block's scope (the ID of the limit that started it, which
//	need not be one of this request's limits) when blocked, else ""
//	then: the override as stored when one applied, else ""
//	then, from the sliding window log and counter only (and not when an
//	exempt or suspend override answered), per limit i: its next after,
//	microseconds, as the lean reply's sixth integer, after the request
//	when it was admitted and recorded, else as it stands
//
// The deciding limit is, for a refused request, the refusing limit with the
// longest retry after (ties: the earliest); for an admitted one (a duplicate
// included), the limit with the fewest units remaining (ties: the
// earliest).
//
// The suppressed script appends two integers after the override: the largest
// suppression factor its limits met, in parts per million (0 to
// 1000000), and 1 when the request was refused and every limit that
// refused it refused by the draw, else 0. Its refused takes also write
// (the offered units), through the prelude's settle.
//
// # Partial grants
//
// The partial-grant scripts ("<algorithm>/partial", for every counting
// algorithm) decide a request with package store's Partial: they take the
// full script's KEYS and ARGV, with ARGV[2] the most units wanted (which
// may exceed the capacity). partial.lua runs the full script twice in the
// one call: as a peek of one unit, whose reply gives the grant g (0 when
// refused, else the smaller of the units wanted and the deciding limit's
// remaining plus one), then in the request's mode with cost g, or 1 when
// g is 0. The reply is the second run's full reply with one integer
// appended: g, or 0 when that run refused. The peek writes nothing, so
// the call writes what a full script of cost g (or a refused one of cost
// 1) writes.
//
// # Reservations
//
// The reservation scripts ("<algorithm>/reserve", for every counting
// algorithm) decide a take of a request with package store's
// Request.Reserve, whose cost a settlement may correct later. They take
// the full script's KEYS and ARGV and run it unchanged as the function
// decide, after common.lua, so that reserve.lua reads the clock the
// decision used: the reply is the full reply with one integer appended,
// the time of the decision in microseconds, which the store reports as
// Decision.Taken of an admission. The window algorithms' settlements need
// it to find the window, or the log members, the take recorded. A peek of
// such a request runs the full script.
//
// # Calendar quotas
//
// The calendar script ("fixed_window/calendar") decides a fixed-window
// request of which some limits count in calendar windows (package store's
// Limit.Calendar). Its KEYS are the full script's; its ARGV the full
// script's, then per limit four integers: the starts (µs) of four
// consecutive calendar windows, the one before the window that holds the
// store's clock, that window and the two after it, or four zeros for a
// limit of aligned windows. For a calendar limit the period argument is
// its longest window (a day of 25 hours, a week and an hour, 31 days and
// an hour), which bounds the de-duplication window as a period would.
// calendar.lua checks and takes the bounds off ARGV before the prelude
// runs; calendar_window.lua, in place of window.lua, gives fixed_window.lua
// the window that holds the server's time: for a calendar limit the one of
// the four that does (an error when none does), else the aligned one. The
// reply is the full script's; the state is the fixed window's, {w, cur},
// expiring at the end of its window.
//
// # Waiting
//
// The waiting scripts ("gcra/wait", "token_bucket/wait") decide a request
// with package store's MaxWait and give back the place one reserved. They
// are common.lua, then unreadable.lua, override.lua, prelude.lua and
// bucket.lua as the function decide, which reads the clock (now) and the
// mode (mode, take) of common.lua when it runs, then wait.lua. A decision
// takes the full script's KEYS and ARGV, then one more argument, the most
// µs the request may wait (at least 0), which wait.lua takes off ARGV.
// It runs decide (as a peek when a limit blocks, so that a refusal that
// will wait starts no block); an admission, a block or a retry after
// beyond the most is answered as is (for a blocking take, by decide in
// take mode). Otherwise the retry after is the delay d: decide runs
// again as a peek with now moved d ahead, and each limit's state is
// written at the real now with its units then plus the units that drain
// in d (nothing is written for a peek). The reply is the full reply
// (reset after counted from now, remaining as it will be after d), then
// d in µs and the reservation: for a take admitted with d > 0, per limit
// the state before (its 16 bytes, or those of {0, 0} for none or
// unreadable state) and after the reservation, else "".
//
// Mode "cancel" gives a place back: KEYS are the request's state keys,
// ARGV[2] the reservation, ARGV[3] n, then per limit rate and period
// in µs. A state key that still holds the state the reservation wrote is
// put back to the state before it (deleted when that has drained, else
// with the TTL of its units); others are left alone. The reply is the
// number of limits put back.
//
// # Stacked decisions
//
// The stacked script ("stacked") decides several requests, each with its own key, limits and
// algorithm, as one (package store's MultiStore). It is common.lua, one
// function per algorithm file, taking KEYS and ARGV as parameters, made of
// unreadable.lua, prelude.lua, part.lua and the file, then multi.lua.
// part.lua shadows the prelude's finish so that a part only reports its
// verdict; multi.lua evaluates every part, then commits every part (each
// writes and answers as the full script would) when all admit, and
// otherwise commits the refusing parts (their counted refusals and blocks)
// and holds the others: they record nothing unless they count refusals,
// and answer as admitting, with their limits as they stand.
//
//	KEYS           each part's full-script KEYS, in part order; with
//	               receipts, then one receipt key per part
//	ARGV[1]        "take" or "peek"
//	ARGV[2]        the receipts' TTL in ms (takes only), "" for none
//	ARGV[3]        p, the number of parts
//	ARGV[4..3+3p]  per part: algorithm index (store's order), its number
//	               of KEYS, its number of ARGV
//	then           each part's full-script ARGV, in part order, each
//	               starting with the mode
//
// The reply is {allowed (1 when every part admits), the full-script reply
// of each part...}. With receipts, an admission writes for each part that
// does not count refusals SET receipt <now µs> PX <the receipts' TTL, or
// its longest period when shorter>.
//
// The lean stacked script ("stacked/lean") decides a step whose every part is a plain GCRA or token
// bucket request (one limit, no block, counted refusals, de-duplication id
// or override) with scalar arithmetic, as the lean script does, and decides
// and writes exactly as the stacked script would. Its arguments are lean:
//
//	KEYS           each part's state key, in part order; with receipts,
//	               then one receipt key per part
//	ARGV[1]        "take" or "peek"
//	ARGV[2]        the receipts' TTL in ms (takes only), "" for none
//	ARGV[3]        p, the number of parts
//	then           per part: cost, rate, period µs, capacity
//
// The lean stacked script of window parts ("stacked/lean-windows") decides a step of plain parts
// of GCRA, the token bucket, the fixed window, the sliding window counter
// and the sliding window log, mixed as they come, with at least one window
// part, and decides and writes exactly as the stacked script would. Its
// arguments are those of "stacked/lean", each part's starting with its
// algorithm's index (store's order): algorithm, cost, rate, period µs,
// capacity; after the parts come the nonces of the sliding window log
// parts, in part order (the nonce each part's full-script arguments carry,
// which names its units and by which a refund finds them). A log part is
// read without a write (ZCOUNT and the ranks its reply needs); only a take
// that every part admits trims its units outside the window and adds the
// request's.
//
// Both lean stacked scripts answer one flat array of integers: allowed (1
// when every part admits), then each part's lean reply as the lean script
// lays it out (see "Calling convention: lean scripts"): allowed (as the
// part alone would answer), remaining, reset after µs, retry after µs,
// repaired, and for a sliding window log or counter part the time until
// one unit more. A table per part, in the stacked script's layout, cost
// Redis 7% of a stacked decision to turn into a reply.
//
// # Calling convention: stacked batches
//
// "stacked/lean-batch" and "stacked/lean-windows-batch" decide several
// requests of "stacked/lean" and of "stacked/lean-windows" in one call,
// as that script would decide each alone, in order, at one reading of
// the clock. The Redis store sends one in place of the pipelined lean
// stacked calls of a batch on a single Redis server: calls with as many
// keys, arguments and nonces (a window stack's log parts), which may be
// stacks of different algorithms.
//
//	KEYS      every request's k keys, in request order
//	ARGV[1]   c, the number of requests
//	ARGV[2]   k, the number of keys of every request
//	ARGV[3]   s, the number of every request's arguments a list holds:
//	          all but its own
//	ARGV[4]   e, the number of every request's own last arguments (the
//	          nonces of a window stack's log parts), which no list holds
//	ARGV[5]   m, the number of argument lists the requests share
//	then      m = 0: every request's s + e arguments, in request order
//	          m = 1: one list of s, every request's
//	          m > 1: the m lists of s, then each request's list number
//	          (from 1)
//	          m > 0: then every request's e own arguments, in order
//
// The requests of one stack shape and cost have the same arguments but
// for their nonces: Redis then parses them once per call rather than once
// per request. A list's arguments from the third on (the number of parts
// and the parts'), which the lean stacked scripts read only as numbers,
// reach decide as numbers, turned once per call. The store shares up to 8
// lists when that does not make the command longer.
//
// The reply has one element per request: its reply as the lean stacked
// script answers it, or the error it met as one string (a Redis error
// keeps its code, any other is ERR), which stops nothing else of the
// batch; a list number that names no list fails its request alone, as
// malformed arguments. Counts that do not match the command fail it
// whole.
//
// The refund script ("refund") gives back what one part recorded, when the Redis store runs a
// stack in several steps (Redis Cluster slots) and a later step refuses:
// KEYS are the receipt and the part's state keys; ARGV "refund", the
// algorithm index, the cost, the take's nonce, n and per limit rate,
// period µs and capacity. The receipt makes it happen at most once: a
// receipt holding a time is undone (GCRA and the bucket: the units taken
// back from the drained level; the window counters: from the take's window
// while it is counted; the log: the take's members removed) and replaced
// by "refunded" with its TTL, in one atomic step. The reply is 1 (refunded
// now), 2 (refunded before: a resent refund changes nothing) or 0 (no
// receipt: the take did not record, or its units have expired).
//
// The refund script also settles a reserved cost (package store's
// Refunder.Settle), for GCRA and the token bucket: KEYS are the request's
// state keys; ARGV "settle", the units to charge (the actual cost less
// the reserved one, negative to give back), n and per limit rate and
// period µs. Each limit's state is drained to now and the units added,
// down to none (the key deleted) and past the capacity if need be, with
// the TTL of the units left; an absent state is written only for a
// charge. The reply is 1. Settling is not idempotent: the store sends it
// once.
//
// # In-flight caps
//
// The slots script ("slots": common, slots) keeps the slots of an
// in-flight cap (package store's SlotStore) in one sorted set per cap key,
// a member per holder id scored with the end of its lease (µs on TIME).
// Every call first drops the leases that ended at or before now (a key
// of another type, or a placeholder, is deleted and holds nothing), then:
//
//	KEYS[1]   the cap's sorted set
//	ARGV[1]   "acquire": ARGV[2] id, ARGV[3] max, ARGV[4] lease µs. A held
//	          id, or any id while fewer than max are held, is (re)scored
//	          now + lease. Reply {acquired (1 or 0), slots held after}.
//	          "release": ARGV[2] id, removed. Reply: slots held after.
//	          "renew": ARGV[2] lease µs, ARGV[3..] ids; each id still held
//	          is rescored now + lease (ZADD XX: an ended lease is never
//	          taken back). Reply: ids renewed.
//
// After every call the set has the TTL of its latest lease end, or is
// deleted when empty. O(log n) per id.
// In mode "settle_window" it settles the window algorithms' reservations:
// KEYS are the request's state keys (the log's one sorted set); ARGV
// "settle_window", the algorithm index, the units to charge, the take's
// time (µs, from the reservation script's reply), a nonce for new log
// members, n and per limit rate and period µs. A charge adds to the
// window that holds the server's time (fixed window and counter: the
// count cur, the state written with the TTL a take gives it; the log:
// min(units, the largest rate) members at now, after the prune a take
// makes, TTL the longest period), an absent or unreadable state counting
// as none and written over. A give-back lowers cur when the state's window
// holds the take's time, or the counter's prev when the state's window is
// the next one, floored at 0 (HSET keeps the TTL), and removes up to that
// many log members scored at the take's time (the log's TTL then set from
// its newest member). The reply is 1.
//
// # Re-sent commands
//
// A client library may re-send a command after a broken connection although
// the server already ran it (go-redis does so up to MaxRetries times). The
// scripts keep no per-attempt record: the Redis store sends them with the
// client's re-send switched off, so a call whose reply is lost fails once
// and is never run twice.
//
// # State and expiry
//
// Every write sets a TTL in whole milliseconds, rounded up and at least 1,
// that ends when the state can no longer change a decision. A window's
// expiry is the same instant for every take in the window, so the lean
// scripts of the fixed window and the sliding window counter set it only
// when they start the key's window (a key that already holds the window
// keeps the TTL its first take gave it; HSET keeps a TTL):
//
//   - gcra and token_bucket: one 16-byte string per limit, {ts, used} as
//     two little-endian doubles (struct.pack '<d<d'): the time of the last
//     admission (integer µs) and the units used then. Expires when the
//     units have drained.
//   - sliding_window_log: one sorted set for the request's limits, a member
//     "<now>:<nonce>:<j>" per recorded unit scored with its time; pruned to
//     the longest period on each recording (by the lean script on each
//     take, refused or not), and with counted refusals
//     trimmed (ZREMRANGEBYRANK) to its newest (largest rate + cost) units,
//     which leaves every decision and retry time unchanged and bounds the
//     set under a flood; expires one longest period after its newest unit.
//   - sliding_window_counter: one hash {w, cur, prev, p} per limit, w the
//     start of the window cur counts; expires at the end of the window
//     after w. p is the period (µs) the TTL was set for: a lean take keeps
//     the TTL of a key that holds its window only when p is its period
//     (a reload may change a named limit's period, not its key). Every
//     script that sets the TTL writes p; keys written before p existed
//     lack it, and get their TTL set again.
//   - fixed_window: one hash {w, cur, p} per limit; expires at the end of
//     window w (a calendar window's end for a calendar limit, whose p is
//     0). p as for the sliding window counter.
//   - override: a string ("exempt", "suspend" or "scale:<factor>"), PX
//     the override's duration; written by the store's SetOverride, never
//     by a script.
//   - suppressed: one hash {w, cur, prev, ocur, oprev, f, ft} per limit:
//     the sliding window counter's fields for the accepted units, the
//     offered units of the same two windows, and the cached suppression
//     factor (ppm) with the time it was computed (µs); written by every
//     take but a duplicate, admitted or refused; expires at the end of the
//     window after w. A cached factor holds for 100ms, or a tenth of the
//     period when shorter, unless the one computed is higher; it needs
//     no key of its own.
//   - block: a string, the scope; PX the block's duration. Its TTL is the
//     only record of when the block ends, so block times have millisecond
//     resolution: a block that still exists is reported with its PTTL,
//     which is never shorter than its true remaining time.
//   - strikes: an integer, the number of escalating blocks whose memory has
//     not lapsed; PX the latest block's duration plus its limit's
//     block_max.
//   - de-duplication: one hash per request key mapping each remembered id
//     to "<end of its window in µs>:<replays used>" (a value without ":",
//     written by an older version, has used none), plus the field "#" (the number of
//     live ids at the last pruning). Redis 7.0 has no per-field expiry, and
//     one hash lets a reset delete every id without knowing them. Ids are
//     stored as given by the caller, which must make them distinct from
//     "#". Expired ids are pruned once the hash has doubled (plus 16 fields)
//     since the last pruning; the hash's TTL is raised, never lowered, to
//     window of each admission that adds an id, so it lives as long as
//     its longest-lived id.
//   - placeholder: any of the keys above may briefly hold the string
//     "\x00rk:absent" during a Redis Cluster slot migration, written by
//     the Redis store with a TTL of a few seconds and read as an absent
//     key (see "Slot migration").
//
// A take that writes nothing (a refusal that does not count, a blocked or
// duplicate request) gives a state key it read that has no TTL (written by
// hand, or by an older version) the TTL its state calls for, as a write
// would have: one PTTL per state key on those takes only. An admission
// writes with a TTL anyway, but for the lean fixed window's and sliding
// window counter's within the window their key holds (see above): a key of
// theirs made persistent by hand gets a TTL at its next window or refusal.
//
// Storing w means callers need not know the current window. Windows are
// aligned at multiples of the period since the Unix epoch. If the server
// clock goes back (after a failover to a replica whose clock is behind), a
// stored window later than the current one stays current, which can only
// make the window algorithms stricter.
//
// # Unreadable state
//
// State is read with redis.pcall, which costs what redis.call does. A key
// whose state the script cannot read, of another type (a WRONGTYPE error
// reply) or malformed (a bucket that is not two finite doubles, window
// fields that are not numbers, a log member scored beyond any time, a
// suppressed hash missing a field or with a factor outside 0 to 10⁶), is
// deleted on a take and the limit decided as if it were absent: as for a
// fresh key. The reply's repaired flag reports it. A peek deletes nothing
// and decides as if the key were absent, with repaired 0. The keys all
// limits share are repaired the same way: a block key that is not a
// string, holds no scope or has no TTL blocks nothing and is deleted (a
// new block replaces it); a strike counter that is not a whole number
// counts no strikes; a de-duplication hash of another type is deleted,
// and an id whose value cannot be read is forgotten. So one key's bad
// state costs that key its history, never an error for every request of
// the key, and never a store failure that would count against the store
// as a whole.
//
// # Slot migration
//
// While a Redis Cluster slot is being migrated, Redis runs a command naming
// several keys only on a node that holds all of them. So that a full
// script can run on the migration's target, the Redis store creates each
// of its keys that exists nowhere there as a placeholder: the string
// "\x00rk:absent" (a NUL byte first, which no state the store writes
// starts with) with a TTL of a few seconds, written with SET NX, so never
// over real state. Every script reads a placeholder as an absent key,
// wherever it reads a key: state of every algorithm (a string, hash or
// sorted set read where a placeholder is a wrong type or malformed string),
// the block key (which then blocks nothing), the strike counter (no
// strikes), the de-duplication hash (no ids), the override (none); in the
// lean scripts and the stacked parts too, since a lean request may share
// a state key with a full one; refund.lua finds no receipt in it and
// nothing to refund. A take deletes a placeholder it reads before it
// writes the key, or when it does not write it; this is not a repair: the
// repaired flag stays 0, at the cost of one GET on the repair path only.
// A peek writes nothing. A placeholder a take does not read (the strike
// counter when no block starts) is left to the store, which deletes the
// placeholders it created right after the script, or to its TTL.
//
// Each script is O(1) per limit, apart from the sliding window log: O(log n)
// per limit for the checks (ZCOUNT and rank access), plus O(cost · log n) to
// record a request and amortized O(1) per unit pruned or trimmed; and the
// de-duplication hash, amortized O(1) per remembered id (one pruning pass
// over at most twice the live ids plus 16).
package lua

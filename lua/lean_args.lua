-- lean_args.lua: the start of every lean script (lean_bucket.lua for GCRA
-- and the token bucket; lean_fixed_window.lua, lean_sliding_window_counter.lua
-- and lean_sliding_window_log.lua for the window algorithms), for the common
-- request: one limit, no block, no de-duplication id, no counted refusals.
-- It follows common.lua (and unreadable.lua for the window algorithms) and
-- parses the lean arguments (see doc.go) into scalars: key, cost, rate and
-- period p of the limit (microseconds), and its capacity cap (the burst of
-- the buckets, the rate of the window algorithms, which count up to it).
-- The lean fixed window and sliding window counter also write ARGV[4], p as
-- given (decimal µs, the form every script writes a period in), to a
-- window's field p and compare it with the stored one as strings:
-- formatting p again would cost Redis more than the field's read and
-- write. The algorithm file answers the lean reply's integers (five, and a
-- sixth from the log and the counter: see doc.go), with the same arithmetic
-- as its full script.
--
-- A lean batch (lean_batch.lua) runs this file once per argument list its
-- requests share, as the function check, and each request's algorithm file
-- with the scalars it returns.
local cost, rate, p, cap = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if (not take and mode ~= 'peek') or not cost or cost < 1 or not rate or rate < 1
    or not p or p < 1000 or not cap or cap < 1 or #KEYS ~= 1 then
  error('ratekeeper: malformed arguments')
end
local key = KEYS[1]

-- lean_window.lua: the start of the lean scripts of the window algorithms
-- (lean_fixed_window.lua, lean_sliding_window_counter.lua,
-- lean_sliding_window_log.lua), for the common request: one limit, no
-- block, no de-duplication id, no counted refusals. It follows common.lua
-- and unreadable.lua and parses the lean arguments (see doc.go) into
-- scalars: key, cost, period p and capacity cap (window algorithms count
-- up to the capacity, the rate). The lean fixed window and sliding window
-- counter write ARGV[4], p as given (decimal µs, the form every script
-- writes a period in), to a window's field p and compare it with the
-- stored one as strings: formatting p again would cost Redis more than
-- the field's read and write. The algorithm file answers the lean
-- reply's integers (five, and a sixth from the log and the counter: see
-- doc.go), with the same arithmetic as its full script.
local cost, rate, p, cap = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if (not take and mode ~= 'peek') or not cost or cost < 1 or not rate or rate < 1
    or not p or p < 1000 or not cap or cap < 1 or #KEYS ~= 1 then
  error('ratekeeper: malformed arguments')
end
local key = KEYS[1]

-- lean.lua: the prelude for the common request: one limit, no block, no
-- de-duplication id, no counted refusals. It sets up the same names as
-- prelude.lua for n = 1 and answers with five integers. See doc.go.

local cost = tonumber(ARGV[2])
local n = 1
local rate, period, cap = {tonumber(ARGV[3])}, {tonumber(ARGV[4])}, {tonumber(ARGV[5])}
local nonce = ARGV[6] or ''
if (not take and ARGV[1] ~= 'peek') or not cost or cost < 1
    or not rate[1] or rate[1] < 1 or not period[1] or period[1] < 1000
    or not cap[1] or cap[1] < 1 or #KEYS ~= 1 then
  error('ratekeeper: malformed arguments')
end
local count_denied = false
local longest = period[1]
local state = {KEYS[1]}
local ok, rem0, reset0, rem1, reset1, retry = {}, {}, {}, {}, {}, {}
local next0, next1 = {}, {}
local allowed = true

-- finish records an admitted take through record, or on a refused take
-- calls settle (which gives a state key left without TTL its TTL), and
-- answers {allowed, remaining, reset after µs, retry after µs, repaired}:
-- after the request when it is admitted, else as the limit stands without
-- it; then, from the sliding window log and counter, the time until one
-- unit more is admitted (µs).
local function finish(record, settle)
  local r
  if allowed then
    if take then
      record()
    end
    r = {1, rem1[1], reset1[1], 0, repaired, next1[1]}
  else
    if take then
      settle()
    end
    r = {0, rem0[1], reset0[1], retry[1], repaired, next0[1]}
  end
  return r
end


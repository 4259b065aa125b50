-- lean_override.lua: the start of the lean script for a request that
-- applies its key's override: one limit, no block, no de-duplication id, no
-- counted refusals. It follows common.lua, unreadable.lua and override.lua,
-- and takes the lean arguments with KEYS[2], the override key. An exempt or
-- suspend override answers here, as in prelude.lua; a cost that the limit
-- the override leaves cannot hold answers RKCOST. Otherwise the
-- algorithm's lean script (lean_args.lua, then lean_bucket.lua or the
-- algorithm's lean file) runs next, as the body of a function that sees
-- the request's state key and the limit the override leaves (the locals
-- KEYS and ARGV below shadow the call's own). The reply is the lean script's five integers,
-- then the override's code and value (0 and '' for none), as in the full
-- reply.
local lean_cost, lean_rate, lean_cap = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[5])
if #KEYS ~= 2 or not lean_cost or lean_cost < 1 or not lean_rate or lean_rate < 1
    or not lean_cap or lean_cap < 1 then
  error('ratekeeper: malformed arguments')
end
local override_kind, override_value, override_ttl, factor = read_override(KEYS[2], repair)
if override_kind == 2 then
  return {1, lean_cap, 0, 0, repaired, 2, override_value}
elseif override_kind == 3 then
  local us = override_ttl * 1000
  return {0, 0, us, us, repaired, 3, override_value}
elseif override_kind == 1 then
  lean_rate, lean_cap = scale_units(lean_rate, factor, lean_cost), scale_units(lean_cap, factor, lean_cost)
end
-- The store lets a request that applies overrides through with a cost
-- above its configured capacity (see prelude.lua).
if lean_cost > lean_cap then
  return redis.error_reply('RKCOST limit 1')
end
local KEYS = {KEYS[1]}
-- ARGV[6], the sliding window log's nonce, goes on when there is one.
local ARGV = {ARGV[1], ARGV[2], lean_rate, ARGV[4], lean_cap, ARGV[6]}

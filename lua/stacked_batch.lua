-- stacked_batch.lua: the driver of a lean stacked script's batch variant,
-- which decides several stacked requests in one call: each in order, as
-- the lean stacked script would alone, at the one clock reading of
-- common.lua. It follows common.lua, the rest of the lean stacked script
-- as the function decide(KEYS, ARGV), which returns the request's reply,
-- and batch_error.lua; it sets mode and take (common.lua's) for each
-- request before deciding it. See doc.go, "Calling convention: stacked
-- batches".
--
-- ARGV[1] is c, the number of requests; ARGV[2i] and ARGV[2i+1] are
-- request i's number of keys and of arguments; then come every request's
-- arguments, in order. KEYS holds every request's keys, in order. The
-- reply has one element per request: its reply as the lean stacked
-- script would have answered it alone, or the error it met as one string
-- (batch_error.lua).
local c = tonumber(ARGV[1])
if not c or c < 1 or c % 1 ~= 0 or #ARGV < 1 + 2 * c then
  error('ratekeeper: malformed arguments')
end
local nk, na = {}, {}
local kt, at = 0, 1 + 2 * c
for i = 1, c do
  local k, a = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
  if not k or k < 1 or k % 1 ~= 0 or not a or a < 1 or a % 1 ~= 0 then
    error('ratekeeper: malformed arguments')
  end
  nk[i], na[i] = k, a
  kt, at = kt + k, at + a
end
if kt ~= #KEYS or at ~= #ARGV then
  error('ratekeeper: malformed arguments')
end

local out = {}
local k, a = 0, 1 + 2 * c
for i = 1, c do
  -- Fresh tables: decide reads #KEYS and #ARGV, and the requests of a
  -- batch need not have as many of either.
  local keys, args = {}, {}
  for j = 1, nk[i] do
    keys[j] = KEYS[k + j]
  end
  for j = 1, na[i] do
    args[j] = ARGV[a + j]
  end
  k, a = k + nk[i], a + na[i]
  mode = args[1]
  take = mode == 'take'
  -- A request that fails stops nothing: the requests before it keep what
  -- they wrote and the ones after it are decided.
  local ok, reply = pcall(decide, keys, args)
  if ok and type(reply) ~= 'table' then
    ok, reply = false, 'ratekeeper: incomplete stacked reply'
  end
  if ok then
    out[i] = reply
  else
    out[i] = batch_error(reply)
  end
end
return out

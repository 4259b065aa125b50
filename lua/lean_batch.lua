-- lean_batch.lua: the driver of a lean script's batch variant, which
-- decides several lean requests in one call: each in order, as its lean
-- script would alone, at the one clock reading of common.lua. It follows
-- common.lua and the lean script as the body of the function
-- decide(KEYS, ARGV), and sets mode and take (common.lua's) for each
-- request before deciding it. See doc.go, "Calling convention: lean
-- batches".
local n = tonumber(ARGV[1])
if not n or n < 1 or #ARGV ~= 1 + n * #KEYS then
  error('ratekeeper: malformed arguments')
end

local out = {}
for i = 1, #KEYS do
  local o = 1 + (i - 1) * n
  local args = {}
  for j = 1, n do
    args[j] = ARGV[o + j]
  end
  mode = args[1]
  take = mode == 'take'
  -- A request that fails stops nothing: the requests before it keep what
  -- they wrote, the ones after it are decided, and its own element is the
  -- error reply it would have met alone.
  local ok, r = pcall(decide, {KEYS[i]}, args)
  if ok then
    out[i] = r
  elseif type(r) == 'table' and r.err then
    out[i] = {err = r.err}
  else
    out[i] = {err = 'ERR ' .. tostring(r)}
  end
end
return out

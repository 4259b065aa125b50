-- lean_batch.lua: the driver of a lean script's batch variant, which
-- decides several lean requests in one call: each in order, as its lean
-- script would alone, at the one clock reading of common.lua. It follows
-- common.lua and the lean script's body as the function decide(KEYS,
-- ARGV), which returns the request's lean reply as values, and sets mode
-- and take (common.lua's) for each request before deciding it. The reply
-- is flat: for each request, the number of its lean reply's integers and
-- then the integers, or the error it met as one string. See doc.go,
-- "Calling convention: lean batches".
local n = tonumber(ARGV[1])
if not n or n < 1 or #ARGV ~= 1 + n * #KEYS then
  error('ratekeeper: malformed arguments')
end

-- One array for the whole batch: Redis turns each table of a reply into
-- an array element by element, after looking up its fields, so a table
-- per request cost it about a sixth of a GCRA decision.
local out = {}
local o = 0
-- One request's KEYS and ARGV, written over for each: decide keeps
-- neither, and every request has n arguments. Two tables fewer per
-- request cost Redis about 8% less time per batch.
local keys, args = {}, {}
for i = 1, #KEYS do
  local a = 1 + (i - 1) * n
  for j = 1, n do
    args[j] = ARGV[a + j]
  end
  keys[1] = KEYS[i]
  mode = args[1]
  take = mode == 'take'
  -- A request that fails stops nothing: the requests before it keep what
  -- they wrote, the ones after it are decided, and its own element is the
  -- error it would have met alone.
  local ok, allowed, remaining, reset, retry, repaired, nxt = pcall(decide, keys, args)
  -- A nil among the five would end the flat reply there (Redis reads a
  -- table up to its first nil) and so fail every request of the batch:
  -- it fails this one alone.
  if ok and not (allowed and remaining and reset and retry and repaired) then
    ok, allowed = false, 'ratekeeper: incomplete lean reply'
  end
  if ok then
    -- Five integers, and the sixth of the log and the counter.
    if nxt then
      out[o + 1] = 6
      out[o + 7] = nxt
    else
      out[o + 1] = 5
    end
    out[o + 2] = allowed
    out[o + 3] = remaining
    out[o + 4] = reset
    out[o + 5] = retry
    out[o + 6] = repaired
    o = o + 1 + out[o + 1]
  else
    -- The error travels as a string, not as an error reply: a client may
    -- stop reading an array at an error element of some codes. A Redis
    -- error (READONLY, OOM, WRONGTYPE...) keeps its code, which tells the
    -- store what it means; pcall hands it back as a string (or as a table
    -- with an err field). Any other error is a Lua error, which Redis
    -- would have answered as ERR.
    local e = allowed
    if type(e) == 'table' and e.err then
      e = e.err
    end
    e = tostring(e)
    if not string.find(e, '^%u[%u%d_]* ') then
      e = 'ERR ' .. e
    end
    o = o + 1
    out[o] = e
  end
end
return out

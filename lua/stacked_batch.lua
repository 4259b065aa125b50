-- stacked_batch.lua: the driver of a lean stacked script's batch variant,
-- which decides several stacked requests in one call: each in order, as
-- the lean stacked script would alone, at the one clock reading of
-- common.lua. It follows common.lua, the rest of the lean stacked script
-- as the function decide(KEYS, ARGV), which returns the request's reply,
-- and batch_error.lua; it sets mode and take (common.lua's) for each
-- request before deciding it. See doc.go, "Calling convention: stacked
-- batches".
--
-- ARGV[1] is c, the number of requests; ARGV[2] k, the number of keys of
-- every request (KEYS holds them, request after request); ARGV[3] s and
-- ARGV[4] e, every request's numbers of arguments in a list and of its
-- own (a window stack's log nonces), which follow the list's; ARGV[5] m,
-- the number of argument lists the requests share. With m = 0 every
-- request's s + e arguments follow in order; with m = 1 one list of s
-- follows, every request's; with m > 1 the m lists follow, then each
-- request's list number. With m > 0 each request's e own arguments come
-- last, in order. The requests of one stack shape and one cost have the
-- same arguments but for their nonces: Redis then parses them once per
-- call instead of once per request.
local c, k, s, e, m = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local function whole(x, lo)
  return x and x >= lo and x % 1 == 0
end
if not (whole(c, 1) and whole(k, 1) and whole(s, 1) and whole(e, 0) and whole(m, 0)) or m > c
    or #KEYS ~= c * k then
  error('ratekeeper: malformed arguments')
end
-- own: where the requests' own arguments start, after the lists and the
-- list numbers.
local own = 5 + m * s
if m > 1 then
  own = own + c
end
local want = own + c * e
if m == 0 then
  want = 5 + c * (s + e)
end
if #ARGV ~= want then
  error('ratekeeper: malformed arguments')
end
-- The shared lists. decide only reads its ARGV, so one table serves every
-- request of a list, with the request's own arguments written after the
-- list's. A lean stacked script reads its arguments from the third on
-- (the number of parts, then the parts') only through tonumber: a list
-- holds them as numbers, parsed once per call; any other string stays,
-- for decide to refuse.
local lists = {}
for t = 1, m do
  local list, a = {}, 5 + (t - 1) * s
  for j = 1, s do
    local x = ARGV[a + j]
    if j >= 3 then
      x = tonumber(x) or x
    end
    list[j] = x
  end
  lists[t] = list
end

local out = {}
-- One request's KEYS and, without shared lists, its ARGV, written over
-- for each: decide keeps neither, and every request has k keys and s + e
-- arguments.
local keys, args = {}, lists[1] or {}
for i = 1, c do
  local b = (i - 1) * k
  for j = 1, k do
    keys[j] = KEYS[b + j]
  end
  if m == 0 then
    local a = 5 + (i - 1) * (s + e)
    for j = 1, s + e do
      args[j] = ARGV[a + j]
    end
  else
    if m > 1 then
      args = lists[tonumber(ARGV[5 + m * s + i])]
    end
    if args then
      local a = own + (i - 1) * e
      for j = 1, e do
        args[s + j] = ARGV[a + j]
      end
    end
  end
  -- A request that fails stops nothing: the requests before it keep what
  -- they wrote and the ones after it are decided (a list number out of
  -- range fails its request alone, as malformed arguments).
  local ok, reply = false, 'ratekeeper: malformed arguments'
  if args then
    mode = args[1]
    take = mode == 'take'
    ok, reply = pcall(decide, keys, args)
  end
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

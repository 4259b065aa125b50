-- lean_batch.lua: the driver of a lean script's batch variant, which
-- decides several lean requests in one call: each in order, as its lean
-- script would alone, at the one clock reading of common.lua. It follows
-- common.lua and the lean script's body as the function decide(KEYS,
-- ARGV), which returns the request's lean reply as values, then the
-- line setting numeric and batch_error.lua, and sets mode and take
-- (common.lua's) for each request before deciding it. The reply is flat: for each request, the
-- number of its lean reply's integers and then the integers (two or
-- three of them for an admission that repaired nothing), or the error it
-- met as one string. See doc.go, "Calling convention: lean batches".
--
-- ARGV[1] is n, the number of arguments of every request, ARGV[2] is m,
-- the number of argument lists the call shares among its requests, and
-- ARGV[3] is e, the number of each request's last arguments that are its
-- own (the sliding window log's nonce), which the lists leave out: a list
-- holds s = n - e arguments. With m = 0 (and e = 0) every request's n
-- arguments follow in order; with m = 1 one list of s follows, every
-- request's; with m > 1 the m lists follow, then each request's list
-- number. With m > 0 each request's e own arguments come last, in order.
-- Most batches are of one limit, whose requests have the same arguments
-- but for a nonce: Redis then parses s of them once per call instead of
-- once per request.
local n, m, e = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local count = #KEYS
if not n or n < 1 or n % 1 ~= 0 or not m or m < 0 or m > count or m % 1 ~= 0
    or not e or e < 0 or e >= n or e % 1 ~= 0 or (m == 0 and e ~= 0) then
  error('ratekeeper: malformed arguments')
end
local s = n - e
-- own: where the requests' own arguments start, after the lists and the
-- list numbers.
local own = 3 + m * s
if m > 1 then
  own = own + count
end
local want = own + count * e
if m == 0 then
  want = 3 + count * n
end
if #ARGV ~= want then
  error('ratekeeper: malformed arguments')
end
-- The shared lists. decide only reads its ARGV, so one table serves every
-- request of a list, with the request's own arguments written after the
-- list's before it is decided. Of the arguments the lean script reads
-- only as numbers (numeric, which precedes this file), a list holds the
-- number: decide's tonumber then returns it as it is, where a string
-- would be parsed again for every request (about a twelfth of a GCRA
-- decision in a batch of 16). Any other string stays, for decide to
-- refuse.
local lists = {}
for t = 1, m do
  local list, a = {}, 3 + (t - 1) * s
  for j = 1, s do
    list[j] = ARGV[a + j]
  end
  for _, j in ipairs(numeric) do
    if j <= s then
      list[j] = tonumber(list[j]) or list[j]
    end
  end
  lists[t] = list
end

-- One array for the whole batch: Redis turns each table of a reply into
-- an array element by element, after looking up its fields, so a table
-- per request cost it about a sixth of a GCRA decision.
local out = {}
local o = 0
-- One request's KEYS and, without shared lists, its ARGV, written over
-- for each: decide keeps neither, and every request has n arguments. Two
-- tables fewer per request cost Redis about 8% less time per batch.
local keys, args = {}, lists[1] or {}
for i = 1, count do
  if m == 0 then
    local a = 3 + (i - 1) * n
    for j = 1, n do
      args[j] = ARGV[a + j]
    end
  else
    if m > 1 then
      args = lists[tonumber(ARGV[3 + m * s + i])]
    end
    if args and e > 0 then
      local a = own + (i - 1) * e
      for j = 1, e do
        args[s + j] = ARGV[a + j]
      end
    end
  end
  keys[1] = KEYS[i]
  -- A request that fails stops nothing: the requests before it keep what
  -- they wrote, the ones after it are decided, and its own element is the
  -- error it would have met alone (here also a list number out of range).
  local ok, allowed, remaining, reset, retry, repaired, nxt = false, 'ratekeeper: malformed arguments'
  if args then
    mode = args[1]
    take = mode == 'take'
    ok, allowed, remaining, reset, retry, repaired, nxt = pcall(decide, keys, args)
  end
  -- A nil among the five would end the flat reply there (Redis reads a
  -- table up to its first nil) and so fail every request of the batch:
  -- it fails this one alone.
  if ok and not (allowed and remaining and reset and retry and repaired) then
    ok, allowed = false, 'ratekeeper: incomplete lean reply'
  end
  if ok and allowed == 1 and retry == 0 and repaired == 0 then
    -- An admission that repaired nothing, the common element, is
    -- compact: the remaining count, the reset time and the log's and the
    -- counter's sixth integer, after their number (2 or 3). Three
    -- integers fewer per request cost Redis about a fourteenth of a GCRA
    -- decision.
    out[o + 2] = remaining
    out[o + 3] = reset
    if nxt then
      out[o + 1] = 3
      out[o + 4] = nxt
      o = o + 4
    else
      out[o + 1] = 2
      o = o + 3
    end
  elseif ok then
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
    -- The error travels as a string (batch_error.lua).
    o = o + 1
    out[o] = batch_error(allowed)
  end
end
return out

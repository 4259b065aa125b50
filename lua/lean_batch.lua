-- lean_batch.lua: the driver of a lean script's batch variant, which
-- decides several lean requests in one call: each in order, as its lean
-- script would alone, at the one clock reading of common.lua. It follows
-- common.lua, lean_args.lua as the function check(KEYS, ARGV), which
-- returns the scalars cost, rate, period and capacity or raises the error
-- of malformed arguments, the algorithm file as the function decide(key,
-- ARGV, cost, rate, p, cap), which returns the request's lean reply as
-- values, and batch_error.lua; it sets mode and take (common.lua's) for
-- each request before deciding it. The reply is flat: for each request,
-- the number of its lean reply's integers and then the integers (two or
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
-- The shared lists, each with the scalars check (lean_args.lua) turned it
-- into, or the error it met: a list is checked once, when its first
-- request is decided, and its requests are then decided with the checked
-- scalars, where each would parse and check its arguments again (about a
-- twentieth of a GCRA decision in a batch of 18). decide only reads its ARGV
-- (the window algorithms' period as given, the log's nonce), so one table
-- serves every request of a list, with the request's own arguments
-- written after the list's before it is decided.
local lists, checked = {}, {}
for t = 1, m do
  local list, a = {}, 3 + (t - 1) * s
  for j = 1, s do
    list[j] = ARGV[a + j]
  end
  lists[t] = list
end

-- One array for the whole batch: Redis turns each table of a reply into
-- an array element by element, after looking up its fields, so a table
-- per request cost it about a sixth of a GCRA decision.
local out = {}
local o = 0
-- One request's KEYS and, without shared lists, its ARGV, written over
-- for each: neither function keeps them, and every request has n
-- arguments.
local keys, args = {}, {}
for i = 1, count do
  local t = 1
  if m == 0 then
    local a = 3 + (i - 1) * n
    for j = 1, n do
      args[j] = ARGV[a + j]
    end
  else
    if m > 1 then
      t = tonumber(ARGV[3 + m * s + i])
    end
    args = lists[t]
    if args and e > 0 then
      local a = own + (i - 1) * e
      for j = 1, e do
        args[s + j] = ARGV[a + j]
      end
    end
  end
  -- A request that fails stops nothing: the requests before it keep what
  -- they wrote, the ones after it are decided, and its own element is the
  -- error it would have met alone (here also a list number out of range).
  local ok, allowed, remaining, reset, retry, repaired, nxt = false, 'ratekeeper: malformed arguments'
  if args then
    mode = args[1]
    take = mode == 'take'
    local c = m > 0 and checked[t]
    if not c then
      keys[1] = KEYS[i]
      c = {pcall(check, keys, args)}
      if m > 0 then
        checked[t] = c
      end
    end
    if c[1] then
      ok, allowed, remaining, reset, retry, repaired, nxt = pcall(decide, KEYS[i], args, c[2], c[3], c[4], c[5])
    else
      allowed = c[2]
    end
  end
  if ok and allowed == 1 and retry == 0 and repaired == 0 and remaining and reset then
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
  elseif ok and allowed and remaining and reset and retry and repaired then
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
    -- The error travels as a string (batch_error.lua). A nil among the
    -- five would have ended the flat reply there (Redis reads a table up
    -- to its first nil) and so failed every request of the batch: it
    -- fails this one alone.
    if ok then
      allowed = 'ratekeeper: incomplete lean reply'
    end
    o = o + 1
    out[o] = batch_error(allowed)
  end
end
return out

-- prelude.lua: the full prelude, for requests with several limits, a block,
-- a de-duplication id or counted refusals. It parses the arguments, checks
-- the block and the de-duplication id, and defines finish, which records,
-- starts blocks and builds the reply. See doc.go.

local cost = tonumber(ARGV[2])
local nonce = ARGV[3]
local count_denied = ARGV[4] == '1'
local dedup_id = ARGV[5]
local dedup_replays = tonumber(ARGV[6])
local dedup_window = tonumber(ARGV[7])
local n = tonumber(ARGV[8])
local overrides = ARGV[9] == '1'
if (not take and mode ~= 'peek') or not cost or cost < 1
    or (ARGV[4] ~= '0' and ARGV[4] ~= '1') or not n or n < 1
    or not dedup_replays or dedup_replays < 0
    or not dedup_window or dedup_window < 0
    or (ARGV[9] ~= '0' and ARGV[9] ~= '1')
    or #ARGV ~= 9 + 6 * n or #KEYS < 5 then
  error('ratekeeper: malformed arguments')
end

-- Per limit i: rate, period (µs) and capacity; block and block_max (ms, 0
-- for none) and scope, the limit's ID ('' when it does not block). longest
-- is the longest period.
local rate, period, cap, block, block_max, scope = {}, {}, {}, {}, {}, {}
local longest = 0
for i = 1, n do
  local b = 9 + 6 * (i - 1)
  rate[i] = tonumber(ARGV[b + 1])
  period[i] = tonumber(ARGV[b + 2])
  cap[i] = tonumber(ARGV[b + 3])
  block[i] = tonumber(ARGV[b + 4])
  block_max[i] = tonumber(ARGV[b + 5])
  scope[i] = ARGV[b + 6]
  if not rate[i] or rate[i] < 1 or not period[i] or period[i] < 1000
      or not cap[i] or cap[i] < 1 or not block[i] or block[i] < 0
      or not block_max[i] or (block_max[i] > 0 and block_max[i] < block[i])
      or (block[i] > 0) ~= (scope[i] ~= '') then
    error('ratekeeper: malformed limit ' .. i)
  end
  if period[i] > longest then
    longest = period[i]
  end
end

-- KEYS[1] is the block, KEYS[2] the strike counter, KEYS[3] the
-- de-duplication hash, KEYS[4] the override, KEYS[5..] the state keys:
-- state[i] for limit i (sliding_window_log: state[1] only).
local block_key, strikes_key, dedup_key, override_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local state = {}
for i = 5, #KEYS do
  state[i - 4] = KEYS[i]
end

-- The key's override, when the request asks for it (read_override in
-- override.lua); override_kind is the reply's code.
local override_kind, override_value, override_ttl = 0, '', 0
if overrides then
  local factor
  override_kind, override_value, override_ttl, factor = read_override(override_key, repair)
  if override_kind == 1 then
    for i = 1, n do
      rate[i], cap[i] = scale_units(rate[i], factor, cost), scale_units(cap[i], factor, cost)
    end
  end
end
-- A request that reads overrides may reach the script with a cost above a
-- limit's capacity (the store cannot know the override before): unless
-- the override exempts or suspends the client, or its scaled limits hold
-- the cost, it is answered with the error RKCOST, which the store reports
-- as store.ErrCostExceedsCapacity.
if overrides and override_kind <= 1 then
  for i = 1, n do
    if cost > cap[i] then
      return redis.error_reply('RKCOST limit ' .. i)
    end
  end
end

-- exempt admits and suspend refuses without touching any other key, and
-- before the key's block: an operator's override is the last word.
if override_kind == 2 or override_kind == 3 then
  local r
  if override_kind == 2 then
    r = {1, 0, cap[1], 0, 0, 0, 0, 0, repaired, 2}
  else
    local us = override_ttl * 1000
    r = {0, 0, 0, us, us, 0, 0, 0, repaired, 3}
  end
  for i = 1, n do
    if override_kind == 2 then
      r[9 + 2 * i], r[10 + 2 * i] = cap[i], 0
    else
      r[9 + 2 * i], r[10 + 2 * i] = 0, r[4]
    end
  end
  r[#r + 1] = ''
  r[#r + 1] = override_value
  do return r end
end

-- The block key holds the scope of the limit that tripped it; its TTL is
-- the only record of when it ends. A key in its last millisecond (PTTL 0)
-- no longer blocks, nor does one without TTL, which a take deletes. A key
-- that is not a string, or holds no scope, is unreadable: it is repaired
-- and blocks nothing.
-- Only requests with a blocking limit are subject to the key's block.
local blocks = false
for i = 1, n do
  if block[i] > 0 then
    blocks = true
  end
end
local block_ttl = -2
if blocks then
  block_ttl = redis.call('PTTL', block_key)
end
local blocked = block_ttl > 0
local block_scope = ''
if blocked then
  block_scope = redis.pcall('GET', block_key)
  if block_scope == placeholder then
    -- An absent key: a take deletes it, so that a block can start.
    blocked, block_scope = false, ''
    block_ttl = -2
    if take then
      redis.call('DEL', block_key)
    end
  elseif type(block_scope) ~= 'string' or block_scope == '' then
    blocked, block_scope = false, ''
    block_ttl = -1
  end
end
if block_ttl == -1 and take then
  repair(block_key)
  block_ttl = -2
end

-- dedup_entry parses a de-duplication hash value, "<end µs>:<replays>"
-- (or "<end µs>", written by an older version: no replay yet), into the
-- id's end and replay count; nil when it is malformed.
local function dedup_entry(v)
  local exp, replays = v, '0'
  local colon = string.find(v, ':', 1, true)
  if colon then
    exp, replays = string.sub(v, 1, colon - 1), string.sub(v, colon + 1)
  end
  exp, replays = tonumber(exp), tonumber(replays)
  if not exp or not replays or replays < 0 then
    return nil
  end
  return exp, replays
end

-- A de-duplication id admitted within its window admits up to
-- dedup_replays repeats; the take of each counts it. A live id with no
-- replay left is kept as it is (exhausted) and the request decided like
-- any other. The hash maps ids to "<end µs>:<replays>". A hash of another
-- type is repaired; an id whose value cannot be parsed is forgotten (HDEL
-- on a take).
local duplicate, exhausted = false, false
local dedup_exp, dedup_count = 0, 0
if dedup_id ~= '' and not blocked then
  local v = redis.pcall('HGET', dedup_key, dedup_id)
  if type(v) == 'table' then
    repair(dedup_key)
  elseif v then
    local exp, count = dedup_entry(v)
    if exp then
      if exp > now then
        duplicate = count < dedup_replays
        exhausted = not duplicate
        dedup_exp, dedup_count = exp, count
      end
    elseif take then
      redis.call('HDEL', dedup_key, dedup_id)
      repaired = 1
    end
  end
end

-- The algorithm fills, per limit i: ok[i], whether it admits the request;
-- rem0[i] and reset0[i] (µs), the limit without the request; rem1[i] and
-- reset1[i], the limit after the request (only when ok[i]); retry[i] (µs),
-- the wait of a refusing limit. All are integers. allowed is true while
-- every limit admits. The sliding window log and counter also fill
-- next0[i] and next1[i] (µs): the time until the limit admits one unit
-- more than rem0[i] and rem1[i] (0 when full).
local ok, rem0, reset0, rem1, reset1, retry = {}, {}, {}, {}, {}, {}
local next0, next1 = {}, {}
local allowed = true

-- dedup_mark is the hash field that holds the number of live ids after the
-- last pruning of the de-duplication hash; ids start with '=' or '~'.
local dedup_mark = '#'

-- remember stores the request's de-duplication id for its window, with no
-- replay yet; an exhausted id is left as it is. Expired ids are pruned
-- once the hash has grown to twice its live size (plus 16) since the last
-- pruning: amortized O(1) per id. The hash lives as long as its
-- longest-lived id.
local function remember()
  if dedup_id == '' or exhausted then
    return
  end
  redis.call('HSET', dedup_key, dedup_id, int(now + dedup_window) .. ':0')
  local size = redis.call('HLEN', dedup_key)
  if size > 16 then
    -- An unreadable count forces a pruning, which rewrites it.
    local live = tonumber(redis.call('HGET', dedup_key, dedup_mark) or '0')
    if not (live and live >= 0 and live <= 9007199254740992) then
      live = 0
    end
    if size > 2 * live + 16 then
      local all = redis.call('HGETALL', dedup_key)
      local dead = {}
      live = 0
      for j = 1, #all, 2 do
        if all[j] ~= dedup_mark then
          local exp = dedup_entry(all[j + 1])
          if exp and exp > now then
            live = live + 1
          else
            dead[#dead + 1] = all[j]
          end
        end
      end
      for j = 1, #dead, 1000 do
        redis.call('HDEL', dedup_key, unpack(dead, j, math.min(#dead, j + 999)))
      end
      redis.call('HSET', dedup_key, dedup_mark, int(live))
    end
  end
  local want = ttl_ms(dedup_window)
  if redis.call('PTTL', dedup_key) < want then
    redis.call('PEXPIRE', dedup_key, int(want))
  end
end

-- start_block runs after a refused take: among the refusing limits that
-- block, the one with the longest block (after escalation; ties: the
-- earliest) blocks the key. It returns the block's scope and duration in
-- ms, or nil when no refusing limit blocks.
local function start_block()
  local strikes
  local best, best_ms = 0, 0
  for i = 1, n do
    if not ok[i] and block[i] > 0 then
      local d = block[i]
      if block_max[i] > d then
        if not strikes then
          -- An unreadable counter (another type, or not a whole number
          -- from 0) is repaired and counts no strikes.
          local v = redis.pcall('GET', strikes_key)
          strikes = 0
          if v then
            local x = type(v) == 'string' and tonumber(v)
            if x and x >= 0 and x <= 9007199254740992 and x == math.floor(x) then
              strikes = x
            else
              repair(strikes_key)
            end
          end
        end
        -- The (strikes + 1)-th block lasts block * 2^strikes, at most
        -- block_max: at most 35 doublings from 1ms to a year.
        local k = 0
        while k < strikes and d < block_max[i] do
          d = d * 2
          k = k + 1
        end
        if d > block_max[i] then
          d = block_max[i]
        end
      end
      if d > best_ms then
        best, best_ms = i, d
      end
    end
  end
  if best == 0 then
    return nil
  end
  -- NX: a block is never extended or started twice. A key that exists
  -- without blocking (in its last millisecond, or without TTL) is
  -- replaced. The block check above ran in this same atomic script, so NX
  -- cannot fail.
  local args = {'SET', block_key, scope[best], 'PX', int(best_ms)}
  if block_ttl == -2 then
    args[6] = 'NX'
  end
  if not redis.call(unpack(args)) then
    error('ratekeeper: block key written during the script')
  end
  if block_max[best] > block[best] then
    redis.call('INCR', strikes_key)
    redis.call('PEXPIRE', strikes_key, int(best_ms + block_max[best]))
  end
  return scope[best], best_ms
end

-- finish decides from the algorithm's verdicts, writes through record (the
-- algorithm's function that adds the request to every limit) when the
-- request is admitted or its refusal counts, else, on a take, calls settle
-- (the algorithm's function that gives state keys left without TTL their
-- TTL), starts a block, and returns the reply.
local function finish(record, settle)
  local sc, ttl = '', 0
  local started, after = false, false
  if blocked then
    sc, ttl = block_scope, block_ttl
    if take then
      if count_denied then
        record()
      else
        settle()
      end
    end
  elseif duplicate then
    allowed = true
    if take then
      redis.call('HSET', dedup_key, dedup_id, int(dedup_exp) .. ':' .. int(dedup_count + 1))
      settle()
    end
  elseif allowed then
    after = true
    if take then
      record()
      remember()
    end
  elseif take then
    if count_denied then
      record()
    else
      settle()
    end
    sc, ttl = start_block()
    if sc then
      started = true
    else
      sc = ''
    end
  end

  -- Per-limit values: after the request when it is recorded as admitted,
  -- else as the limits stand without it.
  local rem, reset, nxt = rem0, reset0, next0
  if after then
    rem, reset, nxt = rem1, reset1, next1
  end
  local r
  if blocked or started then
    -- The block's remaining time, or later, when a limit that refuses the
    -- request admits it only after the block has ended: a retry at the
    -- reported time must be admitted.
    local us = ttl * 1000
    for i = 1, n do
      if not ok[i] and retry[i] > us then
        us = retry[i]
      end
    end
    r = {0, -1, 0, us, us, 1, 0, 0, repaired, override_kind}
    if started then
      r[7] = 1
    end
  else
    local d = 0
    for i = 1, n do
      if allowed then
        if d == 0 or rem[i] < rem[d] then
          d = i
        end
      elseif not ok[i] and (d == 0 or retry[i] > retry[d]) then
        d = i
      end
    end
    r = {0, d - 1, rem[d], reset[d], retry[d], 0, 0, 0, repaired, override_kind}
    if allowed then
      r[1] = 1
      r[5] = 0
    end
    if duplicate then
      r[8] = 1
    end
  end
  for i = 1, n do
    r[9 + 2 * i] = rem[i]
    r[10 + 2 * i] = reset[i]
  end
  r[#r + 1] = sc
  r[#r + 1] = override_value
  if nxt[1] then
    for i = 1, n do
      r[#r + 1] = nxt[i]
    end
  end
  return r
end


-- refund.lua: follows common.lua. It gives back the units one part of a
-- stacked take recorded, when a later part of the stack, in another
-- Redis Cluster slot, refused the request. The receipt the take wrote
-- makes the refund happen at most once. See "Stacked decisions" in doc.go.
--
--   KEYS[1]    the part's receipt
--   KEYS[2..]  the part's state keys, as the take had them
--   ARGV[1]    "refund"
--   ARGV[2]    algorithm index (package store's order)
--   ARGV[3]    cost
--   ARGV[4]    the take's nonce (sliding window log members)
--   ARGV[5]    n, then per limit: rate, period µs, capacity
--
-- Reply: 1 refunded now, 2 refunded before (a retry after a lost reply),
-- 0 nothing to refund (the take recorded nothing, or its receipt expired:
-- it lives a few store timeouts, or the part's longest period when that
-- is shorter, so units still counted then stay charged until they expire).
--
-- The same script settles a reserved cost (package store, "Costs settled
-- after the response"), GCRA and the token bucket only:
--
--   KEYS       the request's state keys, one per limit
--   ARGV[1]    "settle"
--   ARGV[2]    the units to charge: the actual cost less the reserved one,
--              negative to give back
--   ARGV[3]    n, then per limit: rate, period µs
--
-- Reply: 1.
--
-- It settles the window algorithms' reservations too (package store,
-- "Costs settled after the response"):
--
--   KEYS       the request's state keys, one per limit (the sliding window
--              log: its one sorted set)
--   ARGV[1]    "settle_window"
--   ARGV[2]    algorithm index (2 log, 3 counter, 4 fixed window)
--   ARGV[3]    the units to charge, negative to give back
--   ARGV[4]    the time of the take (µs, the reservation's Decision.Taken)
--   ARGV[5]    a nonce unique to the settlement, free of ':' (log members)
--   ARGV[6]    n, then per limit: rate, period µs
--
-- Reply: 1.

-- adjust_bucket adds delta units to the GCRA or token bucket state key of
-- rate r per period p (µs), drained to now first: more units when delta
-- is positive (an absent or unreadable state counting as none, which is
-- then written over), fewer, down to none, when negative. The state is
-- written at now with the TTL of its units, or deleted when none are left.
local function adjust_bucket(key, r, p, delta)
  local st = redis.pcall('GET', key)
  local u = 0
  if type(st) == 'string' and #st == 16 then
    local ts, used = struct.unpack('<d<d', st)
    local d = now - ts
    if d < 0 then
      d = 0
    end
    u = used - d * r / p
    if u < 0 then
      u = 0
    end
  elseif delta <= 0 then
    return
  end
  u = u + delta
  if u > 0 then
    redis.call('SET', key, struct.pack('<d<d', now, u), 'PX', int(ttl_ms(ceil_us(u * p / r))))
  else
    redis.call('DEL', key)
  end
end

-- settle_counts applies delta to the window-counter state key (alg 3, the
-- sliding window counter, {w, cur, prev}; alg 4, the fixed window, {w,
-- cur}) of period p: a give-back lowers the count of the window that holds
-- at while the key still counts it (cur, or prev for the counter), never
-- below 0; a charge adds to the current window (a stored later one stays
-- current, as a take's does), an absent or unreadable state counting as
-- none, which is then written over.
local function settle_counts(alg, key, p, delta, at)
  local st = redis.pcall('HMGET', key, 'w', 'cur', 'prev')
  local w, c, pv
  if not st.err and st[1] then
    w, c, pv = tonumber(st[1]), tonumber(st[2]), tonumber(st[3])
    if alg == 4 then
      pv = 0
    end
  end
  if not (w and c and pv) then
    if delta <= 0 then
      return
    end
    redis.call('DEL', key)
    w, c, pv = nil, 0, 0
  end
  if delta < 0 then
    local ws = at - math.fmod(at, p)
    if w == ws then
      redis.call('HSET', key, 'cur', int(math.max(0, c + delta)))
    elseif alg == 3 and w == ws + p then
      redis.call('HSET', key, 'prev', int(math.max(0, pv + delta)))
    end
    return
  end
  local ws = now - math.fmod(now, p)
  if w and w >= ws then
    ws = w
  elseif alg == 3 and w == ws - p then
    c, pv = 0, c
  else
    c, pv = 0, 0
  end
  if alg == 3 then
    redis.call('HSET', key, 'w', int(ws), 'cur', int(c + delta), 'prev', int(pv), 'p', int(p))
    redis.call('PEXPIRE', key, int(ttl_ms(ws + 2 * p - now)))
  else
    redis.call('HSET', key, 'w', int(ws), 'cur', int(c + delta), 'p', int(p))
    redis.call('PEXPIRE', key, int(ttl_ms(ws + p - now)))
  end
end

-- settle_log applies delta to the sliding window log key: a give-back
-- removes up to -delta members scored at (the take's, or others of that
-- microsecond, which count alike); a charge adds delta members at now, at
-- most most (the largest rate: more would change no decision), after the
-- prune a take makes. The TTL is the one its newest member calls for.
local function settle_log(key, delta, at, nonce, most, longest)
  if delta < 0 then
    local ids = redis.pcall('ZRANGEBYSCORE', key, int(at), int(at), 'LIMIT', '0', int(-delta))
    if type(ids) ~= 'table' or #ids == 0 then
      return
    end
    for j = 1, #ids, 1000 do
      redis.call('ZREM', key, unpack(ids, j, math.min(#ids, j + 999)))
    end
    local newest = redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')
    if #newest == 2 then
      redis.call('PEXPIRE', key, int(ttl_ms(tonumber(newest[2]) + longest - now)))
    end
    return
  end
  local t = redis.call('TYPE', key)
  if type(t) == 'table' then
    t = t.ok
  end
  if t ~= 'zset' and t ~= 'none' then
    redis.call('DEL', key)
  end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now - longest))
  local k = math.min(delta, most)
  local j = 1
  while j <= k do
    local args = {'ZADD', key}
    local last = math.min(k, j + 999)
    for u = j, last do
      args[#args + 1] = int(now)
      args[#args + 1] = string.format('%d:%s:%d', now, nonce, u)
    end
    redis.call(unpack(args))
    j = last + 1
  end
  redis.call('PEXPIRE', key, int(ttl_ms(longest)))
end

if mode == 'settle_window' then
  local alg, delta, at, nonce, n = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[6])
  if not alg or alg < 2 or alg > 4 or not delta or not at or not n or n < 1
      or #ARGV ~= 6 + 2 * n or #KEYS ~= (alg == 2 and 1 or n) then
    error('ratekeeper: malformed arguments')
  end
  local most, longest = 0, 0
  for i = 1, n do
    local r, p = tonumber(ARGV[5 + 2 * i]), tonumber(ARGV[6 + 2 * i])
    if not r or r < 1 or not p or p < 1 then
      error('ratekeeper: malformed arguments')
    end
    most, longest = math.max(most, r), math.max(longest, p)
    if alg ~= 2 then
      settle_counts(alg, KEYS[i], p, delta, at)
    end
  end
  if alg == 2 then
    settle_log(KEYS[1], delta, at, nonce, most, longest)
  end
  return 1
end

if mode == 'settle' then
  local delta, n = tonumber(ARGV[2]), tonumber(ARGV[3])
  if not delta or not n or n < 1 or #ARGV ~= 3 + 2 * n or #KEYS ~= n then
    error('ratekeeper: malformed arguments')
  end
  for i = 1, n do
    local r, p = tonumber(ARGV[2 + 2 * i]), tonumber(ARGV[3 + 2 * i])
    if not r or r < 1 or not p or p < 1 then
      error('ratekeeper: malformed arguments')
    end
    adjust_bucket(KEYS[i], r, p, delta)
  end
  return 1
end

local alg, cost, nonce, n = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
if mode ~= 'refund' or not alg or alg < 0 or alg > 4 or not cost or cost < 1
    or not n or n < 1 or #ARGV ~= 5 + 3 * n or #KEYS < 2 then
  error('ratekeeper: malformed arguments')
end
local receipt = KEYS[1]
local v = redis.pcall('GET', receipt)
if type(v) ~= 'string' then
  return 0
end
if v == 'refunded' then
  return 2
end
local t = tonumber(v)
if not t then
  return 0
end

for i = 1, n do
  local r, p = tonumber(ARGV[5 + 3 * i - 2]), tonumber(ARGV[5 + 3 * i - 1])
  if alg <= 1 then
    -- GCRA and the token bucket: the units drain linearly, so the units
    -- the take added are still counted now, unless drained to zero.
    adjust_bucket(KEYS[1 + i], r, p, -cost)
  elseif alg == 2 then
    -- The sliding window log: the take's own members.
    if i == 1 then
      local j = 1
      while j <= cost do
        local args = {'ZREM', KEYS[2]}
        local last = math.min(cost, j + 999)
        for u = j, last do
          args[#args + 1] = string.format('%d:%s:%d', t, nonce, u)
        end
        redis.pcall(unpack(args))
        j = last + 1
      end
    end
  else
    -- The window counters: the take's window, while it is counted.
    local key = KEYS[1 + i]
    local ws = t - math.fmod(t, p)
    local st = redis.pcall('HMGET', key, 'w', 'cur', 'prev')
    local w = tonumber(st[1])
    if not st.err and w then
      local c, pv = tonumber(st[2]), tonumber(st[3])
      if w == ws and c then
        redis.call('HSET', key, 'cur', int(math.max(0, c - cost)))
      elseif alg == 3 and w == ws + p and pv then
        redis.call('HSET', key, 'prev', int(math.max(0, pv - cost)))
      end
    end
  end
end

local ttl = redis.call('PTTL', receipt)
if ttl < 1 then
  ttl = 1
end
redis.call('SET', receipt, 'refunded', 'PX', ttl)
return 1

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

-- bucket.lua: GCRA and the token bucket, one algorithm (package store,
-- "Semantics"). state[i] holds limit i's {ts, used} packed as two
-- little-endian doubles: the time of the last admission in integer
-- microseconds and the units used then, which drain at rate/period per
-- microsecond. The key expires when they have drained.
if count_denied then
  error('ratekeeper: counting refused requests needs a window algorithm')
end

-- used_at returns the units used at time t given the stored state (nil
-- used when there is none).
local function used_at(used, ts, t, r, p)
  if not used then
    return 0
  end
  local d = t - ts
  if d < 0 then
    d = 0
  end
  local u = used - d * r / p
  if u < 0 then
    return 0
  end
  return u
end

local after = {}
for i = 1, n do
  local r, p, b = rate[i], period[i], cap[i]
  local used, ts
  local stored = redis.pcall('GET', state[i])
  if stored then
    -- Unreadable state (another type, or not two finite doubles in range)
    -- is repaired: the limit is decided as fresh.
    if type(stored) == 'string' and #stored == 16 then
      ts, used = struct.unpack('<d<d', stored)
    end
    if not (used and used >= 0 and used <= 9007199254740992 and ts >= 0 and ts <= 9007199254740992) then
      repair(state[i])
      used, ts = nil, nil
    end
  end
  local u = used_at(used, ts, now, r, p)
  rem0[i] = floor_units(b - u, b)
  reset0[i] = ceil_us(u * p / r)
  if u + cost <= b then
    local v = u + cost
    ok[i] = true
    rem1[i] = floor_units(b - v, b)
    reset1[i] = ceil_us(v * p / r)
    retry[i] = 0
    after[i] = v
  else
    ok[i] = false
    allowed = false
    retry[i] = earliest(ceil_us((u + cost - b) * p / r), function(d)
      return used_at(used, ts, now + d, r, p) + cost <= b
    end)
  end
end

-- record adds the request's units to every limit; finish calls it for
-- admitted requests only.
local function record()
  for i = 1, n do
    redis.call('SET', state[i], struct.pack('<d<d', now, after[i]),
      'PX', int(ttl_ms(reset1[i])))
  end
end

-- settle gives a state key left without TTL the one its units call for:
-- it expires when they have drained.
local function settle()
  for i = 1, n do
    expire(state[i], reset0[i])
  end
end

return finish(record, settle)

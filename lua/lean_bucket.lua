-- lean_bucket.lua: GCRA and the token bucket for the common request (one
-- limit, no block, no de-duplication id, no counted refusals), with the
-- lean calling convention (see doc.go) and scalars only: the same
-- arithmetic as bucket.lua under lean.lua, at a lower cost per call.
local take = ARGV[1] == 'take'
local cost, r, p, b = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if (not take and ARGV[1] ~= 'peek') or not cost or cost < 1 or not r or r < 1
    or not p or p < 1000 or not b or b < 1 or #KEYS ~= 1 then
  error('ratekeeper: malformed arguments')
end
local key = KEYS[1]

-- used, ts: the stored state, nil when there is none; u: the units used now.
local used, ts
local u = 0
local stored = redis.call('GET', key)
if stored then
  if #stored ~= 16 then
    error('ratekeeper: malformed bucket state')
  end
  ts, used = struct.unpack('<d<d', stored)
  local d = now - ts
  if d < 0 then
    d = 0
  end
  u = used - d * r / p
  if u < 0 then
    u = 0
  end
end

if u + cost <= b then
  local v = u + cost
  local reset = ceil_us(v * p / r)
  if take then
    redis.call('SET', key, struct.pack('<d<d', now, v), 'PX', int(ttl_ms(reset)))
  end
  return {1, floor_units(b - v, b), reset, 0}
end

-- used_at is bucket.lua's: the units used at time t.
local function used_at(t)
  if not used then
    return 0
  end
  local d = t - ts
  if d < 0 then
    d = 0
  end
  local x = used - d * r / p
  if x < 0 then
    return 0
  end
  return x
end
local retry = earliest(ceil_us((u + cost - b) * p / r), function(d)
  return used_at(now + d) + cost <= b
end)
return {0, floor_units(b - u, b), ceil_us(u * p / r), retry}

-- lean_bucket.lua: GCRA and the token bucket for the common request (one
-- limit, no block, no de-duplication id, no counted refusals), with the
-- lean calling convention (see doc.go) and scalars only: the same
-- arithmetic as bucket.lua for one limit, at a lower cost per call.
local cost, r, p, b = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if (not take and ARGV[1] ~= 'peek') or not cost or cost < 1 or not r or r < 1
    or not p or p < 1000 or not b or b < 1 or #KEYS ~= 1 then
  error('ratekeeper: malformed arguments')
end
local key = KEYS[1]

-- used, ts: the stored state, nil when there is none; u: the units used now.
-- State that cannot be read (another type, whose error pcall hands back,
-- or not two finite doubles in range) is deleted and the key decided as
-- fresh; repaired reports it (see "Unreadable state" in doc.go).
local used, ts
local u = 0
local repaired = 0
local stored = redis.pcall('GET', key)
if stored then
  if type(stored) == 'string' and #stored == 16 then
    ts, used = struct.unpack('<d<d', stored)
  end
  if used and used >= 0 and used <= 9007199254740992 and ts >= 0 and ts <= 9007199254740992 then
    local d = now - ts
    if d < 0 then
      d = 0
    end
    u = used - d * r / p
    if u < 0 then
      u = 0
    end
  else
    -- A peek writes nothing: it only decides as if the key were fresh. A
    -- placeholder (see common.lua) is an absent key: a take deletes it
    -- without reporting a repair.
    if take then
      redis.call('DEL', key)
      if stored ~= placeholder then
        repaired = 1
      end
    end
    used, ts = nil, nil
  end
end

if u + cost <= b then
  local v = u + cost
  local reset = ceil_us(v * p / r)
  if take then
    redis.call('SET', key, struct.pack('<d<d', now, v), 'PX', int(ttl_ms(reset)))
  end
  return {1, floor_units(b - v, b), reset, 0, repaired}
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
-- A refusal writes nothing, but a key left without a TTL (by hand, or by
-- an older version) gets the one its state calls for: it expires when the
-- units have drained.
if take and redis.call('PTTL', key) == -1 then
  redis.call('PEXPIRE', key, int(ttl_ms(ceil_us(u * p / r))))
end
return {0, floor_units(b - u, b), ceil_us(u * p / r), retry, repaired}

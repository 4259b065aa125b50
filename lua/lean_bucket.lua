-- lean_bucket.lua: GCRA and the token bucket for the common request (one
-- limit, no block, no de-duplication id, no counted refusals), after
-- lean_args.lua: scalars only, the same arithmetic as bucket.lua for one
-- limit (its rate r is rate here, its burst b is cap), at a lower cost per
-- call.

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
    u = used - d * rate / p
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

if u + cost <= cap then
  local v = u + cost
  local reset = ceil_us(v * p / rate)
  if take then
    redis.call('SET', key, struct.pack('<d<d', now, v), 'PX', int(ttl_ms(reset)))
  end
  return {1, floor_units(cap - v, cap), reset, 0, repaired}
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
  local x = used - d * rate / p
  if x < 0 then
    return 0
  end
  return x
end
local retry = earliest(ceil_us((u + cost - cap) * p / rate), function(d)
  return used_at(now + d) + cost <= cap
end)
-- A refusal writes nothing, but a key left without a TTL (by hand, or by
-- an older version) gets the one its state calls for: it expires when the
-- units have drained.
if take and redis.call('PTTL', key) == -1 then
  redis.call('PEXPIRE', key, int(ttl_ms(ceil_us(u * p / rate))))
end
return {0, floor_units(cap - u, cap), ceil_us(u * p / rate), retry, repaired}

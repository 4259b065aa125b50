-- override.lua: reading a key's override (store.Override), for the scripts
-- of requests that apply overrides: prelude.lua and lean_override.lua.

-- read_override returns the override held at key: its code (0 none, 1
-- scale, 2 exempt, 3 suspend), its value as stored, its remaining time in
-- ms and, for a scale, the factor. The value is a string "exempt",
-- "suspend" or "scale:<factor>" with a TTL. One that cannot be read (of
-- another type, malformed, or without a TTL, which no store writes) is
-- handed to repair and applies nothing.
local function read_override(key, repair)
  local pttl = redis.call('PTTL', key)
  if pttl == -1 then
    repair(key)
    return 0, '', 0
  elseif pttl <= 0 then
    return 0, '', 0
  end
  local v = redis.pcall('GET', key)
  if v == 'exempt' then
    return 2, v, pttl
  elseif v == 'suspend' then
    return 3, v, pttl
  end
  -- The factor as store.Override.Encode writes it: digits and a point,
  -- and an exponent "e+NN" or "e-NN"; nothing else (no sign, space or
  -- hexadecimal), so that the store reads back what the script applied.
  local factor = type(v) == 'string' and #v <= 40 and (string.match(v, '^scale:(%d[%d%.]*)$')
      or string.match(v, '^scale:(%d[%d%.]*e[%+%-]%d+)$'))
  factor = factor and tonumber(factor)
  if factor and factor >= 1 / 1048576 and factor <= 1048576 then
    return 1, v, pttl, factor
  end
  repair(key)
  return 0, '', 0
end

-- scale_units returns x (a rate or a capacity) under a scale override's
-- factor: floor(x * factor), at most 2^30, at least 1 and at least
-- min(cost, x) (store.ScaleLimit).
local function scale_units(x, factor, cost)
  local y = math.floor(x * factor)
  if y > 1073741824 then
    y = 1073741824
  end
  if y < cost and y < x then
    y = math.min(cost, x)
  end
  if y < 1 then
    y = 1
  end
  return y
end

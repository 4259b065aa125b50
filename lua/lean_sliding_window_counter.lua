-- lean_sliding_window_counter.lua: sliding_window_counter.lua for one
-- plain limit, after lean_args.lua and counter.lua: the same state (a
-- hash {w, cur, prev}), arithmetic and calls, with scalars only. The
-- reply has a sixth integer: the time until one unit more is admitted
-- (µs).
local w, sc, spv
local st = redis.pcall('HMGET', key, 'w', 'cur', 'prev', 'p')
if st[1] then
  w, sc, spv = tonumber(st[1]), tonumber(st[2]), tonumber(st[3])
end
if st.err or (st[1] and not (w and w >= 0 and w <= 9007199254740992
    and sc and sc >= 0 and sc <= 9007199254740992
    and spv and spv >= 0 and spv <= 9007199254740992)) then
  repair(key)
  w, sc, spv = nil, nil, nil
end
local ws, c, pv = counter_at(now, p, w, sc, spv)
local est = estimate(now, ws, p, c, pv)
-- The state matters until the end of the window after the current one.
local life = ws + 2 * p - now
if est + cost <= cap then
  if take then
    -- A key that holds this window, its TTL set under this period (field
    -- p, which every script that sets the TTL writes), already has the
    -- TTL a take in this window gives it (the end of the next window),
    -- and fields w, prev and p as they stay: only cur changes. After a
    -- reload that changed the period of a named limit it has the old
    -- one's.
    if w == ws and st[4] == ARGV[4] then
      redis.call('HSET', key, 'cur', int(c + cost))
    else
      redis.call('HSET', key, 'w', int(ws), 'cur', int(c + cost), 'prev', int(pv), 'p', ARGV[4])
      redis.call('PEXPIRE', key, int(ttl_ms(life)))
    end
  end
  -- One unit more fits once the estimate after this request has fallen
  -- by one (see sliding_window_counter.lua).
  local rem = floor_units(cap - (est + cost), cap)
  local nxt = 0
  if rem < cap then
    nxt = counter_wait(ws, p, c + cost, pv, ws, c + cost, pv, cap - rem - 1 + cost)
  end
  return {1, rem, life, 0, repaired, nxt}
end
if take then
  expire(key, life)
end
local reset = 0
if c > 0 then
  reset = life
elseif pv > 0 then
  reset = ws + p - now
end
local rem = floor_units(cap - est, cap)
local nxt = 0
if rem < cap then
  nxt = counter_wait(ws, p, c, pv, w, sc, spv, cap - rem - 1 + cost)
end
return {0, rem, reset, counter_wait(ws, p, c, pv, w, sc, spv, cap), repaired, nxt}
